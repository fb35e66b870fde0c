/* Threads (design.md §5): the thread cap and its abort, EAGAIN retries,
 * idle threads reused and (beyond Go) let go after a timeout, LockOSThread
 * (nesting, a locked task keeps its thread and has it to itself, a locked
 * task that ends takes its thread down, threads made while a task is
 * locked come clean from the template thread), the signal mask of new
 * threads, and threads_total. */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>

#include "gmp_test.h"

#include "export_test.h"

/* Waits until *counter reaches want, and asserts it did not overshoot. */
static void wait_count(atomic_int *counter, int want)
{
	TU_WAIT_FOR(atomic_load(counter) >= want);
	assert_int_equal(atomic_load(counter), want);
}

static bool thread_alive(pid_t tid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
	return access(path, F_OK) == 0;
}

/* The thread ids of this process, from /proc/self/task. */
static int list_threads(pid_t *out, int max)
{
	DIR *d = opendir("/proc/self/task");
	T_ASSERT(d != NULL);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && n < max)
			out[n++] = (pid_t)atoi(e->d_name);
	closedir(d);
	return n;
}

/* A burst of n tasks blocked in a wrapped read() on a pipe, all at once:
 * the driver waits until every one is in its syscall (each then holds a
 * thread), reads the stats, and only then writes the n bytes that release
 * them. Gating the burst this way, rather than having each task sleep for
 * a fixed time, makes every burst reach the same peak, so thread counts
 * can be compared across bursts. */
struct gate {
	int fd[2];
	bool block; /* gmp_enter_syscall_block instead of gmp_enter_syscall */
	atomic_int done;
};

static void gated_reader(void *arg)
{
	struct gate *gt = arg;
	char c;
	if (gt->block)
		gmp_enter_syscall_block();
	else
		gmp_enter_syscall();
	ssize_t r = read(gt->fd[0], &c, 1);
	gmp_exit_syscall();
	T_ASSERT(r == 1);
	atomic_fetch_add(&gt->done, 1);
}

/* Whether every M is parked idle: every thread of the runtime's but
 * sysmon. (The template thread would be one more; no case that runs a
 * burst locks a task.) */
static bool all_threads_idle(void)
{
	gmp_stats st = tu_stats();
	return st.threads_idle + 1 == st.threads_total;
}

/* Runs one burst from the test's thread (not a task); returns the stats
 * at its peak. On return every task has ended and its thread parked. */
static gmp_stats gated_burst(struct gate *gt, int n)
{
	atomic_store(&gt->done, 0);
	for (int i = 0; i < n; i++)
		assert_true(gmp_go(gated_reader, gt) > 0);
	gmp_stats peak;
	TU_WAIT_FOR((peak = tu_stats()).tasks_in_syscall >= (uint64_t)n);
	assert_int_equal(peak.tasks_in_syscall, n);
	char buf[64];
	memset(buf, 'x', sizeof buf);
	assert_int_equal(write(gt->fd[1], buf, (size_t)n), n);
	wait_count(&gt->done, n);
	TU_WAIT_FOR(tu_stats().tasks_live == 0);
	assert_int_equal(tu_stats().tasks_live, 0);
	TU_WAIT_FOR(all_threads_idle());
	return peak;
}

/* ---- the thread cap ------------------------------------------------------ */

static void test_thread_set_max_threads_returns_previous(void **s)
{
	(void)s;
	tu_init(2);
	assert_int_equal(gmp_set_max_threads(0), 10000); /* the default */
	assert_int_equal(gmp_set_max_threads(500), 10000);
	assert_int_equal(gmp_set_max_threads(-1), 500); /* only asks */
	assert_int_equal(gmp_set_max_threads(600), 500);
	assert_int_equal(gmp_set_max_threads(0), 600);
	assert_int_equal(gmp_shutdown(), 0);

	gmp_config c = { .maxprocs = 1, .max_threads = 77 };
	assert_int_equal(gmp_init(&c), 0);
	assert_int_equal(gmp_set_max_threads(0), 77);
	assert_int_equal(gmp_shutdown(), 0);

	setenv("GMP_MAX_THREADS", "123", 1);
	tu_init(1);
	unsetenv("GMP_MAX_THREADS");
	assert_int_equal(gmp_set_max_threads(0), 123);
	assert_int_equal(gmp_shutdown(), 0);
}

