/* bench=timer_churn: 4 tasks together start and stop n timers: each makes
 * a one-shot timer of 1 s (gmp_timer_new), stops it before it fires and
 * frees it, n/4 times (Go: time.NewTimer and Stop, the same loop in
 * bench/go/timer_churn; its garbage collector frees them). ns_per_op is
 * the wall time per timer: total / n. Default --procs=2. */
#include <stdio.h>

#include <gmp.h>

#include "benchutil.h"

enum { NTASKS = 4 };

static long long per_task;
static gmp_wg wg = GMP_WG_INIT;
static long long not_pending;

static void worker(void *arg)
{
	(void)arg;
	long long bad = 0;
	for (long long i = 0; i < per_task; i++) {
		gmp_timer *t = gmp_timer_new(1000000000, 0);
		if (!t || !gmp_timer_stop(t))
			bad++;
		gmp_timer_free(t);
	}
	__atomic_fetch_add(&not_pending, bad, __ATOMIC_RELAXED);
	gmp_wg_done(&wg);
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 1000000);
	per_task = a.n / NTASKS;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0)
		return 1;
	int64_t t0 = bench_now_ns();
	gmp_wg_add(&wg, NTASKS);
	for (int i = 0; i < NTASKS; i++)
		gmp_go(worker, NULL);
	gmp_wg_wait(&wg);
	int64_t t1 = bench_now_ns();
	gmp_shutdown();
	if (not_pending) {
		fprintf(stderr, "timer_churn: %lld timers were not pending\n",
			not_pending);
		return 1;
	}
	long long n = per_task * NTASKS;
	printf("bench=timer_churn procs=%d n=%lld ns_per_op=%.2f total_ms=%.1f\n",
	       a.procs, n, (double)(t1 - t0) / (double)n,
	       (double)(t1 - t0) / 1e6);
	return 0;
}
