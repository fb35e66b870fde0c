/* The execution trace, the histograms and the stall report (src/trace.c,
 * src/tracejson.c, src/metrics.c, src/stall.c).
 *
 * The traces written here are checked by src/tools/gmp-trace (its check
 * command: runs never overlap on a P, every run has its cause and its
 * arrow, every park its reason, every system call its end), with python3
 * from the host; without python3 those cases check only what C can (the
 * file is whole JSON that names the tasks' functions) and say so. */
#include "gmp_test.h"

#include <sys/stat.h>

#include "export_test.h"

#ifndef GMP_TRACE_TOOL
#error "tests/CMakeLists.txt gives GMP_TRACE_TOOL, the path of src/tools/gmp-trace"
#endif

/* ---- helpers ---------------------------------------------------------------- */

/* A fresh path under the build tree's temporary directory. */
static void tmp_path(char *buf, size_t n, const char *what)
{
	const char *dir = getenv("TMPDIR");
	snprintf(buf, n, "%s/gmp-trace-%d-%s.json", dir && *dir ? dir : "/tmp",
		 (int)getpid(), what);
}

/* The whole file, NUL-ended (the caller frees); NULL if it is missing. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	T_ASSERT(buf);
	size_t got = fread(buf, 1, (size_t)n, f);
	fclose(f);
	buf[got] = 0;
	if (len)
		*len = got;
	return buf;
}

/* Occurrences of needle, by a plain loop: the sanitizers' strstr and
 * memmem check the whole rest of the text at every call, which makes
 * counting in a long trace quadratic. */
static size_t count(const char *hay, const char *needle)
{
	size_t n = 0, nl = strlen(needle);
	for (const char *p = hay; *p; p++) {
		size_t i = 0;
		while (i < nl && p[i] == needle[i])
			i++;
		if (i == nl) {
			n++;
			p += nl - 1;
		}
	}
	return n;
}

/* What C can check of a trace file: one JSON object with the traceEvents
 * array, closed, with balanced braces and brackets outside strings. */
static void assert_json_shape(const char *text)
{
	assert_non_null(strstr(text, "{\"displayTimeUnit\":\"ns\""));
	assert_non_null(strstr(text, "\"traceEvents\":["));
	long depth = 0;
	bool in_str = false;
	for (const char *p = text; *p; p++) {
		if (in_str) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				in_str = false;
			continue;
		}
		if (*p == '"')
			in_str = true;
		else if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']')
			depth--;
		assert_true(depth >= 0);
	}
	assert_false(in_str);
	assert_int_equal(depth, 0);
}

static bool have_python(void)
{
	return system("python3 -c 'import json' >/dev/null 2>&1") == 0;
}

/* Runs the tool's check on path with the extra arguments; returns its
 * exit status, or -1 without python3. */
static int tool_check(const char *path, const char *args)
{
	if (!have_python()) {
		printf("python3 is missing: %s is checked by shape only\n",
		       path);
		return -1;
	}
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "python3 '%s' check '%s' %s", GMP_TRACE_TOOL,
		 path, args);
	fflush(stdout);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ---- a known program ----------------------------------------------------------
 *
 * Tasks that park on channels, sleep, wait for a mutex and a wait group,
 * yield, and make system calls (one kind keeps the P, the other hands it
 * off at once), on two Ps. Their functions are static: the trace must
 * name them from the symbol table all the same. */

enum { ROUNDS = 200 };
static gmp_chan *ping, *pong, *done, *wake;
static gmp_mutex mu = GMP_MUTEX_INIT;
static gmp_wg all = GMP_WG_INIT;

static void pinger(void *arg)
{
	(void)arg;
	for (long i = 0; i < ROUNDS; i++) {
		T_ASSERT(gmp_chan_send(ping, &i) == 0);
		long v;
		T_ASSERT(gmp_chan_recv(pong, &v) == 0 && v == i);
	}
	gmp_wg_done(&all);
}

static void ponger(void *arg)
{
	(void)arg;
	for (long i = 0; i < ROUNDS; i++) {
		long v;
		T_ASSERT(gmp_chan_recv(ping, &v) == 0);
		T_ASSERT(gmp_chan_send(pong, &v) == 0);
	}
	gmp_wg_done(&all);
}

