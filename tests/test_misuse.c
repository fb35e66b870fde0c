/* Misuse, answered: each row of docs/guide.md's misuse table that no other
 * suite covers. Calls that can fail answer -errno and start or change
 * nothing; broken invariants print "gmp: ..." and abort (checked in a
 * forked child). The table names, for every row, the test that covers it
 * here or elsewhere. */
#include <pthread.h>

#include "gmp_test.h"
#include "export_test.h"

static void nop(void *arg)
{
	(void)arg;
}

/* ---- gmp_go(NULL) -------------------------------------------------------------- */

static void go_null_task(void *arg)
{
	*(int64_t *)arg = gmp_go(NULL, NULL);
}

static void test_misuse_go_null(void **s)
{
	(void)s;
	/* Off: -EINVAL, and the runtime is not started by it. */
	assert_int_equal(gmp_go(NULL, NULL), -EINVAL);
	assert_int_equal(tu_stats().procs, 0);
	/* From a task, too. */
	int64_t r = 0;
	tu_init(1);
	assert_true(gmp_go(go_null_task, &r) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(r, -EINVAL);
}

/* ---- bad configuration ---------------------------------------------------------- */

static void expect_einval(const gmp_config *c, const char *var, const char *val)
{
	if (var)
		setenv(var, val, 1);
	int r = gmp_init(c);
	if (var)
		unsetenv(var);
	if (r != -EINVAL)
		fail_msg("gmp_init with %s=%s: %d, not -EINVAL",
			 var ? var : "cfg", val ? val : "", r);
	assert_int_equal(tu_stats().procs, 0); /* nothing started */
	assert_int_equal(tu_stats().threads_total, 0);
}

static void test_misuse_bad_config_values(void **s)
{
	(void)s;
	gmp_config c;
	c = (gmp_config){ .maxprocs = -1 };
	expect_einval(&c, NULL, NULL);
	c = (gmp_config){ .max_threads = -1 };
	expect_einval(&c, NULL, NULL);
	c = (gmp_config){ .stack_size = 16 * 1024 - 1 };
	expect_einval(&c, NULL, NULL);
	c = (gmp_config){ .stack_size =
				  SIZE_MAX }; /* would wrap when rounded */
	expect_einval(&c, NULL, NULL);
	expect_einval(NULL, "GMP_MAXPROCS", "0");
	expect_einval(NULL, "GMP_MAXPROCS", "-2");
	expect_einval(NULL, "GMP_MAXPROCS", "4x");
	expect_einval(NULL, "GMP_MAX_THREADS", "many");
	expect_einval(NULL, "GMP_STACK_SIZE", "8K");
	expect_einval(NULL, "GMP_STACK_SIZE", "64Q");
	expect_einval(NULL, "GMP_STACK_SIZE", "-64K");
	expect_einval(NULL, "GMP_STACK_SIZE", "99999999999999999999");
	expect_einval(NULL, "GMP_STACK_GUARD", "sometimes");
	expect_einval(NULL, "GMP_IDLE_THREAD_TIMEOUT", "-1");
	expect_einval(NULL, "GMP_IDLE_THREAD_TIMEOUT", "soon");
	expect_einval(NULL, "GMP_DEBUG", "randomize");
	expect_einval(NULL, "GMP_DEBUG", "nosuchkey=1");
	expect_einval(NULL, "GMP_DEBUG", "schedtrace=-5");
	/* Not errors: a config value wins over a valid variable, and counts
	 * beyond the limit are clamped. */
	c = (gmp_config){ .maxprocs = 3 };
	setenv("GMP_MAXPROCS", "2", 1);
	int r = gmp_init(&c);
	unsetenv("GMP_MAXPROCS");
	assert_int_equal(r, 0);
	assert_int_equal(gmp_set_maxprocs(0), 3);
	assert_int_equal(gmp_shutdown(), 0);
	c = (gmp_config){ .maxprocs = 1 << 20, .stack_size = 16 * 1024 + 1 };
	assert_int_equal(gmp_init(&c), 0);
	assert_int_equal(gmp_set_maxprocs(0), 1024);
	assert_true(gmp_go(nop, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* An unparsable variable is an error even where the config gives the
 * value it would have set (design.md §1.1): it is checked, not skipped. */
static void test_misuse_bad_env_despite_config(void **s)
{
	(void)s;
	const gmp_config full = { .maxprocs = 2,
				  .max_threads = 50,
				  .stack_size = 64 * 1024 };
	expect_einval(&full, "GMP_MAXPROCS", "junk");
	expect_einval(&full, "GMP_MAXPROCS", "0");
	expect_einval(&full, "GMP_MAX_THREADS", "many");
	expect_einval(&full, "GMP_MAX_THREADS", "-1");
	expect_einval(&full, "GMP_STACK_SIZE", "64Q");
	expect_einval(&full, "GMP_STACK_SIZE", "8K");
	expect_einval(&full, "GMP_STACK_SIZE", "99999999999999999999");
	expect_einval(&full, "GMP_STACK_GUARD", "sometimes");
	expect_einval(&full, "GMP_IDLE_THREAD_TIMEOUT", "soon");
	expect_einval(&full, "GMP_DEBUG", "nosuchkey=1");
	/* The config alone is fine, and wins over valid variables. */
	setenv("GMP_MAXPROCS", "1", 1);
	setenv("GMP_STACK_SIZE", "1M", 1);
	int r = gmp_init(&full);
	unsetenv("GMP_MAXPROCS");
	unsetenv("GMP_STACK_SIZE");
	assert_int_equal(r, 0);
	assert_int_equal(gmp_set_maxprocs(0), 2);
	assert_int_equal(gmp__cfg.stack_size, 64 * 1024);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- gmp_init and gmp_shutdown from a task ------------------------------------- */

static atomic_int init_r = 99, release_task;

static void init_from_task(void *arg)
{
	(void)arg;
	/* Wait until gmp_shutdown is draining (it waits for us). */
	while (!atomic_load(&release_task))
		gmp_yield();
	gmp_config bad = { .maxprocs = -1 };
	T_ASSERT(gmp_init(&bad) == -EINVAL);
	atomic_store(&init_r, gmp_init(NULL));
}

static void *shutdown_thread(void *arg)
{
	*(int *)arg = gmp_shutdown();
	return NULL;
}

/* gmp_init from a task changes nothing and returns 0, even while
 * gmp_shutdown drains (it must not wait for gmp_shutdown, which waits for
 * the task); gmp_shutdown from a task is -EPERM
 * (test_sched_shutdown_from_task_eperm). */
static void test_misuse_init_from_task_while_draining(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(init_from_task, NULL) > 0);
	int sr = -1;
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, shutdown_thread, &sr), 0);
	/* gmp_shutdown registers as a drain waiter once it has begun to
	 * drain (runtime.c's wait_no_tasks). */
	TU_WAIT_FOR(gmp__load32_acq(&gmp__sched.drain_waiters) != 0);
	assert_true(gmp_go(nop, NULL) == -ESHUTDOWN); /* it drains */
	atomic_store(&release_task, 1);
	pthread_join(th, NULL);
	assert_int_equal(sr, 0);
	assert_int_equal(atomic_load(&init_r), 0);
	assert_int_equal(tu_stats().procs, 0);
}

/* ---- parking outside a task ------------------------------------------------------ */

static bool park_in_unlock(gmp_g *g, void *arg)
{
	(void)g;
	(void)arg;
	gmp_park(NULL, NULL); /* on the scheduler's stack: not a task */
	return false;
}

static void parker_task(void *arg)
{
	(void)arg;
	gmp_park(park_in_unlock, NULL);
}

static void child_park_in_unlock(void *arg)
{
	(void)arg;
	tu_init(1);
	gmp_go(parker_task, NULL);
	sleep(10);
}

/* Outside any task it aborts (test_sched_park_outside_task_aborts); in
 * an unlock function, which runs on the scheduler's stack, as well. */
static void test_misuse_park_in_unlock_function_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_park_in_unlock, NULL, "outside a task");
}

