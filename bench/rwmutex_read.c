/* bench=rwmutex_read: 4 tasks each take and drop a shared gmp_rwmutex's
 * read lock n times, reading a shared value inside (Go: sync.RWMutex's
 * RLock/RUnlock, the same loop in bench/go/rwmutex_read). ns_per_op is the
 * wall time per rlock+runlock pair: total / (4 n). Default --procs=2. */
#include <stdio.h>

#include <gmp.h>

#include "benchutil.h"

enum { NTASKS = 4 };

static long long n;
static gmp_rwmutex rw = GMP_RWMUTEX_INIT;
static volatile long long shared = 1; /* read under the read lock */
static long long sums[NTASKS * 8];    /* one per task, a line apart */
static gmp_wg wg = GMP_WG_INIT;

static void reader(void *arg)
{
	long long *sum = arg;
	long long s = 0;
	/* A local bound: the global n may share a line with rw. */
	const long long iters = n;
	for (long long i = 0; i < iters; i++) {
		gmp_rwmutex_rlock(&rw);
		s += shared;
		gmp_rwmutex_runlock(&rw);
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
		gmp_go(reader, &sums[i * 8]);
	gmp_wg_wait(&wg);
	int64_t t1 = bench_now_ns();
	gmp_shutdown();
	for (int i = 0; i < NTASKS; i++)
		if (sums[i * 8] != n) {
			fprintf(stderr, "rwmutex_read: sum %lld, want %lld\n",
				sums[i * 8], n);
			return 1;
		}
	printf("bench=rwmutex_read procs=%d n=%lld ns_per_op=%.2f\n", a.procs,
	       n, (double)(t1 - t0) / ((double)NTASKS * (double)n));
	return 0;
}