static void sleeper(void *arg)
{
	(void)arg;
	for (int i = 0; i < 5; i++)
		gmp_sleep(1 * MS);
	int one = 1;
	T_ASSERT(gmp_chan_send(wake, &one) == 0);
	gmp_wg_done(&all);
}

/* Parks in a receive long before the sleeper sends. */
static void receiver(void *arg)
{
	(void)arg;
	int v;
	T_ASSERT(gmp_chan_recv(wake, &v) == 0);
	gmp_wg_done(&all);
}

/* The holder takes the mutex, lets the locker try, and keeps it until
 * the locker sleeps on it (however late the locker gets a P: the hogger
 * may hold one for 15 ms), so that the trace has a park for a mutex. */
static gmp_chan *gate;

static void holder(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&mu);
	int one = 1;
	T_ASSERT(gmp_chan_send(gate, &one) == 0);
	int64_t give_up = gmp_nanotime() + 10000 * MS;
	while (gmp__sema_nwaiters(&gmp__mutex_words_of(&mu)->sema) == 0 &&
	       gmp_nanotime() < give_up)
		gmp_sleep(MS / 4);
	gmp_sleep(MS);
	gmp_mutex_unlock(&mu);
	gmp_wg_done(&all);
}

static void locker(void *arg)
{
	(void)arg;
	int v;
	T_ASSERT(gmp_chan_recv(gate, &v) == 0);
	gmp_mutex_lock(&mu);
	gmp_mutex_unlock(&mu);
	gmp_wg_done(&all);
}

static void syscaller(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3; i++)
		tu_syscall_sleep(2 * MS, false);
	for (int i = 0; i < 2; i++)
		tu_syscall_sleep(2 * MS, true);
	gmp_wg_done(&all);
}

static void yielder(void *arg)
{
	(void)arg;
	for (int i = 0; i < 50; i++)
		gmp_yield();
	gmp_wg_done(&all);
}

/* 15 ms without a switch point: sysmon asks it to yield, and detaches its
 * P if another task wants it meanwhile (its run then continues on its M,
 * and its next run on a P has an arrow from the detach). */
static void hogger(void *arg)
{
	(void)arg;
	int64_t until = gmp_nanotime() + 15 * MS;
	while (gmp_nanotime() < until)
		;
	gmp_wg_done(&all);
}

static void collector(void *arg)
{
	(void)arg;
	gmp_wg_wait(&all);
	int one = 1;
	T_ASSERT(gmp_chan_send(done, &one) == 0);
}

static void run_known_program(void)
{
	ping = gmp_chan_new(sizeof(long), 0);
	pong = gmp_chan_new(sizeof(long), 0);
	done = gmp_chan_new(sizeof(int), 0);
	wake = gmp_chan_new(sizeof(int), 0);
	gate = gmp_chan_new(sizeof(int), 1);
	gmp_wg_add(&all, 9);
	T_ASSERT(gmp_go(collector, NULL) > 0);
	T_ASSERT(gmp_go(receiver, NULL) > 0);
	T_ASSERT(gmp_go(pinger, NULL) > 0);
	T_ASSERT(gmp_go(ponger, NULL) > 0);
	T_ASSERT(gmp_go(sleeper, NULL) > 0);
	T_ASSERT(gmp_go(holder, NULL) > 0);
	T_ASSERT(gmp_go(locker, NULL) > 0);
	T_ASSERT(gmp_go(syscaller, NULL) > 0);
	T_ASSERT(gmp_go(yielder, NULL) > 0);
	T_ASSERT(gmp_go(hogger, NULL) > 0);
	int v;
	T_ASSERT(gmp_chan_recv(done, &v) == 0); /* a thread: blocks */
}

static const char *const known_args =
	"--fn pinger --fn ponger --fn sleeper --fn receiver --fn holder "
	"--fn locker "
	"--fn syscaller --fn yielder --fn hogger --fn collector "
	"--reason 'chan receive' "
	"--reason sleep --reason mutex --reason 'wait group'";

