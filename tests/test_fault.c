/* Faults (fault.h): the system running out of threads, stack memory or
 * heap. Every call that can fail answers with -errno (or NULL where its
 * contract says so) and the runtime keeps working once the shortage ends;
 * where nothing can be answered (a thread the scheduler needs) the program
 * aborts with a "gmp: " message. The sweeps inject one failure (or a
 * lasting shortage) at every allocation of a mixed workload in turn, each
 * in a forked child, and accept only a clean exit or a "gmp: " abort:
 * never a crash. The EAGAIN retry itself is tested in test_thread.c
 * (test_thread_eagain_retried, test_thread_eagain_exhausted_aborts_naming_ulimit). */
#include <pthread.h>

#include "gmp_test.h"
#include "export_test.h"

static void disarm_all(void)
{
	for (int k = 0; k < GMP__FAULT_NKINDS; k++)
		gmp__fault_arm((enum gmp__fault)k, 0, 0);
}

/* The runtime works: n tasks run. */
static atomic_int ran;

static void count_task(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ran, 1);
}

static int count_main(void *arg)
{
	count_task(arg);
	return 0;
}

static void runtime_works(int n)
{
	atomic_store(&ran, 0);
	for (int i = 0; i < n; i++)
		assert_true(gmp_go(count_task, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&ran) >= n);
	assert_int_equal(atomic_load(&ran), n);
}

/* ---- threads -------------------------------------------------------------------- */

/* sysmon's thread cannot be made at once: EAGAIN is retried
 * (design.md §5.2), so gmp_init succeeds; while it lasts, gmp_init fails
 * cleanly after the retries and starts nothing. */
static void test_fault_thread_eagain_at_init(void **s)
{
	(void)s;
	int64_t base = gmp__alloc_live();
	gmp_config c = { .maxprocs = 2 };
	gmp__fault_arm(GMP__FAULT_THREAD_EAGAIN, 0, 3);
	assert_int_equal(gmp_init(&c), 0);
	disarm_all();
	runtime_works(1000);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp__alloc_live(), base);

	gmp__fault_arm(GMP__FAULT_THREAD_EAGAIN, 0, -1);
	int64_t t0 = tu_now_ns();
	assert_int_equal(gmp_init(&c), -EAGAIN);
	assert_true(tu_now_ns() - t0 >
		    500 * 1000 * (int64_t)1000); /* retried */
	disarm_all();
	gmp_stats st;
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(st.procs, 0); /* not running */
	assert_int_equal(gmp__alloc_live(), base);
	assert_int_equal(gmp_init(&c), 0);
	runtime_works(1000);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp__alloc_live(), base);
}

static void locked_task(void *arg)
{
	(void)arg;
	gmp_lock_os_thread(); /* needs the template thread: never comes */
	gmp_unlock_os_thread();
}

static void child_template_eagain(void *arg)
{
	(void)arg;
	tu_init(1);
	runtime_works(10);
	gmp__fault_arm(GMP__FAULT_THREAD_EAGAIN, 0, -1);
	gmp_go(locked_task, NULL);
	sleep(10);
}

/* The template thread (design.md §5.1) is a thread too: a lasting EAGAIN
 * aborts with the same message as an M's. */
static void test_fault_thread_eagain_template_thread_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_template_eagain, NULL, "ulimit -u");
}

/* ---- stacks ---------------------------------------------------------------------- */

static struct {
	_Atomic(gmp_g *) g[4096];
	atomic_int parked;
	atomic_int spawned; /* by spawn_until_enomem, final once it failed */
	atomic_long enomem_task;
} pk;

static bool publish(gmp_g *g, void *arg)
{
	atomic_store(&pk.g[(uintptr_t)arg], g);
	atomic_fetch_add(&pk.parked, 1);
	return true;
}

static void parked_task(void *arg)
{
	gmp_park(publish, arg);
}

/* Spawns parking children until gmp_go fails (no dead G left to reuse,
 * and no stack to be had); records the error. */
static void spawn_until_enomem(void *arg)
{
	(void)arg;
	for (uintptr_t i = 0; i < 4096; i++) {
		int64_t id = gmp_go(parked_task, (void *)i);
		if (id < 0) {
			atomic_store(&pk.enomem_task, id);
			return;
		}
		atomic_fetch_add(&pk.spawned, 1);
		gmp_yield(); /* let it park */
	}
}

