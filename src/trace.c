/* The execution trace's recorder (trace.h says what is recorded, and how
 * the hooks stay off the fast paths): its writers and their chunks,
 * gmp_trace_start, gmp_trace_stop and gmp_trace_dump, the thread that
 * moves full chunks to a file while a trace runs, the flight recorder,
 * and the slow halves of the hooks. tracejson.c turns the chunks into
 * JSON.
 *
 * Writers. Each P has one, written by whoever holds the P (its M, or
 * sysmon while it takes the P away); each M has one for what it records
 * while it holds no P; and one side writer, under sidelock, takes what
 * sysmon and threads that are not the runtime's record. No lock is taken
 * per event: a writer fills its current chunk and publishes each event
 * with a release store of the chunk's length.
 *
 * Chunks. A full chunk goes to the full list (under tr.lock, once per
 * few thousand events) and its writer takes a free one. Recording a full
 * trace, the tracer's thread moves full chunks to a spill file beside the
 * output (raw, as they are) and frees them for reuse; the JSON is written
 * when the trace stops, from the spill file and what the writers still
 * hold. The flight recorder keeps a fixed number of chunks (its N MiB):
 * when none is free, a writer takes the oldest full one, so that what is
 * kept is always the most recent window; a dump reads the full list (set
 * aside meanwhile, so that nobody reuses those chunks while they are
 * read) and a copy of each writer's current chunk.
 *
 * Ending a trace without stopping the writers. A writer that found
 * gmp__trace_on set may still be writing when the trace stops. It only
 * ever writes its own current chunk (and hands it to the full list when
 * full), and whoever reads that chunk reads it up to the length it loaded
 * with acquire, so nothing it reads is half-written; what a late writer
 * adds after is not read. A chunk carries its trace's epoch: a chunk
 * handed over after the trace ended is dropped by the next one, and a
 * writer whose current chunk is of an older trace starts afresh. Chunks
 * are freed only when no writer can hold them: on a trace's end for the
 * free ones, at gmp_shutdown (no writers left) for the rest.
 *
 * Lock order: sched.lock, then sidelock, then tr.lock. tr.api (a pthread
 * mutex) is taken first of all, by the calls above, never by a hook.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "export_test.h"
#include "g.h"
#include "internal.h"
#include "runq.h"
#include "runtime.h"
#include "sys.h"
#include "trace.h"
#include "tracejson.h"

volatile uint32_t gmp__trace_on;
gmp__trace_settings gmp__trace_cfg;

enum { MODE_OFF = 0, MODE_STREAM = 1, MODE_FLIGHT = 2 };

/* A full trace keeps chunks of 64 KiB, at most 256 MiB of them in memory
 * (if the spill thread falls that far behind, events are dropped and
 * counted); the flight recorder's are smaller, so that its N MiB hold
 * many. */
enum {
	STREAM_CHUNK = 64 * 1024,
	STREAM_MAX = 256 * 1024 * 1024,
	FLIGHT_CHUNK_MAX = 64 * 1024,
	FLIGHT_CHUNK_MIN = 4 * 1024,
};

/* A record of the spill file: this header, then nwords event words. */
enum { SPILL_MAGIC = 0x47545243 }; /* "GTRC" */
struct spillrec {
	uint32_t magic;
	uint32_t nwords;
	uint64_t src, seq;
};

static struct {
	pthread_mutex_t api; /* start, stop and dump: one at a time */
	bool closed;         /* gmp_shutdown stopped the trace: no new one
				until the next gmp_init; api */
	int mode;            /* MODE_*; api (read by the hooks' slow halves
				only after an acquire of gmp__trace_on) */
	char path[4096];     /* the output; api */
	int fd;              /* stream: open from start; api */
	uint64_t c0;         /* ticks and ns at the start; api */
	int64_t t0;

	/* Chunks: under lock. */
	gmp__mutex lock;
	gmp__trchunk *full, *fulltail; /* oldest first */
	gmp__trchunk *pool;            /* free, of this trace's size */
	gmp__trchunk *all;             /* every chunk that exists */
	size_t nall, maxchunks;
	uint32_t chunkwords;
	volatile uint32_t epoch; /* written under lock and api */
	bool aside;              /* a dump set the full list aside */
	volatile uint64_t lost;  /* atomic: events dropped */

	/* The side writer. */
	gmp__mutex sidelock;
	gmp__trsrc side;

	/* Streaming: the spill thread and its file. */
	pthread_t spiller;
	bool spilling;               /* the thread runs; api */
	volatile uint32_t spillseq;  /* futex: bumped when work comes */
	volatile uint32_t spillwait; /* atomic: the thread sleeps */
	volatile uint32_t spillstop; /* atomic: end the thread */
	gmp__mutex spilllock;        /* the file's end: spillfd, spilled */
	int spillfd;
	uint64_t spilled; /* bytes written to it */

	/* No-P sampling of readies: one in gmp__sample_ready. */
	volatile uint32_t nop_ready;
} tr = {
	.api = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
	.lock = GMP__MUTEX_INIT,
	.sidelock = GMP__MUTEX_INIT,
	.spilllock = GMP__MUTEX_INIT,
	.spillfd = -1,
};

static const uint8_t ev_words[GMP__EV_NKINDS] = {
	[GMP__EV_PSTART] = 1,   [GMP__EV_PSTOP] = 1,   [GMP__EV_RUN] = 2,
	[GMP__EV_STOP] = 2,     [GMP__EV_READY] = 2,   [GMP__EV_CREATE] = 3,
	[GMP__EV_SYSENTER] = 1, [GMP__EV_SYSEXIT] = 1, [GMP__EV_STEAL] = 1,
	[GMP__EV_HANDOFF] = 1,  [GMP__EV_MSTART] = 1,  [GMP__EV_MPARK] = 0,
	[GMP__EV_MUNPARK] = 0,  [GMP__EV_MWAKE] = 1,   [GMP__EV_MEXIT] = 0,
	[GMP__EV_STATE] = 3,    [GMP__EV_MSTATE] = 2,  [GMP__EV_LOST] = 1,
	[GMP__EV_SWITCH] = 4,
};

unsigned gmp__trev_words(unsigned kind)
{
	return kind < GMP__EV_NKINDS ? ev_words[kind] : 0;
}

/* The readers below look at fields other threads own (a G's id, fn and
 * wait reason; an M's P) without synchronisation, as dump.c's do: the
 * values may be stale, which the trace tolerates (the converter trusts
 * the events that follow), and ThreadSanitizer is told not to watch. A
 * field its owner writes plainly (the wait reason, which goexit0 clears)
 * is read plainly here: atomic.h's loads are not inlined into these
 * functions under TSan, which would then see an atomic load racing a
 * plain store. */

/* ---- chunks ---------------------------------------------------------------- */

/* A chunk of `words`, on no list yet, or NULL. */
static gmp__trchunk *chunk_new(uint32_t words)
{
	gmp__trchunk *c = gmp__malloc(sizeof(gmp__trchunk) + (size_t)words * 8);
	if (!c)
		return NULL;
	memset(c, 0, sizeof *c);
	c->cap = words;
	return c;
}

/* Counts c among the chunks that exist (tr.lock held). */
static void chunk_own(gmp__trchunk *c)
{
	c->allnext = tr.all;
	tr.all = c;
	tr.nall++;
}

/* A new chunk, counted (tr.lock held). */
static gmp__trchunk *chunk_alloc(uint32_t words)
{
	gmp__trchunk *c = chunk_new(words);
	if (c)
		chunk_own(c);
	return c;
}

