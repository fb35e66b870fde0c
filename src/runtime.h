/* The runtime's lifecycle (runtime.c): what threads without a P use to
 * find the runtime running (or to start it), and gmp_main's exit path.
 */
#ifndef GMP_RUNTIME_H
#define GMP_RUNTIME_H

#include <limits.h>

#include "internal.h"
#include "os.h"

/* Holding the runtime, for code on a thread that holds no P (the
 * program's own threads, gmp_main's caller, a task inside a
 * gmp_enter_syscall window) and uses the scheduler's structures: to spawn,
 * to ready, to change a setting, to read stats or dump. Between a
 * gmp__rt_hold that returned 0 and its gmp__rt_release, gmp_shutdown can
 * neither leave RUNNING (so no spawn is half-way through when it starts
 * to drain) nor tear the structures down.
 *
 * gmp__rt_hold returns 0, held, when the runtime is
 *   RUNNING;
 *   DRAINING (gmp_shutdown waits for the last tasks), unless `start` is
 *     set and the caller is not a runtime thread: new work from outside
 *     is refused while draining, but a runtime thread (gmp__getm() set:
 *     a task, or the scheduler working for one) is part of what the
 *     drain waits for, so it may still spawn, and its hold cannot delay
 *     the teardown, which waits for that task anyway.
 * Otherwise it returns, holding nothing,
 *   -ESHUTDOWN   DRAINING and refused as above; or OFF, without `start`;
 *   gmp_init's error, OFF with `start`: it starts the runtime with the
 *                defaults (and takes the hold) or says why it could not.
 *
 * The hold is a read lock on a writer-preferring rwlock: a holder must
 * not hold again (a gmp_init or gmp_shutdown waiting in between would
 * deadlock both), and must release on the thread that held, with no
 * switch point in between. Tasks that hold a P never need it. */
int gmp__rt_hold(bool start);
void gmp__rt_release(void);

/* gmp_exit from gmp_main's task, inside its function: tell the waiting
 * thread that the function will not return. */
void gmp__main_goexit(gmp_g *g);

/* In the child of fork() (fork.c). */
void gmp__runtime_forked(void);

/* A P goes idle (gmp__pidleput): if a thread is waiting for the last
 * task to end, let it count again (wait_no_tasks in runtime.c). Only ever
 * true during gmp_shutdown, or after gmp_main's task called gmp_exit. */
static inline void gmp__drain_poke(void)
{
	if (GMP__UNLIKELY(gmp__load32_rlx(&gmp__sched.drain_waiters))) {
		gmp__add32_full(&gmp__sched.drain_seq, 1);
		gmp__futex_wake(&gmp__sched.drain_seq, INT_MAX);
	}
}

#endif