struct pipe_block {
	int fd[2];
	atomic_int in, done;
};

/* Blocks in read() on a pipe nobody writes to, its P handed off at once:
 * every such task needs a thread of its own. */
static void read_forever(void *arg)
{
	struct pipe_block *pb = arg;
	char c;
	atomic_fetch_add(&pb->in, 1);
	gmp_enter_syscall_block();
	ssize_t r = read(pb->fd[0], &c, 1);
	gmp_exit_syscall();
	(void)r;
	atomic_fetch_add(&pb->done, 1);
}

static void child_exceed_cap(void *arg)
{
	(void)arg;
	static struct pipe_block pb;
	T_ASSERT(pipe(pb.fd) == 0);
	tu_init(1);
	T_ASSERT(gmp_set_max_threads(4) == 10000);
	for (int i = 0; i < 10; i++)
		T_ASSERT(gmp_go(read_forever, &pb) > 0);
	/* Ten blocked readers need ten threads: the fifth must abort. If it
	 * does not, return, and the parent sees a clean exit. */
	sleep(3);
}

static void test_thread_cap_exceeded_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_exceed_cap, NULL,
			"program exceeds 4-thread limit");
}

static void child_cap_below_current(void *arg)
{
	(void)arg;
	static struct pipe_block pb;
	T_ASSERT(pipe(pb.fd) == 0);
	tu_init(2);
	for (int i = 0; i < 6; i++)
		T_ASSERT(gmp_go(read_forever, &pb) > 0);
	TU_WAIT_FOR(tu_stats().tasks_in_syscall >= 6);
	T_ASSERT(tu_stats().tasks_in_syscall == 6);
	/* As debug.SetMaxThreads: a cap below the threads that exist is
	 * exceeded already. */
	gmp_set_max_threads(3);
	sleep(3);
}

static void test_thread_cap_below_current_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_cap_below_current, NULL,
			"program exceeds 3-thread limit");
}

/* ---- EAGAIN from pthread_create ---------------------------------------------- */

static atomic_int eagain_ran;

static void eagain_task(void *arg)
{
	(void)arg;
	atomic_fetch_add(&eagain_ran, 1);
}

static void test_thread_eagain_retried(void **s)
{
	(void)s;
	atomic_store(&eagain_ran, 0);
	tu_init(1); /* sysmon exists; no M yet */
	/* The first M's creation fails three times, then succeeds. */
	gmp__fault_arm(GMP__FAULT_THREAD_EAGAIN, 0, 3);
	assert_true(gmp_go(eagain_task, NULL) > 0);
	wait_count(&eagain_ran, 1);
	/* All three failures were used up: the runtime did retry. */
	assert_false(gmp__fault_hit(GMP__FAULT_THREAD_EAGAIN));
	/* Again for Ms made from inside the runtime (handoffs): six tasks
	 * blocked at once need five more threads; the third of them fails
	 * four times first. */
	struct gate gt = { .block = true };
	assert_int_equal(pipe(gt.fd), 0);
	gmp__fault_arm(GMP__FAULT_THREAD_EAGAIN, 2, 4);
	gmp_stats peak = gated_burst(&gt, 6);
	assert_true(peak.threads_total >= 6 + 1);
	assert_false(gmp__fault_hit(GMP__FAULT_THREAD_EAGAIN));
	gmp__fault_arm(GMP__FAULT_THREAD_EAGAIN, 0, 0);
	assert_true(gmp_go(eagain_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&eagain_ran), 2);
	close(gt.fd[0]);
	close(gt.fd[1]);
}

static void child_eagain_forever(void *arg)
{
	(void)arg;
	tu_init(1);
	gmp__fault_arm(GMP__FAULT_THREAD_EAGAIN, 0, -1);
	gmp_go(eagain_task, NULL); /* needs a first M: never comes */
	sleep(5);
}

