/* bench=preempt_contention: tasks that reach a switch point often, on a
 * machine whose CPUs other processes want as well (design.md §37.7).
 *
 *   preempt_contention [--procs=P] [--n=N] [--mode=chunks|fib]
 *                      [--work_us=W] [--ms=MS] [--fib=K] [--busy=B]
 *
 * At maxprocs P (default: the CPUs this process may use), B processes
 * (default: as many as the CPUs) spin beside it: forked before the
 * runtime starts, killed at the end. The work:
 *
 *   chunks  N tasks (default 4) each do chunks of W µs of CPU work
 *           (default 30; an LCG loop calibrated before the spinners
 *           start) with gmp_preempt_point() between two chunks, MS ms of
 *           work (default 2000) on P CPUs in all;
 *   fib     N tasks (default 2000) each compute fib(K) (default 27) by
 *           the double recursion, with gmp_preempt_point() at each call
 *           of fib(k) for k >= 16 (every few µs; parallel_fib calls it at
 *           every call, which would make the count below the work).
 *
 * Each task counts itself running (an atomic counter) from just before a
 * stretch of its own code to just after it, switch point excluded; a
 * task the kernel takes off its CPU in the middle stays counted, as it
 * should. A task reads Threads: from /proc/self/status every 5 ms (as
 * the Go twin's goroutine does: a thread of its own would be one more
 * thread wanting a CPU beside the work, which Go's sampler is not).
 *
 * The busy neighbours are the same program on both sides, a shell's
 * empty loop (sh -c 'while :; do :; done'), so that each side competes
 * with the same thing (a copy of Go's own binary spinning runs a sysmon
 * that signals it every 10 ms, a forked C loop does not).
 *
 * Reported: most_running (the most tasks running their own code at one
 * instant) and over_procs (how far that exceeds P: 0 is the target),
 * detaches (gmp_stats), threads_peak (the process's threads, the main
 * thread included), cpu_share (the process's CPU time
 * over the work's wall time, in CPUs) and work_ms (the work's wall
 * time). Go: bench/go/preempt_contention, the same program; Go preempts a
 * goroutine anywhere, so its count may include one stopped mid-stretch. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

static long long ntasks, chunks, iters, fib_k;
static bool fib_mode;
static atomic_int running, most;
static atomic_ullong sink;
static gmp_wg wg = GMP_WG_INIT;

static uint64_t lcg(uint64_t x, long long n)
{
	for (long long i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static inline void enter(void)
{
	int r = atomic_fetch_add_explicit(&running, 1, memory_order_relaxed) +
		1;
	int m = atomic_load_explicit(&most, memory_order_relaxed);
	while (r > m && !atomic_compare_exchange_weak_explicit(
				&most, &m, r, memory_order_relaxed,
				memory_order_relaxed))
		;
}

static inline void leave(void)
{
	atomic_fetch_sub_explicit(&running, 1, memory_order_relaxed);
}

static void chunk_worker(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg;
	for (long long i = 0; i < chunks; i++) {
		enter();
		x = lcg(x, iters);
		leave();
		gmp_preempt_point();
	}
	atomic_fetch_add_explicit(&sink, x, memory_order_relaxed);
	gmp_wg_done(&wg);
}

static uint64_t fib(int k)
{
	if (k >= 16) {
		leave();
		gmp_preempt_point();
		enter();
	}
	return k < 2 ? (uint64_t)k : fib(k - 1) + fib(k - 2);
}

static void fib_worker(void *arg)
{
	(void)arg;
	enter();
	uint64_t r = fib((int)fib_k);
	leave();
	atomic_fetch_add_explicit(&sink, r, memory_order_relaxed);
	gmp_wg_done(&wg);
}

/* ---- the threads sampler ------------------------------------------------------ */

static atomic_int sampling = 1;
static gmp_wg sampled = GMP_WG_INIT;
static int threads_peak;

static int threads_now(void)
{
	char buf[4096];
	FILE *f = fopen("/proc/self/status", "r");
	int n = -1;
	while (f && fgets(buf, sizeof buf, f))
		if (!strncmp(buf, "Threads:", 8))
			n = atoi(buf + 8);
	if (f)
		fclose(f);
	return n;
}

static void sampler(void *arg)
{
	(void)arg;
	while (atomic_load(&sampling)) {
		int n = threads_now();
		if (n > threads_peak)
			threads_peak = n;
		gmp_sleep(5 * 1000 * 1000);
	}
	gmp_wg_done(&sampled);
}

