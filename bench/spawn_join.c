/* bench=spawn_join: one task spawns n tasks that each bump an atomic
 * counter; the last one to finish wakes the spawner (Go: go f() with a
 * sync.WaitGroup). ns_per_op is the time per task, spawn to completion.
 *
 * The spawn loop calls gmp_preempt_point(), as any long loop in a
 * cooperative runtime should: Go's compiler puts the same check into every
 * loop, and sysmon's 10 ms slices then let the spawned tasks run (and
 * their stacks be reused) while the loop goes on, in both runtimes. */
#include <stdatomic.h>
#include <stdio.h>

#include <gmp.h>

#include "benchutil.h"

static long long n;
static atomic_llong left;
static _Atomic(gmp_g *) waiter;
static int64_t t_start, t_end;

static void leaf(void *arg)
{
	(void)arg;
	if (atomic_fetch_sub_explicit(&left, 1, memory_order_acq_rel) == 1) {
		gmp_g *w;
		while ((w = atomic_load(&waiter)) == NULL)
			; /* the spawner is about to park */
		gmp_ready(w);
	}
}

static bool publish(gmp_g *g, void *arg)
{
	(void)arg;
	atomic_store(&waiter, g);
	return true;
}

static int spawner(void *arg)
{
	(void)arg;
	atomic_store(&left, n);
	atomic_store(&waiter, NULL);
	t_start = bench_now_ns();
	for (long long i = 0; i < n; i++) {
		gmp_go(leaf, NULL);
		gmp_preempt_point();
	}
	gmp_park(publish, NULL); /* until the last leaf readies us */
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
	gmp_main(spawner, NULL);
	gmp_shutdown();
	printf("bench=spawn_join procs=%d n=%lld ns_per_op=%.2f\n", a.procs, n,
	       (double)(t_end - t_start) / (double)n);
	return 0;
}
