/* Writing a trace as Chrome trace-event JSON (tracejson.h), the format
 * ui.perfetto.dev and chrome://tracing open: an object whose traceEvents
 * array holds complete events ("X"), instants ("i"), metadata naming the
 * tracks ("M"), and flow arrows bound to slices (bind_id with flow_out on
 * the slice where an arrow starts, flow_in on the one it ends at).
 * docs/debugging.md lists every name and argument key written here.
 *
 * The tracks: one per P (pid 1, tid 1 + the P's number), one per M (pid 2,
 * tid 100000 + the M's number), and one for sysmon and threads that are
 * not the runtime's (pid 3). On a P's track every run of a task is a
 * complete event named after its entry function; inside it, zero-length
 * slices mark the readies and creates it made (each the start of an
 * arrow to the run it caused), and instants mark parks, exits, steals and
 * handoffs. On an M's track: its system calls, its idle sleeps and the
 * stretches it ran a detached task, as complete events, and its thread's
 * start and end, and the Ps it took and let go, as instants.
 *
 * The writers' chunks are merged into one stream in time order (each
 * writer's own events are in order already) and replayed through a model
 * of every P, M and task. The model forgives what recording from several
 * threads without a lock allows: a run whose end its P recorded after
 * another P recorded the task's next ready or run (the P's own record of
 * a switch is taken at its next schedule(), a moment later) ends where
 * that later event says, and takes its wait reason from the ready.
 *
 * Everything here allocates from mmap'd arenas and writes with write(2),
 * so that a trace can be written from a signal handler, or by a thread
 * that is about to abort, without malloc or stdio.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "symtab.h"
#include "sys.h"
#include "trace.h"
#include "tracejson.h"

/* ---- the arena ------------------------------------------------------------- */

struct ablock {
	struct ablock *next;
	size_t size;
};

enum { ARENA_BLOCK = 1 << 20 };

void *gmp__arena_alloc(gmp__arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (!a->cur || (size_t)(a->end - a->cur) < n) {
		size_t size = n + 64 > ARENA_BLOCK ? n + 64 : ARENA_BLOCK;
		size = (size + 4095) & ~(size_t)4095;
		void *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		struct ablock *b = m;
		b->next = a->blocks;
		b->size = size;
		a->blocks = b;
		a->cur = (char *)m + 64;
		a->end = (char *)m + size;
	}
	void *p = a->cur;
	a->cur += n;
	return p;
}

void gmp__arena_free(gmp__arena *a)
{
	struct ablock *b = a->blocks;
	while (b) {
		struct ablock *next = b->next;
		munmap(b, b->size);
		b = next;
	}
	a->cur = a->end = NULL;
	a->blocks = NULL;
}

/* ---- output ------------------------------------------------------------------ */

struct out {
	int fd;
	int err;
	size_t len;
	char buf[1 << 16];
};

static void o_flush(struct out *o)
{
	size_t off = 0;
	while (off < o->len && !o->err) {
		ssize_t r = gmp__sys_write(o->fd, o->buf + off, o->len - off);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			o->err = r < 0 ? (int)-r : EIO;
		else
			off += (size_t)r;
	}
	o->len = 0;
}

static void o_mem(struct out *o, const char *s, size_t n)
{
	while (n) {
		if (o->len == sizeof o->buf)
			o_flush(o);
		size_t k = sizeof o->buf - o->len;
		if (k > n)
			k = n;
		memcpy(o->buf + o->len, s, k);
		o->len += k;
		s += k;
		n -= k;
	}
}

static void o_str(struct out *o, const char *s)
{
	o_mem(o, s, strlen(s));
}

static void o_u64(struct out *o, uint64_t v)
{
	char tmp[24];
	int i = (int)sizeof tmp;
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	o_mem(o, tmp + i, sizeof tmp - (size_t)i);
}

static void o_i64(struct out *o, int64_t v)
{
	if (v < 0) {
		o_str(o, "-");
		o_u64(o, 0 - (uint64_t)v);
	} else {
		o_u64(o, (uint64_t)v);
	}
}

/* A duration or a time since the trace began, in microseconds with three
 * decimals (the JSON format's unit; nanoseconds stay exact). */
static void o_us(struct out *o, int64_t ns)
{
	if (ns < 0) {
		o_str(o, "-");
		ns = -ns;
	}
	o_u64(o, (uint64_t)ns / 1000);
	char f[4] = { '.', (char)('0' + ns / 100 % 10),
		      (char)('0' + ns / 10 % 10), (char)('0' + ns % 10) };
	o_mem(o, f, 4);
}

/* A JSON string. */
static void o_jstr(struct out *o, const char *s)
{
	size_t plain = 0;
	while (s[plain] && s[plain] != '"' && s[plain] != '\\' &&
	       (unsigned char)s[plain] >= 0x20)
		plain++;
	if (!s[plain]) { /* the usual case: nothing to escape */
		o_mem(o, "\"", 1);
		o_mem(o, s, plain);
		o_mem(o, "\"", 1);
		return;
	}
	o_str(o, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			o_mem(o, e, 2);
		} else if (c < 0x20) {
			char e[6] = { '\\',
				      'u',
				      '0',
				      '0',
				      "0123456789abcdef"[c >> 4],
				      "0123456789abcdef"[c & 15] };
			o_mem(o, e, 6);
		} else {
			o_mem(o, (const char *)&c, 1);
		}
	}
	o_str(o, "\"");
}

/* ---- the model ------------------------------------------------------------------ */

enum { T_P = 1, T_M = 2, T_SIDE = 3 };

struct track {
	int pid;
	uint64_t tid;
};

