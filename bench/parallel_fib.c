/* bench=parallel_fib: CPU-bound tasks spread over Ps. n tasks (default
 * 1000) each compute fib(27) by the naive double recursion; a wait group
 * tells the main task when all are done. The same work is timed at procs 1
 * and at --procs (default 2), in one process, and the line gives both and
 * the speedup (Go: the same program, runtime.GOMAXPROCS(1) then (P)).
 *
 *   parallel_fib [--procs=P] [--n=N] [--fib=K] [--preempt=0|1] [--reps=R]
 *
 * Output: bench=parallel_fib procs=<P> n=<N> total_ms=<at P>
 *         p1_ms=<at 1> speedup=<p1_ms / total_ms> fib=<K> preempt=<0|1>
 *         reps=<R>
 * (with --procs=1 only total_ms.)
 *
 * The two settings run alternately R times (default 3) and each figure is
 * the least of its R rounds. On a shared machine another tenant's work
 * only ever adds time, and one slow round of either setting would
 * otherwise decide the speedup.
 *
 * Preemption. Go stops a goroutine that has run for 10 ms at the check in
 * every function's prologue (or with a signal, since Go 1.14). libgmp is
 * cooperative: sysmon can only ask, and the task honours the request at
 * its next switch point. A long computation with no switch point in it
 * must therefore call gmp_preempt_point() where Go's compiler would have
 * put the check, and that is how this program is written: once per call
 * of the recursion, the same place as Go's prologue check. When nothing is
 * pending it costs one thread-local load and a branch (gmp.h inlines it).
 * --preempt=0 leaves
 * the calls out (unfair: a task then runs to the end once started), to
 * measure what they cost. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <gmp.h>

#include "benchutil.h"

static long long ntasks;
static int fib_k = 27;
static bool preempt = true;
static gmp_wg wg = GMP_WG_INIT;
static atomic_ullong sink; /* keeps the results alive */

static uint64_t fib_fair(int k)
{
	gmp_preempt_point();
	return k < 2 ? (uint64_t)k : fib_fair(k - 1) + fib_fair(k - 2);
}

static uint64_t fib_plain(int k)
{
	return k < 2 ? (uint64_t)k : fib_plain(k - 1) + fib_plain(k - 2);
}

static void worker(void *arg)
{
	int k = (int)(intptr_t)arg;
	uint64_t r = preempt ? fib_fair(k) : fib_plain(k);
	atomic_fetch_add_explicit(&sink, r, memory_order_relaxed);
	gmp_wg_done(&wg);
}

/* Spawns the n tasks, computing fib(k), and waits for them. */
static int64_t round_ns(int k)
{
	int64_t t0 = bench_now_ns();
	gmp_wg_add(&wg, ntasks);
	for (long long i = 0; i < ntasks; i++)
		if (gmp_go(worker, (void *)(intptr_t)k) < 0)
			abort();
	gmp_wg_wait(&wg);
	return bench_now_ns() - t0;
}

static int procs;
static long long reps = 3;
static int64_t p1_ns = INT64_MAX, pn_ns = INT64_MAX;

static int run(void *arg)
{
	(void)arg;
	round_ns(fib_k - 7); /* warm up: threads, stacks, caches */
	for (long long r = 0; r < reps; r++) {
		int64_t t;
		if (procs > 1) {
			gmp_set_maxprocs(1);
			if ((t = round_ns(fib_k)) < p1_ns)
				p1_ns = t;
			gmp_set_maxprocs(procs);
		}
		if ((t = round_ns(fib_k)) < pn_ns)
			pn_ns = t;
	}
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 1000);
	ntasks = a.n;
	procs = a.procs;
	fib_k = (int)bench_flag_ll(argc, argv, "fib", 27);
	preempt = bench_flag_ll(argc, argv, "preempt", 1) != 0;
	reps = bench_flag_ll(argc, argv, "reps", 3);
	if (fib_k < 8 || fib_k > 50) {
		fprintf(stderr, "parallel_fib: --fib must be 8..50\n");
		return 2;
	}
	if (reps < 1 || reps > 100) {
		fprintf(stderr, "parallel_fib: --reps must be 1..100\n");
		return 2;
	}
	gmp_config c = { .maxprocs = procs };
	if (gmp_init(&c) != 0 || gmp_main(run, NULL) != 0)
		return 1;
	gmp_shutdown();
	printf("bench=parallel_fib procs=%d n=%lld total_ms=%.1f", procs,
	       ntasks, (double)pn_ns / 1e6);
	if (procs > 1)
		printf(" p1_ms=%.1f speedup=%.3f", (double)p1_ns / 1e6,
		       (double)p1_ns / (double)pn_ns);
	printf(" fib=%d preempt=%d reps=%lld\n", fib_k, preempt, reps);
	return 0;
}
