/* Per-P timer heaps (timer.h): starting and stopping a runtime timer, and
 * running a P's due timers. design.md §29 explains the design: the 4-ary
 * heap of (when, timer) pairs under each P's timers.lock, with ts->next
 * mirroring the root for lock-free peeks (§29.1); the states IDLE,
 * PENDING and RUNNING, and why a stopper cannot miss a run in progress
 * (§29.1, §29.4); timers_run's batches of RUN_BATCH, whose readied tasks
 * m->readyq collects for gmp__ready_flush (§29.2); who runs the timers
 * (§29.3); and the re-arming of periodic timers (§29.4).
 *
 * The owners of timers are elsewhere: waiters' deadlines (wait.c), sleeps
 * (time.c), gmp_timer (timerchan.c), descriptor deadlines (pollfd.c).
 */
#include <string.h>

#include "export_test.h"
#include "internal.h"
#include "runq.h"
#include "scheduler.h"
#include "task.h"
#include "timer.h"

enum { TIMER_IDLE = 0, TIMER_PENDING = 1, TIMER_RUNNING = 2 };

static void publish_next(gmp__timers *ts)
{
	int64_t next = ts->len ? ts->heap[0].when : 0;
	gmp__store64_rel((volatile uint64_t *)&ts->next, (uint64_t)next);
}

/* The sifts move a hole rather than swapping: each entry that moves is
 * written once, and so is its timer's idx, a store that no load waits
 * for. They compare the slots' copies of when, so a sift reads only the
 * array (h, a local: the compiler could not otherwise assume that the
 * stores to idx leave ts->heap alone). */
static inline void set_at(gmp__timer_slot *h, int32_t i, gmp__timer_slot e)
{
	h[i] = e;
	e.t->idx = i;
}

/* Puts e at hole i or above it. */
static void sift_up(gmp__timers *ts, int32_t i, gmp__timer_slot e)
{
	gmp__timer_slot *h = ts->heap;
	while (i > 0) {
		int32_t parent = (i - 1) / 4;
		if (h[parent].when <= e.when)
			break;
		set_at(h, i, h[parent]);
		i = parent;
	}
	set_at(h, i, e);
}

/* Puts e at hole i or below it. */
static void sift_down(gmp__timers *ts, int32_t i, gmp__timer_slot e)
{
	gmp__timer_slot *h = ts->heap;
	const int32_t n = ts->len;
	for (;;) {
		int32_t c = 4 * i + 1;
		if (c >= n)
			break;
		int32_t end = c + 4 < n ? c + 4 : n, best = c;
		for (int32_t k = c + 1; k < end; k++)
			if (h[k].when < h[best].when)
				best = k;
		if (h[best].when >= e.when)
			break;
		set_at(h, i, h[best]);
		i = best;
	}
	set_at(h, i, e);
}

static void heap_remove(gmp__timers *ts, int32_t i)
{
	int32_t last = --ts->len;
	if (i != last) {
		gmp__timer_slot e = ts->heap[last];
		if (i > 0 && e.when < ts->heap[(i - 1) / 4].when)
			sift_up(ts, i, e);
		else
			sift_down(ts, i, e);
	}
	ts->heap[last].t = NULL;
}

/* Doubles the array. It is placed so that slot 1 begins a cache line:
 * the four children of slot i are slots 4i+1 to 4i+4, 16 bytes each, so
 * each family then fills exactly one line, and a sift-down reads one line
 * per level rather than two. */
static int heap_grow(gmp__timers *ts)
{
	enum { SLOT = sizeof(gmp__timer_slot) };
	_Static_assert(4 * SLOT == GMP__CACHELINE, "a family per line");
	int32_t cap = ts->cap ? ts->cap * 2 : 16;
	char *mem = gmp__malloc((size_t)cap * SLOT + GMP__CACHELINE);
	if (!mem)
		return -ENOMEM;
	uintptr_t one = ((uintptr_t)mem + SLOT + GMP__CACHELINE - 1) &
			~(uintptr_t)(GMP__CACHELINE - 1);
	gmp__timer_slot *h = (gmp__timer_slot *)(one - SLOT);
	if (ts->len)
		memcpy(h, ts->heap, (size_t)ts->len * SLOT);
	gmp__free(ts->mem);
	ts->mem = mem;
	ts->heap = h;
	ts->cap = cap;
	return 0;
}