/* ---- gmp_exit outside a task --------------------------------------------------- */

static void child_exit_outside(void *arg)
{
	(void)arg;
	gmp_exit();
}

static void test_misuse_exit_outside_task_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_exit_outside, NULL,
			"gmp_exit called outside a task");
}

/* ---- gmp_exit from gmp_main's function ------------------------------------------ */

/* As Go's main calling runtime.Goexit: the other tasks (and the ending
 * task's key destructors) run on, new ones too, and once no task is left
 * the program aborts, since gmp_main can never return fn's result. The
 * child's tasks write a line each as they end; the abort must come after
 * all of them. */
enum { MAIN_EXIT_WORKERS = 4 };

static void say(const char *line)
{
	ssize_t unused = write(2, line, strlen(line));
	(void)unused;
}

static void main_exit_late(void *arg)
{
	(void)arg;
	gmp_sleep(30 * 1000000);
	say("late done\n");
}

static void main_exit_worker(void *arg)
{
	uintptr_t k = (uintptr_t)arg;
	gmp_sleep((int64_t)(k + 1) * 20 * 1000000);
	if (k == 0)
		T_ASSERT(gmp_go(main_exit_late, NULL) > 0);
	say("worker done\n");
}

static void main_exit_dtor(void *v)
{
	(void)v;
	gmp_sleep(10 * 1000000); /* a switch point on the ending task */
	say("main dtor done\n");
}

