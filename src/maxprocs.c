/* The default number of Ps, and keeping it in step with the CPUs the
 * process may use (Go 1.25's container-aware GOMAXPROCS). design.md §5.4
 * is the contract; §34 the design and where it differs from Go's.
 *
 * Unless the user chose a number (gmp_config.maxprocs, $GMP_MAXPROCS or
 * gmp_set_maxprocs), maxprocs is
 *
 *     min(CPUs in the main thread's affinity mask,
 *         ceil(cgroup CPU quota / period))
 *
 * and sysmon calls gmp__maxprocs_update about once a second, which
 * resizes when the result changes. The quota is read by cgroup_linux.c
 * (the tightest from this process's cgroup up to the mount's root).
 */
#include "internal.h"
#include "maxprocs.h"
#include "scheduler.h"

int gmp__maxprocs_default(void)
{
	int saved = errno;
	int n = gmp__ncpu();
	int limit = gmp__cgroup_cpu_limit();
	if (limit > 0 && limit < n)
		n = limit;
	if (n > GMP__MAXPROCS_LIMIT)
		n = GMP__MAXPROCS_LIMIT;
	errno = saved;
	return n;
}

enum { CHECK_PERIOD_NS = 1000 * 1000 * 1000 };

/* sysmon's alone; a stale value from an earlier run of the runtime only
 * delays the first check, by at most one period. */
static int64_t next_check;

void gmp__maxprocs_update(int64_t now)
{
	if (now < next_check)
		return;
	next_check = now + CHECK_PERIOD_NS;
	/* The reading costs a few system calls: done before taking the
	 * lock, and at most once a second. */
	int n = gmp__maxprocs_default();

	gmp__lock(&gmp__sched.lock);
	/* maxprocs_from_user is written under sched.lock once running
	 * (set_maxprocs), so a user's choice is never overwritten. */
	int old = (int)gmp__load32_rlx(&gmp__sched.gomaxprocs);
	bool changed = false;
	if (!gmp__cfg.maxprocs_from_user && n != old &&
	    !gmp__load32_rlx(&gmp__sched.stopping) && gmp__procresize(n) == 0)
		changed = true;
	gmp__unlock(&gmp__sched.lock);
	/* as gmp_set_maxprocs: new Ps get work, retiring Ps' queues get
	 * stolen */
	if (changed)
		gmp__wakep();
}