static int heap_push(gmp__timers *ts, gmp__timer *t)
{
	if (ts->len == ts->cap && heap_grow(ts) != 0)
		return -ENOMEM;
	gmp__timer_slot e = { t->when, t };
	sift_up(ts, ts->len++, e);
	return 0;
}

/* Pushes t onto p's heap (ts->lock held). Out of memory is fatal, as in
 * Go: failing the timer would make a sleep or a timeout end early,
 * silently. Returns whether t is now the earliest on p. */
static bool push_locked(gmp__p *p, gmp__timer *t, int64_t when)
{
	gmp__timers *ts = &p->timers;
	t->when = when;
	if (heap_push(ts, t) != 0)
		gmp__throw("out of memory growing the timer heap of P %d "
			   "(%d timers)",
			   p->id, ts->len);
	gmp__storep_rel(&t->p, p);
	/* release, after t->p: see the top comment (periodic timers) */
	gmp__store32_rel(&t->state, TIMER_PENDING);
	publish_next(ts);
	return t->idx == 0;
}

void gmp__timer_start_on(gmp__timer *t, int64_t when, gmp__p *p)
{
	if (gmp__load32_rlx(&t->state) != TIMER_IDLE)
		gmp__throw("timer_start: timer %p is already armed", (void *)t);
	gmp__timers *ts = &p->timers;
	gmp__lock(&ts->lock);
	bool earliest = push_locked(p, t, when);
	gmp__unlock(&ts->lock);
	/* A new earliest timer on this P: an M sleeping in the poller until
	 * some later time must wake up sooner. */
	if (earliest)
		gmp__wake_netpoller(when);
}

void gmp__timer_start(gmp__timer *t, int64_t when)
{
	gmp__m *m;
	gmp__getg(&m);
	gmp__p *p = m ? m->p : NULL;
	if (!p)
		gmp__throw("timer_start without a P");
	gmp__timer_start_on(t, when, p);
}

bool gmp__timer_stop(gmp__timer *t)
{
	for (;;) {
		gmp__p *p = gmp__loadp_acq(&t->p);
		if (!p) {
			/* Not in a heap when we looked: never started, done,
			 * running, or (periodic) armed again since. */
			uint32_t st = gmp__load32_acq(&t->state);
			if (st == TIMER_IDLE)
				return false;
			for (int spins = 0; st == TIMER_RUNNING; spins++) {
				spins < 64 ? gmp__cpu_relax() : gmp__osyield();
				st = gmp__load32_acq(&t->state);
			}
			/* PENDING: in a heap again, and (acquire) its t->p is
			 * published: look again. IDLE: done, look again too. */
			continue;
		}
		gmp__timers *ts = &p->timers;
		gmp__lock(&ts->lock);
		if (gmp__loadp_rlx(&t->p) == p) {
			heap_remove(ts, t->idx);
			gmp__storep_rlx(&t->p, NULL);
			gmp__store32_rel(&t->state, TIMER_IDLE);
			publish_next(ts);
			gmp__unlock(&ts->lock);
			return true;
		}
		gmp__unlock(&ts->lock); /* it moved or ran meanwhile: retry */
	}
}

bool gmp__timer_pending(const gmp__timer *t)
{
	return gmp__load32_acq(&t->state) == TIMER_PENDING;
}

/* When a periodic timer that was due at `when` fires next: the first
 * multiple of period after now (the ticks missed meanwhile are dropped,
 * as Go's tickers drop them), saturating. */
static int64_t next_tick(int64_t when, int64_t period, int64_t now)
{
	int64_t late = now - when; /* >= 0: it was due */
	int64_t ticks = late / period + 1;
	if (ticks > (INT64_MAX - when) / period)
		return INT64_MAX;
	return when + ticks * period;
}

/* How many due timers timers_run pops under one hold of the heap lock.
 * Their functions run after the lock drops, and the re-arming of the
 * periodic ones and the end of the others' runs are done together under
 * the next hold, which pops the next batch: two holds per batch, rather
 * than three per timer. A stopper of a timer in a batch waits for the
 * whole batch's functions (each a try-send or a ready, well under a
 * microsecond), so batches stay short. */
enum { RUN_BATCH = 32 };

