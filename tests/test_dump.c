/* The runtime's dumps (src/dump.c): gmp_dump, the GMP_DEBUG=sigquit=1
 * handler, and the GMP_DEBUG=scheddetail=1 lines. */
#include "gmp_test.h"

#include "export_test.h"

static gmp_chan *chan;
static gmp_mutex mu = GMP_MUTEX_INIT;
static gmp_wg wg = GMP_WG_INIT;
static atomic_int stop_spin, spinning;

static void chan_waiter(void *arg)
{
	(void)arg;
	gmp_chan_recv(chan, NULL);
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

static void select_waiter(void *arg)
{
	(void)arg;
	gmp_select_case c = { .chan = chan, .op = GMP_SELECT_RECV };
	gmp_select(&c, 1, 60 * (int64_t)1000000000);
}

static void spinner(void *arg)
{
	(void)arg;
	atomic_store(&spinning, 1);
	while (!atomic_load(&stop_spin))
		gmp_preempt_point();
}

struct ids {
	int64_t chan, mutex, wg, select, spin;
};

/* Starts the runtime with one task parked in each way and one running,
 * and waits until they are. */
static struct ids start_tasks(void)
{
	struct ids id;
	tu_init(2);
	chan = gmp_chan_new(0, 0);
	gmp_mutex_lock(&mu);
	gmp_wg_add(&wg, 1);
	atomic_store(&stop_spin, 0);
	atomic_store(&spinning, 0);
	id.chan = gmp_go(chan_waiter, NULL);
	id.mutex = gmp_go(mutex_waiter, NULL);
	id.wg = gmp_go(wg_waiter, NULL);
	id.select = gmp_go(select_waiter, NULL);
	id.spin = gmp_go(spinner, NULL);
	TU_WAIT_FOR(tu_stats().tasks_waiting == 4 && atomic_load(&spinning));
	return id;
}

static void stop_tasks(void)
{
	gmp_chan_close(chan);
	gmp_mutex_unlock(&mu);
	gmp_wg_done(&wg);
	atomic_store(&stop_spin, 1);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(chan);
}

/* The line of task `id` in text, or fails. */
static void expect_line(const char *text, int64_t id, const char *state,
			void (*fn)(void *))
{
	char want[256];
	snprintf(want, sizeof want, "task %lld [%s]: entry=%#lx", (long long)id,
		 state, (unsigned long)(uintptr_t)fn);
	if (!strstr(text, want)) {
		fprintf(stderr, "no \"%s\" in:\n%s", want, text);
		fail();
	}
}

static void test_dump_lists_tasks(void **state)
{
	(void)state;
	struct ids id = start_tasks();
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	int n = gmp_dump(f);
	fclose(f);
	printf("%s", text);
	assert_int_equal(n, 5);
	int lines = 0;
	for (char *p = text; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 5);
	expect_line(text, id.chan, "waiting, chan receive", chan_waiter);
	expect_line(text, id.mutex, "waiting, mutex", mutex_waiter);
	expect_line(text, id.wg, "waiting, wait group", wg_waiter);
	expect_line(text, id.select, "waiting, select", select_waiter);
	expect_line(text, id.spin, "running", spinner);
	/* The running task names its M, the parked ones the last one. */
	char *spin = strstr(text, "entry=");
	assert_non_null(spin);
	assert_non_null(strstr(text, " m="));
	assert_non_null(strstr(text, " lastm="));
	free(text);
	stop_tasks();
}

static int64_t from_task_n;
static char from_task_text[4096];

static void dump_from_task(void *arg)
{
	(void)arg;
	FILE *f = fmemopen(from_task_text, sizeof from_task_text, "w");
	T_ASSERT(f);
	from_task_n = gmp_dump(f);
	fclose(f);
}

static void test_dump_from_task(void **state)
{
	(void)state;
	tu_init(2);
	int64_t self;
	assert_true((self = gmp_go(dump_from_task, NULL)) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	printf("%s", from_task_text);
	assert_int_equal(from_task_n, 1);
	char want[64];
	snprintf(want, sizeof want, "task %lld [running]: ", (long long)self);
	assert_non_null(strstr(from_task_text, want));
}

static void test_dump_errors(void **state)
{
	(void)state;
	assert_int_equal(gmp_dump(NULL), -EINVAL);
	/* Not running: nothing to list. */
	FILE *f = fopen("/dev/null", "w");
	assert_non_null(f);
	assert_int_equal(gmp_dump(f), 0);
	fclose(f);
	/* A write that fails. */
	start_tasks();
	f = fopen("/dev/full", "w");
	if (f) {
		assert_int_equal(gmp_dump(f), -EIO);
		fclose(f);
	}
	stop_tasks();
}

/* ---- SIGQUIT ---------------------------------------------------------------- */

static struct ids child_ids;

static void sigquit_child(void *arg)
{
	(void)arg;
	setenv("GMP_DEBUG", "sigquit=1", 1);
	child_ids = start_tasks();
	/* The ids go before the dump, so the parent can look for them. */
	dprintf(2, "ids %lld %lld %lld %lld %lld\n", (long long)child_ids.chan,
		(long long)child_ids.mutex, (long long)child_ids.wg,
		(long long)child_ids.select, (long long)child_ids.spin);
	kill(getpid(), SIGQUIT);
	sleep(5); /* the handler exits, wherever it runs */
	_exit(0);
}

static void test_dump_sigquit(void **state)
{
	(void)state;
	static char err[65536];
	int status = tu_run_child(sigquit_child, NULL, err, sizeof err);
	printf("%s", err);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 2);
	struct ids id;
	long long a, b, c, d, e;
	/* Lines the runtime prints at gmp_init under GMP_DEBUG (why file I/O
	 * takes the system call path, under qemu-user) may come before. */
	char *ids = strstr(err, "ids ");
	assert_non_null(ids);
	assert_int_equal(sscanf(ids, "ids %lld %lld %lld %lld %lld", &a, &b, &c,
				&d, &e),
			 5);
	id = (struct ids){ a, b, c, d, e };
	char *dump = strstr(err, "SIGQUIT: quit\n");
	assert_non_null(dump);
	expect_line(dump, id.chan, "waiting, chan receive", chan_waiter);
	expect_line(dump, id.mutex, "waiting, mutex", mutex_waiter);
	expect_line(dump, id.wg, "waiting, wait group", wg_waiter);
	expect_line(dump, id.select, "waiting, select", select_waiter);
	expect_line(dump, id.spin, "running", spinner);
}

static volatile sig_atomic_t own_handler_ran;

static void own_handler(int sig)
{
	(void)sig;
	own_handler_ran = 1;
}

/* gmp_shutdown puts back the handler it found; without sigquit=1 none is
 * installed at all. */
static void test_dump_sigquit_restored(void **state)
{
	(void)state;
	struct sigaction own = { 0 }, cur;
	own.sa_handler = own_handler;
	assert_int_equal(sigaction(SIGQUIT, &own, NULL), 0);

	unsetenv("GMP_DEBUG");
	tu_init(2);
	assert_int_equal(sigaction(SIGQUIT, NULL, &cur), 0);
	assert_ptr_equal(cur.sa_handler, own_handler);
	assert_int_equal(gmp_shutdown(), 0);

	setenv("GMP_DEBUG", "sigquit=1", 1);
	tu_init(2);
	unsetenv("GMP_DEBUG");
	assert_int_equal(sigaction(SIGQUIT, NULL, &cur), 0);
	assert_ptr_not_equal(cur.sa_handler, own_handler);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(sigaction(SIGQUIT, NULL, &cur), 0);
	assert_ptr_equal(cur.sa_handler, own_handler);
	raise(SIGQUIT);
	assert_int_equal(own_handler_ran, 1);
	signal(SIGQUIT, SIG_DFL);
}

/* ---- scheddetail ---------------------------------------------------------------- */

static void scheddetail_child(void *arg)
{
	(void)arg;
	setenv("GMP_DEBUG", "schedtrace=20,scheddetail=1", 1);
	struct ids id = start_tasks();
	dprintf(2, "ids %lld %lld\n", (long long)id.chan, (long long)id.spin);
	usleep(200 * 1000);
	stop_tasks();
	unsetenv("GMP_DEBUG");
}

static void test_dump_scheddetail(void **state)
{
	(void)state;
	static char err[1 << 20];
	int status = tu_run_child(scheddetail_child, NULL, err, sizeof err);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		printf("child status %#x, stderr:\n%s\n", status, err);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	long long chan_id, spin_id;
	char *ids = strstr(err, "ids ");
	assert_non_null(ids);
	assert_int_equal(sscanf(ids, "ids %lld %lld", &chan_id, &spin_id), 2);
	/* A trace after the ids while the tasks are still there (they stay
	 * for 200 ms, about ten traces; later traces may see them end) that
	 * shows the waiter waiting and the spinner running. Not necessarily
	 * the first: sysmon preempts the spinner every 10 ms, in the same
	 * round as it traces, and a trace may catch it queued for an
	 * instant (status=runnable). */
	char want_wait[128], want_run[128];
	snprintf(want_wait, sizeof want_wait,
		 "\n  G%lld: status=waiting(chan receive) m=-1", chan_id);
	snprintf(want_run, sizeof want_run,
		 "\n  G%lld: status=running() m=", spin_id);
	int traces = 0;
	bool found = false;
	for (char *t = strstr(ids, "SCHED "); t && !found;) {
		char *end = strstr(t + 1, "SCHED ");
		if (end)
			*end = 0;
		traces++;
		if (strstr(t, "gomaxprocs=2 ") &&
		    strstr(t, "\n  P0: status=") &&
		    strstr(t, "\n  P1: status=") && strstr(t, "\n  M") &&
		    strstr(t, want_wait) && strstr(t, want_run)) {
			printf("%s", t);
			found = true;
		}
		if (end)
			*end = 'S';
		t = end;
	}
	if (!found)
		printf("no trace of %d shows both; all of them:\n%s", traces,
		       ids);
	assert_true(traces >= 1);
	assert_true(found);
}

GMP_TEST_MAIN(cmocka_unit_test(test_dump_lists_tasks),
	      cmocka_unit_test(test_dump_from_task),
	      cmocka_unit_test(test_dump_errors),
	      cmocka_unit_test(test_dump_sigquit),
	      cmocka_unit_test(test_dump_sigquit_restored),
	      cmocka_unit_test(test_dump_scheddetail))
