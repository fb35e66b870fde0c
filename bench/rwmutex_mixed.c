/* bench=rwmutex_mixed: 4 tasks each do n operations on a shared
 * gmp_rwmutex, 9 in 10 a read (read lock, read a shared counter) and 1 in
 * 10 a write (write lock, increment it), in a fixed pattern (Go:
 * sync.RWMutex, the same loop in bench/go/rwmutex_mixed). ns_per_op is the
 * wall time per operation: total / (4 n). Default --procs=2. */
#include <stdio.h>

#include <gmp.h>

#include "benchutil.h"

enum { NTASKS = 4 };

static long long n;
static gmp_rwmutex rw = GMP_RWMUTEX_INIT;
static long long counter; /* written under the write lock */
static long long sums[NTASKS * 8];
static gmp_wg wg = GMP_WG_INIT;

static void worker(void *arg)
{
	long long *sum = arg;
	long long s = 0;
	/* A local bound: the global n may share a line with rw. */
	const long long iters = n;
	for (long long i = 0; i < iters; i++) {
		if (i % 10 == 0) {
			gmp_rwmutex_lock(&rw);
			counter++;
			gmp_rwmutex_unlock(&rw);
		} else {
			gmp_rwmutex_rlock(&rw);
			s += counter;
			gmp_rwmutex_runlock(&rw);
		}
	}
	*sum = s;
	gmp_wg_done(&wg);
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 1000000);
	n = a.n;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0)
		return 1;
	int64_t t0 = bench_now_ns();
	gmp_wg_add(&wg, NTASKS);
	for (int i = 0; i < NTASKS; i++)
		gmp_go(worker, &sums[i * 8]);
	gmp_wg_wait(&wg);
	int64_t t1 = bench_now_ns();
	gmp_shutdown();
	long long writes = NTASKS * ((n + 9) / 10);
	if (counter != writes) {
		fprintf(stderr, "rwmutex_mixed: counter %lld, want %lld\n",
			counter, writes);
		return 1;
	}
	printf("bench=rwmutex_mixed procs=%d n=%lld ns_per_op=%.2f\n", a.procs,
	       n, (double)(t1 - t0) / ((double)NTASKS * (double)n));
	return 0;
}
