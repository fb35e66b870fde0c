/* readme.c: the example in README.md. Ten tasks each add up a tenth of
 * 1..10000000 and send their sum over a channel; gmp_main's task collects
 * the sums, waiting on the channel without holding a thread. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include <gmp.h>

enum { NTASKS = 10, N = 10000000 };

static gmp_chan *sums; /* of int64_t */

static void worker(void *arg)
{
	int64_t part = (int64_t)(intptr_t)arg, len = N / NTASKS, sum = 0;
	for (int64_t i = part * len + 1; i <= (part + 1) * len; i++) {
		sum += i;
		gmp_preempt_point(); /* one load; yields if the slice is over */
	}
	gmp_chan_send(sums, &sum);
}

static int run(void *arg)
{
	(void)arg;
	sums = gmp_chan_new(sizeof(int64_t), 0); /* unbuffered */
	for (intptr_t i = 0; i < NTASKS; i++)
		gmp_go(worker, (void *)i);
	int64_t total = 0;
	for (int i = 0; i < NTASKS; i++) {
		int64_t sum;
		gmp_chan_recv(sums, &sum); /* parks until a worker sends */
		total += sum;
	}
	gmp_chan_free(sums);
	printf("1 + 2 + ... + %d = %" PRId64 ", from %d tasks\n", N, total,
	       NTASKS);
	return 0;
}

int main(void)
{
	return gmp_main(run, NULL);
}