/* Frees a chunk that is on no list but `all` (tr.lock held). */
static void chunk_free(gmp__trchunk *c)
{
	for (gmp__trchunk **pp = &tr.all; *pp; pp = &(*pp)->allnext)
		if (*pp == c) {
			*pp = c->allnext;
			break;
		}
	tr.nall--;
	gmp__free(c);
}

static void full_push(gmp__trchunk *c)
{
	c->next = NULL;
	if (tr.fulltail)
		tr.fulltail->next = c;
	else
		tr.full = c;
	tr.fulltail = c;
}

static gmp__trchunk *full_pop(void)
{
	gmp__trchunk *c = tr.full;
	if (c) {
		tr.full = c->next;
		if (!tr.full)
			tr.fulltail = NULL;
		c->next = NULL;
	}
	return c;
}

/* The spill thread is woken once a source has filled this many chunks
 * (1 MiB at 64 KiB), not for each: a wake is a system call on the
 * writer's thread, and the spill thread's turn a context switch on a
 * CPU the program may want. */
enum { SPILL_BATCH = 16 };

/* Under tr.lock: whether handing c over should wake the spill thread. */
static bool spill_due(const gmp__trchunk *c)
{
	return tr.spilling && (c->seq % SPILL_BATCH == SPILL_BATCH - 1 ||
			       tr.nall >= tr.maxchunks / 2);
}

static void spill_kick(void)
{
	gmp__add32_full(&tr.spillseq, 1);
	if (gmp__load32_rlx(&tr.spillwait))
		gmp__futex_wake(&tr.spillseq, 1);
}

/* Gives s a fresh chunk with room for `words`, handing its full one over.
 * Returns where to write, or NULL if no chunk could be had (the event is
 * dropped and counted). */
static uint64_t *src_refill(gmp__trsrc *s, unsigned words)
{
	bool kick = false;
	gmp__lock(&tr.lock);
	uint32_t epoch = tr.epoch;
	gmp__trchunk *c = s->chunk;
	if (c && c->epoch == epoch && s->epoch == epoch) {
		if (c->len) {
			full_push(c);
			kick = spill_due(c);
			c = NULL;
		}
	} else if (c) {
		/* Of a trace that ended: nobody reads it any more. */
		if (c->cap == tr.chunkwords) {
			c->next = tr.pool;
			tr.pool = c;
		} else {
			chunk_free(c);
		}
		c = NULL;
		s->seq = 0;
	}
	if (s->epoch != epoch) {
		s->epoch = epoch;
		s->seq = 0;
	}
	if (!c && tr.pool) {
		c = tr.pool;
		tr.pool = c->next;
	}
	if (!c && tr.nall < tr.maxchunks)
		c = chunk_alloc(tr.chunkwords);
	if (!c && !tr.aside && tr.full &&
	    gmp__load32_rlx(&gmp__trace_on) == MODE_FLIGHT)
		c = full_pop(); /* the flight recorder's oldest */
	if (!c) {
		gmp__storep_rel(&s->chunk, NULL);
		s->pos = s->end = NULL;
		gmp__unlock(&tr.lock);
		gmp__add64_rlx(&tr.lost, 1);
		return NULL;
	}
	/* full: the reuse is announced before the chunk changes, to a copier
	 * that checks gen after it copied (collect_current) */
	gmp__add32_full(&c->gen, 1);
	c->next = NULL;
	c->src = s->id;
	c->seq = s->seq++;
	c->epoch = epoch;
	gmp__store32_rel(&c->len, 0);
	/* release: the header before the pointer a copier loads (acquire) */
	gmp__storep_rel(&s->chunk, c);
	s->pos = c->w;
	s->end = c->w + c->cap;
	gmp__unlock(&tr.lock);
	if (kick)
		spill_kick();
	return s->pos;
}

/* Asks for the cache line four lines past pos, to be written. A writer's
 * chunk is cold: taken from the pool after the spill thread read it on
 * another CPU (stream), or last written a whole window ago (flight). Its
 * stores would wait on the line's fetch at the next full barrier (the
 * run queue's CAS, a lock) and a switch or ready came to cost 10-20 ns
 * more; fetched for writing (exclusive, not shared with the spill
 * thread's copy) 250 bytes ahead, a round trip or two before it is
 * needed, the line is there. Past a chunk's end it is harmless. */
static inline __attribute__((always_inline)) void ahead(const uint64_t *pos)
{
#if defined(__x86_64__)
	if (GMP__LIKELY(gmp__cpu_prefetchw))
		__asm__("prefetchw %0" : : "m"(pos[32]));
#elif defined(__aarch64__)
	__builtin_prefetch(pos + 32, 1, 3); /* PRFM PSTL1KEEP */
#else
	(void)pos;
#endif
}

static inline __attribute__((always_inline)) void
emit_at(gmp__trsrc *s, uint64_t *pos, unsigned n, unsigned kind, uint64_t tick,
	uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	/* Relaxed atomic stores (plain ones, compiled): a copier may read
	 * the words past the length it loaded while they are written. */
	ahead(pos);
	gmp__store64_rlx(&pos[0], tick << 8 | kind);
	if (n > 0)
		gmp__store64_rlx(&pos[1], a);
	if (n > 1)
		gmp__store64_rlx(&pos[2], b);
	if (n > 2)
		gmp__store64_rlx(&pos[3], c);
	if (n > 3)
		gmp__store64_rlx(&pos[4], d);
	pos += 1 + n;
	s->pos = pos;
	/* release: the words above before the length that covers them;
	 * pairs with the acquire of every reader of the chunk */
	gmp__store32_rel(&s->chunk->len, (uint32_t)(pos - s->chunk->w));
}

static __attribute__((noinline)) void emit_slow(gmp__trsrc *s, unsigned kind,
						uint64_t tick, uint64_t a,
						uint64_t b, uint64_t c,
						uint64_t d)
{
	unsigned n = ev_words[kind];
	uint64_t *pos = src_refill(s, n);
	if (pos)
		emit_at(s, pos, n, kind, tick, a, b, c, d);
}

/* Records one event into s, owned by the caller: a few stores while the
 * chunk has room (inline; with a constant kind the word count folds). */
static inline __attribute__((always_inline)) void
emit4(gmp__trsrc *s, unsigned kind, uint64_t tick, uint64_t a, uint64_t b,
      uint64_t c, uint64_t d)
{
	unsigned n = ev_words[kind];
	uint64_t *pos = s->pos;
	if (GMP__UNLIKELY(!pos || pos + 1 + n > s->end ||
			  s->epoch != gmp__load32_rlx(&tr.epoch))) {
		emit_slow(s, kind, tick, a, b, c, d);
		return;
	}
	emit_at(s, pos, n, kind, tick, a, b, c, d);
}

static inline __attribute__((always_inline)) void
emit(gmp__trsrc *s, unsigned kind, uint64_t tick, uint64_t a, uint64_t b,
     uint64_t c)
{
	emit4(s, kind, tick, a, b, c, 0);
}

/* A P's writer; its id is set when the P is made (trace_p_init). */
static inline gmp__trsrc *p_src(gmp__p *p)
{
	return &p->tr.src;
}

static inline gmp__trsrc *m_src(gmp__m *m)
{
	m->tr.src.id = (uint64_t)GMP__TRSRC_M << 56 |
		       ((uint64_t)m->id & (((uint64_t)1 << 56) - 1));
	return &m->tr.src;
}

/* The side writer: sysmon and threads that are not the runtime's. The
 * tick is read under the lock, so that its events stay in time order. */
