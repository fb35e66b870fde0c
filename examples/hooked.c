/* hooked: plain blocking code in tasks, with libgmp-hook.
 *
 * The same ten readers as blocked_syscalls.c, but written as code that
 * knows nothing of libgmp: a bare read() on an empty blocking pipe, and a
 * ticker that calls usleep(). Linked with libgmp-hook (or run with
 * LD_PRELOAD=.../libgmp-hook.so), those calls park their tasks instead of
 * holding threads: the thread count stays where it started, and the
 * ticker and main's own sleep keep time. Expected output (a count may
 * differ by one with timing):
 *
 *   hooks: active
 *   at start: 3 threads
 *   later: 3 threads, 10 readers parked
 *   meanwhile the ticker ticked 90 times and main slept 100 ms
 *   released: 10 reads returned; 3 threads
 *
 * Without the hooks (GMP_HOOK=off, or not linked) each read blocks its
 * thread with its P, the ticker stalls until sysmon takes the Ps away, and
 * the thread count climbs as in blocked_syscalls.c. The program says
 * which it ran with and exits with status 2 without the hooks.
 *
 * Build and run:  cmake -S . -B build && cmake --build build && build/examples/hooked
 * By hand:        cc hooked.c -Lbuild -Wl,--no-as-needed -lgmp-hook -lgmp
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include <gmp.h>

enum { NREADERS = 10 };
static const int64_t MS = 1000000;

static int fds[2]; /* a blocking pipe: read end, write end */
static gmp_wg readers = GMP_WG_INIT;
static gmp_wg ticker_done = GMP_WG_INIT;
static atomic_int stop_ticking;
static atomic_long ticks;
static atomic_int reads_ok;

static uint64_t threads(void)
{
	gmp_stats s;
	gmp_stats_read(&s);
	return s.threads_total;
}

/* Code that could be any library's: it blocks, as it always did. */
static void reader(void *arg)
{
	(void)arg;
	char c;
	if (read(fds[0], &c, 1) == 1)
		atomic_fetch_add(&reads_ok, 1);
	gmp_wg_done(&readers);
}

static void ticker(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_ticking)) {
		usleep(1000);
		atomic_fetch_add(&ticks, 1);
	}
	gmp_wg_done(&ticker_done);
}

static int run(void *arg)
{
	(void)arg;
	printf("at start: %" PRIu64 " threads\n", threads());
	if (pipe(fds) != 0) {
		perror("pipe");
		return 1;
	}
	gmp_wg_add(&ticker_done, 1);
	if (gmp_go(ticker, NULL) < 0)
		return 1;
	gmp_wg_add(&readers, NREADERS);
	for (int i = 0; i < NREADERS; i++)
		if (gmp_go(reader, NULL) < 0)
			return 1;

	int64_t t0 = gmp_nanotime();
	usleep(100 * 1000);
	int64_t slept = gmp_nanotime() - t0;
	gmp_stats s;
	gmp_stats_read(&s);
	/* The ticker is parked too, now and then: count it out. */
	uint64_t parked = s.tasks_waiting >= NREADERS ? NREADERS
						      : s.tasks_waiting;
	printf("later: %" PRIu64 " threads, %" PRIu64 " readers parked\n",
	       s.threads_total, parked);
	printf("meanwhile the ticker ticked %ld times and main slept %" PRId64
	       " ms\n",
	       atomic_load(&ticks), slept / MS);

	char bytes[NREADERS] = { 0 };
	if (write(fds[1], bytes, sizeof bytes) != (ssize_t)sizeof bytes) {
		perror("write");
		return 1;
	}
	gmp_wg_wait(&readers);
	atomic_store(&stop_ticking, 1);
	gmp_wg_wait(&ticker_done);
	printf("released: %d reads returned; %" PRIu64 " threads\n",
	       atomic_load(&reads_ok), threads());
	close(fds[0]);
	close(fds[1]);
	return atomic_load(&reads_ok) == NREADERS ? 0 : 1;
}

int main(void)
{
	printf("hooks: %s\n", gmp_hook_active() ? "active" : "not active");
	gmp_config cfg = { .maxprocs = 2 };
	int rc = gmp_init(&cfg);
	if (rc == 0)
		rc = gmp_main(run, NULL);
	if (rc < 0) {
		fprintf(stderr, "hooked: error %d\n", rc);
		return 1;
	}
	gmp_shutdown();
	if (rc == 0 && !gmp_hook_active())
		return 2;
	return rc;
}
