/* bench=chan_pingpong: two tasks bounce a value over two unbuffered
 * channels (ping, pong) n times (Go: the same with chan int). ns_per_op is
 * the time per round trip: two sends, two receives, two switches.
 *
 * Each send finds the partner waiting in its receive, copies the value
 * into it and readies it into runnext; the sender then blocks in its own
 * receive and the partner runs next on the same P, inheriting the time
 * slice. So at procs 1 and 2 alike this measures the channel hand-off and
 * the park/ready switch, not thread wake-ups. */
#include <stdio.h>

#include <gmp.h>

#include "benchutil.h"

static long long n;
static gmp_chan *ping, *pong;
static int64_t t_start, t_end;

static void ponger(void *arg)
{
	(void)arg;
	long long v;
	for (long long i = 0; i < n; i++) {
		if (gmp_chan_recv(ping, &v) != 0 ||
		    gmp_chan_send(pong, &v) != 0)
			abort();
	}
}

static int pinger(void *arg)
{
	(void)arg;
	gmp_go(ponger, NULL);
	t_start = bench_now_ns();
	for (long long i = 0; i < n; i++) {
		long long v = i;
		if (gmp_chan_send(ping, &v) != 0 ||
		    gmp_chan_recv(pong, &v) != 0 || v != i)
			abort();
	}
	t_end = bench_now_ns();
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 1000000);
	n = a.n;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0)
		return 1;
	ping = gmp_chan_new(sizeof(long long), 0);
	pong = gmp_chan_new(sizeof(long long), 0);
	if (!ping || !pong || gmp_main(pinger, NULL) != 0)
		return 1;
	gmp_shutdown();
	gmp_chan_free(ping);
	gmp_chan_free(pong);
	printf("bench=chan_pingpong procs=%d n=%lld ns_per_op=%.2f\n", a.procs,
	       n, (double)(t_end - t_start) / (double)n);
	return 0;
}
