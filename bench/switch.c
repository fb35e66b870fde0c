/* The raw cost of one context switch: two contexts ping-ponging through
 * gmp__ctx_swap on one thread, no scheduler involved. One op is one switch
 * in one direction, so a round trip is two ops.
 *
 *   switch [--n=N] [--procs=P]
 *
 * --n is the number of switches (default 10,000,000; rounded up to an even
 * number, which is what gets reported). --procs is accepted for the
 * benchmark driver's sake and ignored: this is always one thread.
 *
 * bench/boost/switch_boost.cpp measures the same with Boost.Context's
 * jump_fcontext, as the yardstick. */
#include <stdlib.h>

#include "benchutil.h"
#include "ctx.h"

#define STACK_SIZE (64 * 1024)
#define WARMUP_ROUNDS 100000

static gmp__gobuf main_buf, peer_buf;

static void peer(void *arg)
{
	(void)arg;
	for (;;)
		gmp__ctx_swap(&peer_buf, &main_buf);
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 10000000);
	long long rounds = (a.n + 1) / 2;

	void *stack = malloc(STACK_SIZE);
	if (stack == NULL) {
		perror("malloc");
		return 1;
	}
	gmp__ctx_make(&peer_buf, stack, STACK_SIZE, peer, NULL);

	for (long long i = 0; i < WARMUP_ROUNDS; i++)
		gmp__ctx_swap(&main_buf, &peer_buf);

	int64_t t0 = bench_now_ns();
	for (long long i = 0; i < rounds; i++)
		gmp__ctx_swap(&main_buf, &peer_buf);
	int64_t t1 = bench_now_ns();

	/* The peer is parked mid-swap for good; its stack is not freed, as
	 * nothing may run on it again. */
	printf("bench=switch procs=1 n=%lld ns_per_op=%.3f\n", 2 * rounds,
	       (double)(t1 - t0) / (double)(2 * rounds));
	return 0;
}
