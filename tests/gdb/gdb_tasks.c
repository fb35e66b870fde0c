/* The program the gdb test (gdb_test.sh) debugs: tasks parked in known
 * places, then a stop at gdb_checkpoint() where gdb looks at them.
 *
 *   chan_waiter    parks in gmp_chan_recv, called from wait_on_chan()
 *   mutex_waiter   parks in gmp_mutex_lock (the mutex is held by main)
 *   wg_waiter      parks in gmp_wg_wait
 *   spinner        runs (on an M of its own) until told to stop
 *
 * With the argument "detached": one P, the chan_waiter, and the spinner,
 * which then holds the only P past its slice, so that sysmon detaches the
 * P from it (design.md §13); the stop comes once it has.
 *
 * Run by itself it finishes cleanly: after the checkpoint main releases
 * every task and shuts the runtime down. Built with -g, as the extension
 * needs debug information.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gmp.h>

void wait_on_chan(gmp_chan *c);
void gdb_checkpoint(void);

/* Read by gdb (eval "gmp-bt %d", id_chan_waiter). */
volatile int64_t id_chan_waiter, id_mutex_waiter, id_wg_waiter, id_spinner;

static gmp_chan *chan;
static gmp_mutex mu = GMP_MUTEX_INIT;
static gmp_wg wg = GMP_WG_INIT;
static atomic_int stop_spinning, spinning;

__attribute__((noinline)) void wait_on_chan(gmp_chan *c)
{
	int v;
	gmp_chan_recv(c, &v);
	__asm__ volatile("" ::: "memory"); /* keep this frame: no tail call */
}

static void chan_waiter(void *arg)
{
	(void)arg;
	wait_on_chan(chan);
}

static void mutex_waiter(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&mu);
	gmp_mutex_unlock(&mu);
}

static void wg_waiter(void *arg)
{
	(void)arg;
	gmp_wg_wait(&wg);
}

static void spinner(void *arg)
{
	(void)arg;
	atomic_store(&spinning, 1);
	/* No switch point in the loop: sysmon's request to yield after 10 ms
	 * goes unheard, so gdb never catches the spinner between its queue
	 * and its thread (the test expects it running). Nothing else waits
	 * for this P. It naps in plain nanosleep (still a running task to
	 * the runtime) rather than burning its CPU: under qemu-user, a
	 * guest thread in a tight loop makes the gdb stub slow to stop every
	 * thread, and the session then times out now and then. */
	while (!atomic_load(&stop_spinning)) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* gdb stops here, with every task where the comment at the top says. */
__attribute__((noinline)) void gdb_checkpoint(void)
{
	__asm__ volatile("" ::: "memory");
}

static void nap(void)
{
	struct timespec ts = { 0, 1000000 };
	nanosleep(&ts, NULL);
}

static int detached_main(void)
{
	gmp_config cfg = { .maxprocs = 1 };
	if (gmp_init(&cfg) != 0)
		return 1;
	chan = gmp_chan_new(sizeof(int), 0);
	id_chan_waiter = gmp_go(chan_waiter, NULL);
	id_spinner = gmp_go(spinner, NULL);
	for (int i = 0;; i++) {
		gmp_stats st;
		gmp_stats_read(&st);
		if (st.tasks_waiting == 1 && st.detaches >= 1 &&
		    atomic_load(&spinning))
			break;
		if (i == 20000) {
			fprintf(stderr, "gdb_tasks: the spinner was never "
					"detached\n");
			return 1;
		}
		nap();
	}
	gdb_checkpoint();

	gmp_chan_close(chan);
	atomic_store(&stop_spinning, 1);
	gmp_shutdown();
	gmp_chan_free(chan);
	printf("gdb_tasks: done\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "detached"))
		return detached_main();
	gmp_config cfg = { .maxprocs = 2 };
	if (gmp_init(&cfg) != 0)
		return 1;
	chan = gmp_chan_new(sizeof(int), 0);
	gmp_mutex_lock(&mu);
	gmp_wg_add(&wg, 1);
	id_chan_waiter = gmp_go(chan_waiter, NULL);
	id_mutex_waiter = gmp_go(mutex_waiter, NULL);
	id_wg_waiter = gmp_go(wg_waiter, NULL);
	id_spinner = gmp_go(spinner, NULL);
	for (;;) {
		gmp_stats st;
		gmp_stats_read(&st);
		if (st.tasks_waiting == 3 && atomic_load(&spinning))
			break;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	gdb_checkpoint();

	gmp_chan_close(chan);
	gmp_mutex_unlock(&mu);
	gmp_wg_done(&wg);
	atomic_store(&stop_spinning, 1);
	gmp_shutdown();
	gmp_chan_free(chan);
	printf("gdb_tasks: done\n");
	return 0;
}
