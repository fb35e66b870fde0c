/* The task API's internal half (task.c): parking and readying for the
 * runtime's own primitives, and the preemption switch point.
 */
#ifndef GMP_TASK_H
#define GMP_TASK_H

#include "internal.h"

/* Makes WAITING g runnable: into the caller's P (runnext when `next`), or
 * the global queue from a thread without one. Aborts if g is not
 * WAITING (two wakers). Never switches. */
void gmp__ready(gmp_g *g, bool next);

/* gmp__ready for a waker that owns the wakeup exclusively (it claimed a
 * waiter): no CAS on the status. */
void gmp__ready_claimed(gmp_g *g, bool next);
/* The same, by a waker that is self, the running task inside the runtime
 * (preempt.h), or NULL for "find out": it readies into self's P. */
void gmp__ready_claimed_by(gmp_g *g, bool next, gmp_g *self);

/* gmp__ready_claimed_by into the runnext of self (the running task,
 * inside the runtime, not NULL) that wakes no idle P when g is all that
 * self's P has queued: self's P runs g as soon as self switches, and no
 * other P's M could take it sooner (thieves leave a running P's runnext
 * alone for 3 µs). For a waker that knows g cannot proceed before self
 * does something first (cond.c: g's next act is to lock the mutex that is
 * locked now). With anything else queued, as gmp__ready_claimed_by. */
void gmp__ready_claimed_quiet(gmp_g *g, gmp_g *self);

/* Queues on p (the caller's, on g0) the tasks collected in q while
 * m->readyq pointed at it, in order, as if each had been readied into
 * runnext in turn, and wakes a P if one idles; empties q. */
void gmp__ready_flush(gmp__p *p, gmp__gqueue *q);

/* gmp_park with a wait reason for dumps; gmp__park_g for a caller that
 * knows g is the task running here. A switch point; from a task only. */
void gmp__park(gmp_unlock_fn unlockf, void *lock, uint32_t reason);
void gmp__park_g(gmp_g *g, gmp_unlock_fn unlockf, void *lock, uint32_t reason);

/* sysmon asked the running task to yield (gmp_preempt_point and other
 * switch points): yield to the global queue's tail. A no-op outside a
 * running task. */
void gmp__preempt_slow(void);

#endif
