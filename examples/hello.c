/* hello: the first libgmp program to run.
 *
 * gmp_main() runs hello() as a task. It spawns 8 workers that each do a
 * little CPU work and 1000 tiny tasks that do nothing but say where they
 * ran, waits for all of them, and prints where they ran and what the
 * scheduler did. Each task records the OS thread it ran on: tasks are
 * spread over the runtime's threads (one running thread per logical CPU by
 * default; set GMP_MAXPROCS to change that) by work stealing.
 *
 * hello() waits for them with a wait group (gmp_wg), as a Go program
 * would with sync.WaitGroup: it parks, holding no thread, until the last
 * task calls gmp_wg_done().
 *
 * Build and run:  cmake -S . -B build && cmake --build build && build/examples/hello
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gmp.h>

enum { NWORKERS = 8, NTINY = 1000, NTASKS = NWORKERS + NTINY };

struct record {
	int64_t task; /* gmp_self() */
	pid_t tid;    /* the OS thread the task finished on */
	uint64_t sum; /* workers: the result of their work */
};

static struct record records[NTASKS];
static gmp_wg done = GMP_WG_INIT;

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* A few milliseconds of arithmetic (xorshift), with a preemption point so
 * a long loop stays fair to the other tasks on its thread. */
static void worker(void *arg)
{
	struct record *r = arg;
	uint64_t x = 88172645463325252ull + (uint64_t)(r - records);
	for (int i = 0; i < 2000000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if ((i & 0xffff) == 0)
			gmp_preempt_point();
	}
	r->sum = x;
	r->task = gmp_self();
	r->tid = gettid_();
	gmp_wg_done(&done);
}

static void tiny(void *arg)
{
	struct record *r = arg;
	r->task = gmp_self();
	r->tid = gettid_();
	gmp_wg_done(&done);
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

static int hello(void *arg)
{
	(void)arg;
	printf("hello from task %" PRId64 ", libgmp %s\n", gmp_self(),
	       gmp_version());

	gmp_wg_add(&done, NTASKS);
	for (int i = 0; i < NTASKS; i++) {
		int64_t id = gmp_go(i < NWORKERS ? worker : tiny, &records[i]);
		if (id < 0) {
			fprintf(stderr, "hello: gmp_go: error %" PRId64 "\n",
				id);
			exit(1);
		}
	}
	gmp_wg_wait(&done);

	/* As in Go, each gmp_wg_done happens before gmp_wg_wait returns, so
	 * every record is complete here. */
	pid_t tids[NTASKS];
	int ran = 0;
	for (int i = 0; i < NTASKS; i++)
		if (records[i].task > 0)
			tids[ran++] = records[i].tid;
	qsort(tids, (size_t)ran, sizeof tids[0], cmp_pid);
	int threads = ran > 0;
	for (int i = 1; i < ran; i++)
		threads += tids[i] != tids[i - 1];

	for (int i = 0; i < NWORKERS; i++)
		printf("worker %d: task %" PRId64
		       " on thread %d (sum %016" PRIx64 ")\n",
		       i, records[i].task, (int)records[i].tid, records[i].sum);
	printf("%d tasks ran on %d distinct threads\n", ran, threads);

	gmp_stats s;
	if (gmp_stats_read(&s) != 0)
		return 1;
	printf("stats: threads_total=%" PRIu64 " procs=%" PRIu64
	       " steals=%" PRIu64 " spawned=%" PRIu64 "\n",
	       s.threads_total, s.procs, s.steals, s.spawned);
	return ran == NTASKS ? 0 : 1;
}

int main(void)
{
	int rc = gmp_main(hello, NULL);
	if (rc < 0) {
		fprintf(stderr, "hello: gmp_main: error %d\n", rc);
		return 1;
	}
	/* Waits for the tasks to end (they have done their work already),
	 * then stops the runtime's threads and frees everything. */
	gmp_shutdown();
	return rc;
}
