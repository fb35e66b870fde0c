/* bench=parked_memory: n tasks (1,000,000 by default) each block
 * receiving from one unbuffered channel. bytes_per_task is the growth of
 * the resident set while they are all parked, divided by n (stacks are
 * reserved, 256 KiB by default, and only the pages a task touched count);
 * total_ms is the time to spawn them all until the last one is parked.
 * Then the channel is closed and every task finishes. (Go: the same with
 * goroutines blocked in <-c.)
 *
 * The spawn loop calls gmp_preempt_point(), as any long loop should (Go's
 * compiler checks for preemption in every loop), so the tasks start and
 * park while the loop goes on. */
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

static long long n;
static gmp_chan *gate, *done;
static atomic_llong parked;
static int64_t t_start, t_end;
static long long rss_before, rss_after;

/* Resident bytes, from /proc/self/statm. */
static long long rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long long size = 0, resident = 0;
	if (!f || fscanf(f, "%lld %lld", &size, &resident) != 2)
		abort();
	fclose(f);
	return resident * sysconf(_SC_PAGESIZE);
}

static void waiter(void *arg)
{
	(void)arg;
	if (atomic_fetch_add(&parked, 1) + 1 == n &&
	    gmp_chan_try_send(done, NULL) != 0)
		abort();
	if (gmp_chan_recv(gate, NULL) != -EPIPE)
		abort();
}

static int spawner(void *arg)
{
	(void)arg;
	rss_before = rss_bytes();
	t_start = bench_now_ns();
	for (long long i = 0; i < n; i++) {
		if (gmp_go(waiter, NULL) < 0)
			abort();
		gmp_preempt_point();
	}
	if (gmp_chan_recv(done, NULL) != 0) /* the last one is parking */
		abort();
	t_end = bench_now_ns();
	rss_after = rss_bytes();
	gmp_chan_close(gate);
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 1000000);
	n = a.n;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0)
		return 1;
	gate = gmp_chan_new(0, 0);
	done = gmp_chan_new(0, 1);
	if (!gate || !done || gmp_main(spawner, NULL) != 0)
		return 1;
	gmp_shutdown(); /* every waiter has seen the close and ended */
	gmp_chan_free(gate);
	gmp_chan_free(done);
	printf("bench=parked_memory procs=%d n=%lld bytes_per_task=%.0f "
	       "total_ms=%.1f\n",
	       a.procs, n, (double)(rss_after - rss_before) / (double)n,
	       (double)(t_end - t_start) / 1e6);
	return 0;
}