static void emit_side(unsigned kind, uint64_t a, uint64_t b, uint64_t c)
{
	gmp__lock(&tr.sidelock);
	tr.side.id = (uint64_t)GMP__TRSRC_SIDE << 56;
	emit(&tr.side, kind, gmp__ticks(), a, b, c);
	gmp__unlock(&tr.sidelock);
}

/* Records an event for the calling thread, into whichever writer is its
 * own: its P's while its P is its own to use (gmp__getg's rule: on g0 or
 * in a RUNNING task), else its M's, else the side writer. */
GMP__RACY_READER static void emit_here(unsigned kind, uint64_t a, uint64_t b,
				       uint64_t c)
{
	gmp__m *m = gmp__getm();
	if (!m) {
		emit_side(kind, a, b, c);
		return;
	}
	gmp_g *g = m->curg;
	gmp__p *p = m->p;
	bool ours = p && (!g || (gmp__load32_rlx(&g->status) &
				 ~(uint32_t)GMP__G_FLAGS) == GMP__G_RUNNING);
	emit(ours ? p_src(p) : m_src(m), kind, gmp__ticks(), a, b, c);
}

static inline bool on_acq(void)
{
	/* acquire: pairs with gmp_trace_start's release, after which the
	 * recorder's settings (tr.mode, the epoch) are set */
	return gmp__load32_acq(&gmp__trace_on) != 0;
}

/* ---- the hooks' slow halves ----------------------------------------------------- */

/* Who readied g (EV_READY's second word): self, else the running task of
 * this thread, else what g0 is doing. */
GMP__RACY_READER static inline __attribute__((always_inline)) uint64_t
ready_word(gmp_g *g, gmp_g *self, unsigned by)
{
	if (!self) {
		gmp__m *m = gmp__getm();
		gmp_g *c = m ? m->curg : NULL;
		if (c && by != GMP__TRBY_POLL) {
			uint32_t st = gmp__load32_rlx(&c->status) &
				      ~(uint32_t)GMP__G_FLAGS;
			/* a running task, or one inside a gmp_enter_syscall
			 * window (it readies as a thread would) */
			if (st == GMP__G_RUNNING || st == GMP__G_SYSCALL)
				self = c;
		}
		if (!self && m && m->readyq && by == GMP__TRBY_SCHED)
			by = GMP__TRBY_TIMER;
	}
	if (self)
		by = GMP__TRBY_TASK;
	uint64_t reason = g->waitreason & 0xff;
	return reason | (uint64_t)by << 8 |
	       (self ? (uint64_t)self->id << 16 : 0);
}

/* A sampled ready: the tick into the G, and the TRACK bit, which execute
 * meets (gmp__metrics_tracked). g is RUNNABLE and the caller's until it
 * queues it. */
static void sample_ready(gmp_g *g)
{
	g->readyt = gmp__ticks();
	gmp__gstatus_track(g);
}

/* Room for an event of n argument words in s, the caller's: where to
 * write it, or NULL (dropped, counted). Nothing is published. */
static inline __attribute__((always_inline)) uint64_t *
src_reserve(gmp__trsrc *s, unsigned n)
{
	uint64_t *pos = s->pos;
	if (GMP__UNLIKELY(!pos || pos + 1 + n > s->end ||
			  s->epoch != gmp__load32_rlx(&tr.epoch)))
		pos = src_refill(s, n);
	return pos;
}

/* A ready the tracer or the sampler wants, its first half: while a trace
 * is recorded, the READY event's argument words are written (not yet
 * published) and the clock read (*now); one ready in gmp__sample_ready
 * is measured. Returns where the event is, or NULL (none, or dropped).
 * ready_end publishes it. Between the halves the caller may queue g, but
 * records no other event into p's writer. */
GMP__RACY_READER static inline __attribute__((always_inline)) uint64_t *
ready_begin(gmp__p *p, gmp_g *g, gmp_g *self, unsigned by, uint64_t *now)
{
	if (!on_acq()) {
		p->tr.ready_tick = gmp__sample_ready;
		p->tr.ready_left = (int32_t)gmp__sample_ready;
		sample_ready(g);
		return NULL;
	}
	p->tr.ready_tick = 1;
	uint64_t *pos = src_reserve(p_src(p), 2);
	if (pos) {
		ahead(pos);
		gmp__store64_rlx(&pos[1], (uint64_t)g->id);
		gmp__store64_rlx(&pos[2], ready_word(g, self, by));
	}
	*now = gmp__ticks();
	if (--p->tr.ready_left <= 0) {
		p->tr.ready_left = (int32_t)gmp__sample_ready;
		g->readyt = *now;
		gmp__gstatus_track(g);
	}
	return pos;
}

/* The second half: the event's time, and the event published. */
static inline __attribute__((always_inline)) void
ready_end(gmp__p *p, uint64_t *pos, uint64_t now)
{
	if (!pos)
		return;
	gmp__trsrc *s = p_src(p);
	gmp__store64_rlx(&pos[0], now << 8 | GMP__EV_READY);
	s->pos = pos + 3;
	/* release: the words before the length that covers them; pairs
	 * with the acquire of every reader of the chunk */
	gmp__store32_rel(&s->chunk->len, (uint32_t)(pos + 3 - s->chunk->w));
}

/* A ready while a trace is recorded (the hook sends each one here), or
 * the sampled one. */
void gmp__trace_ready_slow(gmp__p *p, gmp_g *g, gmp_g *self, unsigned by)
{
	uint64_t now;
	uint64_t *pos = ready_begin(p, g, self, by, &now);
	ready_end(p, pos, now);
}

/* The same around the queueing of g. The time word is stored after the
 * queueing: its full CAS (on runnext) drains the store buffer, and a
 * store of the clock's value before it would make the CAS wait for
 * rdtsc, some 15-20 ns per ready on this machine's VM, while after it
 * the clock's latency hides behind the queueing. The tick is still taken
 * before g is queued, so that a RUN of g on another P is never stamped
 * before its READY. */
void gmp__trace_ready_put(gmp__p *p, gmp_g *g, gmp_g *self, unsigned by,
			  bool next)
{
	uint64_t now;
	uint64_t *pos = ready_begin(p, g, self, by, &now);
	gmp__runq_put(p, g, next);
	ready_end(p, pos, now);
}

GMP__RACY_READER void gmp__trace_ready_nop(gmp_g *g, unsigned by)
{
	if (on_acq()) {
		gmp__m *m = gmp__getm();
		uint64_t w = ready_word(g, NULL, m ? by : GMP__TRBY_THREAD);
		if (m)
			emit(m_src(m), GMP__EV_READY, gmp__ticks(),
			     (uint64_t)g->id, w, 0);
		else
			emit_side(GMP__EV_READY, (uint64_t)g->id, w, 0);
	}
	uint32_t n = gmp__add32_rlx(&tr.nop_ready, 1) + 1;
	if (n % gmp__sample_ready == 0)
		sample_ready(g);
}

/* Why the run of g (not running here any more) ended, and its wait
 * reason: what the P was told (stopwhy), else what g's status says. A
 * g that is RUNNING or in a system call already was readied and run
 * elsewhere meanwhile: it parked (the converter knows from its ready). */
