/* blocked_syscalls: tasks blocked in system calls do not stop the others.
 *
 * With two Ps (maxprocs=2), ten tasks each block in read() on an empty
 * pipe, a blocking one that the network poller never sees, so each read
 * really sleeps in the kernel and holds its OS thread. Each read is wrapped
 * in gmp_enter_syscall()/gmp_exit_syscall(): while a task sits in the
 * kernel, sysmon takes its P away and hands it to another thread, so the
 * program goes on running (here: a ticker task, and gmp_main's own task,
 * which sleeps 100 ms and wakes up on time). The price is threads: each
 * blocked read holds one, so the thread count rises by about ten, far
 * above maxprocs; when the reads return, those threads park and are
 * reused by the next burst.
 *
 * This is the Go program of "GOMAXPROCS limits P" (the Go book's 9.5.3)
 * in C; Go prints "at start: 5 threads ... later: 13 threads". Expected
 * output here (a count may differ by one with timing):
 *
 *   at start: 3 threads, 0 tasks in system calls
 *   later: 14 threads, 10 tasks in system calls
 *   meanwhile the ticker ticked 90 times and main slept 100 ms
 *   released: 10 reads returned; 14 threads (idle ones parked for reuse), 0 tasks in system calls
 *
 * At start: sysmon, the thread running main's task, and a second thread
 * that woke up for the idle P (threads are made on demand; it finds no
 * work and parks). Later: the same plus one thread per blocked read, plus
 * one spare that a handoff started and that is parked now: 3 + 10 + 1.
 * The ticker counts 1 ms sleeps, so "about 90" (each sleep lasts a little
 * over 1 ms) shows that it never stopped. Afterwards the threads stay,
 * parked, for the next burst; with GMP_IDLE_THREAD_TIMEOUT=S those beyond
 * maxprocs exit after S idle seconds (Go keeps them forever).
 *
 * Build and run:  cmake -S . -B build && cmake --build build && build/examples/blocked_syscalls
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

static void stats_line(uint64_t *threads, uint64_t *in_syscall)
{
	gmp_stats s;
	gmp_stats_read(&s);
	*threads = s.threads_total;       /* the seed's /sched/threads/total */
	*in_syscall = s.tasks_in_syscall; /* /sched/goroutines/not-in-go */
}

static void reader(void *arg)
{
	(void)arg;
	char c;
	gmp_enter_syscall();
	ssize_t n = read(fds[0], &c, 1); /* empty pipe: blocks in the kernel */
	gmp_exit_syscall();
	if (n == 1)
		atomic_fetch_add(&reads_ok, 1);
	gmp_wg_done(&readers);
}

/* Proof of life: counts milliseconds while the readers are blocked. */
static void ticker(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_ticking)) {
		gmp_sleep(1 * MS);
		atomic_fetch_add(&ticks, 1);
	}
	gmp_wg_done(&ticker_done);
}

static int run(void *arg)
{
	(void)arg;
	uint64_t threads, in_syscall;
	stats_line(&threads, &in_syscall);
	printf("at start: %" PRIu64 " threads, %" PRIu64
	       " tasks in system calls\n",
	       threads, in_syscall);

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
	gmp_sleep(100 * MS);
	int64_t slept = gmp_nanotime() - t0;
	stats_line(&threads, &in_syscall);
	printf("later: %" PRIu64 " threads, %" PRIu64
	       " tasks in system calls\n",
	       threads, in_syscall);
	printf("meanwhile the ticker ticked %ld times and main slept %" PRId64
	       " ms\n",
	       atomic_load(&ticks), slept / MS);

	/* One byte per reader releases them all. */
	char bytes[NREADERS] = { 0 };
	if (write(fds[1], bytes, sizeof bytes) != (ssize_t)sizeof bytes) {
		perror("write");
		return 1;
	}
	gmp_wg_wait(&readers);
	atomic_store(&stop_ticking, 1);
	gmp_wg_wait(&ticker_done);
	stats_line(&threads, &in_syscall);
	printf("released: %d reads returned; %" PRIu64
	       " threads (idle ones parked for reuse), %" PRIu64
	       " tasks in system calls\n",
	       atomic_load(&reads_ok), threads, in_syscall);
	close(fds[0]);
	close(fds[1]);
	return atomic_load(&reads_ok) == NREADERS ? 0 : 1;
}

int main(void)
{
	gmp_config cfg = { .maxprocs = 2 };
	int rc = gmp_init(&cfg);
	if (rc == 0)
		rc = gmp_main(run, NULL);
	if (rc < 0) {
		fprintf(stderr, "blocked_syscalls: error %d\n", rc);
		return 1;
	}
	gmp_shutdown();
	return rc;
}
