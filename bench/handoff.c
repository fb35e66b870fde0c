/* bench=handoff: how long a task blocked in a system call keeps a runnable
 * task waiting. One P (procs 1): each trial, the main task spawns a task
 * (into its runnext) and at once blocks in a wrapped read() on an empty
 * pipe. The spawned task can only run once sysmon has taken the P from
 * the blocked one and handed it to another thread; it records when it
 * first ran and writes the byte that ends the read. The latency is that
 * time minus the time taken just before the read began.
 *
 * Reported over n trials (default 200): median_us, p90_us and max_us;
 * retakes counts the Ps sysmon took (one per trial expected). Go: the same
 * with syscall.Read on a syscall.Pipe (no poller) at GOMAXPROCS=1.
 *
 * What it measures: sysmon must see the syscall twice (first sight only
 * notes it), so one to two sysmon periods of 20 µs, each stretched by the
 * kernel's timer slack, then the wakeup of a parked thread.
 *
 * --jitter_us=J (default 0) busy-waits a pseudo-random 0..J µs before each
 * trial. Without it every trial starts at the same point of sysmon's
 * cycle (the previous trial ended just after sysmon's last look), so the
 * result depends on how the trial's own length lines up with the sysmon
 * period; with J at least one period, the start falls anywhere in the
 * cycle, as a real program's calls do. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

static int fds[2];
static int64_t t_ran;
static int64_t *lat;
static long long n, jitter_ns;
static uint64_t rng = 88172645463325252ull;

static void jitter(void)
{
	if (!jitter_ns)
		return;
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	int64_t until = bench_now_ns() + (int64_t)(rng % (uint64_t)jitter_ns);
	while (bench_now_ns() < until)
		;
}
static gmp_stats before, after;

static void other(void *arg)
{
	(void)arg;
	t_ran = bench_now_ns();
	if (write(fds[1], "x", 1) != 1)
		abort();
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int run(void *arg)
{
	(void)arg;
	gmp_stats_read(&before);
	for (long long i = -10; i < n; i++) { /* 10 warm-up trials */
		char c;
		jitter();
		if (gmp_go(other, NULL) < 0)
			abort();
		int64_t t0 = bench_now_ns();
		gmp_enter_syscall();
		ssize_t r = read(fds[0], &c, 1);
		gmp_exit_syscall();
		if (r != 1)
			abort();
		if (i >= 0)
			lat[i] = t_ran - t0;
		if (i == -1)
			gmp_stats_read(&before);
		/* The other task has ended (we ran after it on this P) or is
		 * about to; let it finish before the next trial. */
		gmp_yield();
	}
	gmp_stats_read(&after);
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 200);
	n = a.n;
	jitter_ns = bench_flag_ll(argc, argv, "jitter_us", 0) * 1000;
	lat = calloc((size_t)n, sizeof *lat);
	if (!lat || pipe(fds) != 0)
		return 1;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0 || gmp_main(run, NULL) != 0)
		return 1;
	gmp_shutdown();
	qsort(lat, (size_t)n, sizeof *lat, cmp64);
	printf("bench=handoff procs=%d n=%lld jitter_us=%lld median_us=%.1f "
	       "p90_us=%.1f max_us=%.1f retakes=%llu\n",
	       a.procs, n, jitter_ns / 1000, (double)lat[n / 2] / 1e3,
	       (double)lat[(n * 9) / 10] / 1e3, (double)lat[n - 1] / 1e3,
	       (unsigned long long)(after.retakes - before.retakes));
	return 0;
}
