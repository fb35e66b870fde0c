/* Runtime timers (Go 1.14+'s design): each P keeps a 4-ary min-heap of
 * timers, run by the scheduler (findrunnable, before looking at local work)
 * and stolen by idle Ps; an M with nothing to do sleeps in the network
 * poller until the earliest timer of any P. See timer.c and design.md §29.
 *
 * A timer is embedded in its owner (a waiter, a sleeping task); the
 * runtime never allocates one. Its fn runs on some M's g0 stack, outside
 * every lock, and must not block: it typically readies a task. Nor may it
 * take a lock that anyone holds while stopping a timer (gmp_timer's lock,
 * a poll descriptor's): fns run in batches, and a stop of any timer of a
 * batch waits until the batch's last fn has returned.
 */
#ifndef GMP_TIMER_H
#define GMP_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"
#include "lock.h"

typedef struct gmp__p gmp__p;
typedef struct gmp__timer gmp__timer;

struct gmp__timer {
	int64_t when;              /* heap key: gmp__nanotime() deadline */
	void (*fn)(gmp__timer *t); /* runs once when due */
	void *arg;                 /* for fn */
	gmp__p *volatile p;        /* atomic: the heap holding it, or NULL;
				      changed only under that heap's lock */
	int64_t period;            /* > 0: after fn, timers_run arms t
				      again at when + period (ticks that
				      are already past are skipped); set
				      only while t is not in a heap */
	int32_t idx;               /* position in the heap; its lock */
	volatile uint32_t state;   /* atomic: TIMER_* in timer.c */
};

/* One entry of a heap: the timer and its deadline, a copy of t->when, so
 * that a sift compares entries of the array without loading the timers
 * (each one a cache miss on a heap of thousands). */
typedef struct gmp__timer_slot {
	int64_t when;
	gmp__timer *t;
} gmp__timer_slot;

/* Per-P timer state, embedded in gmp__p. */
typedef struct gmp__timers {
	gmp__mutex lock; /* protects heap, len, cap */
	int32_t len, cap;
	gmp__timer_slot *heap; /* inside mem, aligned (timer.c's heap_grow) */
	void *mem;
	volatile int64_t next; /* atomic: earliest when, 0 if empty;
				      read lock-free by idle Ms and sysmon */
	uint64_t fired;        /* timers popped to run, ever; lock */
	int32_t firing;        /* of those, fn (and a re-arm) not done; lock */
} gmp__timers;

/* How long an M that goes idle with a timer due already sleeps in the
 * poller before it runs it (sched.c), so that the timers that come due
 * meanwhile run in one batch with it rather than each alone, with a poll
 * and a trip through findrunnable apiece. A timer due later is slept for
 * as long as it takes, which the kernel's timer slack (50 µs by default)
 * stretches by about as much; this gives an overdue one the same. */
#define GMP__TIMER_SLACK_NS 50000

/* Arms t (fn and arg set by the caller) to run at `when`, on the heap of
 * the caller's P: call from a task or from g0 with a P. Never fails: the
 * poller an idle M sleeps in exists from gmp_init on, and running out of
 * memory for the heap aborts (as Go does), since a failed timer would end
 * a sleep or timeout early without a word. */
void gmp__timer_start(gmp__timer *t, int64_t when);

/* gmp__timer_start on the heap of p, from a thread that holds no P (a
 * thread that is not a task, or a task inside a gmp_enter_syscall
 * window): p must be one that never retires (P0), and the caller holds
 * the runtime (gmp__rt_hold) so that it cannot be torn down meanwhile. */
void gmp__timer_start_on(gmp__timer *t, int64_t when, gmp__p *p);

/* Disarms t from any thread. Returns true if t was pending and will not
 * run; false if it already ran or was never started. Either way t's fn
 * has finished and t is in no heap (a periodic t that was running is
 * disarmed once fn returns; a running t is waited out until the end of
 * its batch): the caller may free t. */
bool gmp__timer_stop(gmp__timer *t);

/* Whether t is in a heap, waiting to fire (acquire: its `when` is the one
 * it was armed with). A snapshot: t may fire or be stopped at once. */
bool gmp__timer_pending(const gmp__timer *t);

/* Runs p's due timers (the caller holds p, or is stealing from it) and
 * returns the next deadline on p, 0 if none. */
int64_t gmp__timers_run(gmp__p *p, int64_t now);

/* The earliest deadline on p, 0 if none; lock-free. */
static inline int64_t gmp__timers_next(gmp__timers *ts)
{
	return (int64_t)gmp__load64_acq((volatile uint64_t *)&ts->next);
}

/* Moves every timer of `from` to `to` (a P retiring). */
void gmp__timers_move(gmp__p *from, gmp__p *to);

/* gmp_shutdown, once no task is left: drops every timer of every P
 * (marked idle: a later gmp__timer_stop says false). With no task left
 * only gmp_timer's and descriptors' deadline timers (pollfd_deadline.c) can be
 * pending, and they never fire after shutdown.
 * Returns false if there was nothing to drop and no timer ran meanwhile;
 * true otherwise, since a timer that ran may have started a task (the
 * caller waits for the tasks again, and asks again). */
bool gmp__timers_drop_all(void);

/* Frees the heap array (shutdown). Timers still in it are dropped, as by
 * gmp__timers_drop_all. */
void gmp__timers_destroy(gmp__timers *ts);

#endif