static void test_thread_eagain_exhausted_aborts_naming_ulimit(void **s)
{
	(void)s;
	tu_expect_abort(child_eagain_forever, NULL, "ulimit -u");
}

/* ---- idle threads --------------------------------------------------------------- */

static void test_thread_idle_threads_reused(void **s)
{
	(void)s;
	struct gate gt = { .block = false };
	assert_int_equal(pipe(gt.fd), 0);
	tu_init(2);
	uint64_t total[10];
	for (int r = 0; r < 10; r++) {
		gmp_stats peak = gated_burst(&gt, 10);
		/* Ten blocked tasks hold ten threads, plus sysmon. */
		assert_true(peak.threads_total >= 10 + 1);
		total[r] = tu_stats().threads_total;
	}
	print_message("threads_total after each round:");
	for (int r = 0; r < 10; r++)
		print_message(" %llu", (unsigned long long)total[r]);
	print_message("\n");
	/* Later bursts find the first one's threads parked and reuse them.
	 * A round can still make a thread or two more than the first did:
	 * an M that has finished its task but not yet parked cannot be
	 * reused, and on a loaded host handoffs overtake such Ms. Without
	 * reuse every round would add ten. */
	assert_true(total[9] <= total[0] + 2);
	assert_int_equal(gmp_shutdown(), 0);
	close(gt.fd[0]);
	close(gt.fd[1]);
}

static void test_thread_idle_threads_exit_after_timeout(void **s)
{
	(void)s;
	struct gate gt = { .block = true };
	assert_int_equal(pipe(gt.fd), 0);
	setenv("GMP_IDLE_THREAD_TIMEOUT", "0.2", 1);
	tu_init(2);
	unsetenv("GMP_IDLE_THREAD_TIMEOUT");
	gmp_stats peak = gated_burst(&gt, 12);
	assert_true(peak.threads_total >= 12 + 1);
	gmp_stats after = tu_stats();
	print_message(
		"burst: %llu threads; after it: %llu threads, %llu idle\n",
		(unsigned long long)peak.threads_total,
		(unsigned long long)after.threads_total,
		(unsigned long long)after.threads_idle);
	/* Idle Ms beyond maxprocs exit 0.2 s after they parked. */
	int64_t until = tu_now_ns() + 5000 * (int64_t)MS;
	gmp_stats st;
	do {
		usleep(10 * 1000);
		st = tu_stats();
	} while ((st.threads_idle > 2 || st.threads_total > 2 + 1) &&
		 tu_now_ns() < until);
	print_message("a few seconds later: %llu threads, %llu idle\n",
		      (unsigned long long)st.threads_total,
		      (unsigned long long)st.threads_idle);
	assert_true(st.threads_idle <= 2);
	/* Every M is idle now, so the total is those plus sysmon. */
	assert_int_equal(st.threads_total, st.threads_idle + 1);
	assert_true(st.threads_total < after.threads_total);
	/* Threads come back when needed (recycling the exited Ms). */
	peak = gated_burst(&gt, 12);
	assert_true(peak.threads_total >= 12 + 1);
	assert_int_equal(gmp_shutdown(), 0);
	close(gt.fd[0]);
	close(gt.fd[1]);
}

static void test_thread_idle_threads_kept_with_zero_timeout(void **s)
{
	(void)s;
	struct gate gt = { .block = true };
	assert_int_equal(pipe(gt.fd), 0);
	setenv("GMP_IDLE_THREAD_TIMEOUT", "0", 1);
	tu_init(2);
	unsetenv("GMP_IDLE_THREAD_TIMEOUT");
	gated_burst(&gt, 12);
	gmp_stats after = tu_stats();
	assert_true(after.threads_total >= 12 + 1);
	usleep(1500 * 1000);
	gmp_stats later = tu_stats();
	assert_int_equal(later.threads_total, after.threads_total);
	assert_int_equal(later.threads_idle, after.threads_idle);
	assert_int_equal(gmp_shutdown(), 0);
	close(gt.fd[0]);
	close(gt.fd[1]);
}