enum cause {
	C_NONE = 0,
	C_READY,
	C_CREATE,
	C_YIELD,
	C_PREEMPT,
	C_SYSCALL,
	C_START,
	C_DETACH,
	C_NCAUSES,
};
static const char *const cause_names[C_NCAUSES] = {
	[C_NONE] = "unknown",      [C_READY] = "ready",
	[C_CREATE] = "create",     [C_YIELD] = "yield",
	[C_PREEMPT] = "preempted", [C_SYSCALL] = "syscall",
	[C_START] = "trace start", [C_DETACH] = "detached",
};

static const char *const how_names[GMP__TRSTOP_NKINDS] = {
	[GMP__TRSTOP_NONE] = "unknown",      [GMP__TRSTOP_YIELD] = "yield",
	[GMP__TRSTOP_PREEMPT] = "preempted", [GMP__TRSTOP_PARK] = "park",
	[GMP__TRSTOP_EXIT] = "exit",         [GMP__TRSTOP_SYSCALL] = "syscall",
	[GMP__TRSTOP_DETACH] = "detach",     [GMP__TRSTOP_LOCKED] = "locked",
};

static const char *const by_names[GMP__TRBY_NKINDS] = {
	[GMP__TRBY_TASK] = "task",     [GMP__TRBY_TIMER] = "timer",
	[GMP__TRBY_POLL] = "netpoll",  [GMP__TRBY_SCHED] = "scheduler",
	[GMP__TRBY_THREAD] = "thread",
};

struct gst {
	int64_t gid; /* 0: empty slot */
	uint64_t fn;
	int32_t runp; /* the P where its run is open, or -1 */
	int64_t detm; /* the M where it runs detached, or -1 */
	int64_t det_ts;
	uint8_t status; /* GMP__G_* as the trace knows it, IDLE: unknown */
	uint8_t reason;
	int64_t park_ts; /* since when it waits (-1: unknown) */
	uint64_t pflow;  /* the arrow to its next run (0: none) */
	int64_t pts;     /* since when it is runnable */
	uint8_t pkind;   /* why (enum cause) */
};

struct run {
	bool open;
	int64_t gid, ts, m;
	uint64_t flow;
	uint8_t cause;
	int64_t delay; /* -1: unknown */
};

struct pst {
	bool used;
	int64_t curm;
	struct run run;
	uint8_t last_how; /* how its last run ended */
};

struct mst {
	int64_t mid; /* -1: empty slot */
	uint32_t tid;
	bool used;
	bool sys_open, sys_block;
	int64_t sys_gid, sys_ts;
	bool idle_open;
	int64_t idle_ts;
};

struct fname {
	uint64_t fn;
	const char *name;
};

struct conv {
	const gmp__trjob *job;
	gmp__arena a;
	struct out *o;
	bool first; /* no event written yet (for the commas) */
	int64_t ws; /* the window's start (ns since the clock's zero) */
	uint64_t flows;

	struct pst ps[GMP__MAXPROCS_LIMIT];
	struct gst *gs;
	size_t gcap, gn;
	struct mst *ms;
	size_t mcap, mn;
	bool side_used;

	struct fname *fns;
	size_t fcap, fnn;
	gmp__symtab *syms;
	bool syms_loaded;
};

static uint64_t hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static struct gst *g_get(struct conv *c, int64_t gid)
{
	if (c->gn * 2 >= c->gcap) {
		size_t ncap = c->gcap ? c->gcap * 2 : 1024;
		struct gst *n = gmp__arena_alloc(&c->a, ncap * sizeof *n);
		if (!n)
			return NULL;
		memset(n, 0, ncap * sizeof *n);
		for (size_t i = 0; i < c->gcap; i++) {
			if (!c->gs[i].gid)
				continue;
			size_t h = hash64((uint64_t)c->gs[i].gid) & (ncap - 1);
			while (n[h].gid)
				h = (h + 1) & (ncap - 1);
			n[h] = c->gs[i];
		}
		c->gs = n;
		c->gcap = ncap;
	}
	size_t h = hash64((uint64_t)gid) & (c->gcap - 1);
	while (c->gs[h].gid && c->gs[h].gid != gid)
		h = (h + 1) & (c->gcap - 1);
	struct gst *g = &c->gs[h];
	if (!g->gid) {
		g->gid = gid;
		g->runp = -1;
		g->detm = -1;
		g->park_ts = -1;
		c->gn++;
	}
	return g;
}

static struct mst *m_get(struct conv *c, int64_t mid)
{
	if (c->mn * 2 >= c->mcap) {
		size_t ncap = c->mcap ? c->mcap * 2 : 64;
		struct mst *n = gmp__arena_alloc(&c->a, ncap * sizeof *n);
		if (!n)
			return NULL;
		for (size_t i = 0; i < ncap; i++)
			n[i].mid = -1;
		for (size_t i = 0; i < c->mcap; i++) {
			if (c->ms[i].mid < 0)
				continue;
			size_t h = hash64((uint64_t)c->ms[i].mid) & (ncap - 1);
			while (n[h].mid >= 0)
				h = (h + 1) & (ncap - 1);
			n[h] = c->ms[i];
		}
		c->ms = n;
		c->mcap = ncap;
	}
	size_t h = hash64((uint64_t)mid) & (c->mcap - 1);
	while (c->ms[h].mid >= 0 && c->ms[h].mid != mid)
		h = (h + 1) & (c->mcap - 1);
	struct mst *m = &c->ms[h];
	if (m->mid < 0) {
		memset(m, 0, sizeof *m);
		m->mid = mid;
		c->mn++;
	}
	return m;
}

