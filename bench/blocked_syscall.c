/* bench=blocked_syscall: does a burst of tasks blocked in system calls slow
 * down the CPU work of the others? A fixed CPU job (n tasks, each
 * computing fib(30) recursively, default n=64) runs at procs 2, timed
 * with no other tasks ("idle") and with 10 tasks blocked in wrapped read()
 * calls on an empty pipe ("blocked"), alternately, 7 times each (Go: the
 * same with syscall.Read on a syscall.Pipe at GOMAXPROCS=2).
 *
 * ratio is the median blocked time over the median idle time: the blocked
 * tasks each hold a thread but no P, so it should be 1. threads_before and
 * threads_after are threads_total before the readers blocked and while
 * they are blocked (Go: runtime/pprof's threadcreate count; Go never lets
 * a thread go, so that is its live total too). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

enum { FIB = 30, NREADERS = 10, ROUNDS = 7 };
static const int64_t MS = 1000000;

static long long njobs;
static int fds[2];
static gmp_wg job_wg = GMP_WG_INIT, readers_wg = GMP_WG_INIT;
static atomic_ullong sink;
static int64_t idle_ns[ROUNDS], blocked_ns[ROUNDS];
static uint64_t threads_before, threads_after;

static uint64_t fib(int k)
{
	return k < 2 ? (uint64_t)k : fib(k - 1) + fib(k - 2);
}

static void job_task(void *arg)
{
	(void)arg;
	atomic_fetch_add(&sink, fib(FIB));
	gmp_wg_done(&job_wg);
}

static int64_t job(void)
{
	int64_t t0 = bench_now_ns();
	gmp_wg_add(&job_wg, njobs);
	for (long long i = 0; i < njobs; i++)
		if (gmp_go(job_task, NULL) < 0)
			abort();
	gmp_wg_wait(&job_wg);
	return bench_now_ns() - t0;
}

static void reader(void *arg)
{
	(void)arg;
	char c;
	gmp_enter_syscall();
	ssize_t r = read(fds[0], &c, 1);
	gmp_exit_syscall();
	if (r != 1)
		abort();
	gmp_wg_done(&readers_wg);
}

static uint64_t threads_total(void)
{
	gmp_stats s;
	gmp_stats_read(&s);
	return s.threads_total;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int run(void *arg)
{
	(void)arg;
	job(); /* warm up */
	for (int r = 0; r < ROUNDS; r++) {
		gmp_sleep(20 * MS);
		if (r == 0)
			threads_before = threads_total();
		idle_ns[r] = job();

		gmp_wg_add(&readers_wg, NREADERS);
		for (int i = 0; i < NREADERS; i++)
			if (gmp_go(reader, NULL) < 0)
				abort();
		/* Let them block and lose their Ps, as in steady state. */
		for (;;) {
			gmp_stats s;
			gmp_stats_read(&s);
			if (s.tasks_in_syscall == NREADERS)
				break;
			gmp_sleep(1 * MS);
		}
		gmp_sleep(20 * MS);
		if (r == 0)
			threads_after = threads_total();
		blocked_ns[r] = job();

		char bytes[NREADERS] = { 0 };
		if (write(fds[1], bytes, sizeof bytes) != NREADERS)
			abort();
		gmp_wg_wait(&readers_wg);
	}
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 64);
	njobs = a.n;
	if (pipe(fds) != 0)
		return 1;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0 || gmp_main(run, NULL) != 0)
		return 1;
	gmp_shutdown();
	qsort(idle_ns, ROUNDS, sizeof idle_ns[0], cmp64);
	qsort(blocked_ns, ROUNDS, sizeof blocked_ns[0], cmp64);
	double idle = (double)idle_ns[ROUNDS / 2] / (double)MS;
	double blocked = (double)blocked_ns[ROUNDS / 2] / (double)MS;
	printf("bench=blocked_syscall procs=%d n=%lld idle_ms=%.2f "
	       "blocked_ms=%.2f ratio=%.3f threads_before=%llu "
	       "threads_after=%llu\n",
	       a.procs, njobs, idle, blocked, blocked / idle,
	       (unsigned long long)threads_before,
	       (unsigned long long)threads_after);
	return 0;
}