static int main_exit_fn(void *arg)
{
	(void)arg;
	static gmp_key key;
	static int one = 1;
	T_ASSERT(gmp_key_create(&key, main_exit_dtor) == 0);
	T_ASSERT(gmp_setspecific(key, &one) == 0);
	for (uintptr_t k = 0; k < MAIN_EXIT_WORKERS; k++)
		T_ASSERT(gmp_go(main_exit_worker, (void *)k) > 0);
	gmp_exit();
}

static void child_main_exit(void *arg)
{
	(void)arg;
	alarm(20); /* a hang fails the test, not the whole CTest run */
	gmp_config c = { .maxprocs = 2 };
	T_ASSERT(gmp_init(&c) == 0);
	gmp_main(main_exit_fn, NULL);
	say("gmp_main returned\n");
}

static void test_misuse_main_exit_aborts_when_no_task_left(void **s)
{
	(void)s;
	const char *msg = "gmp: no tasks left (gmp_main's function called "
			  "gmp_exit): deadlock\n";
	char err[4096];
	int status = tu_run_child(child_main_exit, NULL, err, sizeof err);
	const char *abort_at = strstr(err, msg);
	int workers = 0;
	const char *last = err;
	for (const char *w = err; (w = strstr(w, "worker done")); w++) {
		workers++;
		last = w;
	}
	const char *late = strstr(err, "late done");
	const char *dtor = strstr(err, "main dtor done");
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT || !abort_at ||
	    workers != MAIN_EXIT_WORKERS || last > abort_at || !late ||
	    late > abort_at || !dtor || dtor > abort_at) {
		fprintf(stderr, "child status %#x, stderr:\n%s\n", status, err);
		fail_msg("expected every task to end, then '%s'", msg);
	}
}

/* ---- gmp_ready of a task that is not waiting ---------------------------------------- */

static _Atomic(gmp_g *) ended_g;
static atomic_int ended;

static void ends_at_once(void *arg)
{
	(void)arg;
	atomic_store(&ended_g, gmp_current());
}

static void dead_done(void *arg)
{
	(void)arg;
	atomic_store(&ended, 1);
}

