/* bench=yield: two tasks on one P, each calling gmp_yield n times
 * (Go: runtime.Gosched). ns_per_op is the time per yield. */
#include <stdatomic.h>
#include <stdio.h>

#include <gmp.h>

#include "benchutil.h"

static long long n;

static void yielder(void *arg)
{
	(void)arg;
	for (long long i = 0; i < n; i++)
		gmp_yield();
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 5000000);
	n = a.n;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0)
		return 1;
	/* Both tasks start from this thread; gmp_shutdown returns when both
	 * have finished, so only their yields are inside the interval (plus
	 * one wakeup of the runtime's first thread, amortised). */
	int64_t t0 = bench_now_ns();
	gmp_go(yielder, NULL);
	gmp_go(yielder, NULL);
	gmp_shutdown();
	int64_t t1 = bench_now_ns();
	printf("bench=yield procs=%d n=%lld ns_per_op=%.2f\n", a.procs, n,
	       (double)(t1 - t0) / (2.0 * (double)n));
	return 0;
}