GMP__RACY_READER static inline uint64_t stop_word(gmp__p *p, gmp_g *g)
{
	uint32_t how = p->tr.stopwhy;
	uint32_t reason = 0;
	if (how == GMP__TRSTOP_NONE) {
		uint32_t st = gmp__load32_rlx(&g->status) &
			      ~(uint32_t)GMP__G_FLAGS;
		switch (st) {
		case GMP__G_RUNNABLE:
			how = GMP__TRSTOP_YIELD;
			break;
		case GMP__G_DEAD:
			how = GMP__TRSTOP_EXIT;
			break;
		default:
			how = GMP__TRSTOP_PARK;
			break;
		}
	}
	if (how == GMP__TRSTOP_PARK)
		reason = g->waitreason & 0xff;
	return how | reason << 8;
}

void gmp__trace_sched_slow(gmp__m *m, gmp__p *p)
{
	(void)m;
	bool on = on_acq();
	if (!on) {
		gmp__trace_slice_done(p);
		p->tr.rung = 0;
		p->tr.rungp = NULL;
		p->tr.stopwhy = GMP__TRSTOP_NONE;
		return;
	}
	/* racy readers: stall.c */
	gmp__store32_rlx(&p->tr.sched_seen, p->tr.sched_seen + 1);
	uint64_t now = gmp__ticks();
	gmp__slice_end(p, now);
	if (p->tr.rung) {
		if (on)
			emit(p_src(p), GMP__EV_STOP, now, (uint64_t)p->tr.rung,
			     stop_word(p, p->tr.rungp), 0);
		p->tr.rung = 0;
		p->tr.rungp = NULL;
	}
	p->tr.stopwhy = GMP__TRSTOP_NONE;
	p->tr.ready_tick = 1;
	p->tr.sys_tick = 1;
}

void gmp__trace_switch(gmp__m *m, gmp__p *p, gmp_g *g, uint64_t now)
{
	(void)m;
	/* racy readers: stall.c */
	gmp__store32_rlx(&p->tr.sched_seen, p->tr.sched_seen + 1);
	gmp__slice_end(p, now);
	gmp__trsrc *s = p_src(p);
	uint64_t fn = (uint64_t)(uintptr_t)g->fn;
	if (p->tr.rung)
		emit4(s, GMP__EV_SWITCH, now, (uint64_t)p->tr.rung,
		      stop_word(p, p->tr.rungp), (uint64_t)g->id, fn);
	else
		emit(s, GMP__EV_RUN, now, (uint64_t)g->id, fn, 0);
	p->tr.rung = g->id;
	p->tr.rungp = g;
	p->tr.stopwhy = GMP__TRSTOP_NONE;
}

void gmp__trace_run_slow(gmp__m *m, gmp__p *p, gmp_g *g, bool natural)
{
	(void)m;
	uint64_t now = gmp__ticks();
	bool on = on_acq();
	if (on) {
		gmp__trsrc *s = p_src(p);
		if (p->tr.rung)
			emit(s, GMP__EV_STOP, now, (uint64_t)p->tr.rung,
			     stop_word(p, p->tr.rungp), 0);
		emit(s, GMP__EV_RUN, now, (uint64_t)g->id,
		     (uint64_t)(uintptr_t)g->fn, 0);
		p->tr.rung = g->id;
		p->tr.rungp = g;
		p->tr.stopwhy = GMP__TRSTOP_NONE;
	}
	if (natural) {
		gmp__store64_rlx(&p->tr.slice_t0, now);
		gmp__store8_rlx(&p->tattn, 1);
	}
}

GMP__RACY_READER void gmp__trace_pstart_slow(gmp__m *m, gmp__p *p)
{
	if (!on_acq())
		return;
	uint64_t now = gmp__ticks();
	gmp__trsrc *s = p_src(p);
	emit(s, GMP__EV_PSTART, now, (uint64_t)m->id, 0, 0);
	gmp__store8_rlx(&p->tattn, 1);
	p->tr.ready_tick = 1;
	p->tr.sys_tick = 1;
	p->tr.rung = 0;
	p->tr.rungp = NULL;
	/* A task that takes a P back while it runs (a detached one, or one
	 * whose system call lost its P) goes on running on it. */
	gmp_g *g = m->curg;
	if (g && (gmp__load32_rlx(&g->status) & ~(uint32_t)GMP__G_FLAGS) ==
			 GMP__G_RUNNING) {
		emit(s, GMP__EV_RUN, now, (uint64_t)g->id,
		     (uint64_t)(uintptr_t)g->fn, 0);
		p->tr.rung = g->id;
		p->tr.rungp = g;
	}
}

GMP__RACY_READER void gmp__trace_pstop_slow(gmp__m *m, gmp__p *p, unsigned why)
{
	uint64_t now = gmp__ticks();
	gmp__slice_end(p, now);
	bool on = on_acq();
	if (on) {
		gmp__trsrc *s = p_src(p);
		if (p->tr.rung) {
			gmp_g *g = p->tr.rungp;
			uint64_t w;
			uint32_t st = gmp__load32_rlx(&g->status) &
				      ~(uint32_t)GMP__G_FLAGS;
			if (why == GMP__TRP_TAKEN)
				w = st == GMP__G_SYSCALL ? GMP__TRSTOP_SYSCALL
							 : GMP__TRSTOP_DETACH;
			else if (g == m->curg && st == GMP__G_RUNNING)
				w = GMP__TRSTOP_SYSCALL; /* the P goes first */
			else if (g == m->lockedg)
				w = stop_word(p, g);
			else
				w = stop_word(p, g);
			emit(s, GMP__EV_STOP, now, (uint64_t)p->tr.rung, w, 0);
		}
		emit(s, GMP__EV_PSTOP, now,
		     (uint64_t)m->id | (uint64_t)why << 56, 0, 0);
	}
	p->tr.rung = 0;
	p->tr.rungp = NULL;
	p->tr.stopwhy = GMP__TRSTOP_NONE;
	if (!on)
		gmp__tattn_clear(p);
}

void gmp__trace_sysenter_slow(gmp__m *m, gmp__p *p, gmp_g *g, bool block)
{
	bool on = on_acq(), sample;
	if (on) {
		p->tr.sys_tick = 1;
		sample = --p->tr.sys_left <= 0;
		if (sample)
			p->tr.sys_left = (int32_t)gmp__sample_syscall;
	} else {
		p->tr.sys_tick = gmp__sample_syscall;
		sample = true;
	}
	uint64_t now = gmp__ticks();
	m->tr.sys_t0 = now;
	m->tr.sys_sampled = sample;
	if (on)
		emit(p_src(p), GMP__EV_SYSENTER, now,
		     (uint64_t)g->id | (uint64_t)block << 63, 0, 0);
}

void gmp__trace_sysexit_slow(gmp__m *m, gmp_g *g)
{
	uint64_t now = gmp__ticks();
	uint64_t t0 = m->tr.sys_t0;
	m->tr.sys_t0 = 0;
	gmp__p *p = m->p; /* ours, or NULL: the P was taken */
	if (m->tr.sys_sampled) {
		uint64_t ns = gmp__ticks_to_ns(now - t0);
		if (ns && p)
			gmp__hist_add(p, GMP__HIST_SYSCALL, ns);
		else if (ns)
			gmp__hist_add_nop(GMP__HIST_SYSCALL, ns);
	}
	if (on_acq())
		emit(p ? p_src(p) : m_src(m), GMP__EV_SYSEXIT, now,
		     (uint64_t)g->id | (uint64_t)(p == NULL) << 63, 0, 0);
}