static void child_ready_dead(void *arg)
{
	(void)arg;
	tu_init(1);
	T_ASSERT(gmp_go(ends_at_once, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&ended_g));
	/* Once its successor has run, the first task has surely ended. */
	T_ASSERT(gmp_go(dead_done, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&ended));
	/* Its exit is over (DEAD), not merely past its last line. */
	TU_WAIT_FOR(gmp__readgstatus(atomic_load(&ended_g)) == GMP__G_DEAD);
	gmp_ready(atomic_load(&ended_g)); /* its G is dead and unused */
	sleep(5);
}

static void test_misuse_ready_of_dead_task_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_ready_dead, NULL, "is dead, not waiting");
}

static void spin_then_ready(void *arg)
{
	(void)arg;
	/* The other task is RUNNABLE (queued behind us on the only P). */
	gmp_ready(atomic_load(&ended_g));
}

static void queued(void *arg)
{
	(void)arg;
}

static void first_task(void *arg)
{
	(void)arg;
	int64_t id = gmp_go(queued, NULL);
	T_ASSERT(id > 0);
	/* Find the queued G: it is the runnext of our P. */
	gmp__m *m = gmp__getm();
	atomic_store(&ended_g, gmp__loadp_rlx(&m->p->runnext));
	spin_then_ready(NULL);
}

static void child_ready_runnable(void *arg)
{
	(void)arg;
	tu_init(1);
	T_ASSERT(gmp_go(first_task, NULL) > 0);
	sleep(5);
}

/* Running: test_sched_ready_of_running_task_aborts; queued (runnable): */
static void test_misuse_ready_of_runnable_task_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_ready_runnable, NULL, "is runnable, not waiting");
}

static void child_ready_null(void *arg)
{
	(void)arg;
	tu_init(1);
	gmp_ready(NULL);
}

static void test_misuse_ready_of_null_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_ready_null, NULL, "gmp_ready of a NULL task");
}

static void child_ready_after_shutdown(void *arg)
{
	(void)arg;
	tu_init(1);
	T_ASSERT(gmp_go(ends_at_once, NULL) > 0);
	T_ASSERT(gmp_shutdown() == 0);
	gmp_ready(atomic_load(&ended_g)); /* its memory is gone */
}

static void test_misuse_ready_after_shutdown_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_ready_after_shutdown, NULL,
			"while the runtime is not running");
}

/* ---- every call after gmp_shutdown -------------------------------------------------- */

static atomic_int after_ran;

static void after_task(void *arg)
{
	(void)arg;
	atomic_fetch_add(&after_ran, 1);
}

static int after_main(void *arg)
{
	after_task(arg);
	return 0;
}

static void *chan_peer(void *arg)
{
	int v = 0;
	T_ASSERT(gmp_chan_recv(arg, &v) == 0 && v == 42);
	return NULL;
}

/* The runtime off again: each call has a defined answer (design.md §1.2 and
 * docs/guide.md's table): the ones that need the runtime start it afresh, the
 * reading ones report nothing, the task-only ones do nothing, and the
 * synchronisation calls work between plain threads. */