/* The name of a task's entry function. */
static const char *fn_name(struct conv *c, uint64_t fn)
{
	if (!fn)
		return "task";
	for (size_t i = 0; i < c->fnn; i++)
		if (c->fns[i].fn == fn)
			return c->fns[i].name;
	if (!c->syms_loaded) {
		c->syms = gmp__symtab_load(&c->a);
		c->syms_loaded = true;
	}
	uintptr_t off = 0;
	const char *name = gmp__symtab_find(c->syms, (uintptr_t)fn, &off);
	if (!name || off) {
		/* No symbol starts there: the address, as gmp_dump prints. */
		char *buf = gmp__arena_alloc(&c->a, 24);
		if (!buf)
			return "task";
		int i = 23;
		buf[i] = 0;
		uint64_t v = fn;
		do {
			buf[--i] = "0123456789abcdef"[v & 15];
			v >>= 4;
		} while (v);
		buf[--i] = 'x';
		buf[--i] = '0';
		name = buf + i;
	}
	if (c->fnn == c->fcap) {
		size_t ncap = c->fcap ? 2 * c->fcap : 64;
		struct fname *n = gmp__arena_alloc(&c->a, ncap * sizeof *n);
		if (!n)
			return name;
		if (c->fnn)
			memcpy(n, c->fns, c->fnn * sizeof *n);
		c->fns = n;
		c->fcap = ncap;
	}
	c->fns[c->fnn++] = (struct fname){ fn, name };
	return name;
}

static struct track p_track(int p)
{
	return (struct track){ 1, 1 + (uint64_t)p };
}

static struct track m_track(int64_t m)
{
	return (struct track){ 2, 100000 + (uint64_t)m };
}

static const struct track side_track = { 3, 300000 };

/* ---- writing events --------------------------------------------------------- */

static void ev_open(struct conv *c, const char *ph, struct track t, int64_t ts)
{
	struct out *o = c->o;
	o_str(o, c->first ? "\n{\"ph\":\"" : ",\n{\"ph\":\"");
	c->first = false;
	o_str(o, ph);
	o_str(o, "\",\"pid\":");
	o_u64(o, (uint64_t)t.pid);
	o_str(o, ",\"tid\":");
	o_u64(o, t.tid);
	o_str(o, ",\"ts\":");
	o_us(o, ts - c->job->t0);
}

static void ev_name(struct conv *c, const char *name, const char *cat)
{
	o_str(c->o, ",\"name\":");
	o_jstr(c->o, name);
	o_str(c->o, ",\"cat\":\"");
	o_str(c->o, cat);
	o_str(c->o, "\",\"args\":{");
}

static void arg_sep(struct conv *c, bool *first)
{
	if (!*first)
		o_str(c->o, ",");
	*first = false;
}

static void arg_i(struct conv *c, bool *first, const char *k, int64_t v)
{
	arg_sep(c, first);
	o_jstr(c->o, k);
	o_str(c->o, ":");
	o_i64(c->o, v);
}

static void arg_s(struct conv *c, bool *first, const char *k, const char *v)
{
	arg_sep(c, first);
	o_jstr(c->o, k);
	o_str(c->o, ":");
	o_jstr(c->o, v);
}

static void arg_us(struct conv *c, bool *first, const char *k, int64_t ns)
{
	arg_sep(c, first);
	o_jstr(c->o, k);
	o_str(c->o, ":");
	o_us(c->o, ns);
}

static void ev_close(struct conv *c, uint64_t flow, const char *dir)
{
	o_str(c->o, "}");
	if (flow) {
		o_str(c->o, ",\"bind_id\":");
		o_u64(c->o, flow);
		o_str(c->o, ",\"");
		o_str(c->o, dir);
		o_str(c->o, "\":true");
	}
	o_str(c->o, "}");
}

static void mark_used(struct conv *c, struct track t)
{
	if (t.pid == 1)
		c->ps[t.tid - 1].used = true;
	else if (t.pid == 2)
		m_get(c, (int64_t)(t.tid - 100000))->used = true;
	else
		c->side_used = true;
}

/* An instant on track t (nothing before the window). */
static bool instant(struct conv *c, struct track t, int64_t ts,
		    const char *name, const char *cat)
{
	if (ts < c->ws)
		return false;
	mark_used(c, t);
	ev_open(c, "i", t, ts);
	o_str(c->o, ",\"s\":\"t\"");
	ev_name(c, name, cat);
	return true;
}

/* A zero-length slice that starts an arrow; returns its id, 0 before the
 * window (then nothing is written). Its args follow. */
static uint64_t marker(struct conv *c, struct track t, int64_t ts,
		       const char *name)
{
	if (ts < c->ws)
		return 0;
	mark_used(c, t);
	ev_open(c, "X", t, ts);
	o_str(c->o, ",\"dur\":0");
	ev_name(c, name, name);
	return ++c->flows;
}

/* A complete event [ts, end) on t, clamped to the window; false (nothing
 * written) if it ended before. Its args follow. */
static bool span(struct conv *c, struct track t, int64_t ts, int64_t end,
		 const char *name, const char *cat)
{
	if (end < c->ws)
		return false;
	if (ts < c->ws)
		ts = c->ws;
	if (end < ts)
		end = ts;
	mark_used(c, t);
	ev_open(c, "X", t, ts);
	o_str(c->o, ",\"dur\":");
	o_us(c->o, end - ts);
	ev_name(c, name, cat);
	return true;
}

/* ---- the model's transitions -------------------------------------------------- */

