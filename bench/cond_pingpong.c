/* bench=cond_pingpong: two tasks take turns n times each through one
 * gmp_cond and its gmp_mutex: each waits until the turn is its own, passes
 * it to the other and signals (Go: sync.Cond, the same loop in
 * bench/go/cond_pingpong). ns_per_op is the wall time per round trip (both
 * tasks had one turn): total / n. Default --procs=1. */
#include <stdio.h>

#include <gmp.h>

#include "benchutil.h"

static long long n;
static gmp_mutex mu = GMP_MUTEX_INIT;
static gmp_cond cv = GMP_COND_INIT;
static int turn; /* mu */
static gmp_wg wg = GMP_WG_INIT;

static void player(void *arg)
{
	int me = (int)(intptr_t)arg;
	for (long long i = 0; i < n; i++) {
		gmp_mutex_lock(&mu);
		while (turn != me)
			gmp_cond_wait(&cv, &mu);
		turn = 1 - me;
		gmp_cond_signal(&cv);
		gmp_mutex_unlock(&mu);
	}
	gmp_wg_done(&wg);
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 1000000);
	n = a.n;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0)
		return 1;
	int64_t t0 = bench_now_ns();
	gmp_wg_add(&wg, 2);
	gmp_go(player, (void *)(intptr_t)0);
	gmp_go(player, (void *)(intptr_t)1);
	gmp_wg_wait(&wg);
	int64_t t1 = bench_now_ns();
	gmp_shutdown();
	if (turn != 0) {
		fprintf(stderr, "cond_pingpong: turn %d at the end\n", turn);
		return 1;
	}
	printf("bench=cond_pingpong procs=%d n=%lld ns_per_op=%.2f\n", a.procs,
	       n, (double)(t1 - t0) / (double)n);
	return 0;
}
