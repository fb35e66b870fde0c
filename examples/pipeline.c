/* A producer/consumer pipeline over channels:
 *
 *   producer --jobs--> N workers --results--> collector
 *
 * The producer sends the numbers 1..count and closes `jobs`. Each worker
 * receives until the close reaches it (gmp_chan_recv returns -EPIPE once
 * the channel is closed and drained), squares what it gets, sends it on,
 * and then signals on `finished`. A closer task waits for all N signals
 * and closes `results`, so the collector's loop ends the same way the
 * workers' did: the end of the input propagates through the pipeline as a
 * close, stage by stage, as in Go.
 *
 * Usage: pipeline [count [workers]]   (defaults: 100000 and 4)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <gmp.h>

struct pipeline {
	long long count;
	int workers;
	gmp_chan *jobs;     /* long long: producer -> workers */
	gmp_chan *results;  /* long long: workers -> collector */
	gmp_chan *finished; /* elem_size 0: "one worker is done" */
	long long sum;      /* written by the collector */
	long long received;
};

static void producer(void *arg)
{
	struct pipeline *pl = arg;
	for (long long i = 1; i <= pl->count; i++)
		gmp_chan_send(pl->jobs, &i);
	gmp_chan_close(pl->jobs); /* no more work: the workers will see it */
}

static void worker(void *arg)
{
	struct pipeline *pl = arg;
	long long n;
	while (gmp_chan_recv(pl->jobs, &n) == 0) {
		long long sq = n * n;
		gmp_chan_send(pl->results, &sq);
	}
	gmp_chan_send(pl->finished, NULL);
}

/* Closes `results` once every worker has sent its last result. */
static void closer(void *arg)
{
	struct pipeline *pl = arg;
	for (int i = 0; i < pl->workers; i++)
		gmp_chan_recv(pl->finished, NULL);
	gmp_chan_close(pl->results);
}

static int collector(void *arg)
{
	struct pipeline *pl = arg;
	gmp_go(producer, pl);
	for (int i = 0; i < pl->workers; i++)
		gmp_go(worker, pl);
	gmp_go(closer, pl);
	long long v;
	while (gmp_chan_recv(pl->results, &v) == 0) {
		pl->sum += v;
		pl->received++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct pipeline pl = { .count = 100000, .workers = 4 };
	if (argc > 1)
		pl.count = atoll(argv[1]);
	if (argc > 2)
		pl.workers = atoi(argv[2]);
	if (pl.count < 0 || pl.count > 1000000 || pl.workers < 1) {
		fprintf(stderr,
			"usage: pipeline [count <= 1000000 [workers >= 1]]\n");
		return 2;
	}
	pl.jobs = gmp_chan_new(sizeof(long long), 64);
	pl.results = gmp_chan_new(sizeof(long long), 64);
	pl.finished = gmp_chan_new(0, 0);
	if (!pl.jobs || !pl.results || !pl.finished)
		return 1;

	int r = gmp_main(collector, &pl);
	if (r != 0) {
		fprintf(stderr, "pipeline: gmp_main: %d\n", r);
		return 1;
	}
	gmp_shutdown();
	gmp_chan_free(pl.jobs);
	gmp_chan_free(pl.results);
	gmp_chan_free(pl.finished);

	/* 1^2 + ... + n^2 = n(n+1)(2n+1)/6 */
	long long n = pl.count, want = n * (n + 1) * (2 * n + 1) / 6;
	printf("%lld squares from %d workers, sum %lld (%s)\n", pl.received,
	       pl.workers, pl.sum, pl.sum == want ? "ok" : "WRONG");
	return pl.sum == want && pl.received == n ? 0 : 1;
}