/* Ends the open run on P p at ts, for `how` (and the wait reason). */
static void run_close(struct conv *c, int p, int64_t ts, unsigned how,
		      unsigned reason)
{
	struct run *r = &c->ps[p].run;
	if (!r->open)
		return;
	r->open = false;
	c->ps[p].last_how = (uint8_t)how;
	struct gst *g = g_get(c, r->gid);
	if (g && g->runp == p)
		g->runp = -1;
	const char *name = fn_name(c, g ? g->fn : 0);
	if (span(c, p_track(p), r->ts, ts, name, "run")) {
		bool f = true;
		arg_i(c, &f, "task", r->gid);
		if (r->m >= 0)
			arg_i(c, &f, "m", r->m);
		arg_s(c, &f, "cause", cause_names[r->cause]);
		if (r->delay >= 0)
			arg_us(c, &f, "delay_us", r->delay);
		arg_s(c, &f, "end",
		      how < GMP__TRSTOP_NKINDS ? how_names[how] : "unknown");
		if (how == GMP__TRSTOP_PARK)
			arg_s(c, &f, "reason", gmp__waitreason_name(reason));
		ev_close(c, r->ts >= c->ws ? r->flow : 0, "flow_in");
	}
	if (!g)
		return;
	switch (how) {
	case GMP__TRSTOP_PARK:
		g->status = GMP__G_WAITING;
		g->reason = (uint8_t)reason;
		g->park_ts = ts;
		if (instant(c, p_track(p), ts, "park", "park")) {
			bool f = true;
			arg_i(c, &f, "task", g->gid);
			arg_s(c, &f, "reason", gmp__waitreason_name(reason));
			ev_close(c, 0, NULL);
		}
		break;
	case GMP__TRSTOP_YIELD:
	case GMP__TRSTOP_PREEMPT: {
		g->status = GMP__G_RUNNABLE;
		bool y = how == GMP__TRSTOP_YIELD;
		uint64_t id =
			marker(c, p_track(p), ts, y ? "yield" : "preempted");
		if (id) {
			bool f = true;
			arg_i(c, &f, "task", g->gid);
			ev_close(c, id, "flow_out");
		}
		g->pflow = id;
		g->pts = ts;
		g->pkind = y ? C_YIELD : C_PREEMPT;
		break;
	}
	case GMP__TRSTOP_EXIT:
		g->status = GMP__G_DEAD;
		if (instant(c, p_track(p), ts, "exit", "exit")) {
			bool f = true;
			arg_i(c, &f, "task", g->gid);
			ev_close(c, 0, NULL);
		}
		break;
	case GMP__TRSTOP_SYSCALL:
		g->status = GMP__G_SYSCALL;
		break;
	case GMP__TRSTOP_DETACH: {
		/* It runs on, on its M, until it takes a P back: that run's
		 * arrow starts here. */
		if (r->m >= 0) {
			g->detm = r->m;
			g->det_ts = ts;
		}
		uint64_t id = marker(c, p_track(p), ts, "detach");
		if (id) {
			bool f = true;
			arg_i(c, &f, "task", g->gid);
			if (r->m >= 0)
				arg_i(c, &f, "m", r->m);
			ev_close(c, id, "flow_out");
		}
		g->pflow = id;
		g->pts = ts;
		g->pkind = C_DETACH;
		break;
	}
	default:
		break;
	}
}

/* The detached stretch of g on its M ends at ts (it took a P back). */
static void detach_close(struct conv *c, struct gst *g, int64_t ts)
{
	if (g->detm < 0)
		return;
	const char *name = fn_name(c, g->fn);
	if (span(c, m_track(g->detm), g->det_ts, ts, name, "detached")) {
		bool f = true;
		arg_i(c, &f, "task", g->gid);
		ev_close(c, 0, NULL);
	}
	g->detm = -1;
}

/* g shows up at ts somewhere else than its open run: that run ended
 * before; if it was readied since, it parked. */
static void g_moved(struct conv *c, struct gst *g, int64_t ts, bool readied,
		    unsigned reason)
{
	if (g->runp >= 0) {
		int p = g->runp;
		run_close(c, p, ts,
			  readied ? GMP__TRSTOP_PARK : GMP__TRSTOP_YIELD,
			  reason);
	}
}

static void ev_run(struct conv *c, int p, int64_t ts, int64_t gid, uint64_t fn)
{
	struct gst *g = g_get(c, gid);
	if (!g)
		return;
	if (fn)
		g->fn = fn;
	if (g->runp >= 0 && g->runp != p)
		g_moved(c, g, ts, false, 0);
	detach_close(c, g, ts);
	struct pst *ps = &c->ps[p];
	if (ps->run.open) {
		if (ps->run.gid == gid)
			return; /* recorded twice (a P taken back) */
		run_close(c, p, ts, GMP__TRSTOP_NONE, 0);
	}
	/* What made it runnable lies before what the file shows (a flight
	 * recorder's window, or a task the trace never saw before): it was
	 * runnable when the window began. */
	if ((g->pkind != C_NONE && !g->pflow && g->pts < c->ws) ||
	    (g->pkind == C_NONE && g->status == GMP__G_IDLE)) {
		g->pkind = C_START;
		g->pts = c->ws;
	}
	ps->run = (struct run){
		.open = true,
		.gid = gid,
		.ts = ts,
		.m = ps->curm,
		.flow = g->pflow,
		.cause = g->pkind,
		.delay = g->pkind != C_NONE ? ts - g->pts : -1,
	};
	g->runp = p;
	g->status = GMP__G_RUNNING;
	g->pflow = 0;
	g->pkind = C_NONE;
}

static void ev_stop(struct conv *c, int p, int64_t ts, int64_t gid, uint64_t w)
{
	struct pst *ps = &c->ps[p];
	if (!ps->run.open || ps->run.gid != gid)
		return; /* ended already, by a later event elsewhere */
	run_close(c, p, ts, (unsigned)(w & 0xff), (unsigned)(w >> 8 & 0xff));
}