static void check_known_trace(const char *path)
{
	size_t len;
	char *text = slurp(path, &len);
	assert_non_null(text);
	assert_json_shape(text);
	/* Named from .symtab, static as they are. */
	assert_non_null(strstr(text, "\"name\":\"pinger\""));
	assert_non_null(strstr(text, "\"name\":\"syscaller\""));
	/* Five system calls, each a complete event on an M's track. */
	assert_true(count(text, "\"cat\":\"syscall\"") >= 5);
	assert_non_null(strstr(text, "\"name\":\"thread_name\""));
	free(text);
	int st = tool_check(path, known_args);
	if (st >= 0)
		assert_int_equal(st, 0);
}

static void test_trace_known_program(void **state)
{
	(void)state;
	char path[512];
	tmp_path(path, sizeof path, "known");
	tu_init(2);
	assert_int_equal(gmp_trace_start(path), 0);
	run_known_program();
	assert_int_equal(gmp_trace_stop(), 0);
	assert_int_equal(gmp_shutdown(), 0);
	check_known_trace(path);
	unlink(path);
}

/* The same program under GMP_TRACE, ended by exit(): the trace is written
 * though gmp_shutdown never ran. */
static void env_child(void *arg)
{
	setenv("GMP_TRACE", arg, 1);
	gmp_config c = { .maxprocs = 2 };
	T_ASSERT(gmp_init(&c) == 0);
	run_known_program();
	exit(0);
}

static void test_trace_env_exit(void **state)
{
	(void)state;
	char path[512], err[4096];
	tmp_path(path, sizeof path, "env");
	int st = tu_run_child(env_child, path, err, sizeof err);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("child status %#x: %s", st, err);
	check_known_trace(path);
	unlink(path);
}

/* ---- the calls' errors ---------------------------------------------------------- */

static void test_trace_api_errors(void **state)
{
	(void)state;
	char path[512];
	tmp_path(path, sizeof path, "api");
	assert_int_equal(gmp_trace_start(NULL), -EINVAL);
	assert_int_equal(gmp_trace_start(""), -EINVAL);
	assert_int_equal(gmp_trace_stop(), -ENOENT);
	assert_int_equal(gmp_trace_dump(path), -ENOENT);
	assert_int_equal(gmp_trace_start("/nonexistent-dir/x.json"), -ENOENT);
	/* It starts the runtime, as gmp_go does. */
	assert_int_equal(gmp_trace_start(path), 0);
	assert_true(tu_stats().procs > 0);
	assert_int_equal(gmp_trace_start(path), -EBUSY);
	assert_int_equal(gmp_trace_stop(), 0);
	assert_int_equal(gmp_trace_stop(), -ENOENT);
	/* gmp_shutdown writes a running trace (the file is empty until
	 * then). */
	assert_int_equal(gmp_trace_start(path), 0);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_true(sb.st_size > 0);
	assert_int_equal(gmp_trace_stop(), -ENOENT);
	unlink(path);
}

/* gmp_trace_dump of a full trace writes what it holds so far, and the
 * trace goes on. */
static void test_trace_dump_while_running(void **state)
{
	(void)state;
	char path[512], dump[512];
	tmp_path(path, sizeof path, "run");
	tmp_path(dump, sizeof dump, "rundump");
	tu_init(2);
	assert_int_equal(gmp_trace_start(path), 0);
	run_known_program();
	assert_int_equal(gmp_trace_dump(dump), 0);
	assert_int_equal(gmp_trace_stop(), 0);
	assert_int_equal(gmp_shutdown(), 0);
	check_known_trace(dump);
	check_known_trace(path);
	unlink(path);
	unlink(dump);
}

/* ---- the flight recorder ------------------------------------------------------- */

/* Runs of these mark the two phases in the recorder's window. */
static void phase_a(void *arg)
{
	(void)arg;
	for (int i = 0; i < 60000; i++)
		gmp_yield();
}

static void phase_b(void *arg)
{
	(void)arg;
	for (int i = 0; i < 60000; i++)
		gmp_yield();
}

static atomic_int watching;
static atomic_size_t most_bytes;