/* Every child spawn_until_enomem made, once it has stopped: it goes on
 * spawning after the 100th has parked until the shortage begins, so more
 * than `parked` said may exist, and the last may not have parked yet (a
 * child left parked would keep gmp_shutdown waiting for ever). */
static void ready_all_parked(void)
{
	int n = atomic_load(&pk.spawned);
	for (int i = 0; i < n; i++) {
		gmp_g *g;
		TU_WAIT_FOR((g = atomic_exchange(&pk.g[i], NULL)) != NULL);
		gmp_ready(g);
	}
}

static void alloc_failure_blocks_new_stacks(enum gmp__fault kind)
{
	int64_t base = gmp__alloc_live();
	memset(&pk, 0, sizeof pk);
	tu_init(2);
	/* A fresh runtime has no dead G to reuse: the first spawn needs a
	 * stack, and from a foreign thread it fails. */
	gmp__fault_arm(kind, 0, -1);
	assert_int_equal(gmp_go(count_task, NULL), -ENOMEM);
	assert_int_equal(gmp_main(count_main, NULL), -ENOMEM);
	disarm_all();
	/* From a task: 100 children park (each keeps its stack), then the
	 * shortage begins, and the next spawn fails. */
	assert_true(gmp_go(spawn_until_enomem, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&pk.parked) >= 100);
	gmp__fault_arm(kind, 0, -1);
	TU_WAIT_FOR(atomic_load(&pk.enomem_task) != 0);
	assert_int_equal(atomic_load(&pk.enomem_task), -ENOMEM);
	disarm_all();
	/* The shortage is over: everything parked wakes, new tasks run. */
	ready_all_parked();
	runtime_works(2000);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp__alloc_live(), base);
}

static void test_fault_stack_enomem_go_returns_enomem(void **s)
{
	(void)s;
	alloc_failure_blocks_new_stacks(GMP__FAULT_STACK_ENOMEM);
}

/* ---- the heap --------------------------------------------------------------------- */

static void test_fault_alloc_go_returns_enomem(void **s)
{
	(void)s;
	alloc_failure_blocks_new_stacks(GMP__FAULT_ALLOC);
}

/* gmp_init allocates its Ps: with no memory it fails and starts nothing;
 * gmp_go, which would start the runtime, fails the same way. */
static void test_fault_alloc_at_init(void **s)
{
	(void)s;
	int64_t base = gmp__alloc_live();
	gmp_config c = { .maxprocs = 4 };
	for (int skip = 0; skip < 4; skip++) {
		gmp__fault_arm(GMP__FAULT_ALLOC, skip, -1);
		assert_int_equal(gmp_init(&c), -ENOMEM);
		assert_int_equal(gmp_go(count_task, NULL), -ENOMEM);
		disarm_all();
		assert_int_equal(gmp__alloc_live(), base);
	}
	assert_int_equal(gmp_init(&c), 0);
	runtime_works(100);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp__alloc_live(), base);
}

enum { NCASES = 17 };

struct sel_result {
	int small, big;
};

/* Selects over 16 cases (no allocation) and over 17 (scratch memory) on a
 * channel with one value ready. */
static void select_both(gmp_chan *ch, struct sel_result *r)
{
	int v = 1;
	gmp_select_case cs[NCASES];
	for (int i = 0; i < NCASES; i++)
		cs[i] = (gmp_select_case){ .chan = ch,
					   .op = GMP_SELECT_RECV,
					   .elem = &v };
	T_ASSERT(gmp_chan_try_send(ch, &v) == 0);
	r->small = gmp_select(cs, NCASES - 1, 0);
	T_ASSERT(gmp_chan_try_send(ch, &v) == 0);
	r->big = gmp_select(cs, NCASES, 0);
	if (r->big < 0)
		T_ASSERT(gmp_chan_try_recv(ch, &v) == 0); /* drain */
}

static struct {
	gmp_chan *ch;
	struct sel_result sel;
	int key, chan_new_null;
	atomic_int ready, armed, done;
} ft;

/* Runs on the only P: makes dead Gs there first, so that the spawns made
 * during the shortage reuse them and need no memory. */