static struct track src_track(struct conv *c, uint64_t src, int64_t *m)
{
	unsigned kind = (unsigned)(src >> 56);
	uint64_t id = src & (((uint64_t)1 << 56) - 1);
	*m = -1;
	if (kind == GMP__TRSRC_P && id < GMP__MAXPROCS_LIMIT) {
		*m = c->ps[id].curm;
		return p_track((int)id);
	}
	if (kind == GMP__TRSRC_M) {
		*m = (int64_t)id;
		return m_track((int64_t)id);
	}
	return side_track;
}

static void ev_ready(struct conv *c, uint64_t src, int64_t ts, int64_t gid,
		     uint64_t w)
{
	struct gst *g = g_get(c, gid);
	if (!g)
		return;
	unsigned reason = (unsigned)(w & 0xff), by = (unsigned)(w >> 8 & 0xff);
	int64_t byg = (int64_t)(w >> 16);
	g_moved(c, g, ts, true, reason);
	int64_t m;
	struct track t = src_track(c, src, &m);
	uint64_t id = marker(c, t, ts, "ready");
	if (id) {
		bool f = true;
		arg_i(c, &f, "task", gid);
		if (by == GMP__TRBY_TASK) {
			char buf[32] = "task ";
			int i = 5;
			char tmp[24];
			int k = 0;
			uint64_t v = (uint64_t)byg;
			do {
				tmp[k++] = (char)('0' + v % 10);
				v /= 10;
			} while (v);
			while (k)
				buf[i++] = tmp[--k];
			buf[i] = 0;
			arg_s(c, &f, "by", buf);
		} else {
			arg_s(c, &f, "by",
			      by < GMP__TRBY_NKINDS ? by_names[by] : "?");
		}
		if (reason)
			arg_s(c, &f, "reason", gmp__waitreason_name(reason));
		if (g->park_ts >= 0 && g->status == GMP__G_WAITING)
			arg_us(c, &f, "parked_us", ts - g->park_ts);
		ev_close(c, id, "flow_out");
	}
	g->status = GMP__G_RUNNABLE;
	g->park_ts = -1;
	g->pflow = id;
	g->pts = ts;
	g->pkind = C_READY;
}

static void ev_create(struct conv *c, uint64_t src, int64_t ts, int64_t gid,
		      uint64_t fn, int64_t parent)
{
	struct gst *g = g_get(c, gid);
	if (!g)
		return;
	g->fn = fn;
	int64_t m;
	struct track t = src_track(c, src, &m);
	uint64_t id = marker(c, t, ts, "create");
	if (id) {
		bool f = true;
		const char *name = fn_name(c, fn);
		arg_i(c, &f, "task", gid);
		arg_s(c, &f, "fn", name);
		if (parent)
			arg_i(c, &f, "parent", parent);
		ev_close(c, id, "flow_out");
	}
	g->status = GMP__G_RUNNABLE;
	g->pflow = id;
	g->pts = ts;
	g->pkind = C_CREATE;
}

static void ev_sysexit(struct conv *c, int64_t m, int64_t ts, int64_t gid,
		       bool lost)
{
	if (m < 0)
		return;
	struct mst *ms = m_get(c, m);
	if (!ms || !ms->sys_open || ms->sys_gid != gid)
		return;
	ms->sys_open = false;
	struct gst *g = g_get(c, gid);
	if (span(c, m_track(m), ms->sys_ts, ts, "syscall", "syscall")) {
		bool f = true;
		arg_i(c, &f, "task", gid);
		if (ms->sys_block)
			arg_s(c, &f, "kind", "blocking");
		if (lost)
			arg_s(c, &f, "p", "lost");
		ev_close(c, 0, NULL);
	}
	if (lost && g) {
		/* It needs a P again: its next run is the arrow's end. */
		uint64_t id = marker(c, m_track(m), ts, "syscall return");
		if (id) {
			bool f = true;
			arg_i(c, &f, "task", gid);
			ev_close(c, id, "flow_out");
		}
		g->pflow = id;
		g->pts = ts;
		g->pkind = C_SYSCALL;
		g->status = GMP__G_RUNNABLE;
	}
}

static void m_instant(struct conv *c, int64_t m, int64_t ts, const char *name,
		      const char *key, int64_t v)
{
	if (m < 0)
		return;
	if (instant(c, m_track(m), ts, name, name)) {
		bool f = true;
		if (key)
			arg_i(c, &f, key, v);
		ev_close(c, 0, NULL);
	}
}

static void ev_state(struct conv *c, int64_t ts, int64_t gid, uint64_t w,
		     uint64_t fn)
{
	struct gst *g = g_get(c, gid);
	if (!g || g->status != GMP__G_IDLE)
		return; /* events said more already */
	g->fn = fn;
	unsigned st = (unsigned)(w & 0xff), reason = (unsigned)(w >> 8 & 0xff);
	int p = (int)(w >> 16 & 0xffff) - 1;
	g->status = (uint8_t)st;
	if (st == GMP__G_WAITING) {
		g->reason = (uint8_t)reason;
	} else if (st == GMP__G_RUNNABLE) {
		uint64_t id = marker(c, side_track, ts, "runnable at start");
		if (id) {
			bool f = true;
			arg_i(c, &f, "task", gid);
			ev_close(c, id, "flow_out");
		}
		g->pflow = id;
		g->pts = ts;
		g->pkind = C_START;
	} else if (st == GMP__G_RUNNING && p >= 0 && p < GMP__MAXPROCS_LIMIT &&
		   !c->ps[p].run.open) {
		g->pkind = C_START;
		g->pts = ts;
		ev_run(c, p, ts, gid, fn);
		c->ps[p].run.delay = -1;
	}
}

/* ---- merging the writers --------------------------------------------------------- */

struct cursor {
	uint64_t src;
	const gmp__trview **v; /* this writer's chunks, in order */
	size_t nv, vi;
	uint32_t wi;
	uint64_t last; /* the previous event's full tick */
	uint64_t tick; /* the current event's */
	bool done;
};

