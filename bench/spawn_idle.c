/* bench=spawn_idle: spawn n tasks (default 1,000,000) that each park at
 * once, on nothing: gmp_park with an unlock function that files the task
 * in a table and counts it, and no waker until the end. total_ms is the
 * time from the first spawn until the last task is off its stack and
 * parked; loop_ms is the spawn loop alone. Afterwards the main task
 * readies them all and they end. (Go: the same with goroutines blocked in
 * <-gate, released by close(gate).)
 *
 * What it measures: creating a task (a G from the free list or a new one,
 * a stack reserved and its first page touched), queueing it, running it
 * once and parking it, with every one of them still alive at the end, so
 * nothing is reused: the cost of a million live, idle tasks.
 *
 * The spawn loop calls gmp_preempt_point(), as any long loop in a
 * cooperative runtime should (Go checks in every loop), so the tasks start
 * and park while the loop goes on, in both runtimes. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <gmp.h>

#include "benchutil.h"

static long long n;
static gmp_g **table;        /* table[i]: task i once it has parked */
static atomic_llong nparked; /* tasks that have parked */
static gmp_g *main_g;        /* the spawner */

/* Who moves first at the end: the last task to park, or the spawner
 * going to sleep. Each CASes from OPEN; the loser of the race knows the
 * other is there. */
enum { OPEN, ALL_PARKED, MAIN_PARKED };
static atomic_int state;

static bool file_task(gmp_g *g, void *arg)
{
	long long i = (long long)(intptr_t)arg;
	table[i] = g; /* read by the spawner after nparked reaches n */
	if (atomic_fetch_add_explicit(&nparked, 1, memory_order_acq_rel) + 1 ==
	    n) {
		int s = OPEN;
		if (!atomic_compare_exchange_strong(&state, &s, ALL_PARKED))
			gmp_ready(main_g); /* s was MAIN_PARKED */
	}
	return true;
}

static void idler(void *arg)
{
	gmp_park(file_task, arg);
}

static bool main_sleep(gmp_g *g, void *arg)
{
	(void)g;
	(void)arg;
	int s = OPEN;
	/* false: every task has parked already, do not sleep. */
	return atomic_compare_exchange_strong(&state, &s, MAIN_PARKED);
}

static int64_t t_start, t_loop, t_end;

static int spawner(void *arg)
{
	(void)arg;
	main_g = gmp_current();
	t_start = bench_now_ns();
	for (long long i = 0; i < n; i++) {
		if (gmp_go(idler, (void *)(intptr_t)i) < 0)
			abort();
		gmp_preempt_point();
	}
	t_loop = bench_now_ns();
	gmp_park(main_sleep, NULL); /* until the last one has parked */
	t_end = bench_now_ns();
	for (long long i = 0; i < n; i++)
		gmp_ready(table[i]);
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 1000000);
	n = a.n;
	table = calloc((size_t)n, sizeof *table);
	gmp_config c = { .maxprocs = a.procs };
	if (!table || gmp_init(&c) != 0 || gmp_main(spawner, NULL) != 0)
		return 1;
	gmp_shutdown(); /* every task has been readied and has ended */
	free(table);
	printf("bench=spawn_idle procs=%d n=%lld total_ms=%.1f loop_ms=%.1f\n",
	       a.procs, n, (double)(t_end - t_start) / 1e6,
	       (double)(t_loop - t_start) / 1e6);
	return 0;
}