/* A run of a P's timers stops after the batch that leaves this many tasks
 * queued on the P, and the due timers left run in its next round. When
 * the timers come due faster than the P gets through the tasks they
 * ready, running them all at once only starves those tasks: a ticker
 * firing again before its reader could run drops the tick, and the pop
 * and re-add were for nothing (2,000 tickers of 1 ms under callgrind, on
 * one CPU: 5,975 instructions per delivered tick that way, 2,931 this
 * way). A task a timer readies would wait behind this queue anyway; the
 * timers waiting their turn get it when the queue has drained, at least
 * RUN_BATCH of them a round. */
enum { RUN_QUEUED = 2 * RUN_BATCH };

/* Ends the runs of batch[0..n) (p's heap lock held; each timer RUNNING,
 * its function returned): a periodic timer goes back on p's heap, a
 * one-shot one becomes IDLE. While RUNNING nobody else changes a timer
 * (stop waits), so its period is still the one it ran with. A retired P
 * (its status is DEAD before its timers move, under this lock) gives its
 * periodic timers to P0 instead, which never retires: then the lock is
 * dropped and taken again meanwhile, since the heap locks are taken in
 * address order when two are held. The re-push never allocates on p: the
 * pop made room. */
static void end_runs(gmp__p *p, gmp__timer **batch, int32_t n, int64_t now)
{
	gmp__timers *ts = &p->timers;
	bool dead = GMP__UNLIKELY(gmp__load32_acq(&p->status) == GMP__P_DEAD &&
				  p != gmp__sched.allp[0]);
	int32_t moved = 0;
	for (int32_t i = 0; i < n; i++) {
		gmp__timer *t = batch[i];
		if (t->period <= 0) /* release: stop's acquire sees fn done */
			gmp__store32_rel(&t->state, TIMER_IDLE);
		else if (!dead)
			push_locked(p, t, next_tick(t->when, t->period, now));
		else
			batch[moved++] = t;
	}
	if (moved) {
		gmp__unlock(&ts->lock);
		gmp__p *p0 = gmp__sched.allp[0];
		int64_t earliest = 0;
		gmp__lock(&p0->timers.lock);
		for (int32_t i = 0; i < moved; i++) {
			gmp__timer *t = batch[i];
			int64_t when = next_tick(t->when, t->period, now);
			if (push_locked(p0, t, when))
				earliest = when;
		}
		gmp__unlock(&p0->timers.lock);
		if (earliest)
			gmp__wake_netpoller(earliest);
		gmp__lock(&ts->lock);
	}
	/* after the re-arms: see gmp__timers_drop_all */
	ts->firing -= n;
}

int64_t gmp__timers_run(gmp__p *p, int64_t now)
{
	gmp__timers *ts = &p->timers;
	int64_t next = gmp__timers_next(ts);
	if (next == 0 || next > now)
		return next;
	/* On g0 with a P (findrunnable, or a thief's last steal pass): the
	 * tasks the functions ready are queued together after each batch
	 * (task.c's ready_queue and gmp__ready_flush), on our P. */
	gmp__m *m = gmp__getm_inline();
	if (GMP__DEBUG && (!m || m->curg || m->readyq || !m->p))
		gmp__throw("timers_run of P %d not on a scheduler stack with a "
			   "P",
			   p->id);
	gmp__gqueue ready = { 0 };
	m->readyq = &ready;
	gmp__timer *batch[RUN_BATCH];
	int32_t n = 0;
	gmp__lock(&ts->lock);
	for (;;) {
		if (n) {
			end_runs(p, batch, n, now);
			/* Enough readied for now: the rest wait for this P's
			 * next round, after what is queued has run (see
			 * RUN_QUEUED). */
			if (ready.n + gmp__runq_len(m->p) >= RUN_QUEUED)
				break;
		}
		n = 0;
		while (n < RUN_BATCH && ts->len && ts->heap[0].when <= now) {
			gmp__timer *t = ts->heap[0].t;
			heap_remove(ts, 0);
			/* RUNNING before t->p goes: see the top comment */
			gmp__store32_rlx(&t->state, TIMER_RUNNING);
			gmp__storep_rel(&t->p, NULL);
			batch[n++] = t;
		}
		if (!n)
			break;
		ts->fired += (uint64_t)n;
		ts->firing += n;
		publish_next(ts);
		gmp__unlock(&ts->lock);
		/* The previous batch's tasks, now that its timers are done
		 * (a task woken by its timer stops it, and would wait). */
		gmp__ready_flush(m->p, &ready);
		for (int32_t i = 0; i < n; i++)
			batch[i]->fn(batch[i]);
		gmp__lock(&ts->lock);
	}
	publish_next(ts);
	next = ts->len ? ts->heap[0].when : 0;
	gmp__unlock(&ts->lock);
	m->readyq = NULL;
	gmp__ready_flush(m->p, &ready);
	return next;
}