static bool view_before(const gmp__trview *a, const gmp__trview *b)
{
	if (a->src != b->src)
		return a->src < b->src;
	if (a->seq != b->seq)
		return a->seq < b->seq;
	return a->n > b->n; /* the longer copy of a chunk first */
}

static void sort_views(const gmp__trview **v, size_t n)
{
	/* Shell sort: no recursion, no allocation. */
	static const size_t gaps[] = { 1750, 701, 301, 132, 57, 23, 10, 4, 1 };
	for (size_t gi = 0; gi < sizeof gaps / sizeof gaps[0]; gi++) {
		size_t gap = gaps[gi];
		for (size_t i = gap; i < n; i++) {
			const gmp__trview *x = v[i];
			size_t j = i;
			while (j >= gap && view_before(x, v[j - gap])) {
				v[j] = v[j - gap];
				j -= gap;
			}
			v[j] = x;
		}
	}
}

static const uint64_t MASK56 = ((uint64_t)1 << 56) - 1;

/* Loads the cursor's next event header (false at its end). */
static bool cur_load(const struct conv *c, struct cursor *k)
{
	while (k->vi < k->nv) {
		const gmp__trview *v = k->v[k->vi];
		if (k->wi < v->n) {
			uint64_t h = v->w[k->wi];
			unsigned kind = (unsigned)(h & 0xff);
			unsigned n = gmp__trev_words(kind);
			if (!kind || kind >= GMP__EV_NKINDS ||
			    k->wi + 1 + n > v->n) {
				k->wi = v->n; /* damaged: skip the rest */
				continue;
			}
			uint64_t d = ((h >> 8) - c->job->c0) & MASK56;
			uint64_t t = d > (MASK56 >> 1) ? c->job->c0
						       : c->job->c0 + d;
			if (t < k->last)
				t = k->last;
			k->tick = t;
			return true;
		}
		k->vi++;
		k->wi = 0;
	}
	k->done = true;
	return false;
}

static int64_t tick_ns(const struct conv *c, uint64_t t)
{
	const gmp__trjob *j = c->job;
	if (j->c1 <= j->c0)
		return j->t0;
	__int128 d = (__int128)(t - j->c0) * (j->t1 - j->t0);
	return j->t0 + (int64_t)(d / (__int128)(j->c1 - j->c0));
}

static void heap_down(struct cursor **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && h[l]->tick < h[m]->tick)
			m = l;
		if (r < n && h[r]->tick < h[m]->tick)
			m = r;
		if (m == i)
			return;
		struct cursor *t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void replay(struct conv *c, struct cursor *k, int64_t ts)
{
	const uint64_t *w = &k->v[k->vi]->w[k->wi];
	unsigned kind = (unsigned)(w[0] & 0xff);
	unsigned srck = (unsigned)(k->src >> 56);
	uint64_t id = k->src & MASK56;
	int p = srck == GMP__TRSRC_P && id < GMP__MAXPROCS_LIMIT ? (int)id : -1;
	int64_t m;
	src_track(c, k->src, &m);
	switch (kind) {
	case GMP__EV_PSTART:
		if (p >= 0) {
			c->ps[p].curm = (int64_t)w[1];
			c->ps[p].used = true;
			m_instant(c, (int64_t)w[1], ts, "acquire P", "p", p);
		}
		break;
	case GMP__EV_PSTOP:
		if (p >= 0) {
			int64_t pm = (int64_t)(w[1] & MASK56);
			bool taken = (w[1] >> 56) == GMP__TRP_TAKEN;
			if (c->ps[p].run.open)
				run_close(c, p, ts,
					  taken ? GMP__TRSTOP_SYSCALL
						: GMP__TRSTOP_NONE,
					  0);
			if (taken && c->ps[p].last_how == GMP__TRSTOP_SYSCALL &&
			    instant(c, p_track(p), ts, "retake", "retake")) {
				bool f = true;
				arg_i(c, &f, "m", pm);
				ev_close(c, 0, NULL);
			}
			m_instant(c, pm, ts, "release P", "p", p);
			c->ps[p].curm = -1;
		}
		break;
	case GMP__EV_RUN:
		if (p >= 0)
			ev_run(c, p, ts, (int64_t)w[1], w[2]);
		break;
	case GMP__EV_STOP:
		if (p >= 0)
			ev_stop(c, p, ts, (int64_t)w[1], w[2]);
		break;
	case GMP__EV_SWITCH:
		if (p >= 0) {
			ev_stop(c, p, ts, (int64_t)w[1], w[2]);
			ev_run(c, p, ts, (int64_t)w[3], w[4]);
		}
		break;
	case GMP__EV_READY:
		ev_ready(c, k->src, ts, (int64_t)w[1], w[2]);
		break;
	case GMP__EV_CREATE:
		ev_create(c, k->src, ts, (int64_t)w[1], w[2], (int64_t)w[3]);
		break;
	case GMP__EV_SYSENTER:
		if (p >= 0 && c->ps[p].curm >= 0) {
			struct mst *ms = m_get(c, c->ps[p].curm);
			if (ms) {
				ms->sys_open = true;
				ms->sys_gid =
					(int64_t)(w[1] & ~((uint64_t)1 << 63));
				ms->sys_block = w[1] >> 63;
				ms->sys_ts = ts;
			}
		}
		break;
	case GMP__EV_SYSEXIT:
		ev_sysexit(c, m, ts, (int64_t)(w[1] & ~((uint64_t)1 << 63)),
			   w[1] >> 63);
		break;
	case GMP__EV_STEAL:
		if (p >= 0) {
			int victim = (int)(uint32_t)w[1];
			int64_t n = (int64_t)(w[1] >> 32);
			if (instant(c, p_track(p), ts, "steal", "steal")) {
				bool f = true;
				arg_i(c, &f, "from", victim);
				arg_i(c, &f, "tasks", n);
				ev_close(c, 0, NULL);
			}
			if (victim >= 0 && victim < GMP__MAXPROCS_LIMIT &&
			    instant(c, p_track(victim), ts, "stolen from",
				    "steal")) {
				bool f = true;
				arg_i(c, &f, "by", p);
				arg_i(c, &f, "tasks", n);
				ev_close(c, 0, NULL);
			}
		}
		break;
	case GMP__EV_HANDOFF:
		if (w[1] < GMP__MAXPROCS_LIMIT &&
		    instant(c, p_track((int)w[1]), ts, "handoff", "handoff")) {
			bool f = true;
			if (m >= 0)
				arg_i(c, &f, "by_m", m);
			ev_close(c, 0, NULL);
		}
		break;
	case GMP__EV_MSTART:
		if (m >= 0) {
			struct mst *ms = m_get(c, m);
			if (ms)
				ms->tid = (uint32_t)w[1];
			m_instant(c, m, ts, "thread start", "tid",
				  (int64_t)(uint32_t)w[1]);
		}
		break;
	case GMP__EV_MEXIT:
		m_instant(c, m, ts, "thread exit", NULL, 0);
		break;
	case GMP__EV_MPARK:
		if (m >= 0) {
			struct mst *ms = m_get(c, m);
			if (ms) {
				ms->idle_open = true;
				ms->idle_ts = ts;
			}
		}
		break;
	case GMP__EV_MUNPARK:
		if (m >= 0) {
			struct mst *ms = m_get(c, m);
			if (ms && ms->idle_open) {
				ms->idle_open = false;
				if (span(c, m_track(m), ms->idle_ts, ts, "idle",
					 "idle"))
					ev_close(c, 0, NULL);
			}
		}
		break;
	case GMP__EV_MWAKE: {
		struct track tt = src_track(c, k->src, &m);
		if (instant(c, tt, ts, "wake M", "wake")) {
			bool f = true;
			arg_i(c, &f, "m", (int64_t)w[1]);
			ev_close(c, 0, NULL);
		}
		break;
	}
	case GMP__EV_STATE:
		ev_state(c, ts, (int64_t)w[1], w[2], w[3]);
		break;
	case GMP__EV_MSTATE: {
		struct mst *ms = m_get(c, (int64_t)w[1]);
		if (ms && !ms->tid)
			ms->tid = (uint32_t)w[2];
		int hp = (int)(w[2] >> 32) - 1;
		if (hp >= 0 && hp < GMP__MAXPROCS_LIMIT && c->ps[hp].curm < 0)
			c->ps[hp].curm = (int64_t)w[1];
		break;
	}
	case GMP__EV_LOST:
		if (instant(c, side_track, ts, "events lost", "lost")) {
			bool f = true;
			arg_i(c, &f, "events", (int64_t)w[1]);
			ev_close(c, 0, NULL);
		}
		break;
	default:
		break;
	}
}

