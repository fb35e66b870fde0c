/* Waiters (see wait.h; design.md §28.1): one sleep/wake handshake for
 * tasks and threads.
 *
 * The state word of a waiter:
 *
 *   PENDING   asleep (or about to be); a waker or the deadline may claim it
 *   CLAIMED   a waker claimed it and is filling in the hand-off; only that
 *             waker moves it on, to WOKEN
 *   WOKEN     the hand-off is complete; the sleeper may return
 *   TIMEDOUT  the deadline claimed it first; wakers must leave it alone
 *
 * A task sleeper parks, and is readied by whichever of waker or timer
 * claimed it; a thread sleeper waits on the state word with FUTEX_WAIT.
 */
#include <limits.h>

#include "task.h"
#include "wait.h"

enum { CLAIMED = 3 };

bool gmp__waiter_claim(gmp__waiter *w)
{
	/* acquire: we are about to write the sleeper's hand-off fields */
	return gmp__cas32_acq(&w->state, GMP__WAIT_PENDING, CLAIMED);
}

void gmp__waiter_wake(gmp__waiter *w)
{
	gmp__waiter_wake_by(w, NULL);
}

void gmp__waiter_wake_by(gmp__waiter *w, gmp_g *self)
{
	gmp_g *g = w->g;
	if (g) {
		/* The task cannot run before gmp__ready, so the order of the
		 * store and the ready does not matter to it; release still
		 * orders the hand-off before the state for the sleeper. */
		gmp__store32_rel(&w->state, GMP__WAIT_WOKEN);
		gmp__ready_claimed_by(g, true, self); /* its only waker */
		return;
	}
	/* A thread: after the store it may return and free w, so take the
	 * address first and only FUTEX_WAKE it (a wake on a stale address is
	 * harmless: every futex wait in the runtime loops). */
	volatile uint32_t *addr = &w->state;
	gmp__store32_rel(addr, GMP__WAIT_WOKEN);
	gmp__futex_wake(addr, INT_MAX);
}

void gmp__waiter_wake_quiet_by(gmp__waiter *w, gmp_g *self)
{
	gmp_g *g = w->g;
	/* release: as in gmp__waiter_wake_by */
	gmp__store32_rel(&w->state, GMP__WAIT_WOKEN);
	gmp__ready_claimed_quiet(g, self);
}

/* The deadline of a task waiter passed. The task runs next on the P
 * that ran the timer (runnext), as Go's timers ready theirs: its wait is
 * over now, and behind the queue it could wait a slice per task queued
 * there (the queue of a P that sysmon just took from a task that ran past
 * its slice is often all such tasks). */
static void waiter_timeout(gmp__timer *t)
{
	gmp__waiter *w = t->arg;
	if (gmp__cas32_acq(&w->state, GMP__WAIT_PENDING, GMP__WAIT_TIMEDOUT))
		gmp__ready_claimed(w->g, true);
}

struct park_args {
	gmp__waiter *w;
	void (*unlock)(void *);
	void *lock;
	int64_t deadline;
};

/* Runs on g0 once the task is WAITING, for a sleep with a deadline. The
 * timer starts before the primitive's lock drops: no waker can claim w (it
 * needs the lock) before the timer exists, so a woken task never finds a
 * timer still to come. */
static bool park_unlock(gmp_g *g, void *arg)
{
	(void)g;
	/* Copy everything first: once the timer is armed it may fire on
	 * another M and let the task run on, reusing *arg's stack frame. */
	struct park_args a = *(struct park_args *)arg;
	a.w->timer.fn = waiter_timeout;
	a.w->timer.period = 0;
	a.w->timer.arg = a.w;
	gmp__timer_start(&a.w->timer, a.deadline);
	a.unlock(a.lock);
	return true;
}

/* A sleep without a deadline, the common case: nothing to arm. */
struct park_plain_args {
	void (*unlock)(void *);
	void *lock;
};

static bool park_unlock_plain(gmp_g *g, void *arg)
{
	(void)g;
	/* Once unlocked, a waker may ready the task, which may run on and
	 * reuse *arg's frame: read both fields first. */
	struct park_plain_args a = *(struct park_plain_args *)arg;
	a.unlock(a.lock);
	return true;
}

bool gmp__waiter_park(gmp__waiter *w, void (*unlock)(void *), void *lock,
		      uint32_t reason)
{
	struct park_plain_args a = { unlock, lock };
	gmp__park_g(w->g, park_unlock_plain, &a, reason);
	/* Only a waker readies a waiter without a deadline. */
	w->woken = gmp__load32_acq(&w->state) == GMP__WAIT_WOKEN;
	return w->woken;
}

bool gmp__waiter_sleep_any(gmp__waiter *w, void (*unlock)(void *), void *lock,
			   uint32_t reason, int64_t deadline)
{
	if (deadline >= 0 && deadline <= gmp__nanotime() &&
	    gmp__cas32_acq(&w->state, GMP__WAIT_PENDING, GMP__WAIT_TIMEDOUT)) {
		unlock(lock);
		w->woken = false;
		return false;
	}
	if (w->g) {
		/* A task with a deadline. */
		struct park_args a = { w, unlock, lock, deadline };
		gmp__park_g(w->g, park_unlock, &a, reason);
		/* Readied by a waker (WOKEN) or by the timer (TIMEDOUT). */
		uint32_t st = gmp__load32_acq(&w->state);
		gmp__timer_stop(&w->timer); /* waits out a running fn */
		w->woken = st == GMP__WAIT_WOKEN;
		return w->woken;
	}
	unlock(lock);
	for (;;) {
		uint32_t st = gmp__load32_acq(&w->state);
		if (st == GMP__WAIT_WOKEN) {
			w->woken = true;
			return true;
		}
		if (st == GMP__WAIT_TIMEDOUT) {
			w->woken = false;
			return false;
		}
		int64_t left = -1;
		if (deadline >= 0 && st == GMP__WAIT_PENDING) {
			left = deadline - gmp__nanotime();
			if (left <= 0) {
				gmp__cas32_acq(&w->state, GMP__WAIT_PENDING,
					       GMP__WAIT_TIMEDOUT);
				continue; /* re-read: a waker may have won */
			}
		}
		gmp__futex_wait(&w->state, st, left);
	}
}