static int64_t work_ns, work_cpu_ns;
static int64_t cpu_ns(void);

static int run(void *arg)
{
	(void)arg;
	int64_t cpu0 = cpu_ns();
	int64_t t0 = bench_now_ns();
	gmp_wg_add(&wg, ntasks);
	gmp_wg_add(&sampled, 1);
	if (gmp_go(sampler, NULL) < 0)
		abort();
	for (long long i = 0; i < ntasks; i++)
		if (gmp_go(fib_mode ? fib_worker : chunk_worker,
			   (void *)(uintptr_t)(i + 1)) < 0)
			abort();
	gmp_wg_wait(&wg);
	work_ns = bench_now_ns() - t0;
	work_cpu_ns = cpu_ns() - cpu0;
	atomic_store(&sampling, 0);
	gmp_wg_wait(&sampled);
	return 0;
}

/* ---- the machine ------------------------------------------------------------ */

static int cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return 1;
	return CPU_COUNT(&set);
}

static int64_t cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* LCG steps per µs of this thread's CPU time: the best of three runs of
 * about 20 ms each. */
static double calibrate(void)
{
	double best = 0;
	long long n = 100000;
	uint64_t x = 1;
	for (int r = 0; r < 3; r++) {
		for (;;) {
			int64_t t0 = thread_cpu_ns();
			x = lcg(x, n);
			int64_t t = thread_cpu_ns() - t0;
			if (t >= 20 * 1000 * 1000) {
				double per_us = (double)n / ((double)t / 1000);
				if (per_us > best)
					best = per_us;
				break;
			}
			n *= 2;
		}
	}
	atomic_fetch_add(&sink, x);
	return best;
}

int main(int argc, char **argv)
{
	int ncpu = cpus();
	const char *mode = bench_flag(argc, argv, "mode");
	fib_mode = mode && !strcmp(mode, "fib");
	if (mode && !fib_mode && strcmp(mode, "chunks")) {
		fprintf(stderr,
			"preempt_contention: --mode is chunks or fib\n");
		return 2;
	}
	bench_args a = bench_parse(argc, argv, ncpu, fib_mode ? 2000 : 4);
	ntasks = a.n;
	long long work_us = bench_flag_ll(argc, argv, "work_us", 30);
	long long ms = bench_flag_ll(argc, argv, "ms", 2000);
	fib_k = bench_flag_ll(argc, argv, "fib", 27);
	long long busy = bench_flag_ll(argc, argv, "busy", ncpu);
	if (work_us < 1 || fib_k < 16 || fib_k > 40) {
		fprintf(stderr, "preempt_contention: bad --n, --work_us or "
				"--fib\n");
		return 2;
	}
	iters = (long long)(calibrate() * (double)work_us);
	chunks = ms * 1000 * a.procs / (ntasks * work_us);
	if (chunks < 1)
		chunks = 1;

	pid_t *spin = calloc((size_t)busy + 1, sizeof *spin);
	for (long long i = 0; i < busy; i++) {
		spin[i] = fork();
		if (spin[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			execl("/bin/sh", "sh", "-c", "while :; do :; done",
			      (char *)NULL);
			_exit(127);
		}
	}
	usleep(100 * 1000); /* the spinners get going */

	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0 || gmp_main(run, NULL) != 0)
		return 1;
	gmp_stats s;
	gmp_stats_read(&s);
	gmp_shutdown();
	for (long long i = 0; i < busy; i++) {
		kill(spin[i], SIGKILL);
		waitpid(spin[i], NULL, 0);
	}
	int m = atomic_load(&most);
	printf("bench=preempt_contention procs=%d n=%lld mode=%s busy=%lld "
	       "most_running=%d over_procs=%d detaches=%llu threads_peak=%d "
	       "cpu_share=%.3f work_ms=%.1f",
	       a.procs, ntasks, fib_mode ? "fib" : "chunks", busy, m,
	       m > a.procs ? m - a.procs : 0, (unsigned long long)s.detaches,
	       threads_peak, (double)work_cpu_ns / (double)work_ns,
	       (double)work_ns / 1e6);
	if (fib_mode)
		printf(" fib=%lld\n", fib_k);
	else
		printf(" work_us=%lld chunks=%lld\n", work_us, chunks);
	return 0;
}