/* ---- the whole file ----------------------------------------------------------------- */

static void meta(struct conv *c, struct track t, const char *what,
		 const char *name, int64_t sort)
{
	struct out *o = c->o;
	o_str(o, c->first ? "\n{\"ph\":\"M\",\"pid\":"
			  : ",\n{\"ph\":\"M\",\"pid\":");
	c->first = false;
	o_u64(o, (uint64_t)t.pid);
	if (t.tid) {
		o_str(o, ",\"tid\":");
		o_u64(o, t.tid);
	}
	o_str(o, ",\"name\":\"");
	o_str(o, what);
	if (!strcmp(what, "thread_sort_index") ||
	    !strcmp(what, "process_sort_index")) {
		o_str(o, "\",\"args\":{\"sort_index\":");
		o_i64(o, sort);
		o_str(o, "}}");
	} else {
		o_str(o, "\",\"args\":{\"name\":");
		o_jstr(o, name);
		o_str(o, "}}");
	}
}

static void write_names(struct conv *c)
{
	static const struct {
		int pid;
		const char *name;
	} procs[] = { { 1, "P (processors)" },
		      { 2, "M (threads)" },
		      { 3, "sysmon and other threads" } };
	for (int i = 0; i < 3; i++) {
		struct track t = { procs[i].pid, 0 };
		meta(c, t, "process_name", procs[i].name, 0);
		meta(c, t, "process_sort_index", NULL, i);
	}
	char name[48];
	for (int p = 0; p < GMP__MAXPROCS_LIMIT; p++) {
		if (!c->ps[p].used)
			continue;
		memcpy(name, "P", 2);
		int i = 1;
		char tmp[12];
		int k = 0;
		int v = p;
		do {
			tmp[k++] = (char)('0' + v % 10);
			v /= 10;
		} while (v);
		while (k)
			name[i++] = tmp[--k];
		name[i] = 0;
		meta(c, p_track(p), "thread_name", name, 0);
		meta(c, p_track(p), "thread_sort_index", NULL, p);
	}
	for (size_t s = 0; s < c->mcap; s++) {
		struct mst *ms = &c->ms[s];
		if (ms->mid < 0 || !ms->used)
			continue;
		int i = 0;
		name[i++] = 'M';
		char tmp[24];
		int k = 0;
		uint64_t v = (uint64_t)ms->mid;
		do {
			tmp[k++] = (char)('0' + v % 10);
			v /= 10;
		} while (v);
		while (k)
			name[i++] = tmp[--k];
		if (ms->tid) {
			memcpy(name + i, " (tid ", 6);
			i += 6;
			v = ms->tid;
			do {
				tmp[k++] = (char)('0' + v % 10);
				v /= 10;
			} while (v);
			while (k)
				name[i++] = tmp[--k];
			name[i++] = ')';
		}
		name[i] = 0;
		meta(c, m_track(ms->mid), "thread_name", name, 0);
		meta(c, m_track(ms->mid), "thread_sort_index", NULL, ms->mid);
	}
	if (c->side_used)
		meta(c, side_track, "thread_name", "sysmon and threads", 0);
}