/* ---- LockOSThread ------------------------------------------------------------------ */

static bool is_locked(void)
{
	gmp_g *g = gmp_current();
	return g && g->lockedm != NULL;
}

struct others {
	atomic_int stop, running;
	atomic_int on_locked; /* another task ran on the locked thread */
	atomic_int locked_tid;
};

/* Keeps the other Ps and threads busy, and watches that it never runs on
 * the locked thread. */
static void other_busy(void *arg)
{
	struct others *o = arg;
	atomic_fetch_add(&o->running, 1);
	while (!atomic_load(&o->stop)) {
		if (tu_gettid() == atomic_load(&o->locked_tid))
			atomic_store(&o->on_locked, 1);
		if (gmp_self() % 2)
			gmp_sleep(200000);
		else
			gmp_yield();
	}
	atomic_fetch_sub(&o->running, 1);
}

struct lock_case {
	struct others o;
	int fd[2];
	atomic_int moved; /* bitmask: which kind of switch changed the tid */
	atomic_int state_bad;
	atomic_int done;
};

static void pipe_writer_later(void *arg)
{
	struct lock_case *lc = arg;
	gmp_sleep(5 * MS);
	T_ASSERT(write(lc->fd[1], "ab", 2) == 2);
}

static void locked_worker(void *arg)
{
	struct lock_case *lc = arg;
	gmp_lock_os_thread();
	gmp_lock_os_thread(); /* nested */
	gmp_unlock_os_thread();
	if (!is_locked())
		atomic_store(&lc->state_bad, 1);
	pid_t tid = tu_gettid();
	atomic_store(&lc->o.locked_tid, tid);
	for (int i = 0; i < 4; i++)
		T_ASSERT(gmp_go(other_busy, &lc->o) > 0);
	for (int i = 0; i < 100; i++) {
		gmp_yield();
		if (tu_gettid() != tid)
			atomic_fetch_or(&lc->moved, 1);
		if (i % 10 == 0) {
			gmp_sleep(1 * MS);
			if (tu_gettid() != tid)
				atomic_fetch_or(&lc->moved, 2);
			tu_syscall_sleep(2 * MS, false);
			if (tu_gettid() != tid)
				atomic_fetch_or(&lc->moved, 4);
		}
	}
	/* Blocking reads, both kinds, unblocked by another task. */
	for (int k = 0; k < 2; k++) {
		char c[2];
		T_ASSERT(gmp_go(pipe_writer_later, lc) > 0);
		if (k)
			gmp_enter_syscall_block();
		else
			gmp_enter_syscall();
		ssize_t r = read(lc->fd[0], c, 2);
		gmp_exit_syscall();
		T_ASSERT(r == 2);
		if (tu_gettid() != tid)
			atomic_fetch_or(&lc->moved, 8);
	}
	/* Still locked once (two locks, one unlock). The others stop before
	 * we unlock, so none may legitimately run here. */
	if (!is_locked())
		atomic_store(&lc->state_bad, 2);
	atomic_store(&lc->o.stop, 1);
	while (atomic_load(&lc->o.running) > 0)
		gmp_yield();
	gmp_unlock_os_thread();
	if (is_locked())
		atomic_store(&lc->state_bad, 3);
	atomic_store(&lc->done, 1);
}

static void test_thread_locked_task_keeps_its_thread(void **s)
{
	(void)s;
	struct lock_case lc = { 0 };
	assert_int_equal(pipe(lc.fd), 0);
	atomic_store(&lc.o.locked_tid, -1);
	tu_init(2);
	assert_true(gmp_go(locked_worker, &lc) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&lc.done), 1);
	assert_int_equal(atomic_load(&lc.state_bad), 0);
	assert_int_equal(atomic_load(&lc.moved), 0);
	assert_int_equal(atomic_load(&lc.o.on_locked), 0);
	close(lc.fd[0]);
	close(lc.fd[1]);
}

static atomic_int nesting_bad;