static void test_misuse_calls_after_shutdown(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(after_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	int64_t base = gmp__alloc_live();

	/* Nothing running: reading and task-only calls. */
	assert_int_equal(gmp_shutdown(), 0);
	gmp_stats st;
	memset(&st, 0xff, sizeof st);
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(st.procs, 0);
	assert_int_equal(st.threads_total, 0);
	assert_int_equal(st.tasks_live, 0);
	assert_int_equal(gmp_self(), 0);
	assert_null(gmp_current());
	gmp_yield();
	gmp_preempt_point();
	gmp_enter_syscall();
	gmp_exit_syscall();
	gmp_enter_syscall_block();
	gmp_exit_syscall();
	gmp_lock_os_thread();
	gmp_unlock_os_thread();
	gmp_key key;
	assert_int_equal(gmp_key_create(&key, NULL), 0);
	assert_int_equal(gmp_setspecific(key, &key), -EPERM);
	assert_null(gmp_getspecific(key));
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(st.procs, 0); /* none of these started it */

	/* Synchronisation between plain threads needs no runtime. */
	gmp_mutex mu = GMP_MUTEX_INIT;
	gmp_mutex_lock(&mu);
	assert_false(gmp_mutex_trylock(&mu));
	gmp_mutex_unlock(&mu);
	gmp_wg wg = GMP_WG_INIT;
	gmp_wg_add(&wg, 1);
	gmp_wg_done(&wg);
	gmp_wg_wait(&wg);
	gmp_chan *c = gmp_chan_new(sizeof(int), 0);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, chan_peer, c), 0);
	int v = 42;
	assert_int_equal(gmp_chan_send(c, &v), 0);
	pthread_join(th, NULL);
	gmp_chan_close(c);
	assert_int_equal(gmp_chan_recv(c, &v), -EPIPE);
	gmp_chan_free(c);
	int64_t t0 = gmp_nanotime();
	gmp_sleep(2000000);
	assert_true(gmp_nanotime() - t0 >= 2000000);
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(st.procs, 0);
	assert_int_equal(gmp__alloc_live(), base);

	/* The calls that need the runtime start it again, with defaults. */
	atomic_store(&after_ran, 0);
	assert_true(gmp_go(after_task, NULL) > 0);
	assert_true(tu_stats().procs > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&after_ran), 1);
	assert_true(gmp_set_maxprocs(0) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp_set_max_threads(0), 10000);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp_main(after_main, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&after_ran), 2);
	assert_int_equal(gmp__alloc_live(), base);
}

/* Keys run out at GMP_KEYS_MAX: the next gmp_key_create says -EAGAIN, and
 * keeps saying it; the last key made works like any other. */
static gmp_key last_key;
static atomic_int last_key_ok;

static void last_key_task(void *arg)
{
	(void)arg;
	int v = 7;
	if (gmp_getspecific(last_key) == NULL &&
	    gmp_setspecific(last_key, &v) == 0 &&
	    gmp_getspecific(last_key) == &v)
		atomic_store(&last_key_ok, 1);
	gmp_setspecific(last_key, NULL);
}

static void test_misuse_keys_run_out(void **s)
{
	(void)s;
	assert_int_equal(gmp_key_create(NULL, NULL), -EINVAL);
	gmp_key k;
	int r, made = 0;
	while ((r = gmp_key_create(&k, NULL)) == 0 && made <= GMP_KEYS_MAX) {
		last_key = k;
		made++;
	}
	assert_int_equal(r, -EAGAIN);
	assert_true(made >= 1);
	/* Ids run from 1: the last one made is the GMP_KEYS_MAX-th key of
	 * the process, whatever other tests here made before. */
	assert_int_equal(last_key.id, GMP_KEYS_MAX);
	assert_int_equal(gmp_key_create(&k, NULL), -EAGAIN);
	tu_init(1);
	assert_true(gmp_go(last_key_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&last_key_ok), 1);
}

/* ---- the section 12 synchronisation types ------------------------------------------ */

static void child_runlock_unlocked(void *arg)
{
	(void)arg;
	gmp_rwmutex rw = GMP_RWMUTEX_INIT;
	gmp_rwmutex_runlock(&rw);
}

static void child_runlock_write_locked(void *arg)
{
	(void)arg;
	gmp_rwmutex rw = GMP_RWMUTEX_INIT;
	gmp_rwmutex_lock(&rw);
	gmp_rwmutex_runlock(&rw);
}

static void child_unlock_unlocked_rw(void *arg)
{
	(void)arg;
	gmp_rwmutex rw = GMP_RWMUTEX_INIT;
	gmp_rwmutex_unlock(&rw);
}

static void child_unlock_read_locked(void *arg)
{
	(void)arg;
	gmp_rwmutex rw = GMP_RWMUTEX_INIT;
	gmp_rwmutex_rlock(&rw);
	gmp_rwmutex_unlock(&rw);
}

