/* bench=rwmutex_floor: the yardstick for bench/rwmutex_read. No runtime
 * and no lock: --procs threads share the same 4 n read-side passes, each
 * pass being exactly what Go's RWMutex algorithm costs a reader at the
 * least, one atomic add of +1 to a shared reader count, a read of the
 * shared value, one atomic add of -1. Both adds are full barriers, as a
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
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atomic.h"

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

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long arg_value(const char *a, const char *key, long long def)
{
	size_t k = strlen(key);
	if (strncmp(a, key, k) != 0)
		return def;
	char *end;
	errno = 0;
	long long v = strtoll(a + k, &end, 10);
	if (errno || *end || v <= 0) {
		fprintf(stderr, "rwmutex_floor: bad %s\n", a);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	long long procs = 2, n = 1000000;
	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--procs=", 8) == 0)
			procs = arg_value(argv[i], "--procs=", procs);
		else if (strncmp(argv[i], "--n=", 4) == 0)
			n = arg_value(argv[i], "--n=", n);
		else {
			fprintf(stderr, "usage: rwmutex_floor [--procs=P] "
					"[--n=N]\n");
			return 2;
		}
	}
	if (procs > MAXTHREADS || (NPASSES * n) % procs) {
		fprintf(stderr, "rwmutex_floor: --procs must divide %d n and "
				"be at most %d\n",
			NPASSES, MAXTHREADS);
		return 2;
	}
	per_thread = NPASSES * n / procs;
	static struct worker ws[MAXTHREADS];
	long long t0 = now_ns();
	for (long long i = 0; i < procs; i++)
		if (pthread_create(&ws[i].t, NULL, reader, &ws[i])) {
			fprintf(stderr, "rwmutex_floor: pthread_create failed\n");
			return 1;
		}
	for (long long i = 0; i < procs; i++)
		pthread_join(ws[i].t, NULL);
	long long t1 = now_ns();
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
