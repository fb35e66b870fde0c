/* Waiters: the one way every blocking primitive sleeps, on a task or on a
 * thread (Go's sudog, plus foreign threads). design.md §3.2 is the
 * contract (a blocking call parks a task and blocks any other thread);
 * §28.1 the protocol, and why no wakeup is lost. A primitive uses them so:
 *
 *   gmp__waiter w;
 *   gmp__waiter_init(&w);            // records who is calling
 *   ... enqueue &w on the primitive's wait queue, under its lock ...
 *   gmp__waiter_sleep(&w, unlock_fn, lock, reason, deadline);
 *   ... on return, w.woken says whether a waker picked us ...
 *
 * The waker, holding the primitive's lock, dequeues w, fills in whatever
 * it hands over (w.elem, w.result, ...), drops the lock and calls
 * gmp__waiter_wake(&w), after which it must not touch w again: it lives on
 * the sleeper's stack. unlock_fn(lock) releases the primitive's lock once
 * the sleeper is committed to sleeping. A deadline (absolute gmp_nanotime
 * ns, or -1 for none) ends a sleep by itself: the sleeper comes back with
 * w.woken false and must take the primitive's lock and remove w from the
 * queue if it is still there (gmp__waiter_sleep's comment has the
 * handshake).
 */
#ifndef GMP_WAIT_H
#define GMP_WAIT_H

#include "internal.h"
#include "timer.h"

typedef struct gmp__waiter gmp__waiter;
struct gmp__waiter {
	gmp_g *g;                 /* the sleeping task, or NULL for a thread */
	volatile uint32_t state;  /* atomic: WAIT_* below */
	bool woken;               /* set for the sleeper: a waker picked it */
	int result;               /* what the waker reports (0, -EPIPE, ...) */
	void *elem;               /* data slot for channel hand-offs */
	gmp__waiter *next, *prev; /* the primitive's wait queue (its lock) */
	void *c;                  /* the primitive (select: which channel) */
	int64_t ticket;           /* free for the primitive's use */
	void *aux;                /* free for the primitive's use */
	gmp__timer timer;         /* deadline for a task sleeper */
};

enum {
	GMP__WAIT_PENDING = 0,  /* asleep or about to be */
	GMP__WAIT_WOKEN = 1,    /* a waker claimed it */
	GMP__WAIT_TIMEDOUT = 2, /* the deadline claimed it first */
};

/* gmp__waiter_init for a caller that knows who it is: self is what
 * gmp__getg(NULL) returns for it (the running task inside the runtime, as
 * a gmp__stay has it, or NULL). Saves the thread-local lookup. */
static inline void gmp__waiter_init_as(gmp__waiter *w, gmp_g *self)
{
	w->g = self;
	w->state = GMP__WAIT_PENDING;
	w->woken = false;
	w->result = 0;
	w->elem = NULL;
	w->next = w->prev = NULL;
	w->c = NULL;
	w->ticket = 0;
	w->aux = NULL;
	w->timer.p = NULL;
	w->timer.state = 0;
}

/* Records the caller (task or thread); resets the other fields. Inline: it
 * is on every blocking path, and callers overwrite some fields at once. A
 * task inside a gmp_enter_syscall window must not park (its P may be
 * gone): gmp__getg says NULL, and it blocks like a foreign thread. */
static inline void gmp__waiter_init(gmp__waiter *w)
{
	gmp__waiter_init_as(w, gmp__getg(NULL));
}

/* The two halves of gmp__waiter_sleep (wait.c): a task with no deadline,
 * the common case, and everything else (a thread, or a deadline). */
bool gmp__waiter_park(gmp__waiter *w, void (*unlock)(void *), void *lock,
		      uint32_t reason);
bool gmp__waiter_sleep_any(gmp__waiter *w, void (*unlock)(void *), void *lock,
			   uint32_t reason, int64_t deadline);

/* Sleeps until gmp__waiter_wake(w) or the deadline (-1: none). unlock(lock)
 * is called once the sleep is committed. Returns true if woken by a waker
 * (w->woken), false on timeout. The wait reason is for dumps. */
static inline bool gmp__waiter_sleep(gmp__waiter *w, void (*unlock)(void *),
				     void *lock, uint32_t reason,
				     int64_t deadline)
{
	if (w->g && deadline < 0)
		return gmp__waiter_park(w, unlock, lock, reason);
	return gmp__waiter_sleep_any(w, unlock, lock, reason, deadline);
}

/* Claims w for waking: true if it was still pending (the caller then owns
 * the hand-off and must call gmp__waiter_wake), false if its deadline beat
 * us (leave it; the sleeper will clean up). Call under the primitive's
 * lock, before handing data over. */
bool gmp__waiter_claim(gmp__waiter *w);

/* Wakes a claimed waiter. Never switches. After this, w is not ours.
 * A waiter nobody else can claim (no deadline, and on one wait queue only,
 * so the waker that dequeued it is its only possible waker) may be woken
 * without gmp__waiter_claim: the state goes from PENDING to WOKEN directly.
 * Channels use this to save an atomic per hand-off. */
void gmp__waiter_wake(gmp__waiter *w);

/* gmp__waiter_wake by a waker that knows who it is (self as for
 * gmp__waiter_init_as): a task sleeper goes into self's P without the
 * thread-local lookup. */
void gmp__waiter_wake_by(gmp__waiter *w, gmp_g *self);

/* gmp__waiter_wake_by for a task waiter (w->g not NULL) by a task waker
 * (self, inside the runtime): through gmp__ready_claimed_quiet (task.h),
 * which wakes no idle P when the waker's P has nothing else queued. */
void gmp__waiter_wake_quiet_by(gmp__waiter *w, gmp_g *self);

#endif