static void test_misuse_rwmutex_unlock_not_held_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_runlock_unlocked, NULL,
			"runlock of unlocked rwmutex");
	tu_expect_abort(child_runlock_write_locked, NULL,
			"runlock of write-locked rwmutex");
	tu_expect_abort(child_unlock_unlocked_rw, NULL,
			"unlock of unlocked rwmutex");
	tu_expect_abort(child_unlock_read_locked, NULL,
			"unlock of read-locked rwmutex");
}

/* A runlock while a writer holds the lock with readers queued behind it
 * (the reader count alone does not show it) is caught at once, by the
 * mark the writer keeps in the wait count while it holds the lock. */
static gmp_rwmutex mis_rw = GMP_RWMUTEX_INIT;

static void queued_reader(void *arg)
{
	(void)arg;
	gmp_rwmutex_rlock(&mis_rw);
}

static void child_runlock_write_locked_queued(void *arg)
{
	(void)arg;
	tu_init(2);
	gmp_rwmutex_lock(&mis_rw);
	T_ASSERT(gmp_go(queued_reader, NULL) > 0);
	TU_WAIT_FOR(gmp__sema_nwaiters(
			    &gmp__rwmutex_words_of(&mis_rw)->reader_sem) == 1);
	gmp_rwmutex_runlock(&mis_rw);
	gmp_rwmutex_unlock(&mis_rw);
	sleep(10);
}

static void test_misuse_rwmutex_runlock_queued_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_runlock_write_locked_queued, NULL,
			"runlock of write-locked rwmutex");
}

static gmp_once mis_once = GMP_ONCE_INIT;

static void once_again(void *arg)
{
	(void)arg;
	gmp_once_do(&mis_once, once_again, NULL);
}

static void once_task(void *arg)
{
	(void)arg;
	gmp_once_do(&mis_once, once_again, NULL);
}

static void child_once_recursive_thread(void *arg)
{
	(void)arg;
	gmp_once_do(&mis_once, once_again, NULL);
}

static void child_once_recursive_task(void *arg)
{
	(void)arg;
	tu_init(1);
	T_ASSERT(gmp_go(once_task, NULL) > 0);
	sleep(10);
}

static void test_misuse_once_recursive_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_once_recursive_thread, NULL,
			"called from its own fn");
	tu_expect_abort(child_once_recursive_task, NULL,
			"called from its own fn");
}

static void child_cond_wait_unlocked(void *arg)
{
	(void)arg;
	gmp_cond c = GMP_COND_INIT;
	gmp_mutex mu = GMP_MUTEX_INIT;
	gmp_cond_wait(&c, &mu);
}

static void test_misuse_cond_wait_without_mutex_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_cond_wait_unlocked, NULL, "unlocked");
}

static void child_sem_negative(void *arg)
{
	(void)arg;
	gmp_sem sem;
	gmp_sem_init(&sem, -1);
}

static void child_sem_overflow(void *arg)
{
	(void)arg;
	gmp_sem sem;
	gmp_sem_init(&sem, INT64_MAX);
	gmp_sem_release(&sem);
}

static void test_misuse_sem_bad_counts_abort(void **s)
{
	(void)s;
	tu_expect_abort(child_sem_negative, NULL, "negative count");
	tu_expect_abort(child_sem_overflow, NULL, "beyond INT64_MAX");
}

/* ---- timers ------------------------------------------------------------------ */

/* arg selects the call: 0 chan, 1 stop, 2 reset, 3 free of NULL; 4 reset
 * with a negative delay, 5 with a negative period; 6 free with a receiver
 * still blocked on the timer's channel. */
static void timer_blocked_recv(void *arg)
{
	int64_t v;
	gmp_chan_recv(gmp_timer_chan(arg), &v);
}

