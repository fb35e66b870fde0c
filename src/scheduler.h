/* The scheduler's entry points (sched.c, whose opening comment is the
 * design): running tasks on Ms, the idle-M list and the spinning
 * protocol, Ps and their handoff, and the scheduler's start and stop
 * (design.md §23, §24, §25, §27 and §34).
 *
 * Not sched.h: tests and benchmarks put src/ on their include path, and
 * <pthread.h> includes the C library's <sched.h>.
 */
#ifndef GMP_SCHEDULER_H
#define GMP_SCHEDULER_H

#include "internal.h"

/* ---- on g0: running tasks ---------------------------------------------- */

/* One round of scheduling on m, which holds a P: find a G and run it.
 * Never returns. */
_Noreturn void gmp__schedule(gmp__m *m);

/* Runs g (RUNNABLE) on m, which holds a P. inherit: g continues the time
 * slice (it came from runnext). Never returns. */
_Noreturn void gmp__execute(gmp__m *m, gmp_g *g, bool inherit);

/* The G in m's runnext, taken, if gmp__schedule would run it next; else
 * NULL (sched.c). On g0, in a park's unlock function. */
gmp_g *gmp__runnext_take(gmp__m *m);

/* m's locked G is not runnable: give the P away, sleep until the G is
 * scheduled, then run it (LockOSThread). Never returns. */
_Noreturn void gmp__schedule_locked(gmp__m *m);

/* A task locked to m ended: hand the P off and let the thread exit with
 * it. Never returns. */
_Noreturn void gmp__goexit_locked(gmp__m *m);

/* ---- Ms and the spinning protocol -------------------------------------- */

/* Parks m, which holds no P, until startm hands it one (or until it must
 * exit, which it then does). */
void gmp__stopm(gmp__m *m);

/* Runs p on an idle M, else a new one. p NULL: take an idle P, if any.
 * spinning: the caller counted the M in nmspinning. lockheld: the caller
 * holds sched.lock. */
void gmp__startm(gmp__p *p, bool spinning, bool lockheld);

/* Work was submitted (and a full barrier passed since): put one more P to
 * work if one idles and no M spins. */
void gmp__wakep(void);

/* Hands off a P whose M cannot use it (syscall, locked M, retake). */
void gmp__handoffp(gmp__p *p);

/* The calling M's wyrand state: a cheap random number (owner only). */
uint32_t gmp__cheaprand(gmp__m *m);

/* ---- Ps ---------------------------------------------------------------- */

void gmp__acquirep(gmp__m *m, gmp__p *p);
gmp__p *gmp__releasep(gmp__m *m);
/* The idle-P list (sched.lock held); gmp__pidleput retires a P beyond
 * gomaxprocs instead of listing it. */
gmp__p *gmp__pidleget(void);
gmp__p *gmp__pidleget_prefer(gmp__p *want);
void gmp__pidleput(gmp__p *p);
/* Sets the number of Ps (sched.lock held). Returns 0 or -ENOMEM. */
int gmp__procresize(int n);

/* ---- work and timers from elsewhere ------------------------------------ */

/* Makes the WAITING Gs in q runnable and queues them, starting Ms for idle
 * Ps (the poller's results). */
void gmp__injectglist(gmp__gqueue *q);

/* A timer is due at `when`: make sure an M will be awake for it (break the
 * poller's sleep, or wake an M). */
void gmp__wake_netpoller(int64_t when);

/* The earliest timer of any P, 0 if none; lock-free. */
int64_t gmp__timers_earliest(void);

/* Live tasks: spawns minus exits, never below the true count. */
int64_t gmp__tasks_live(void);

/* ---- start and stop ---------------------------------------------------- */

int gmp__sched_start(int maxprocs, int max_threads);
/* Every task has ended: stop every M, free Ms and Ps (gmp_shutdown). */
void gmp__sched_stop(void);

#endif