GMP__RACY_READER void gmp__trace_create_slow(gmp__p *p, gmp_g *g)
{
	if (!on_acq())
		return;
	gmp__m *m = gmp__getm();
	gmp_g *parent = m ? m->curg : NULL;
	uint64_t pid = parent ? (uint64_t)parent->id : 0;
	uint64_t fn = (uint64_t)(uintptr_t)g->fn;
	if (p)
		emit(p_src(p), GMP__EV_CREATE, gmp__ticks(), (uint64_t)g->id,
		     fn, pid);
	else
		emit_here(GMP__EV_CREATE, (uint64_t)g->id, fn, pid);
}

void gmp__trace_exit_slow(gmp__m *m, gmp__p *p, gmp_g *g)
{
	(void)m;
	if (on_acq() && p->tr.rung == g->id) {
		emit(p_src(p), GMP__EV_STOP, gmp__ticks(), (uint64_t)g->id,
		     GMP__TRSTOP_EXIT, 0);
		p->tr.rung = 0;
		p->tr.rungp = NULL;
	}
}

void gmp__trace_mstart(gmp__m *m)
{
	if (gmp__tracing() && on_acq())
		emit(m_src(m), GMP__EV_MSTART, gmp__ticks(),
		     (uint64_t)(uint32_t)m->tid, 0, 0);
}

/* The M's thread ends: its chunk goes to the full list, where the trace
 * finds it (the M struct is reused by another thread later). */
void gmp__trace_mexit(gmp__m *m)
{
	gmp__trsrc *s = &m->tr.src;
	if (gmp__tracing() && on_acq())
		emit(m_src(m), GMP__EV_MEXIT, gmp__ticks(), 0, 0, 0);
	if (!s->chunk)
		return;
	gmp__lock(&tr.lock);
	gmp__trchunk *c = s->chunk;
	bool kick = false;
	if (c->epoch == tr.epoch && s->epoch == tr.epoch && c->len) {
		full_push(c);
		kick = spill_due(c);
	} else if (c->cap == tr.chunkwords) {
		c->next = tr.pool;
		tr.pool = c;
	} else {
		chunk_free(c);
	}
	memset(s, 0, sizeof *s);
	gmp__unlock(&tr.lock);
	if (kick)
		spill_kick();
}

void gmp__trace_mpark(gmp__m *m, bool woke)
{
	if (gmp__tracing() && on_acq())
		emit(m_src(m), woke ? GMP__EV_MUNPARK : GMP__EV_MPARK,
		     gmp__ticks(), 0, 0, 0);
}

void gmp__trace_mwake(gmp__m *nm)
{
	if (gmp__tracing() && on_acq())
		emit_here(GMP__EV_MWAKE, (uint64_t)nm->id, 0, 0);
}

void gmp__trace_handoff(gmp__p *p)
{
	if (gmp__tracing() && on_acq())
		emit_here(GMP__EV_HANDOFF, (uint64_t)p->id, 0, 0);
}

void gmp__trace_steal(gmp__p *p, gmp__p *victim, uint32_t n)
{
	if (gmp__tracing() && on_acq())
		emit(p_src(p), GMP__EV_STEAL, gmp__ticks(),
		     (uint64_t)(uint32_t)victim->id | (uint64_t)n << 32, 0, 0);
}

/* ---- the tasks as the trace finds them ------------------------------------------ */

GMP__RACY_READER static void snapshot_tasks(void)
{
	for (gmp_g *g = gmp__loadp_acq(&gmp__allg); g; g = g->allglink) {
		uint32_t st = gmp__load32_acq(&g->status) &
			      ~(uint32_t)GMP__G_FLAGS;
		if (st == GMP__G_DEAD || st == GMP__G_IDLE)
			continue;
		uint64_t pnum = 0;
		gmp__m *m = gmp__loadp_rlx(&g->m);
		if (m && st == GMP__G_RUNNING) {
			gmp__p *p = gmp__loadp_rlx(&m->p);
			if (p)
				pnum = (uint64_t)p->id + 1;
		}
		uint64_t w = st | (uint64_t)(g->waitreason & 0xff) << 8 |
			     pnum << 16;
		emit_side(GMP__EV_STATE, (uint64_t)g->id, w,
			  (uint64_t)(uintptr_t)g->fn);
	}
	for (gmp__m *m = gmp__loadp_acq(&gmp__sched.allm); m; m = m->alllink)
		emit_side(GMP__EV_MSTATE, (uint64_t)m->id,
			  (uint64_t)(uint32_t)gmp__load32_rlx(
				  (volatile uint32_t *)&m->tid),
			  0);
}

/* ---- the spill thread ---------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t r = gmp__sys_write(fd, p, n);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? (int)r : -EIO;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Appends the first n words of chunk c to the spill file (spilllock
 * held). A write error leaves the record out; the trace says how many
 * events went missing. */
static void spill_chunk(const gmp__trchunk *c, uint32_t n)
{
	struct spillrec h = { SPILL_MAGIC, n, c->src, c->seq };
	if (!n || tr.spillfd < 0)
		return;
	if (write_all(tr.spillfd, &h, sizeof h) != 0 ||
	    write_all(tr.spillfd, c->w, (size_t)n * 8) != 0) {
		gmp__add64_rlx(&tr.lost, n);
		/* drop the partial record */
		if (ftruncate(tr.spillfd, (off_t)tr.spilled) == 0)
			lseek(tr.spillfd, (off_t)tr.spilled, SEEK_SET);
		return;
	}
	tr.spilled += sizeof h + (uint64_t)n * 8;
}

/* Moves what is on the full list to the spill file, and the chunks to
 * the pool. Returns whether there was anything. */
static bool spill_full(void)
{
	gmp__lock(&tr.lock);
	gmp__trchunk *list = tr.full;
	tr.full = tr.fulltail = NULL;
	uint32_t epoch = tr.epoch;
	gmp__unlock(&tr.lock);
	if (!list)
		return false;
	gmp__lock(&tr.spilllock);
	for (gmp__trchunk *c = list; c; c = c->next)
		if (c->epoch == epoch)
			spill_chunk(c, gmp__load32_acq(&c->len));
	gmp__unlock(&tr.spilllock);
	gmp__lock(&tr.lock);
	while (list) {
		gmp__trchunk *c = list;
		list = c->next;
		c->next = tr.pool;
		tr.pool = c;
	}
	gmp__unlock(&tr.lock);
	return true;
}

static void *spiller_main(void *arg)
{
	(void)arg;
	/* Every signal stays blocked here (gmp__thread_create): this thread
	 * only moves memory to a file. */
	for (;;) {
		uint32_t seq = gmp__load32_acq(&tr.spillseq);
		if (spill_full())
			continue;
		if (gmp__load32_acq(&tr.spillstop))
			break;
		/* full: announce the sleep, then look once more (Dekker with
		 * spill_kick's bump, then its load of spillwait) */
		gmp__xchg32_full(&tr.spillwait, 1);
		if (gmp__load32_acq(&tr.spillseq) == seq &&
		    !gmp__load32_acq(&tr.spillstop))
			gmp__futex_wait(&tr.spillseq, seq, -1);
		gmp__store32_rlx(&tr.spillwait, 0);
	}
	return NULL;
}

/* A file for the spill, beside the output if possible: unnamed (O_TMPFILE)
 * or unlinked at once, so that nothing is left behind whatever happens. */
static int spill_open(const char *path)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = 0;
	else if (slash)
		*slash = 0;
	else
		snprintf(dir, sizeof dir, ".");
#ifdef O_TMPFILE
	int fd = gmp__sys_open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
