/* gmp_sleep and gmp_nanotime (design.md §10.1). */
#include "internal.h"
#include "preempt.h"
#include "wait.h"

GMP_EXTERN int64_t gmp_nanotime(void)
{
	return gmp__nanotime();
}

static void no_unlock(void *arg)
{
	(void)arg;
}

GMP_EXTERN void gmp_sleep(int64_t ns)
{
	if (ns <= 0) {
		gmp_yield();
		return;
	}
	int64_t deadline = gmp__nanotime() + ns;
	/* parks with a timer on the P: inside the runtime (preempt.h) */
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__waiter w;
	gmp__waiter_init(&w);
	/* Nobody wakes this waiter: only its deadline ends the sleep. A task
	 * parks with a timer on its P; a thread sleeps on the futex. */
	gmp__waiter_sleep(&w, no_unlock, NULL, GMP__WAIT_SLEEP, deadline);
}
