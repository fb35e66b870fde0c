/* sysmon, the monitor thread (sysmon.c). */
#ifndef GMP_SYSMON_H
#define GMP_SYSMON_H

#include "internal.h"
#include "runq.h"
#include "timer.h"

/* gmp_init / gmp_shutdown. Start returns 0 or -errno. */
int gmp__sysmon_start(void);
void gmp__sysmon_stop(void);

/* sched.sysmonwait: 0 while sysmon is awake, else the sleep it is in
 * (sysmon.c): a deep one, taken with every P idle, SHORT while tasks are
 * live (in slices of at most 10 ms) and LONG while none is (up to a
 * second; a P leaving the idle list ends it); or the long sleep while the
 * Ps compute, BUSY until a task enters a system call (gmp__sysmon_wanted),
 * then BUSY_CALL. */
enum {
	GMP__SYSMON_WAIT_SHORT = 1,
	GMP__SYSMON_WAIT_LONG,
	GMP__SYSMON_WAIT_BUSY,
	GMP__SYSMON_WAIT_BUSY_CALL,
};

/* Whether work that finds no idle P ends the sleep w (a sysmonwait
 * value): any but a long sleep while the Ps compute that no task has
 * entered a system call during, as then every P runs a task that will
 * get to the work (gmp__wakep, gmp__sysmon_wake_work_locked). */
static inline bool gmp__sysmon_work_wakes(uint32_t w)
{
	return w && w != GMP__SYSMON_WAIT_BUSY;
}

/* Ends sysmon's deep sleep, if it is in one (sched.lock held). */
void gmp__sysmon_wake_locked(void);

/* The same for work that finds no idle P (sched.lock held), if that ends
 * the sleep (gmp__sysmon_work_wakes). */
void gmp__sysmon_wake_work_locked(void);

/* The same without sched.lock held, for a caller that work could be
 * waiting on: takes the lock only if sysmonwait says sysmon sleeps deeply.
 * That look is racy, so only for a caller whose wake, if missed, the end
 * of sysmon's current deep-sleep slice makes up for. */
void gmp__sysmon_wake(void);

/* The same, but only a deep sleep that may last longer than sysmon's
 * longest round (10 ms): taken while no task is live. */
void gmp__sysmon_wake_long_locked(void);

/* gmp_enter_syscall: whether sysmon sleeps deeply (it took the sleep when
 * every P was idle, or sleeps long while the Ps compute) and the system
 * call that p's task is about to enter could hold up work: tasks queued on p or globally, or a timer of p's due
 * before sysmon would wake by itself. Then it must be woken, to retake p
 * should the call block. Work that turns up later and finds no idle P
 * wakes it then (gmp__wakep, injectglist), for which the call marks a
 * long sleep it enters (BUSY_CALL, above); timers armed later on p are run
 * by other Ps' Ms, or once sysmon's sleep ends (a 10 ms slice at most
 * while tasks are live). So a server whose one task parks and wakes
 * thousands of times a second does not wake sysmon, a futex wake and a
 * context switch on the other CPU, at each of its system calls, as Go's
 * entersyscall does.
 *
 * Called while p is still ours (its queue and timers are read). sysmon
 * cannot start a deep sleep while p runs, so sysmonwait read here is what
 * it would be after the call's status CAS, or already cleared. It can
 * start a long one (sysmon.c's busy_sleep): it looks at every P again
 * once sysmonwait is set and stays awake if this task is in its call by
 * then; a call entered in the instant between misses the wake and is
 * looked at when that sleep ends (10 ms at most). */
static inline bool gmp__sysmon_wanted(gmp__p *p)
{
	uint32_t w = gmp__load32_rlx(&gmp__sched.sysmonwait);
	if (GMP__LIKELY(!w))
		return false;
	/* The first call in a long sleep while the Ps compute marks it, so
	 * that work which finds no idle P from now on wakes sysmon
	 * (gmp__wakep). full: a #StoreLoad barrier between the mark and the
	 * loads of the queues below, whose partners are the queueing of
	 * that work and gmp__wakep's load of sysmonwait: either this sees
	 * the work, or the waker sees the mark. */
	if (w == GMP__SYSMON_WAIT_BUSY)
		gmp__cas32_full(&gmp__sched.sysmonwait, GMP__SYSMON_WAIT_BUSY,
				GMP__SYSMON_WAIT_BUSY_CALL);
	int64_t next = gmp__timers_next(&p->timers);
	return !gmp__runq_empty(p) || gmp__load64_rlx(&gmp__sched.runqsize) ||
	       (next &&
		next < (int64_t)gmp__load64_rlx(&gmp__sched.sysmonuntil));
}

#endif