#endif
	char tmpl[4200];
	snprintf(tmpl, sizeof tmpl, "%s/.gmp-trace-XXXXXX", dir);
	int fd2 = mkostemp(tmpl, O_CLOEXEC);
	if (fd2 < 0) {
		snprintf(tmpl, sizeof tmpl, "/tmp/.gmp-trace-XXXXXX");
		fd2 = mkostemp(tmpl, O_CLOEXEC);
	}
	if (fd2 < 0)
		return -errno;
	unlink(tmpl);
	return fd2;
}

/* ---- collecting a trace ---------------------------------------------------------- */

/* The views of a trace being written, and the memory they live in. */
struct collect {
	gmp__arena arena;
	gmp__trview *v;
	size_t nv, cap;
};

static bool collect_add(struct collect *k, uint64_t src, uint64_t seq,
			const uint64_t *w, uint32_t n)
{
	if (!n)
		return true;
	if (k->nv == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 256;
		gmp__trview *v = gmp__arena_alloc(&k->arena, cap * sizeof *v);
		if (!v)
			return false;
		if (k->nv)
			memcpy(v, k->v, k->nv * sizeof *v);
		k->v = v;
		k->cap = cap;
	}
	k->v[k->nv++] = (gmp__trview){ src, seq, w, n };
	return true;
}

/* A writer's current chunk, copied as it is now (the writer goes on):
 * whole events up to the length loaded with acquire, kept only if the
 * chunk was not handed to another writer meanwhile. */
GMP__RACY_READER static void collect_current(struct collect *k, gmp__trsrc *s,
					     uint32_t epoch)
{
	gmp__trchunk *c = gmp__loadp_acq(&s->chunk);
	if (!c)
		return;
	uint32_t gen = gmp__load32_acq(&c->gen);
	uint32_t n = gmp__load32_acq(&c->len);
	uint64_t src = c->src, seq = c->seq;
	if (c->epoch != epoch || !n || n > c->cap)
		return;
	uint64_t *copy = gmp__arena_alloc(&k->arena, (size_t)n * 8);
	if (!copy)
		return;
	for (uint32_t i = 0; i < n; i++)
		copy[i] = gmp__load64_rlx(&c->w[i]);
	/* full: the copy's loads come before this one, which finds out
	 * whether a writer took the chunk over meanwhile (its reuse bumps
	 * gen, fully ordered, before it writes) */
	if (gmp__add32_full(&c->gen, 0) != gen)
		return;
	collect_add(k, src, seq, copy, n);
}

GMP__RACY_READER static void collect_currents(struct collect *k, uint32_t epoch,
					      bool lock_side)
{
	uint32_t n = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < n; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (p)
			collect_current(k, &p->tr.src, epoch);
	}
	for (gmp__m *m = gmp__loadp_acq(&gmp__sched.allm); m; m = m->alllink)
		collect_current(k, &m->tr.src, epoch);
	if (lock_side)
		gmp__lock(&tr.sidelock);
	collect_current(k, &tr.side, epoch);
	if (lock_side)
		gmp__unlock(&tr.sidelock);
}

/* The spill file's records, mapped. */
static void *spill_map(struct collect *k, uint64_t size)
{
	if (!size || tr.spillfd < 0)
		return NULL;
	void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, tr.spillfd, 0);
	if (map == MAP_FAILED)
		return NULL;
	for (uint64_t off = 0; off + sizeof(struct spillrec) <= size;) {
		const struct spillrec *h =
			(const struct spillrec *)((char *)map + off);
		uint64_t bytes = sizeof *h + (uint64_t)h->nwords * 8;
		if (h->magic != SPILL_MAGIC || off + bytes > size)
			break;
		collect_add(
			k, h->src, h->seq,
			(const uint64_t *)((const char *)map + off + sizeof *h),
			h->nwords);
		off += bytes;
	}
	return map;
}

static int write_json(int fd, struct collect *k, uint64_t c1, int64_t t1,
		      bool window, const char *why)
{
	gmp__trjob job = {
		.fd = fd,
		.v = k->v,
		.nv = k->nv,
		.c0 = tr.c0,
		.c1 = c1,
		.t0 = tr.t0,
		.t1 = t1,
		.lost = gmp__load64_rlx(&tr.lost),
		.window = window,
		.why = why,
	};
	return gmp__trjson_write(&job);
}

/* ---- start, stop, dump ---------------------------------------------------------------- */

static void free_pool_locked(void)
{
	while (tr.pool) {
		gmp__trchunk *c = tr.pool;
		tr.pool = c->next;
		chunk_free(c);
	}
}

/* The flight recorder's window, allocated and its pages faulted in when
 * it starts (tr.api held, before gmp__trace_on is set): recording then
 * never waits on a page fault, where a window filled as it goes costs
 * its writers one every 4 KiB of events for the whole first window (a
 * fault takes 1-2 µs on a VM: 64 MiB took 26-32 ms, some 30 ns a round
 * trip of chan_pingpong while it lasted). Best effort: what cannot be
 * had now is allocated as it goes, as before. */
static void flight_commit(void)
{
	gmp__lock(&tr.lock);
	size_t want = tr.nall < tr.maxchunks ? tr.maxchunks - tr.nall : 0;
	uint32_t words = tr.chunkwords;
	gmp__unlock(&tr.lock);

	size_t bytes = sizeof(gmp__trchunk) + (size_t)words * 8;
	gmp__trchunk *list = NULL;
	for (size_t i = 0; i < want; i++) {
		gmp__trchunk *c = chunk_new(words);
		if (!c)
			break;
		volatile char *b = (volatile char *)c;
		for (size_t off = 0; off < bytes; off += 4096)
			b[off] = 0;
		b[bytes - 1] = 0;
		c->next = list;
		list = c;
	}

	gmp__lock(&tr.lock);
	while (list) {
		gmp__trchunk *c = list;
		list = c->next;
		if (tr.nall >= tr.maxchunks) {
			/* full already: a late writer of an older trace
			 * took a chunk meanwhile */
			gmp__free(c);
			continue;
		}
		chunk_own(c);
		c->next = tr.pool;
		tr.pool = c;
	}
	gmp__unlock(&tr.lock);
}

