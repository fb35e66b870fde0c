/* bench=preempt_latency: how late a sleeping task wakes while other tasks
 * compute without ever reaching a switch point. At maxprocs `procs`,
 * `hogs` tasks (default procs + 1) loop on arithmetic and a relaxed load
 * of a stop flag, calling nothing; the main task sleeps sleep_ms (10) n
 * times (200) and times each sleep. Without preemption a hog holds its P
 * for ever and the sleeper, queued behind it, never wakes; with it, sysmon
 * detaches each hog's P after its slice and the sleeper's timer fires on
 * time. Go: the same program, whose hogs Go preempts with a signal.
 *
 * Reported: the median, p99 and worst time a sleep took (ms), and the
 * detaches counted in gmp_stats. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <gmp.h>

#include "benchutil.h"

static atomic_int stop;
static long long n, nhogs, sleep_ms;
static int64_t *lat;
static uint64_t *results;
static gmp_wg hogs_done = GMP_WG_INIT;

static void hog(void *arg)
{
	uint64_t *out = arg;
	uint64_t x = 1, iters = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int i = 0; i < 1000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		iters++;
	}
	*out = x + iters;
	gmp_wg_done(&hogs_done);
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int run(void *arg)
{
	(void)arg;
	gmp_wg_add(&hogs_done, nhogs);
	for (long long i = 0; i < nhogs; i++)
		if (gmp_go(hog, &results[i]) < 0)
			abort();
	for (long long i = 0; i < n; i++) {
		int64_t t0 = gmp_nanotime();
		gmp_sleep(sleep_ms * 1000000);
		lat[i] = gmp_nanotime() - t0;
	}
	atomic_store(&stop, 1);
	gmp_wg_wait(&hogs_done);
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 200);
	n = a.n;
	nhogs = bench_flag_ll(argc, argv, "hogs", a.procs + 1);
	sleep_ms = bench_flag_ll(argc, argv, "sleep_ms", 10);
	lat = calloc((size_t)n, sizeof *lat);
	results = calloc((size_t)nhogs + 1, sizeof *results);
	if (!lat || !results)
		return 1;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0 || gmp_main(run, NULL) != 0)
		return 1;
	gmp_stats st;
	gmp_stats_read(&st);
	gmp_shutdown();
	qsort(lat, (size_t)n, sizeof *lat, cmp64);
	printf("bench=preempt_latency procs=%d n=%lld hogs=%lld sleep_ms=%lld "
	       "median_ms=%.2f p99_ms=%.2f max_ms=%.2f detaches=%llu\n",
	       a.procs, n, nhogs, sleep_ms, (double)lat[n / 2] / 1e6,
	       (double)lat[(n * 99) / 100] / 1e6, (double)lat[n - 1] / 1e6,
	       (unsigned long long)st.detaches);
	return 0;
}
