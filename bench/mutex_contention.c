/* bench=mutex_contention: 4 tasks each lock a shared gmp_mutex, increment a
 * plain counter and unlock, n times (Go: sync.Mutex, the same loop in
 * bench/go/mutex_contention). ns_per_op is the wall time per
 * lock+increment+unlock pair: total / (4 n). Default --procs=2. */
#include <stdio.h>

#include <gmp.h>

#include "benchutil.h"

enum { NTASKS = 4 };

static long long n;
static gmp_mutex mu = GMP_MUTEX_INIT;
static long long counter; /* protected by mu */
static gmp_wg wg = GMP_WG_INIT;

static void worker(void *arg)
{
	(void)arg;
	for (long long i = 0; i < n; i++) {
		gmp_mutex_lock(&mu);
		counter++;
		gmp_mutex_unlock(&mu);
	}
	gmp_wg_done(&wg);
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 1000000);
	n = a.n;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0)
		return 1;
	/* The workers start from this thread, which then waits for them on
	 * the wait group (sleeping on a futex), as Go's main goroutine does
	 * in wg.Wait. */
	int64_t t0 = bench_now_ns();
	gmp_wg_add(&wg, NTASKS);
	for (int i = 0; i < NTASKS; i++)
		gmp_go(worker, NULL);
	gmp_wg_wait(&wg);
	int64_t t1 = bench_now_ns();
	gmp_shutdown();
	if (counter != NTASKS * n) {
		fprintf(stderr, "mutex_contention: counter %lld, want %lld\n",
			counter, NTASKS * n);
		return 1;
	}
	printf("bench=mutex_contention procs=%d n=%lld ns_per_op=%.2f\n",
	       a.procs, n, (double)(t1 - t0) / ((double)NTASKS * (double)n));
	return 0;
}
