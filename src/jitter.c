/* Randomised scheduling (GMP_DEBUG=randomize=1), in the spirit of Go's
 * randomizeScheduler: besides skipping runnext at random (runq.h) and
 * shuffling overflow batches (runq.c), the runtime calls gmp__jitter() at
 * the points where its protocols race with other threads, so that tests
 * meet the rare interleavings often. Each call site is one
 *
 *     if (GMP__UNLIKELY(gmp__cfg.randomize)) gmp__jitter();
 *
 * and they are:
 *
 *   sched.c  findrunnable  after the P went idle, before nmspinning drops
 *                          (submitters see a spinner and skip wakep)
 *            findrunnable  after nmspinning dropped, before the re-check
 *                          of every queue (the Dekker pair with wakep)
 *            wakep         after winning the nmspinning CAS, before taking
 *                          an idle P
 *            resetspinning after nmspinning dropped, before wakep
 *            stopm         after the M went on the idle list, before it
 *                          sleeps (startm's wakeup may come first)
 *   task.c   park_m        after the G is WAITING and off its M, before
 *                          the unlock function (wakers may already see it)
 *   syscall.c gmp_exit_syscall  before the SYSCALL -> RUNNING CAS
 *                          (sysmon's retake window)
 *   runq.c   runq_grab     between copying a victim's slots and the head
 *                          CAS that commits the steal
 *   preempt.c gmp__preempt_detach  after sysmon's claim CAS, before the
 *                          barrier (the task's thread may enter meanwhile)
 *
 * None holds a lock. A jitter does nothing half the time; otherwise it
 * spins up to ~256 pauses, yields the CPU, or (rarely) sleeps a few
 * microseconds. errno is preserved: some sites are inside windows where
 * a task's errno is live.
 */
#include <errno.h>

#include "internal.h"

/* Per-thread state (xorshift32): the sites run on Ms, sysmon and the
 * program's threads alike, and need no lock to draw a number. */
static __thread uint32_t jitter_state
	__attribute__((tls_model("initial-exec")));

void gmp__jitter(void)
{
	uint32_t x = jitter_state;
	if (GMP__UNLIKELY(x == 0)) {
		x = (uint32_t)gmp__gettid() * 2654435761u ^
		    (uint32_t)gmp__nanotime();
		x |= 1;
	}
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	jitter_state = x;

	switch (x & 7) {
	case 4:
	case 5:
		for (uint32_t i = (x >> 8) & 255; i > 0; i--)
			gmp__cpu_relax();
		break;
	case 6: {
		int saved = errno;
		gmp__osyield();
		errno = saved;
		break;
	}
	case 7:
		if (((x >> 3) & 15) == 0)
			gmp__usleep(1 + (x >> 8) % 20); /* keeps errno */
		else {
			int saved = errno;
			gmp__osyield();
			errno = saved;
		}
		break;
	default:
		break; /* half the time: nothing */
	}
}