static void child_timer_misuse(void *arg)
{
	int which = (int)(intptr_t)arg;
	tu_init(1);
	gmp_timer *t = gmp_timer_new(SEC, 0);
	T_ASSERT(t);
	switch (which) {
	case 0:
		gmp_timer_chan(NULL);
		break;
	case 1:
		gmp_timer_stop(NULL);
		break;
	case 2:
		gmp_timer_reset(NULL, 0, 0);
		break;
	case 3:
		gmp_timer_free(NULL);
		break;
	case 4:
		gmp_timer_reset(t, -1, 0);
		break;
	case 5:
		gmp_timer_reset(t, 0, -1);
		break;
	case 6:
		T_ASSERT(gmp_go(timer_blocked_recv, t) > 0);
		TU_WAIT_FOR(tu_stats().tasks_waiting == 1);
		gmp_timer_free(t);
		break;
	}
}

static void test_misuse_timer_null_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_timer_misuse, (void *)0,
			"gmp_timer_chan of a NULL timer");
	tu_expect_abort(child_timer_misuse, (void *)1,
			"gmp_timer_stop of a NULL timer");
	tu_expect_abort(child_timer_misuse, (void *)2,
			"gmp_timer_reset of a NULL timer");
	tu_expect_abort(child_timer_misuse, (void *)3,
			"gmp_timer_free of a NULL timer");
}

static void test_misuse_timer_reset_negative_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_timer_misuse, (void *)4,
			"gmp_timer_reset with a negative delay");
	tu_expect_abort(child_timer_misuse, (void *)5,
			"gmp_timer_reset with a negative period");
}

static void test_misuse_timer_free_with_receiver_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_timer_misuse, (void *)6,
			"free of a channel with receivers still waiting");
}

static void test_misuse_timer_bad_arguments(void **s)
{
	(void)s;
	/* NULL, and the runtime is not started by them. */
	assert_null(gmp_timer_new(-1, 0));
	assert_null(gmp_timer_new(0, -5));
	assert_null(gmp_timer_func(-1, nop, NULL));
	assert_null(gmp_timer_func(0, NULL, NULL));
	assert_int_equal(tu_stats().procs, 0);
}

GMP_TEST_MAIN(cmocka_unit_test(test_misuse_go_null),
	      cmocka_unit_test(test_misuse_bad_config_values),
	      cmocka_unit_test(test_misuse_bad_env_despite_config),
	      cmocka_unit_test(test_misuse_init_from_task_while_draining),
	      cmocka_unit_test(test_misuse_park_in_unlock_function_aborts),
	      cmocka_unit_test(test_misuse_exit_outside_task_aborts),
	      cmocka_unit_test(test_misuse_main_exit_aborts_when_no_task_left),
	      cmocka_unit_test(test_misuse_ready_of_dead_task_aborts),
	      cmocka_unit_test(test_misuse_ready_of_runnable_task_aborts),
	      cmocka_unit_test(test_misuse_ready_of_null_aborts),
	      cmocka_unit_test(test_misuse_ready_after_shutdown_aborts),
	      cmocka_unit_test(test_misuse_calls_after_shutdown),
	      cmocka_unit_test(test_misuse_rwmutex_unlock_not_held_aborts),
	      cmocka_unit_test(test_misuse_rwmutex_runlock_queued_aborts),
	      cmocka_unit_test(test_misuse_once_recursive_aborts),
	      cmocka_unit_test(test_misuse_cond_wait_without_mutex_aborts),
	      cmocka_unit_test(test_misuse_sem_bad_counts_abort),
	      cmocka_unit_test(test_misuse_timer_null_aborts),
	      cmocka_unit_test(test_misuse_timer_reset_negative_aborts),
	      cmocka_unit_test(test_misuse_timer_free_with_receiver_aborts),
	      cmocka_unit_test(test_misuse_timer_bad_arguments),
	      /* last: no key can be made after it in this process */
	      cmocka_unit_test(test_misuse_keys_run_out))
