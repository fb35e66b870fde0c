/* The default number of Ps, and keeping it in step with the CPUs the
 * process may use (Go 1.25's container-aware GOMAXPROCS).
 *
 * Unless the user chose a number (gmp_config.maxprocs, $GMP_MAXPROCS or
 * gmp_set_maxprocs), maxprocs is
 *
 *     min(CPUs in the affinity mask, ceil(cgroup CPU quota / period))
 *
 * and sysmon re-reads both about once a second and resizes when the
 * result changes (a `taskset -p`, a `docker update --cpus`, a move to
 * another cgroup). Once the user has chosen, nothing is adjusted again.
 *
 * Go 1.25 (runtime/cgroup_linux.go, defaultGOMAXPROCS and
 * adjustCgroupGOMAXPROCS; internal/runtime/cgroup) does the same, and we
 * differ where our situation differs:
 *
 *  - Go raises any cgroup limit below 2 to 2, so a 0.5-CPU or 1-CPU
 *    container still gets two Ps: Go's collector wants a second P for its
 *    background work. We have no collector, and every extra running thread
 *    in a small quota only gets throttled, so we only round up: 0.5 and
 *    1.0 CPU give 1 P, 1.5 gives 2, 2.5 gives 3 (so a fractional quota
 *    above 1 still gets at least 2, as in Go).
 *  - Go reads the quota of the leaf cgroup only (its comment admits that
 *    a tighter parent is missed); we take the tightest quota from our
 *    cgroup up to the root of the mount, as the kernel enforces them all.
 *  - Go joins the mount point and the cgroup path and ignores the mount's
 *    root (field 4 of mountinfo); we strip it, so a bind-mounted sub-tree
 *    resolves, and give up on paths outside it.
 *  - Go finds its cgroup once at startup and does not notice being moved;
 *    we read /proc/self/cgroup at each check (the mount is found once).
 *  - Go re-counts the affinity of the thread that runs sysmon, which
 *    `taskset -p <pid>` does not change; we count the main thread's mask,
 *    which it does (and so does a cpuset cgroup, for every thread).
 *  - Go applies a new value from a goroutine with the world stopped; our
 *    procresize needs only sched.lock, so sysmon calls it directly.
 *  - Go has GODEBUG=containermaxprocs=0 and updatemaxprocs=0; here
 *    $GMP_MAXPROCS (or a config value) is the one way to opt out.
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