static void nesting(void *arg)
{
	(void)arg;
	int bad = 0;
	/* Unlocking an unlocked task does nothing, and banks nothing. */
	gmp_unlock_os_thread();
	gmp_unlock_os_thread();
	bad |= is_locked() << 0;
	gmp_lock_os_thread();
	bad |= !is_locked() << 1;
	gmp_unlock_os_thread();
	bad |= is_locked() << 2;
	/* Three deep: locked until the third unlock. */
	gmp_lock_os_thread();
	gmp_lock_os_thread();
	gmp_lock_os_thread();
	gmp_unlock_os_thread();
	gmp_unlock_os_thread();
	bad |= !is_locked() << 3;
	gmp_yield();
	bad |= !is_locked() << 4;
	gmp_unlock_os_thread();
	bad |= is_locked() << 5;
	gmp_unlock_os_thread(); /* one too many: still a no-op */
	bad |= is_locked() << 6;
	atomic_store(&nesting_bad, bad | 1 << 16);
}

static void test_thread_lock_nests_and_unlock_without_lock_is_noop(void **s)
{
	(void)s;
	/* Outside a task both do nothing, before and after gmp_init. */
	gmp_lock_os_thread();
	gmp_unlock_os_thread();
	gmp_unlock_os_thread();
	atomic_store(&nesting_bad, 0);
	tu_init(2);
	gmp_lock_os_thread();
	gmp_unlock_os_thread();
	assert_true(gmp_go(nesting, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&nesting_bad), 1 << 16);
}

struct exiting {
	atomic_int tid[2];
	atomic_int ran;
};

static void lock_and_return(void *arg)
{
	struct exiting *ex = arg;
	gmp_lock_os_thread();
	atomic_store(&ex->tid[0], tu_gettid());
}

static void lock_and_exit(void *arg)
{
	struct exiting *ex = arg;
	gmp_lock_os_thread();
	gmp_lock_os_thread();
	atomic_store(&ex->tid[1], tu_gettid());
	gmp_exit();
}

static void after_exit(void *arg)
{
	struct exiting *ex = arg;
	T_ASSERT(tu_gettid() != atomic_load(&ex->tid[0]));
	T_ASSERT(tu_gettid() != atomic_load(&ex->tid[1]));
	tu_syscall_sleep(10 * MS, true);
	atomic_fetch_add(&ex->ran, 1);
}

static void test_thread_locked_exit_kills_thread(void **s)
{
	(void)s;
	struct exiting ex = { 0 };
	tu_init(2);
	assert_true(gmp_go(lock_and_return, &ex) > 0);
	assert_true(gmp_go(lock_and_exit, &ex) > 0);
	TU_WAIT_FOR(atomic_load(&ex.tid[0]) != 0 &&
		    atomic_load(&ex.tid[1]) != 0);
	pid_t t0 = atomic_load(&ex.tid[0]), t1 = atomic_load(&ex.tid[1]);
	assert_true(t0 > 0 && t1 > 0 && t0 != t1);
	/* Both threads leave with their tasks. */
	TU_WAIT_FOR(!thread_alive(t0) && !thread_alive(t1));
	assert_false(thread_alive(t0));
	assert_false(thread_alive(t1));
	/* The runtime goes on, making threads again (and recycling the
	 * exited Ms' structures). */
	for (int i = 0; i < 8; i++)
		assert_true(gmp_go(after_exit, &ex) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&ex.ran), 8);
}

/* ---- the template thread ------------------------------------------------------------ */

enum { NSPAWN = 4 };

struct taint {
	int fd[2];
	atomic_int blocked_done;
	pid_t locked_tid;
	int ncpus; /* CPUs we may run on at the start */
	int nnew;  /* threads created while tainted */
	int tainted_name, tainted_affinity;
	char err[128];
};

static const char TAINT_NAME[] = "gmp-tainted";

static void blocked_reader(void *arg)
{
	struct taint *t = arg;
	char c;
	gmp_enter_syscall_block();
	ssize_t r = read(t->fd[0], &c, 1);
	gmp_exit_syscall();
	T_ASSERT(r == 1);
	atomic_fetch_add(&t->blocked_done, 1);
}