static void *watch_bytes(void *arg)
{
	(void)arg;
	while (atomic_load(&watching)) {
		size_t b = gmp__trace_bytes();
		if (b > atomic_load(&most_bytes))
			atomic_store(&most_bytes, b);
		tu_sleep(100 * US);
	}
	return NULL;
}

static void test_trace_flight_keeps_last(void **state)
{
	(void)state;
	char path[512];
	tmp_path(path, sizeof path, "flight");
	tu_init(1);
	assert_int_equal(gmp__trace_start_flight(path, 1), 0);
	/* The window is committed when the recorder starts: recording
	 * never waits on an allocation or a page fault. */
	size_t at_start = gmp__trace_bytes();
	assert_true(at_start > ((size_t)1 << 20) - 64 * 1024);
	assert_true(at_start <= (size_t)1 << 20);
	atomic_store(&watching, 1);
	atomic_store(&most_bytes, 0);
	pthread_t w;
	assert_int_equal(pthread_create(&w, NULL, watch_bytes, NULL), 0);
	/* Phase A: 60000 runs, more than 2 MiB of events (each a run's end
	 * and the next's start, 48 bytes); then phase B, as much again. */
	int64_t a = gmp_go(phase_a, NULL);
	assert_true(a > 0);
	TU_WAIT_FOR(tu_stats().tasks_live == 0);
	assert_true(gmp_go(phase_b, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_live == 0);
	assert_int_equal(gmp_trace_dump(NULL), 0);
	atomic_store(&watching, 0);
	pthread_join(w, NULL);
	size_t held = gmp__trace_bytes();
	assert_int_equal(gmp_trace_stop(), 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_true(atomic_load(&most_bytes) <= (size_t)1 << 20);
	assert_true(held <= (size_t)1 << 20);
	size_t len;
	char *text = slurp(path, &len);
	assert_non_null(text);
	assert_json_shape(text);
	/* The window holds the end of phase B and nothing of phase A. */
	assert_non_null(strstr(text, "\"name\":\"phase_b\""));
	assert_null(strstr(text, "\"name\":\"phase_a\""));
	/* Much of the MiB: a run is some 150 bytes of JSON, and the window
	 * holds thousands of them. */
	assert_true(count(text, "\"cat\":\"run\"") > 2000);
	free(text);
	int st = tool_check(path, "--fn phase_b");
	if (st >= 0)
		assert_int_equal(st, 0);
	unlink(path);
}

/* SIGQUIT with GMP_DEBUG=sigquit=1 writes the flight recorder's window
 * before the process goes (status 2). */
static void sigquit_child(void *arg)
{
	char env[600];
	snprintf(env, sizeof env, "flight:2:%s", (const char *)arg);
	setenv("GMP_TRACE", env, 1);
	setenv("GMP_DEBUG", "sigquit=1", 1);
	gmp_config c = { .maxprocs = 2 };
	T_ASSERT(gmp_init(&c) == 0);
	run_known_program();
	raise(SIGQUIT);
	_exit(0);
}

static void test_trace_flight_sigquit(void **state)
{
	(void)state;
	char path[512], err[8192];
	tmp_path(path, sizeof path, "quit");
	int st = tu_run_child(sigquit_child, path, err, sizeof err);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 2)
		fail_msg("child status %#x: %s", st, err);
	assert_non_null(strstr(err, "SIGQUIT: quit"));
	check_known_trace(path);
	unlink(path);
}

/* An abort of the runtime (a broken invariant) writes the window too. */
static void throw_child(void *arg)
{
	char env[600];
	snprintf(env, sizeof env, "flight:2:%s", (const char *)arg);
	setenv("GMP_TRACE", env, 1);
	gmp_config c = { .maxprocs = 2 };
	T_ASSERT(gmp_init(&c) == 0);
	run_known_program();
	gmp_ready(NULL); /* a broken call: "gmp: gmp_ready of a NULL task" */
	_exit(0);
}

static void test_trace_flight_abort(void **state)
{
	(void)state;
	char path[512], err[8192];
	tmp_path(path, sizeof path, "abort");
	int st = tu_run_child(throw_child, path, err, sizeof err);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
		fail_msg("child status %#x: %s", st, err);
	assert_non_null(strstr(err, "gmp: "));
	size_t len;
	char *text = slurp(path, &len);
	assert_non_null(text);
	assert_json_shape(text);
	assert_non_null(strstr(text, "\"written_at\":\"abort\""));
	assert_non_null(strstr(text, "\"name\":\"pinger\""));
	free(text);
	unlink(path);
}

/* ---- the histograms --------------------------------------------------------------- */

static uint64_t hist_total(const uint64_t *h)
{
	uint64_t n = 0;
	for (int i = 0; i < GMP_HIST_BUCKETS; i++)
		n += h[i];
	return n;
}

/* The first bucket with counts at or above `from`. */
static int hist_lowest(const uint64_t *h, int from)
{
	for (int i = from; i < GMP_HIST_BUCKETS; i++)
		if (h[i])
			return i;
	return -1;
}

static void test_trace_metrics_off(void **state)
{
	(void)state;
	gmp_metrics m;
	memset(&m, 0xff, sizeof m);
	assert_int_equal(gmp_metrics_read(NULL), -EINVAL);
	assert_int_equal(gmp_metrics_read(&m), 0);
	assert_int_equal(hist_total(m.sched_latency), 0);
	assert_int_equal(hist_total(m.syscall_time), 0);
	assert_int_equal(hist_total(m.slice_time), 0);
}

/* A task readied and then kept from its P for 5 ms (by the task that
 * readied it, which computes 5 ms before it parks) shows in the bucket of
 * 5 ms: 2^22 ns <= 5 ms < 2^23 ns, or a later one should the host have
 * descheduled the thread meanwhile, never an earlier one. */
static gmp_chan *lat_c;

static void lat_waiter(void *arg)
{
	(void)arg;
	int v;
	T_ASSERT(gmp_chan_recv(lat_c, &v) == 0);
}

static void lat_readier(void *arg)
{
	(void)arg;
	int v = 1;
	T_ASSERT(gmp_chan_send(lat_c, &v) == 0); /* readies lat_waiter */
	int64_t until = gmp_nanotime() + 5 * MS;
	while (gmp_nanotime() < until)
		; /* no switch point: the waiter waits for the P */
}

static void test_trace_metrics_latency_bucket(void **state)
{
	(void)state;
	gmp__metrics_set_sampling(1, 1); /* every ready is measured */
	tu_init(1);
	lat_c = gmp_chan_new(sizeof(int), 0);
	gmp_metrics before, after;
	assert_int_equal(gmp_metrics_read(&before), 0);
	/* The waiter parks first (one P: it runs before the readier). */
	assert_true(gmp_go(lat_waiter, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting == 1);
	assert_int_equal(gmp_metrics_read(&before), 0);
	assert_true(gmp_go(lat_readier, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_live == 0);
	assert_int_equal(gmp_metrics_read(&after), 0);
	uint64_t d[GMP_HIST_BUCKETS];
	for (int i = 0; i < GMP_HIST_BUCKETS; i++)
		d[i] = after.sched_latency[i] - before.sched_latency[i];
	/* The waiter's wait was the only ready, and was measured. */
	assert_int_equal(hist_total(d), 1);
	assert_true(hist_lowest(d, 0) >= 22);
	gmp_chan_free(lat_c);
	assert_int_equal(gmp_shutdown(), 0);
	gmp__metrics_set_sampling(0, 0);
	/* Off: zeros again. */
	assert_int_equal(gmp_metrics_read(&after), 0);
	assert_int_equal(hist_total(after.sched_latency), 0);
}

/* With the default sampling (one ready in 64 per P), waits of about a
 * millisecond, made often enough, are seen in the millisecond's buckets. */
static void short_waiter(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200; i++) {
		int v;
		T_ASSERT(gmp_chan_recv(lat_c, &v) == 0);
	}
}

static void short_readier(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200; i++) {
		int v = i;
		T_ASSERT(gmp_chan_send(lat_c, &v) == 0);
		int64_t until = gmp_nanotime() + 1 * MS;
		while (gmp_nanotime() < until)
			;
		gmp_yield(); /* the waiter runs, and parks again */
	}
}

static void test_trace_metrics_sampled(void **state)
{
	(void)state;
	tu_init(1);
	lat_c = gmp_chan_new(sizeof(int), 0);
	assert_true(gmp_go(short_waiter, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting == 1);
	assert_true(gmp_go(short_readier, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_live == 0);
	gmp_metrics m;
	assert_int_equal(gmp_metrics_read(&m), 0);
	/* 200 readies at one in 64: at least 3 samples, each of a wait of
	 * at least 1 ms (2^19 ns < 1 ms < 2^20 ns). */
	uint64_t ms_waits = 0;
	for (int i = 19; i < GMP_HIST_BUCKETS; i++)
		ms_waits += m.sched_latency[i];
	assert_true(ms_waits >= 3);
	/* And slices: the readier's 1 ms ones among them. */
	uint64_t ms_slices = 0;
	for (int i = 19; i < GMP_HIST_BUCKETS; i++)
		ms_slices += m.slice_time[i];
	assert_true(ms_slices >= 1);
	gmp_chan_free(lat_c);
	assert_int_equal(gmp_shutdown(), 0);
}

/* A slice of 3 ms of computation lands at 2^21 ns (2.1 ms) or above (the
 * task's first run, started by the scheduler's slow path as it takes the
 * task from the global queue, is measured); so does a system call of 3 ms
 * inside the bracket. */
static void syscall_task(void *arg)
{
	(void)arg;
	int64_t until = gmp_nanotime() + 3 * MS;
	while (gmp_nanotime() < until)
		;
	gmp_yield();
	tu_syscall_sleep(3 * MS, false);
}

static void test_trace_metrics_syscall_and_slice(void **state)
{
	(void)state;
	gmp__metrics_set_sampling(1, 1);
	tu_init(1);
	assert_true(gmp_go(syscall_task, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_live == 0);
	gmp_metrics m;
	assert_int_equal(gmp_metrics_read(&m), 0);
	assert_int_equal(hist_lowest(m.syscall_time, 0) >= 21, 1);
	assert_true(hist_total(m.syscall_time) >= 1);
	uint64_t long_slices = 0;
	for (int i = 21; i < GMP_HIST_BUCKETS; i++)
		long_slices += m.slice_time[i];
	assert_true(long_slices >= 1);
	assert_int_equal(gmp_shutdown(), 0);
	gmp__metrics_set_sampling(0, 0);
}

/* schedtrace prints the histograms' p50 and p99 since its last line. */
static void schedtrace_child(void *arg)
{
	(void)arg;
	setenv("GMP_DEBUG", "schedtrace=20", 1);
	gmp_config c = { .maxprocs = 2 };
	T_ASSERT(gmp_init(&c) == 0);
	run_known_program();
	tu_sleep(60 * MS);
	T_ASSERT(gmp_shutdown() == 0);
}

static void test_trace_schedtrace_percentiles(void **state)
{
	(void)state;
	char err[16384];
	int st = tu_run_child(schedtrace_child, NULL, err, sizeof err);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("child status %#x: %s", st, err);
	assert_non_null(strstr(err, "SCHED "));
	assert_non_null(strstr(err, " schedlat_p50="));
	assert_non_null(strstr(err, " syscall_p99="));
	assert_non_null(strstr(err, " slice_p50="));
}

/* ---- stalls -------------------------------------------------------------------------- */

static void hog(void *arg)
{
	(void)arg;
	int64_t until = gmp_nanotime() + 50 * MS;
	while (gmp_nanotime() < until)
		; /* no switch point for 50 ms */
}

/* How long the polite task runs: three times its stall limit, so that
 * its yields, not its brevity, keep it unreported. */
static int64_t polite_ns = 100 * MS;

static void polite(void *arg)
{
	(void)arg;
	int64_t until = gmp_nanotime() + polite_ns;
	while (gmp_nanotime() < until) {
		int64_t next = gmp_nanotime() + 1 * MS;
		while (gmp_nanotime() < next)
			;
		gmp_yield();
	}
}

/* arg: 1 for the hog, reported past 20 ms; 0 for the polite task, which
 * must not be reported past 100 ms (five times that under TSan or qemu),
 * though it runs three times as long: a loaded host may keep its thread
 * from the CPU, or a sanitizer's lock keep it waiting, for a while
 * between two of its yields, which would be a stall of its P, truly;
 * the limit leaves room for a busy CI machine. */
static void stall_child(void *arg)
{
	bool is_hog = *(int *)arg;
	char dbg[32];
	int limit_ms = 100 * tu_host_slowdown();
	snprintf(dbg, sizeof dbg, "stall=%d", is_hog ? 20 : limit_ms);
	polite_ns = 3 * (int64_t)limit_ms * MS;
	setenv("GMP_DEBUG", dbg, 1);
	gmp_config c = { .maxprocs = 1 };
	T_ASSERT(gmp_init(&c) == 0);
	T_ASSERT(gmp_go(is_hog ? hog : polite, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_live == 0);
	T_ASSERT(gmp_shutdown() == 0);
}

static void test_trace_stall_hog_reported(void **state)
{
	(void)state;
	char err[8192];
	int which = 1;
	int st = tu_run_child(stall_child, &which, err, sizeof err);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("child status %#x: %s", st, err);
	/* One line for the one stretch, naming the static function. */
	if (count(err, "gmp: stall: ") != 1 || !strstr(err, "(hog)"))
		fail_msg("stderr:\n%s", err);
	assert_non_null(strstr(err, "without a switch point"));
	assert_non_null(strstr(err, "state "));
}

static void test_trace_stall_polite_quiet(void **state)
{
	(void)state;
	char err[8192];
	int which = 0;
	int st = tu_run_child(stall_child, &which, err, sizeof err);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("child status %#x: %s", st, err);
	if (strstr(err, "gmp: stall:"))
		fail_msg("stderr:\n%s", err);
}

/* A hog that sysmon detaches (another task wants the P) counts once,
 * whether it was detached by the time the limit passed or not. */
static void detached_child(void *arg)
{
	(void)arg;
	setenv("GMP_DEBUG", "stall=20", 1);
	gmp_config c = { .maxprocs = 1 };
	T_ASSERT(gmp_init(&c) == 0);
	T_ASSERT(gmp_go(hog, NULL) > 0);
	T_ASSERT(gmp_go(polite, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_live == 0);
	T_ASSERT(gmp_shutdown() == 0);
}

static void test_trace_stall_detached_once(void **state)
{
	(void)state;
	char err[8192];
	int st = tu_run_child(detached_child, NULL, err, sizeof err);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("child status %#x: %s", st, err);
	/* One line for the hog's stretch. (The polite task may have one of
	 * its own on a loaded host: its thread kept from the CPU for 20 ms
	 * between two yields holds its P that long.) */
	if (count(err, "(hog) has run") != 1)
		fail_msg("stderr:\n%s", err);
	if (!strstr(err, "detached from its P") && !strstr(err, "not detached"))
		fail_msg("stderr:\n%s", err);
}

GMP_TEST_MAIN(cmocka_unit_test(test_trace_known_program),
	      cmocka_unit_test(test_trace_env_exit),
	      cmocka_unit_test(test_trace_api_errors),
	      cmocka_unit_test(test_trace_dump_while_running),
	      cmocka_unit_test(test_trace_flight_keeps_last),
	      cmocka_unit_test(test_trace_flight_sigquit),
	      cmocka_unit_test(test_trace_flight_abort),
	      cmocka_unit_test(test_trace_metrics_off),
	      cmocka_unit_test(test_trace_metrics_latency_bucket),
	      cmocka_unit_test(test_trace_metrics_sampled),
	      cmocka_unit_test(test_trace_metrics_syscall_and_slice),
	      cmocka_unit_test(test_trace_schedtrace_percentiles),
	      cmocka_unit_test(test_trace_stall_hog_reported),
	      cmocka_unit_test(test_trace_stall_polite_quiet),
	      cmocka_unit_test(test_trace_stall_detached_once))