/* Closes what is still open when the trace ends. */
static void close_all(struct conv *c, int64_t end)
{
	for (int p = 0; p < GMP__MAXPROCS_LIMIT; p++)
		if (c->ps[p].run.open)
			run_close(c, p, end, GMP__TRSTOP_NONE, 0);
	for (size_t i = 0; i < c->gcap; i++)
		if (c->gs[i].gid && c->gs[i].detm >= 0)
			detach_close(c, &c->gs[i], end);
	for (size_t s = 0; s < c->mcap; s++) {
		struct mst *ms = &c->ms[s];
		if (ms->mid < 0)
			continue;
		if (ms->sys_open && span(c, m_track(ms->mid), ms->sys_ts, end,
					 "syscall", "syscall")) {
			bool f = true;
			arg_i(c, &f, "task", ms->sys_gid);
			arg_s(c, &f, "end", "trace end");
			ev_close(c, 0, NULL);
		}
		if (ms->idle_open &&
		    span(c, m_track(ms->mid), ms->idle_ts, end, "idle", "idle"))
			ev_close(c, 0, NULL);
	}
}

int gmp__trjson_write(const gmp__trjob *job)
{
	struct conv *c;
	gmp__arena a = { 0 };
	c = gmp__arena_alloc(&a, sizeof *c);
	struct out *o = gmp__arena_alloc(&a, sizeof *o);
	if (!c || !o) {
		gmp__arena_free(&a);
		return -ENOMEM;
	}
	memset(c, 0, sizeof *c);
	c->a = a;
	c->job = job;
	c->o = o;
	o->fd = job->fd;
	o->err = 0;
	o->len = 0;
	c->first = true;
	for (int p = 0; p < GMP__MAXPROCS_LIMIT; p++)
		c->ps[p].curm = -1;

	/* The writers: their chunks in order, a chunk seen twice read once. */
	const gmp__trview **v =
		gmp__arena_alloc(&c->a, (job->nv + 1) * sizeof *v);
	struct cursor *ks = gmp__arena_alloc(&c->a, (job->nv + 1) * sizeof *ks);
	struct cursor **heap =
		gmp__arena_alloc(&c->a, (job->nv + 1) * sizeof *heap);
	if (!v || !ks || !heap) {
		gmp__arena_free(&c->a);
		return -ENOMEM;
	}
	size_t nv = 0;
	for (size_t i = 0; i < job->nv; i++)
		if (job->v[i].n)
			v[nv++] = &job->v[i];
	sort_views(v, nv);
	size_t nk = 0;
	for (size_t i = 0; i < nv;) {
		size_t j = i;
		struct cursor *k = &ks[nk++];
		memset(k, 0, sizeof *k);
		k->src = v[i]->src;
		k->v = &v[i];
		size_t kept = 0;
		for (; j < nv && v[j]->src == v[i]->src; j++)
			if (kept == 0 || v[i + kept - 1]->seq != v[j]->seq)
				v[i + kept++] = v[j];
		k->nv = kept;
		i = j;
	}

	/* The window: a flight recorder kept each writer's latest chunks,
	 * so the trace starts where every writer that lost older ones still
	 * has events. */
	c->ws = job->t0;
	size_t nh = 0;
	for (size_t i = 0; i < nk; i++) {
		struct cursor *k = &ks[i];
		k->last = job->c0;
		if (!cur_load(c, k))
			continue;
		if (job->window && k->v[0]->seq > 0) {
			int64_t first = tick_ns(c, k->tick);
			if (first > c->ws)
				c->ws = first;
		}
		heap[nh++] = k;
	}
	for (size_t i = nh; i-- > 0;)
		heap_down(heap, nh, i);

	o_str(o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"runtime\":"
		 "\"libgmp\",\"clock\":\"CLOCK_MONOTONIC\",\"start_ns\":");
	o_i64(o, job->t0);
	o_str(o, ",\"window_start_ns\":");
	o_i64(o, c->ws);
	o_str(o, ",\"end_ns\":");
	o_i64(o, job->t1);
	o_str(o, ",\"written_at\":");
	o_jstr(o, job->why ? job->why : "stop");
	o_str(o, ",\"lost_events\":");
	o_u64(o, job->lost);
	o_str(o, "},\"traceEvents\":[");

	while (nh) {
		struct cursor *k = heap[0];
		int64_t ts = tick_ns(c, k->tick);
		replay(c, k, ts);
		k->last = k->tick;
		const gmp__trview *cv = k->v[k->vi];
		k->wi += 1 + gmp__trev_words((unsigned)(cv->w[k->wi] & 0xff));
		if (!cur_load(c, k)) {
			heap[0] = heap[--nh];
		}
		heap_down(heap, nh, 0);
	}
	close_all(c, job->t1);
	if (job->lost &&
	    instant(c, side_track, job->t1, "events lost", "lost")) {
		bool f = true;
		arg_i(c, &f, "events", (int64_t)job->lost);
		ev_close(c, 0, NULL);
	}
	write_names(c);
	o_str(o, "\n]}\n");
	o_flush(o);
	int err = o->err;
	gmp__symtab_unload(c->syms);
	gmp__arena a2 = c->a;
	gmp__arena_free(&a2);
	return err ? -err : 0;
}