/* tr.api held, the runtime running (held, or a task calling). */
static int start_locked(const char *path, uint64_t flight_mb)
{
	if (strlen(path) >= sizeof tr.path)
		return -ENAMETOOLONG;
	int fd = gmp__sys_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			       0644);
	if (fd < 0)
		return fd;
	int spillfd = -1;
	if (!flight_mb) {
		spillfd = spill_open(path);
		if (spillfd < 0) {
			gmp__sys_close(fd);
			return spillfd;
		}
	}
	snprintf(tr.path, sizeof tr.path, "%s", path);
	tr.fd = fd;

	gmp__lock(&tr.lock);
	free_pool_locked(); /* of the previous trace's size, perhaps */
	if (flight_mb) {
		uint64_t bytes = flight_mb << 20;
		uint64_t chunk = bytes / 64;
		if (chunk > FLIGHT_CHUNK_MAX)
			chunk = FLIGHT_CHUNK_MAX;
		if (chunk < FLIGHT_CHUNK_MIN)
			chunk = FLIGHT_CHUNK_MIN;
		tr.chunkwords = (uint32_t)((chunk - sizeof(gmp__trchunk)) / 8);
		/* Writers' current chunks of older traces still count: they
		 * are memory this trace holds too, until they are replaced. */
		tr.maxchunks = bytes / chunk;
		if (tr.maxchunks < 2)
			tr.maxchunks = 2;
		tr.mode = MODE_FLIGHT;
	} else {
		tr.chunkwords =
			(uint32_t)((STREAM_CHUNK - sizeof(gmp__trchunk)) / 8);
		tr.maxchunks = STREAM_MAX / STREAM_CHUNK;
		tr.mode = MODE_STREAM;
	}
	/* What an older trace left on the full list (a late writer's) is
	 * not this one's. */
	while (tr.full) {
		gmp__trchunk *c = full_pop();
		c->next = tr.pool;
		tr.pool = c;
	}
	tr.aside = false;
	gmp__store32_rlx(&tr.epoch, tr.epoch + 1);
	gmp__store64_rlx(&tr.lost, 0);
	gmp__unlock(&tr.lock);
	if (flight_mb)
		flight_commit();

	tr.spillfd = spillfd;
	tr.spilled = 0;
	gmp__store32_rlx(&tr.spillstop, 0);
	tr.c0 = gmp__ticks();
	tr.t0 = gmp__nanotime();

	/* release: the settings above before the flag the hooks test */
	gmp__store32_rel(&gmp__trace_on, (uint32_t)tr.mode);
	/* Every P takes the slow way at its next schedule() and joins. */
	uint32_t n = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < n; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (p)
			gmp__store8_rlx(&p->tattn, 1);
	}
	snapshot_tasks();

	if (tr.mode == MODE_STREAM) {
		int err = gmp__thread_create(&tr.spiller, 64 * 1024,
					     spiller_main, NULL);
		if (err == 0) {
			tr.spilling = true;
			gmp__add32_rlx(&gmp__sched.nthreads, 1);
		}
		/* Without the thread the full chunks wait in memory (up to
		 * the cap) and are written at the stop. */
	}
	return 0;
}

/* tr.api held. Stops the recording and writes the trace. */
static int stop_locked(void)
{
	uint32_t epoch = tr.epoch;
	int mode = tr.mode;
	gmp__store32_rel(&gmp__trace_on, 0);
	uint64_t c1 = gmp__ticks();
	int64_t t1 = gmp__nanotime();
	if (tr.spilling) {
		gmp__store32_rel(&tr.spillstop, 1);
		spill_kick();
		pthread_join(tr.spiller, NULL);
		tr.spilling = false;
		gmp__add32_rlx(&gmp__sched.nthreads, -1);
	}
	struct collect k = { 0 };
	void *map = NULL;
	uint64_t mapsize = 0;
	gmp__trchunk *list = NULL;
	if (mode == MODE_STREAM) {
		spill_full(); /* what came after the thread's last round */
		/* The writers' current chunks, into the file too. */
		struct collect cur = { 0 };
		collect_currents(&cur, epoch, true);
		gmp__lock(&tr.spilllock);
		for (size_t i = 0; i < cur.nv; i++) {
			struct spillrec r = { SPILL_MAGIC, cur.v[i].n,
					      cur.v[i].src, cur.v[i].seq };
			if (write_all(tr.spillfd, &r, sizeof r) == 0 &&
			    write_all(tr.spillfd, cur.v[i].w,
				      (size_t)cur.v[i].n * 8) == 0)
				tr.spilled +=
					sizeof r + (uint64_t)cur.v[i].n * 8;
		}
		gmp__unlock(&tr.spilllock);
		gmp__arena_free(&cur.arena);
		mapsize = tr.spilled;
		map = spill_map(&k, mapsize);
	} else {
		gmp__lock(&tr.lock);
		list = tr.full;
		tr.full = tr.fulltail = NULL;
		gmp__unlock(&tr.lock);
		for (gmp__trchunk *c = list; c; c = c->next)
			if (c->epoch == epoch)
				collect_add(&k, c->src, c->seq, c->w,
					    gmp__load32_acq(&c->len));
		collect_currents(&k, epoch, true);
	}
	int err = write_json(tr.fd, &k, c1, t1, mode == MODE_FLIGHT, "stop");
	int cr = gmp__sys_close(tr.fd);
	if (cr != 0 && !err)
		err = cr;
	tr.fd = -1;
	if (map)
		munmap(map, mapsize);
	gmp__arena_free(&k.arena);
	if (tr.spillfd >= 0)
		gmp__sys_close(tr.spillfd);
	tr.spillfd = -1;
	gmp__lock(&tr.lock);
	while (list) {
		gmp__trchunk *c = list;
		list = c->next;
		c->next = tr.pool;
		tr.pool = c;
	}
	free_pool_locked();
	tr.mode = MODE_OFF;
	gmp__unlock(&tr.lock);
	return err;
}

/* tr.api held, a trace running: writes what it holds now to path. */
static int dump_locked(const char *path)
{
	int fd = gmp__sys_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			       0644);
	if (fd < 0)
		return fd;
	uint32_t epoch = tr.epoch;
	uint64_t c1 = gmp__ticks();
	int64_t t1 = gmp__nanotime();
	struct collect k = { 0 };
	void *map = NULL;
	uint64_t mapsize = 0;
	gmp__lock(&tr.lock);
	gmp__trchunk *list = tr.full;
	tr.full = tr.fulltail = NULL;
	tr.aside = true;
	gmp__unlock(&tr.lock);
	if (tr.mode == MODE_STREAM) {
		/* What the spill thread wrote so far, then the rest. */
		gmp__lock(&tr.spilllock);
		for (gmp__trchunk *c = list; c; c = c->next)
			if (c->epoch == epoch)
				spill_chunk(c, gmp__load32_acq(&c->len));
		mapsize = tr.spilled;
		gmp__unlock(&tr.spilllock);
		map = spill_map(&k, mapsize);
	} else {
		for (gmp__trchunk *c = list; c; c = c->next)
			if (c->epoch == epoch)
				collect_add(&k, c->src, c->seq, c->w,
					    gmp__load32_acq(&c->len));
	}
	collect_currents(&k, epoch, true);
	int err = write_json(fd, &k, c1, t1, tr.mode == MODE_FLIGHT, "dump");
	int cr = gmp__sys_close(fd);
	if (cr != 0 && !err)
		err = cr;
	if (map)
		munmap(map, mapsize);
	gmp__arena_free(&k.arena);
	/* The chunks set aside go back: a flight recorder's to the head of
	 * the full list (they are its oldest), a full trace's (written to
	 * the file now) to the pool. */
	gmp__lock(&tr.lock);
	if (tr.mode == MODE_FLIGHT && list) {
		gmp__trchunk *last = list;
		while (last->next)
			last = last->next;
		last->next = tr.full;
		if (!tr.full)
			tr.fulltail = last;
		tr.full = list;
	} else {
		while (list) {
			gmp__trchunk *c = list;
			list = c->next;
			c->next = tr.pool;
			tr.pool = c;
		}
	}
	tr.aside = false;
	gmp__unlock(&tr.lock);
	return err;
}

GMP_EXTERN int gmp_trace_start(const char *path)
{
	if (!path || !*path)
		return -EINVAL;
	int saved = errno;
	bool held = false;
	if (!gmp__getm()) {
		int err = gmp__rt_hold(true);
		if (err)
			return err;
		held = true;
	}
	pthread_mutex_lock(&tr.api);
	int err = tr.closed                         ? -ESHUTDOWN
		  : gmp__load32_rlx(&gmp__trace_on) ? -EBUSY
						    : start_locked(path, 0);
	pthread_mutex_unlock(&tr.api);
	if (held)
		gmp__rt_release();
	errno = saved;
	return err;
}

GMP_EXTERN int gmp_trace_stop(void)
{
	int saved = errno;
	pthread_mutex_lock(&tr.api);
	int err = tr.mode == MODE_OFF ? -ENOENT : stop_locked();
	pthread_mutex_unlock(&tr.api);
	errno = saved;
	return err;
}