static void tainting_task(void *arg)
{
	struct taint *t = arg;
	gmp_lock_os_thread(); /* starts the template thread, clean */
	t->locked_tid = tu_gettid();

	cpu_set_t orig, one;
	T_ASSERT(sched_getaffinity(0, sizeof orig, &orig) == 0);
	t->ncpus = CPU_COUNT(&orig);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &orig)) {
			CPU_SET(c, &one);
			break;
		}
	if (t->ncpus > 1)
		T_ASSERT(sched_setaffinity(0, sizeof one, &one) == 0);
	T_ASSERT(pthread_setname_np(pthread_self(), TAINT_NAME) == 0);

	pid_t before[256];
	int nbefore = list_threads(before, 256);

	/* One P: the readers wait in our queue (no idle P to wake). When we
	 * block, our P is handed off from this thread, so the next M is made
	 * from here; each reader then blocks in turn and hands the P on. */
	for (int i = 0; i < NSPAWN; i++)
		T_ASSERT(gmp_go(blocked_reader, t) > 0);
	gmp_enter_syscall_block();
	/* Until every reader blocks in its read, each on a thread made while
	 * we are tainted; no TU_WAIT_FOR inside a syscall window. */
	int64_t give_up = tu_now_ns() + TU_WAIT_NS;
	while (tu_stats().tasks_in_syscall < NSPAWN + 1) {
		T_ASSERT(tu_now_ns() < give_up);
		tu_sleep(1 * MS);
	}
	gmp_exit_syscall();
	T_ASSERT(tu_gettid() == t->locked_tid);

	pid_t now[256];
	int n = list_threads(now, 256);
	for (int i = 0; i < n; i++) {
		bool old = false;
		for (int j = 0; j < nbefore && !old; j++)
			old = before[j] == now[i];
		if (now[i] == t->locked_tid)
			continue;
		t->nnew += !old;
		char path[64], comm[32] = { 0 };
		snprintf(path, sizeof path, "/proc/self/task/%d/comm",
			 (int)now[i]);
		FILE *f = fopen(path, "re");
		if (f) {
			if (!fgets(comm, sizeof comm, f))
				comm[0] = 0;
			fclose(f);
		}
		if (strncmp(comm, TAINT_NAME, strlen(TAINT_NAME)) == 0)
			t->tainted_name++;
		cpu_set_t cs;
		if (t->ncpus > 1 &&
		    sched_getaffinity(now[i], sizeof cs, &cs) == 0 &&
		    CPU_EQUAL(&cs, &one))
			t->tainted_affinity++;
	}
	char bytes[NSPAWN];
	memset(bytes, 'x', sizeof bytes);
	T_ASSERT(write(t->fd[1], bytes, sizeof bytes) == NSPAWN);
	while (atomic_load(&t->blocked_done) < NSPAWN)
		gmp_yield();
	/* Ends locked: the tainted thread goes too. */
}

