/* Per-P timer heaps (timer.h).
 *
 * Each P's heap is a 4-ary min-heap on `when` (Go 1.14+: shallower than a
 * binary heap, so sift-down touches fewer cache lines), under the P's
 * timers.lock, so that any thread may stop a timer. ts->next mirrors the
 * root for lock-free peeks by idle Ms and sysmon.
 *
 * A timer's state:
 *
 *   IDLE     in no heap (never started, stopped, or done)
 *   PENDING  in heap t->p
 *   RUNNING  popped by timers_run, fn executing; stop waits it out
 *
 * timers_run sets RUNNING before it clears t->p (both under the heap
 * lock), so a stopper that sees t->p == NULL and then reads the state
 * cannot miss a run in progress. A periodic timer goes from RUNNING
 * straight back to PENDING: timers_run publishes its new t->p before the
 * state (release), so a stopper that waited the run out and then sees
 * PENDING finds the heap it is in, and removes it from there.
 */
#include "internal.h"
#include "scheduler.h"
#include "timer.h"

enum { TIMER_IDLE = 0, TIMER_PENDING = 1, TIMER_RUNNING = 2 };

static void publish_next(gmp__timers *ts)
{
	int64_t next = ts->len ? ts->heap[0]->when : 0;
	gmp__store64_rel((volatile uint64_t *)&ts->next, (uint64_t)next);
}

static void set_at(gmp__timers *ts, int32_t i, gmp__timer *t)
{
	ts->heap[i] = t;
	t->idx = i;
}

static void sift_up(gmp__timers *ts, int32_t i)
{
	gmp__timer *t = ts->heap[i];
	while (i > 0) {
		int32_t parent = (i - 1) / 4;
		if (ts->heap[parent]->when <= t->when)
			break;
		set_at(ts, i, ts->heap[parent]);
		i = parent;
	}
	set_at(ts, i, t);
}

static void sift_down(gmp__timers *ts, int32_t i)
{
	gmp__timer *t = ts->heap[i];
	for (;;) {
		int32_t c = 4 * i + 1, best = -1;
		int64_t w = t->when;
		for (int32_t k = c; k < c + 4 && k < ts->len; k++)
			if (ts->heap[k]->when < w) {
				w = ts->heap[k]->when;
				best = k;
			}
		if (best < 0)
			break;
		set_at(ts, i, ts->heap[best]);
		i = best;
	}
	set_at(ts, i, t);
}

static void heap_remove(gmp__timers *ts, int32_t i)
{
	int32_t last = --ts->len;
	if (i != last) {
		set_at(ts, i, ts->heap[last]);
		sift_down(ts, i);
		sift_up(ts, ts->heap[i]->idx);
	}
	ts->heap[last] = NULL;
}

static int heap_push(gmp__timers *ts, gmp__timer *t)
{
	if (ts->len == ts->cap) {
		int32_t cap = ts->cap ? ts->cap * 2 : 16;
		gmp__timer **h =
			gmp__realloc(ts->heap, (size_t)cap * sizeof *h);
		if (!h)
			return -ENOMEM;
		ts->heap = h;
		ts->cap = cap;
	}
	set_at(ts, ts->len++, t);
	sift_up(ts, t->idx);
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

/* Arms the periodic t again after its run (t is RUNNING, so no stopper
 * has it): on p, the heap it ran from, unless p has retired, whose timers
 * went to P0 already; then on P0, which never retires. A retiring P's
 * status is set before its timers move under its heap lock, so whoever
 * takes that lock after the move sees DEAD. */
static void rearm(gmp__p *p, gmp__timer *t, int64_t when)
{
	gmp__timers *ts = &p->timers;
	gmp__lock(&ts->lock);
	if (GMP__UNLIKELY(gmp__load32_acq(&p->status) == GMP__P_DEAD &&
			  p != gmp__sched.allp[0])) {
		gmp__unlock(&ts->lock);
		gmp__p *p0 = gmp__sched.allp[0];
		gmp__lock(&p0->timers.lock);
		bool earliest = push_locked(p0, t, when);
		gmp__unlock(&p0->timers.lock);
		if (earliest)
			gmp__wake_netpoller(when);
		return;
	}
	/* The pop made room: no allocation here unless a timer was added
	 * meanwhile. The caller computes the next deadline after this. */
	push_locked(p, t, when);
	gmp__unlock(&ts->lock);
}

int64_t gmp__timers_run(gmp__p *p, int64_t now)
{
	gmp__timers *ts = &p->timers;
	int64_t next = gmp__timers_next(ts);
	if (next == 0 || next > now)
		return next;
	gmp__lock(&ts->lock);
	while (ts->len && ts->heap[0]->when <= now) {
		gmp__timer *t = ts->heap[0];
		heap_remove(ts, 0);
		ts->fired++;
		ts->firing++;
		gmp__store32_rlx(&t->state, TIMER_RUNNING);
		gmp__storep_rel(&t->p, NULL);
		publish_next(ts);
		gmp__unlock(&ts->lock);
		t->fn(t);
		/* While RUNNING, nobody else changes t (stop waits), so its
		 * period is still the one it ran with. */
		if (t->period > 0)
			rearm(p, t, next_tick(t->when, t->period, now));
		else /* release: stop's acquire sees fn's effects finished */
			gmp__store32_rel(&t->state, TIMER_IDLE);
		gmp__lock(&ts->lock);
		ts->firing--; /* after the re-arm: see gmp__timers_drop_all */
	}
	next = ts->len ? ts->heap[0]->when : 0;
	gmp__unlock(&ts->lock);
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
		gmp__timer *t = a->heap[a->len - 1];
		a->heap[--a->len] = NULL;
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
		gmp__timer *t = ts->heap[--ts->len];
		ts->heap[ts->len] = NULL;
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
	gmp__free(ts->heap);
	ts->heap = NULL;
	ts->cap = 0;
}