GMP_EXTERN int gmp_trace_dump(const char *path)
{
	int saved = errno;
	pthread_mutex_lock(&tr.api);
	int err;
	if (tr.mode == MODE_OFF)
		err = -ENOENT;
	else if (!path && !tr.path[0])
		err = -EINVAL;
	else
		err = dump_locked(path ? path : tr.path);
	pthread_mutex_unlock(&tr.api);
	errno = saved;
	return err;
}

/* ---- the runtime's side ------------------------------------------------------------------ */

static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

/* A normal exit writes a running trace (the runtime may still be
 * running: its threads record on until the recording stops). */
static void at_exit(void)
{
	pthread_mutex_lock(&tr.api);
	if (tr.mode != MODE_OFF)
		stop_locked();
	pthread_mutex_unlock(&tr.api);
}

static void register_atexit(void)
{
	atexit(at_exit);
}

void gmp__trace_init(void)
{
	gmp__ticks_init();
	pthread_once(&atexit_once, register_atexit);
	pthread_mutex_lock(&tr.api);
	tr.closed = false;
	if (gmp__trace_cfg.path[0] && tr.mode == MODE_OFF) {
		int err = start_locked(gmp__trace_cfg.path,
				       gmp__trace_cfg.flight_mb);
		if (err)
			fprintf(stderr, "gmp: GMP_TRACE=%s: %s\n",
				gmp__trace_cfg.path, strerror(-err));
	}
	pthread_mutex_unlock(&tr.api);
}

/* gmp_shutdown, every task ended, before sysmon and the Ms stop: the
 * trace is written; no new one starts until the next gmp_init. */
void gmp__trace_shutdown(void)
{
	pthread_mutex_lock(&tr.api);
	if (tr.mode != MODE_OFF) {
		int err = stop_locked();
		if (err)
			fprintf(stderr, "gmp: writing the trace to %s: %s\n",
				tr.path, strerror(-err));
	}
	tr.closed = true;
	pthread_mutex_unlock(&tr.api);
}

/* gmp_shutdown, once every M has exited and before the Ps are freed: no
 * writer is left, so every chunk goes. */
void gmp__trace_release(void)
{
	pthread_mutex_lock(&tr.api);
	gmp__lock(&tr.lock);
	while (tr.all) {
		gmp__trchunk *c = tr.all;
		tr.all = c->allnext;
		gmp__free(c);
	}
	tr.nall = 0;
	tr.pool = tr.full = tr.fulltail = NULL;
	gmp__unlock(&tr.lock);
	memset(&tr.side, 0, sizeof tr.side);
	pthread_mutex_unlock(&tr.api);
}

void gmp__trace_forked(void)
{
	/* The child's copy: no thread spills, the files are the parent's
	 * (close our copies), and nothing records. */
	gmp__store32_rlx(&gmp__trace_on, 0);
	if (tr.fd >= 0)
		gmp__sys_close(tr.fd);
	if (tr.spillfd >= 0)
		gmp__sys_close(tr.spillfd);
	tr.api = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	tr.lock = (gmp__mutex)GMP__MUTEX_INIT;
	tr.sidelock = (gmp__mutex)GMP__MUTEX_INIT;
	tr.spilllock = (gmp__mutex)GMP__MUTEX_INIT;
	tr.fd = tr.spillfd = -1;
	tr.spilling = false;
	tr.mode = MODE_OFF;
	tr.closed = false;
	tr.full = tr.fulltail = tr.pool = tr.all = NULL;
	tr.nall = 0;
	memset(&tr.side, 0, sizeof tr.side);
}

/* Tries a lock for a while, never sleeping on it: the emergency paths
 * may run on a thread that holds it (interrupted by a signal, or aborting
 * inside). */
static bool try_lock_a_while(gmp__mutex *l)
{
	for (int i = 0; i < 100000; i++) {
		if (gmp__cas32_acq(&l->key, GMP__UNLOCKED, GMP__LOCKED))
			return true;
		gmp__cpu_relax();
	}
	return false;
}

void gmp__trace_dump_emergency(void)
{
	static volatile uint32_t once;
	if (!gmp__load32_acq(&gmp__trace_on) || !tr.path[0] ||
	    gmp__xchg32_full(&once, 1) != 0)
		return;
	uint32_t epoch = gmp__load32_rlx(&tr.epoch);
	int mode = tr.mode;
	gmp__store32_rel(&gmp__trace_on, 0);
	uint64_t c1 = gmp__ticks();
	int64_t t1 = gmp__nanotime();
	struct collect k = { 0 };
	void *map = NULL;
	uint64_t mapsize = 0;
	bool locked = try_lock_a_while(&tr.lock);
	gmp__trchunk *list = tr.full;
	if (locked) {
		tr.full = tr.fulltail = NULL;
		tr.aside = true;
		gmp__unlock(&tr.lock);
	}
	if (mode == MODE_STREAM) {
		bool sl = try_lock_a_while(&tr.spilllock);
		mapsize = tr.spilled;
		if (sl)
			gmp__unlock(&tr.spilllock);
		map = spill_map(&k, mapsize);
	}
	for (gmp__trchunk *c = list; c; c = c->next)
		if (c->epoch == epoch)
			collect_add(&k, c->src, c->seq, c->w,
				    gmp__load32_acq(&c->len));
	bool side = try_lock_a_while(&tr.sidelock);
	collect_currents(&k, epoch, false);
	if (side)
		gmp__unlock(&tr.sidelock);
	int fd = gmp__sys_open(tr.path,
			       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		write_json(fd, &k, c1, t1, mode == MODE_FLIGHT, "abort");
		gmp__sys_close(fd);
	}
	if (map)
		munmap(map, mapsize);
	gmp__arena_free(&k.arena);
}

/* ---- settings ----------------------------------------------------------------------------- */

/* GMP_TRACE: "path", or "flight:N:path" (N MiB, 1 to 65536). */
int gmp__trace_parse(const char *v, gmp__trace_settings *out)
{
	memset(out, 0, sizeof *out);
	if (!v || !*v)
		return 0;
	const char *path = v;
	if (!strncmp(v, "flight:", 7)) {
		char *end;
		errno = 0;
		unsigned long long mb = strtoull(v + 7, &end, 10);
		if (errno || end == v + 7 || *end != ':' || !end[1] || mb < 1 ||
		    mb > 65536 || v[7] == '-')
			return -EINVAL;
		out->flight_mb = mb;
		path = end + 1;
	}
	if (strlen(path) >= sizeof out->path)
		return -EINVAL;
	snprintf(out->path, sizeof out->path, "%s", path);
	return 0;
}

/* ---- tests ---------------------------------------------------------------------------------- */

#if GMP__TEST_HOOKS
int gmp__trace_start_flight(const char *path, uint64_t mb)
{
	pthread_mutex_lock(&tr.api);
	int err = tr.closed                         ? -ESHUTDOWN
		  : gmp__load32_rlx(&gmp__trace_on) ? -EBUSY
						    : start_locked(path, mb);
	pthread_mutex_unlock(&tr.api);
	return err;
}

size_t gmp__trace_bytes(void)
{
	gmp__lock(&tr.lock);
	size_t n = 0;
	for (gmp__trchunk *c = tr.all; c; c = c->allnext)
		n += sizeof *c + (size_t)c->cap * 8;
	gmp__unlock(&tr.lock);
	return n;
}
#endif
