/* sleep, usleep, nanosleep, clock_nanosleep (hook.h, design.md §32).
 *
 * In a task each is gmp_sleep: a timer of the P, holding no thread. A
 * signal is never delivered to a parked task (its thread runs others), so
 * these return early with EINTR only where a thread's sleep would have
 * been interrupted by a signal sent to that very thread, which a task has
 * none of: they sleep their whole time and leave *rem alone. An absolute
 * clock_nanosleep sleeps until its clock says the time has come, looking
 * again after each wake (a CLOCK_REALTIME set forward ends it sooner, as
 * the kernel's does; set back, later). The CPU-time clocks cannot be slept
 * on by a timer: those sleeps run in the blocking-syscall bracket.
 */
#include <time.h>
#include <unistd.h>

#include "hook.h"

static bool ts_valid(const struct timespec *ts)
{
	return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}

static int64_t ts_ns(const struct timespec *ts)
{
	if (ts->tv_sec > INT64_MAX / 1000000000 - 1)
		return INT64_MAX;
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* Sleeps ns (> 0) on a timer. gmp_sleep's ns <= 0 still yields. */
static void nap(int64_t ns)
{
	gmp_sleep(ns);
}

HK_EXPORT unsigned sleep(unsigned s)
{
	if (!hk_task())
		return HK_REAL(sleep)(s);
	if (s)
		nap((int64_t)s * 1000000000);
	return 0;
}

HK_EXPORT int usleep(useconds_t us)
{
	if (!hk_task())
		return HK_REAL(usleep)(us);
	if (us)
		nap((int64_t)us * 1000);
	return 0;
}

HK_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
	if (!hk_task())
		return HK_REAL(nanosleep)(req, rem);
	if (!req)
		return (int)hk_ret(-EFAULT);
	if (!ts_valid(req))
		return (int)hk_ret(-EINVAL);
	int64_t ns = ts_ns(req);
	if (ns)
		nap(ns);
	return 0;
}

/* Whether the kernel can sleep on clk with a timer (the clocks
 * clock_nanosleep takes that are not CPU-time clocks). */
static bool timer_clock(clockid_t clk)
{
	return clk == CLOCK_REALTIME || clk == CLOCK_MONOTONIC ||
	       clk == CLOCK_BOOTTIME || clk == CLOCK_TAI;
}

HK_EXPORT int clock_nanosleep(clockid_t clk, int flags,
			      const struct timespec *req, struct timespec *rem)
{
	if (!hk_task())
		return HK_REAL(clock_nanosleep)(clk, flags, req, rem);
	if (!timer_clock(clk)) {
		/* A CPU-time clock, or one that is no clock: libc's answer
		 * (EINVAL), or its sleep, in the bracket. */
		return HK_BRACKET(true, HK_REAL(clock_nanosleep)(clk, flags,
								 req, rem));
	}
	if (!req)
		return EFAULT;
	if (!ts_valid(req))
		return EINVAL;
	if (!(flags & TIMER_ABSTIME)) {
		int64_t ns = ts_ns(req);
		if (ns)
			nap(ns);
		return 0;
	}
	int64_t until = ts_ns(req);
	for (;;) {
		struct timespec now;
		clock_gettime(clk, &now); /* not hooked: the vDSO's */
		int64_t left = until - ts_ns(&now);
		if (left <= 0)
			return 0;
		nap(left);
	}
}