static void test_thread_template_thread_keeps_new_threads_clean(void **s)
{
	(void)s;
	struct taint t = { 0 };
	assert_int_equal(pipe(t.fd), 0);
	tu_init(1);
	assert_true(gmp_go(tainting_task, &t) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	print_message("%d new threads while locked and tainted; %d with the "
		      "name, %d with the affinity (%d CPUs)\n",
		      t.nnew, t.tainted_name, t.tainted_affinity, t.ncpus);
	assert_true(t.nnew >= NSPAWN);
	assert_int_equal(t.tainted_name, 0);
	assert_int_equal(t.tainted_affinity, 0);
	assert_false(thread_alive(t.locked_tid));
	close(t.fd[0]);
	close(t.fd[1]);
	if (t.ncpus < 2)
		skip(); /* one CPU: the affinity half could not be tried */
}

/* ---- signal masks ---------------------------------------------------------------------- */

struct masks {
	atomic_int wrong;
	atomic_int checked;
};

static void check_mask(struct masks *mk)
{
	sigset_t cur;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	/* Exactly the mask gmp_init's caller had: USR2 blocked, the rest
	 * not (a thread still in its creation mask would block all). */
	if (!sigismember(&cur, SIGUSR2) || sigismember(&cur, SIGUSR1) ||
	    sigismember(&cur, SIGTERM))
		atomic_store(&mk->wrong, 1);
	atomic_fetch_add(&mk->checked, 1);
}

static void mask_checker(void *arg)
{
	struct masks *mk = arg;
	check_mask(mk);
	/* The next one runs on another thread. */
	tu_syscall_sleep(20 * MS, true);
	check_mask(mk);
}

static void test_thread_new_threads_get_init_sigmask(void **s)
{
	(void)s;
	struct masks mk = { 0 };
	sigset_t usr2, old;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &usr2, &old);
	tu_init(2);
	pthread_sigmask(SIG_SETMASK, &old, NULL); /* later changes: ignored */
	for (int i = 0; i < 6; i++)
		assert_true(gmp_go(mask_checker, &mk) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&mk.checked), 12);
	assert_int_equal(atomic_load(&mk.wrong), 0);
}

/* ---- threads_total --------------------------------------------------------------------- */

struct counts {
	gmp_stats unlocked, locked;
	int eagains; /* pthread_create failures to inject before the lock */
};

static void lock_and_count(void *arg)
{
	struct counts *c = arg;
	c->unlocked = tu_stats();
	if (c->eagains)
		gmp__fault_arm(GMP__FAULT_THREAD_EAGAIN, 0, c->eagains);
	gmp_lock_os_thread(); /* the first lock starts the template thread */
	c->locked = tu_stats();
	gmp_unlock_os_thread();
}

static void test_thread_stats_threads_total_counts_sysmon(void **s)
{
	(void)s;
	struct counts c = { .eagains = 0 };
	tu_init(1);
	/* Threads are made on demand: only sysmon so far. */
	gmp_stats st;
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(st.threads_total, 1);
	assert_true(gmp_go(lock_and_count, &c) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	/* sysmon and the M running the task. */
	assert_int_equal(c.unlocked.threads_total, 2);
	assert_int_equal(c.locked.threads_total, 3);
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(st.threads_total, 0);
}

/* The template thread's creation is retried on EAGAIN like an M's. */
static void test_thread_template_thread_eagain_retried(void **s)
{
	(void)s;
	struct counts c = { .eagains = 3 };
	tu_init(1);
	assert_true(gmp_go(lock_and_count, &c) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_false(gmp__fault_hit(GMP__FAULT_THREAD_EAGAIN));
	gmp__fault_arm(GMP__FAULT_THREAD_EAGAIN, 0, 0);
	/* sysmon, the task's M and the template thread. */
	assert_int_equal(c.locked.threads_total, 3);
}

GMP_TEST_MAIN(
	cmocka_unit_test(test_thread_set_max_threads_returns_previous),
	cmocka_unit_test(test_thread_cap_exceeded_aborts),
	cmocka_unit_test(test_thread_cap_below_current_aborts),
	cmocka_unit_test(test_thread_eagain_retried),
	cmocka_unit_test(test_thread_eagain_exhausted_aborts_naming_ulimit),
	cmocka_unit_test(test_thread_idle_threads_reused),
	cmocka_unit_test(test_thread_idle_threads_exit_after_timeout),
	cmocka_unit_test(test_thread_idle_threads_kept_with_zero_timeout),
	cmocka_unit_test(test_thread_locked_task_keeps_its_thread),
	cmocka_unit_test(test_thread_lock_nests_and_unlock_without_lock_is_noop),
	cmocka_unit_test(test_thread_locked_exit_kills_thread),
	cmocka_unit_test(test_thread_template_thread_keeps_new_threads_clean),
	cmocka_unit_test(test_thread_new_threads_get_init_sigmask),
	cmocka_unit_test(test_thread_stats_threads_total_counts_sysmon),
	cmocka_unit_test(test_thread_template_thread_eagain_retried))
