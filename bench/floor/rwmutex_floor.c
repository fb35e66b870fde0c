/* bench=rwmutex_floor: the yardstick for bench/rwmutex_read. No runtime
 * and no lock: --procs threads share the same 4 n read-side passes, each
 * pass being exactly the work Go's RWMutex algorithm gives a reader: one
 * atomic add of +1 to a shared reader count, a read of the shared value,
 * one atomic add of -1. Both adds are full barriers, as a
 * read lock's acquire and a read unlock's release are on x86 (lock xadd)
 * and as ours are (rwmutex.c). ns_per_op is the wall time per pair, as in
 * rwmutex_read: total / (4 n).
 *
 * With the count's cache line moving between the CPUs at every add, this
 * is what that algorithm costs while both CPUs take the lock all the time:
 * a lock built on one shared reader count gets below it only where its
 * readers contend less (fewer of them on the CPUs at once), not by doing
 * less per pass. */
#define _GNU_SOURCE
#include <pthread.h>

#include "atomic.h"
#include "benchutil.h"

enum { NPASSES = 4, MAXTHREADS = 64 };

/* The reader count and the value read under it, as in a gmp_rwmutex and
 * the benchmark's shared value: apart, each on its own line. */
static struct {
	_Alignas(64) volatile uint32_t count;
	_Alignas(64) volatile long long shared;
} w = { .shared = 1 };

static long long per_thread;

struct worker {
	_Alignas(64) long long sum;
	pthread_t t;
};

static void *reader(void *arg)
{
	struct worker *me = arg;
	long long s = 0;
	for (long long i = 0; i < per_thread; i++) {
		if ((int32_t)gmp__add32_full(&w.count, 1) + 1 < 0)
			abort(); /* never: no writer here */
		s += w.shared;
		gmp__add32_full(&w.count, -1);
	}
	me->sum = s;
	return NULL;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 1000000);
	long long procs = a.procs, n = a.n;
	if (procs > MAXTHREADS || (NPASSES * n) % procs) {
		fprintf(stderr,
			"rwmutex_floor: --procs must divide %d n and "
			"be at most %d\n",
			NPASSES, MAXTHREADS);
		return 2;
	}
	per_thread = NPASSES * n / procs;
	static struct worker ws[MAXTHREADS];
	int64_t t0 = bench_now_ns();
	for (long long i = 0; i < procs; i++)
		if (pthread_create(&ws[i].t, NULL, reader, &ws[i])) {
			fprintf(stderr,
				"rwmutex_floor: pthread_create failed\n");
			return 1;
		}
	for (long long i = 0; i < procs; i++)
		pthread_join(ws[i].t, NULL);
	int64_t t1 = bench_now_ns();
	for (long long i = 0; i < procs; i++)
		if (ws[i].sum != per_thread) {
			fprintf(stderr, "rwmutex_floor: sum %lld, want %lld\n",
				ws[i].sum, per_thread);
			return 1;
		}
	if (w.count != 0) {
		fprintf(stderr, "rwmutex_floor: count %u at the end\n",
			(unsigned)w.count);
		return 1;
	}
	printf("bench=rwmutex_floor procs=%lld n=%lld ns_per_op=%.2f\n", procs,
	       n, (double)(t1 - t0) / ((double)NPASSES * (double)n));
	return 0;
}
