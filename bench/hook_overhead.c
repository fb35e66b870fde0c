/* bench=hook_overhead: what libgmp-hook adds to a call that does not wait.
 * One task writes 64 bytes into a socket pair and reads them back, n times
 * each way:
 *
 *   hook    write() and read(), interposed by libgmp-hook (the socket is
 *           blocking, as a library's usually is: MSG_DONTWAIT attempts)
 *   gmp     gmp_write() and gmp_read(), libgmp's own calls
 *   raw     the system calls themselves (syscall(2)): the floor
 *   thread  write() and read() from a plain thread: the hooks' cost
 *           outside a task (one thread-local load, then libc's own)
 *
 * in many short alternating chunks (the order rotated) so that all four
 * see the same clock speed, cache state and neighbours' load; each figure
 * is the median over the chunks of ns per call. over_gmp_ns is the median
 * of hook minus gmp, chunk by chunk (its target: at most 20 ns); the
 * pairing cancels what drifts between chunks on a shared machine.
 * over_raw_ns likewise against raw. Linked with libgmp-hook.so and
 * libgmp.so, as a program that uses the hooks is.
 *
 * --mode=hook, gmp or raw runs that loop alone, n times, and prints
 * nothing: for valgrind's callgrind, which counts the instructions of
 * each path (run it at two n and divide the difference). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

enum { CHUNKS = 201, SIZE = 64 };

static int sv[2];
static long long chunk;
static char buf[SIZE];

enum { HOOK, GMP, RAW, THREAD, MODES };
static double ns[MODES][CHUNKS];
static double over_gmp[CHUNKS], over_raw[CHUNKS];

static void hook_loop(long long k)
{
	for (long long i = 0; i < k; i++)
		if (write(sv[1], buf, SIZE) != SIZE ||
		    read(sv[0], buf, SIZE) != SIZE)
			abort();
}

static void gmp_loop(long long k)
{
	for (long long i = 0; i < k; i++)
		if (gmp_write(sv[1], buf, SIZE) != SIZE ||
		    gmp_read(sv[0], buf, SIZE) != SIZE)
			abort();
}

static void raw_loop(long long k)
{
	for (long long i = 0; i < k; i++)
		if (syscall(SYS_write, sv[1], buf, SIZE) != SIZE ||
		    syscall(SYS_read, sv[0], buf, SIZE) != SIZE)
			abort();
}

static int c_now;

static void *thread_chunk(void *arg)
{
	(void)arg;
	int64_t t0 = bench_now_ns();
	hook_loop(chunk);
	ns[THREAD][c_now] = (double)(bench_now_ns() - t0) / (2.0 * chunk);
	return NULL;
}

static int run_one(void *arg)
{
	void (*loop)(long long) = (void (*)(long long))arg;
	loop(chunk * CHUNKS);
	return 0;
}

static int run(void *arg)
{
	(void)arg;
	/* warm up every path */
	hook_loop(chunk / 10 + 1);
	gmp_loop(chunk / 10 + 1);
	raw_loop(chunk / 10 + 1);
	for (int c = 0; c < CHUNKS; c++) {
		void (*loops[3])(long long) = { hook_loop, gmp_loop, raw_loop };
		for (int k = 0; k < 3; k++) {
			int m = (k + c) % 3; /* rotate which goes first */
			int64_t t0 = bench_now_ns();
			loops[m](chunk);
			ns[m][c] =
				(double)(bench_now_ns() - t0) / (2.0 * chunk);
		}
		over_gmp[c] = ns[HOOK][c] - ns[GMP][c];
		over_raw[c] = ns[HOOK][c] - ns[RAW][c];
		/* The plain thread's turn, while this task waits for it. */
		c_now = c;
		pthread_t t;
		gmp_enter_syscall_block();
		if (pthread_create(&t, NULL, thread_chunk, NULL) != 0 ||
		    pthread_join(t, NULL) != 0)
			abort();
		gmp_exit_syscall();
	}
	return 0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, CHUNKS, sizeof *v, cmp);
	return v[CHUNKS / 2];
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 2000000);
	chunk = a.n / CHUNKS > 0 ? a.n / CHUNKS : 1;
	if (!gmp_hook_active()) {
		fprintf(stderr, "hook_overhead: libgmp-hook is not active\n");
		return 1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	gmp_config cfg = { .maxprocs = a.procs };
	if (gmp_init(&cfg) != 0)
		return 1;
	const char *mode = bench_flag(argc, argv, "mode");
	if (mode) {
		void (*loop)(long long) = !strcmp(mode, "hook")  ? hook_loop
					  : !strcmp(mode, "gmp") ? gmp_loop
					  : !strcmp(mode, "raw") ? raw_loop
								 : NULL;
		if (!loop) {
			fprintf(stderr, "--mode: hook, gmp or raw\n");
			return 2;
		}
		return gmp_main(run_one, (void *)loop) != 0;
	}
	if (gmp_main(run, NULL) != 0)
		return 1;
	double m[MODES];
	for (int k = 0; k < MODES; k++)
		m[k] = median(ns[k]);
	printf("bench=hook_overhead procs=%d n=%lld ns_hook=%.1f ns_gmp=%.1f "
	       "ns_raw=%.1f ns_thread=%.1f over_gmp_ns=%.1f over_raw_ns=%.1f\n",
	       a.procs, chunk * CHUNKS, m[HOOK], m[GMP], m[RAW], m[THREAD],
	       median(over_gmp), median(over_raw));
	gmp_shutdown();
	return 0;
}