static void fault_driver(void *arg)
{
	(void)arg;
	atomic_store(&ran, 0);
	for (int i = 0; i < 10; i++)
		T_ASSERT(gmp_go(count_task, NULL) > 0);
	while (atomic_load(&ran) < 10)
		gmp_yield();
	atomic_store(&ft.ready, 1);
	while (!atomic_load(&ft.armed))
		gmp_yield();
	select_both(ft.ch, &ft.sel);
	gmp_key key;
	T_ASSERT(gmp_key_create(&key, NULL) == 0);
	ft.key = gmp_setspecific(key, &key); /* allocates the key array */
	ft.chan_new_null = gmp_chan_new(sizeof(int), 4) == NULL;
	T_ASSERT(gmp_go(count_task, NULL) > 0); /* a dead G is reused */
	/* Let it run before saying done: runtime_works, next on the main
	 * thread, starts its count from zero. */
	while (atomic_load(&ran) < 11)
		gmp_yield();
	atomic_store(&ft.done, 1);
}

static void wait_flag(atomic_int *f)
{
	TU_WAIT_FOR(atomic_load(f) != 0);
	assert_int_equal(atomic_load(f), 1);
}

static void test_fault_alloc_chan_select_keys(void **s)
{
	(void)s;
	int64_t base = gmp__alloc_live();
	memset(&ft, 0, sizeof ft);
	tu_init(1);
	ft.ch = gmp_chan_new(sizeof(int), 1);
	assert_non_null(ft.ch);
	assert_true(gmp_go(fault_driver, NULL) > 0);
	wait_flag(&ft.ready);

	gmp__fault_arm(GMP__FAULT_ALLOC, 0, -1);
	/* From this thread. */
	assert_null(gmp_chan_new(sizeof(int), 8));
	assert_null(gmp_chan_new(0, 0));
	struct sel_result r;
	select_both(ft.ch, &r);
	assert_in_range(r.small, 0, NCASES - 2);
	assert_int_equal(r.big, -ENOMEM);
	/* From a task. */
	atomic_store(&ft.armed, 1);
	wait_flag(&ft.done);
	disarm_all();
	assert_in_range(ft.sel.small, 0, NCASES - 2);
	assert_int_equal(ft.sel.big, -ENOMEM);
	assert_int_equal(ft.key, -ENOMEM);
	assert_true(ft.chan_new_null);

	/* Memory is back: all of it works again. */
	select_both(ft.ch, &r);
	assert_true(r.small >= 0 && r.big >= 0);
	gmp_chan *c = gmp_chan_new(sizeof(int), 8);
	assert_non_null(c);
	gmp_chan_free(c);
	runtime_works(1000);
	gmp_chan_free(ft.ch);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp__alloc_live(), base);
}

/* ---- sweeps: a failure at every allocation of a workload ---------------------------- */

/* A bit of everything that allocates or makes threads: starting the
 * runtime, spawning (stacks), channels and a large select, task-local
 * keys, timers (sleeps), I/O registration, growing maxprocs, blocking
 * syscalls (new Ms). Every failure it is told of is tolerated: it
 * retries a few times, then carries on without. */
static gmp_key sweep_key;

static void sweep_task(void *arg)
{
	gmp_wg *wg = arg;
	for (int t = 0; t < 3 && gmp_setspecific(sweep_key, wg) != 0; t++)
		gmp_yield();
	gmp_sleep(100 * 1000);
	gmp_chan *c = gmp_chan_new(sizeof(int), 2);
	if (c) {
		int v = 7;
		gmp_chan_send(c, &v);
		gmp_select_case cs[NCASES];
		for (int i = 0; i < NCASES; i++)
			cs[i] = (gmp_select_case){ .chan = c,
						   .op = GMP_SELECT_RECV,
						   .elem = &v };
		int r = gmp_select(cs, NCASES, 1000000);
		T_ASSERT(r >= 0 || r == -ENOMEM);
		gmp_chan_free(c);
	}
	int fd[2];
	if (pipe(fd) == 0) {
		char ch = 'x';
		gmp_write(fd[1], &ch, 1);
		gmp_read(fd[0], &ch, 1);
		gmp_close(fd[0]);
		gmp_close(fd[1]);
	}
	tu_syscall_sleep(200 * US, false);
	gmp_wg_done(wg);
}