void gmp__timers_move(gmp__p *from, gmp__p *to)
{
	if (from == to || gmp__timers_next(&from->timers) == 0)
		return;
	/* Lock order: by address. */
	gmp__timers *a = &from->timers, *b = &to->timers;
	gmp__mutex *first = a < b ? &a->lock : &b->lock;
	gmp__mutex *second = a < b ? &b->lock : &a->lock;
	gmp__lock(first);
	gmp__lock(second);
	while (a->len) {
		gmp__timer *t = a->heap[a->len - 1].t;
		a->heap[--a->len].t = NULL;
		if (heap_push(b, t) != 0)
			gmp__throw("out of memory moving timers");
		gmp__storep_rel(&t->p, to);
	}
	publish_next(a);
	publish_next(b);
	gmp__unlock(second);
	gmp__unlock(first);
}

/* Drops every timer in ts (its lock held); returns how many. */
static int32_t drop_locked(gmp__timers *ts)
{
	int32_t n = ts->len;
	while (ts->len) {
		gmp__timer *t = ts->heap[--ts->len].t;
		ts->heap[ts->len].t = NULL;
		gmp__storep_rlx(&t->p, NULL);
		gmp__store32_rel(&t->state, TIMER_IDLE);
	}
	publish_next(ts);
	return n;
}

/* Sums the Ps' fire counts; *busy is set if a fire is under way. */
static uint64_t fired_sum(uint32_t n, bool *busy)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		gmp__timers *ts = &gmp__sched.allp[i]->timers;
		gmp__lock(&ts->lock);
		sum += ts->fired;
		*busy |= ts->firing != 0;
		gmp__unlock(&ts->lock);
	}
	return sum;
}

/* One pass: the fire counts, the drop, the counts again. A timer that was
 * pending when the pass began and escaped the drop was popped to run
 * meanwhile (perhaps re-armed on a heap dropped already), which changes
 * a count; one that was running when it began was counted as firing. So a
 * pass that drops nothing, with the counts unchanged and nothing firing,
 * proves that no timer is left. */
bool gmp__timers_drop_all(void)
{
	uint32_t n = gmp__load32_acq(&gmp__sched.nallp);
	bool busy = false;
	uint64_t before = fired_sum(n, &busy);
	int32_t dropped = 0;
	for (uint32_t i = 0; i < n; i++) {
		gmp__timers *ts = &gmp__sched.allp[i]->timers;
		gmp__lock(&ts->lock);
		dropped += drop_locked(ts);
		gmp__unlock(&ts->lock);
	}
	uint64_t after = fired_sum(n, &busy);
	if (busy)
		gmp__osyield();
	return dropped || busy || before != after;
}

void gmp__timers_destroy(gmp__timers *ts)
{
	drop_locked(ts);
	gmp__free(ts->mem);
	ts->mem = NULL;
	ts->heap = NULL;
	ts->cap = 0;
}

#if GMP__TEST_HOOKS
int32_t gmp__timers_check(gmp__p *p)
{
	gmp__timers *ts = &p->timers;
	gmp__lock(&ts->lock);
	for (int32_t i = 0; i < ts->len; i++) {
		gmp__timer_slot e = ts->heap[i];
		if (e.when != e.t->when || e.t->idx != i ||
		    gmp__loadp_rlx(&e.t->p) != p)
			gmp__throw("timers_check: P %d slot %d (when %lld) "
				   "disagrees with its timer (when %lld, idx "
				   "%d)",
				   p->id, i, (long long)e.when,
				   (long long)e.t->when, e.t->idx);
		if (i > 0 && ts->heap[(i - 1) / 4].when > e.when)
			gmp__throw("timers_check: P %d slot %d is earlier than "
				   "its parent",
				   p->id, i);
	}
	int64_t next = ts->len ? ts->heap[0].when : 0;
	if (gmp__timers_next(ts) != next)
		gmp__throw("timers_check: P %d publishes %lld, its earliest "
			   "is %lld",
			   p->id, (long long)gmp__timers_next(ts),
			   (long long)next);
	int32_t n = ts->len;
	gmp__unlock(&ts->lock);
	return n;
}
#endif
