/* bench=skynet: the classic skynet benchmark. A root task spawns 10
 * children, each spawns 10 more, down to n leaves (1,000,000 by default,
 * a power of 10); each leaf sends its number to its parent over the
 * parent's unbuffered channel, and each inner node sums its 10 children's
 * results and sends the sum up. The root checks the total, n(n-1)/2.
 * total_ms is the wall time from the first spawn to the root's result
 * (Go: the same program with chan int and go statements).
 *
 * A node keeps its children's arguments in its own frame: it outlives
 * them, since it waits for all ten results before it returns. */
#include <stdio.h>

#include <gmp.h>

#include "benchutil.h"

enum { DIV = 10 };

struct node {
	gmp_chan *up; /* where the result goes */
	long long num, size;
};

static void skynet(void *arg)
{
	struct node *self = arg;
	gmp_chan *up = self->up;
	long long num = self->num, size = self->size;
	if (size == 1) {
		if (gmp_chan_send(up, &num) != 0)
			abort();
		return;
	}
	gmp_chan *rc = gmp_chan_new(sizeof(long long), 0);
	if (!rc)
		abort();
	struct node kids[DIV];
	long long sub = size / DIV;
	for (int i = 0; i < DIV; i++) {
		kids[i] = (struct node){ rc, num + i * sub, sub };
		if (gmp_go(skynet, &kids[i]) < 0)
			abort();
	}
	long long sum = 0, v;
	for (int i = 0; i < DIV; i++) {
		if (gmp_chan_recv(rc, &v) != 0)
			abort();
		sum += v;
	}
	gmp_chan_free(rc);
	if (gmp_chan_send(up, &sum) != 0)
		abort();
}

static long long n;
static long long result;
static int64_t t_start, t_end;

static int root(void *arg)
{
	(void)arg;
	gmp_chan *c = gmp_chan_new(sizeof(long long), 0);
	struct node top = { c, 0, n };
	t_start = bench_now_ns();
	if (gmp_go(skynet, &top) < 0 || gmp_chan_recv(c, &result) != 0)
		abort();
	t_end = bench_now_ns();
	gmp_chan_free(c);
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 1000000);
	n = a.n;
	long long p = 1;
	while (p < n)
		p *= DIV;
	if (p != n) {
		fprintf(stderr, "skynet: --n must be a power of %d\n", DIV);
		return 2;
	}
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0 || gmp_main(root, NULL) != 0)
		return 1;
	gmp_shutdown();
	long long want = n * (n - 1) / 2;
	if (result != want) {
		fprintf(stderr, "skynet: sum %lld, want %lld\n", result, want);
		return 1;
	}
	printf("bench=skynet procs=%d n=%lld total_ms=%.1f sum=%lld\n", a.procs,
	       n, (double)(t_end - t_start) / 1e6, result);
	return 0;
}