static void sweep_workload(void)
{
	gmp_config c = { .maxprocs = 2 };
	int err = -1;
	for (int t = 0; t < 3 && (err = gmp_init(&c)) != 0; t++)
		T_ASSERT(err == -ENOMEM || err == -EAGAIN);
	if (err)
		return;
	gmp_wg wg = GMP_WG_INIT;
	for (int i = 0; i < 20; i++) {
		gmp_wg_add(&wg, 1);
		int64_t id = gmp_go(sweep_task, &wg);
		if (id < 0) {
			T_ASSERT(id == -ENOMEM);
			gmp_wg_done(&wg);
		}
		if (i == 10)
			gmp_set_maxprocs(4);
	}
	gmp_wg_wait(&wg);
	T_ASSERT(gmp_shutdown() == 0);
}

struct sweep {
	enum gmp__fault kind;
	int64_t skip, count;
};

static void child_sweep(void *arg)
{
	struct sweep *sw = arg;
	gmp__fault_arm(sw->kind, sw->skip, sw->count);
	sweep_workload();
	/* Also after the shortage (count > 0): all well again. */
	disarm_all();
	sweep_workload();
	fflush(NULL);
	_exit(0);
}

static void sweep(enum gmp__fault kind, int64_t count, int from, int to)
{
	static const char *const names[] = { "EAGAIN", "stack ENOMEM",
					     "alloc" };
	T_ASSERT(gmp_key_create(&sweep_key, NULL) == 0 || sweep_key.id);
	int clean = 0, aborted = 0;
	char err[8192], seen[2048] = "";
	for (int k = from; k < to; k++) {
		struct sweep sw = { kind, k, count };
		int status = tu_run_child(child_sweep, &sw, err, sizeof err);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			clean++;
			continue;
		}
		char *msg = strstr(err, "gmp: ");
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && msg) {
			aborted++;
			char *nl = strchr(msg, '\n');
			if (nl)
				*nl = 0;
			if (!strstr(seen, msg) &&
			    strlen(seen) + strlen(msg) + 4 < sizeof seen) {
				strcat(seen, "  ");
				strcat(seen, msg);
				strcat(seen, "\n");
			}
			continue;
		}
		fail_msg("%s fault at %d (count %lld): status %#x, stderr:\n%s",
			 names[kind], k, (long long)count, status, err);
	}
	print_message("%s, count %lld, skips %d..%d: %d clean, %d aborts\n%s",
		      names[kind], (long long)count, from, to - 1, clean,
		      aborted, seen);
}

static void test_fault_alloc_sweep_one_failure(void **s)
{
	(void)s;
	sweep(GMP__FAULT_ALLOC, 1, 0, 120);
}

static void test_fault_alloc_sweep_lasting_shortage(void **s)
{
	(void)s;
	sweep(GMP__FAULT_ALLOC, -1, 0, 120);
}

static void test_fault_stack_sweep_lasting_shortage(void **s)
{
	(void)s;
	sweep(GMP__FAULT_STACK_ENOMEM, -1, 0, 25);
}

/* Each lasting EAGAIN costs a second of retries before its abort. */
static void test_fault_thread_sweep_long(void **s)
{
	(void)s;
	sweep(GMP__FAULT_THREAD_EAGAIN, -1, 0, 12);
	sweep(GMP__FAULT_THREAD_EAGAIN, 3, 0, 12);
}

GMP_TEST_MAIN(cmocka_unit_test(test_fault_thread_eagain_at_init),
	      cmocka_unit_test(test_fault_thread_eagain_template_thread_aborts),
	      cmocka_unit_test(test_fault_stack_enomem_go_returns_enomem),
	      cmocka_unit_test(test_fault_alloc_go_returns_enomem),
	      cmocka_unit_test(test_fault_alloc_at_init),
	      cmocka_unit_test(test_fault_alloc_chan_select_keys),
	      cmocka_unit_test(test_fault_alloc_sweep_one_failure),
	      cmocka_unit_test(test_fault_alloc_sweep_lasting_shortage),
	      cmocka_unit_test(test_fault_stack_sweep_lasting_shortage),
	      cmocka_unit_test(test_fault_thread_sweep_long))
