/* fork() in a program running libgmp (src/fork.c): the child's runtime is
 * off, whatever the parent was doing; gmp_init there starts a fresh one
 * (never deadlocking on a lock some vanished thread held); a task that
 * forked continues in the child as a plain thread; exec works and sees
 * none of the runtime's descriptors. Each child runs under alarm(), so a
 * deadlock fails the test instead of hanging it. */
#include <pthread.h>
#include <sys/wait.h>

#include "gmp_test.h"

enum { CHILD_ALARM_S = 20 };

/* Where the child of a multi-threaded fork cannot start threads, and so
 * no fresh runtime: ThreadSanitizer (it dies, or with die_after_fork=0
 * trips over its records of the parent's threads) and qemu-user 7.2 (its
 * own assertions fail: "cpu == current_cpu"). */
#define SKIP_WHERE_CHILD_CANNOT_THREAD()                                       \
	do {                                                                   \
		if (TU_TSAN || tu_under_qemu()) {                              \
			print_message("skipped: %s cannot start threads in "   \
				      "the child of a threaded fork\n",        \
				      TU_TSAN ? "TSan" : "qemu-user");         \
			skip();                                                \
		}                                                              \
	} while (0)

/* ---- a busy parent ----------------------------------------------------------------
 *
 * Tasks that spawn, talk over channels, contend on a mutex, sleep, do
 * I/O and sit in syscalls, so that at the instant of fork other threads
 * hold the runtime's locks now and then. */

static struct {
	atomic_int stop;
	atomic_int started; /* busy tasks that have begun */
	atomic_long work;
	gmp_mutex mu;
	gmp_chan *ch;
	int pipefd[2];
	gmp_wg wg;
} busy;

static void busy_leaf(void *arg)
{
	(void)arg;
	atomic_fetch_add(&busy.work, 1);
}

static void busy_spawner(void *arg)
{
	(void)arg;
	atomic_fetch_add(&busy.started, 1);
	while (!atomic_load(&busy.stop)) {
		for (int i = 0; i < 16; i++)
			gmp_go(busy_leaf, NULL);
		gmp_mutex_lock(&busy.mu);
		atomic_fetch_add(&busy.work, 1);
		gmp_mutex_unlock(&busy.mu);
		gmp_yield();
	}
	gmp_wg_done(&busy.wg);
}

static void busy_pinger(void *arg)
{
	int v = (int)(uintptr_t)arg;
	atomic_fetch_add(&busy.started, 1);
	while (!atomic_load(&busy.stop)) {
		gmp_select_case cs[2] = {
			{ .chan = busy.ch, .op = GMP_SELECT_SEND, .elem = &v },
			{ .chan = busy.ch, .op = GMP_SELECT_RECV, .elem = &v },
		};
		gmp_select(cs, 2, 1000000);
		gmp_sleep(50000);
	}
	gmp_wg_done(&busy.wg);
}

static void busy_io(void *arg)
{
	(void)arg;
	char c = 'x';
	atomic_fetch_add(&busy.started, 1);
	while (!atomic_load(&busy.stop)) {
		gmp_write(busy.pipefd[1], &c, 1);
		gmp_read(busy.pipefd[0], &c, 1);
		atomic_fetch_add(&busy.work, 1);
		tu_syscall_sleep(100 * US, false);
	}
	gmp_wg_done(&busy.wg);
}

/* spawners: tasks that spawn others in a loop, whose stacks and records
 * come from malloc. Under ASan they are left out where the parent forks
 * from a thread while they run: ASan's allocator takes no lock around
 * fork (test_fork_repeated_while_busy below), and a child forked while
 * a spawner was inside it waits forever for the lock it inherited. */
static void busy_start(int procs, int spawners)
{
	memset(&busy, 0, sizeof busy);
	assert_int_equal(pipe2(busy.pipefd, O_NONBLOCK | O_CLOEXEC), 0);
	tu_init(procs);
	busy.ch = gmp_chan_new(sizeof(int), 0);
	gmp_wg_add(&busy.wg, spawners + 4);
	for (int i = 0; i < spawners; i++)
		assert_true(gmp_go(busy_spawner, NULL) > 0);
	for (int i = 0; i < 3; i++)
		assert_true(gmp_go(busy_pinger, (void *)(uintptr_t)i) > 0);
	assert_true(gmp_go(busy_io, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&busy.started) == spawners + 4);
	/* A thread the runtime starts allocates in ASan's own start-up, and
	 * ASan's allocator takes no lock around fork: a child forked then
	 * inherits the allocator's lock held, and its runtime's first new
	 * thread waits for it for ever (4-6 runs of 12 of
	 * test_fork_child_starts_fresh_runtime, forking just after this).
	 * Under ASan the forks wait until the runtime has made the threads
	 * this load needs: the count unchanged for 200 ms. */
	if (TU_ASAN) {
		uint64_t prev = 0, n;
		while ((n = tu_stats().threads_total) != prev) {
			prev = n;
			usleep(200 * 1000);
		}
	}
}

static void busy_stop(void)
{
	long before = atomic_load(&busy.work);
	TU_WAIT_FOR(atomic_load(&busy.work) > before); /* parent unharmed */
	atomic_store(&busy.stop, 1);
	gmp_wg_wait(&busy.wg);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(busy.ch);
	close(busy.pipefd[0]);
	close(busy.pipefd[1]);
}

/* ---- what a child does: a fresh runtime, all of it working -------------------------- */

static atomic_int child_ran;

static void child_leaf(void *arg)
{
	gmp_chan *c = arg;
	int v = 1;
	gmp_sleep(1000); /* a timer: the child's own poller */
	T_ASSERT(gmp_chan_send(c, &v) == 0);
	atomic_fetch_add(&child_ran, 1);
}

static void child_io(void *arg)
{
	int *fd = arg;
	char buf[4] = "abc";
	T_ASSERT(gmp_write(fd[1], buf, 3) == 3);
	T_ASSERT(gmp_read(fd[0], buf, 3) == 3);
	atomic_fetch_add(&child_ran, 1);
}

/* In the child: returns 0 if all went well, else a line number. */
static int child_fresh_runtime(void)
{
	alarm(CHILD_ALARM_S);
	if (gmp_self() != 0 || gmp_current() != NULL)
		return __LINE__;
	gmp_stats st;
	if (gmp_stats_read(&st) != 0 || st.procs != 0 || st.threads_total)
		return __LINE__; /* off, whatever the parent was doing */
	if (gmp_shutdown() != 0)
		return __LINE__;
	gmp_config c = { .maxprocs = 2 };
	if (gmp_init(&c) != 0)
		return __LINE__;
	atomic_store(&child_ran, 0);
	gmp_chan *ch = gmp_chan_new(sizeof(int), 0);
	for (int i = 0; i < 200; i++)
		if (gmp_go(child_leaf, ch) <= 0)
			return __LINE__;
	int v;
	for (int i = 0; i < 200; i++)
		if (gmp_chan_recv(ch, &v) != 0)
			return __LINE__;
	int fd[2];
	if (pipe2(fd, O_NONBLOCK) != 0 || gmp_go(child_io, fd) <= 0)
		return __LINE__;
	if (gmp_shutdown() != 0)
		return __LINE__;
	if (atomic_load(&child_ran) != 201)
		return __LINE__;
	gmp_chan_free(ch);
	/* And once more, from scratch. */
	if (gmp_init(NULL) != 0 || gmp_go(child_leaf, NULL) <= 0)
		return __LINE__; /* a nil channel: blocks forever... */
	return -1;               /* ...so the caller must not shut down */
}

/* Forks from this thread; the child checks its fresh runtime and exits.
 * Returns the child's wait status. */
static int fork_and_check(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int r = child_fresh_runtime();
		fflush(NULL);
		_exit(r == -1 ? 0 : (r & 0xff ? r & 0xff : 1));
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

static void expect_clean_child(int status, const char *what)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
		fail_msg("%s: the child deadlocked", what);
	if (WIFEXITED(status))
		fail_msg("%s: the child failed at line %d (mod 256) of %s",
			 what, WEXITSTATUS(status), __FILE__);
	fail_msg("%s: the child died of signal %d", what, WTERMSIG(status));
}

static void test_fork_child_starts_fresh_runtime(void **s)
{
	(void)s;
	SKIP_WHERE_CHILD_CANNOT_THREAD();
	busy_start(2, TU_ASAN ? 0 : 2);
	for (int i = 0; i < 5; i++)
		expect_clean_child(fork_and_check(), "fork from a thread");
	busy_stop();
	/* With the runtime off in the parent, too. */
	expect_clean_child(fork_and_check(), "fork with the runtime off");
}

/* Many forks at random moments of a busy parent: whatever lock a thread
 * of the parent held at that instant, the child must not wait for it. */
static void test_fork_repeated_while_busy(void **s)
{
	(void)s;
	SKIP_WHERE_CHILD_CANNOT_THREAD();
	/* ASan's own allocator (gcc 12's libasan) takes no lock around
	 * fork: a child forked while a parent thread is inside it (a free
	 * refilling the quarantine) inherits that lock held, and the first
	 * thread of the child's runtime to free something waits for it
	 * forever, inside ASan (seen with gdb on a child that hung in CI
	 * here). Nothing of ours holds it. */
	if (TU_ASAN) {
		print_message("skipped: ASan's allocator is not fork-safe "
			      "while other threads allocate\n");
		skip();
	}
	busy_start(4, 2);
	for (int i = 0; i < (TU_TSAN ? 10 : 40); i++) {
		expect_clean_child(fork_and_check(), "fork while busy");
		usleep((useconds_t)(i % 7) * 300);
	}
	busy_stop();
}

/* ---- fork from a task ------------------------------------------------------------- */

static atomic_int task_child_status;

static void forking_task(void *arg)
{
	(void)arg;
	int64_t me = gmp_self();
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		/* The child: this code goes on as a plain thread. */
		int r = 0;
		if (gmp_self() != 0 || gmp_current() != NULL)
			r = __LINE__;
		gmp_yield(); /* does nothing here */
		if (!r)
			r = child_fresh_runtime();
		fflush(NULL);
		_exit(r == -1 ? 0 : (r & 0xff ? r & 0xff : 1));
	}
	T_ASSERT(gmp_self() == me); /* the parent's task goes on */
	int status;
	gmp_enter_syscall();
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	gmp_exit_syscall();
	atomic_store(&task_child_status, status);
}

static void test_fork_from_a_task(void **s)
{
	(void)s;
	SKIP_WHERE_CHILD_CANNOT_THREAD();
	busy_start(2, TU_ASAN ? 0 : 2);
	for (int i = 0; i < 3; i++) {
		atomic_store(&task_child_status, -1);
		assert_true(gmp_go(forking_task, NULL) > 0);
		TU_WAIT_FOR(atomic_load(&task_child_status) != -1);
		expect_clean_child(atomic_load(&task_child_status),
				   "fork from a task");
	}
	busy_stop();
}

/* The task that forked must not end in the child: there it is a plain
 * thread, with no scheduler to return to. */
static void returning_task(void *arg)
{
	int *fds = arg;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 2);
		signal(SIGABRT, SIG_DFL);
		alarm(CHILD_ALARM_S);
		return; /* into the task's exit path */
	}
	close(fds[1]);
	int status;
	gmp_enter_syscall();
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	gmp_exit_syscall();
	fds[2] = status;
}

static void test_fork_task_ending_in_child_aborts(void **s)
{
	(void)s;
	int fds[3];
	assert_int_equal(pipe(fds), 0);
	fds[2] = -1;
	tu_init(1);
	assert_true(gmp_go(returning_task, fds) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	char err[2048];
	ssize_t n = read(fds[0], err, sizeof err - 1);
	err[n > 0 ? n : 0] = 0;
	close(fds[0]);
	if (!WIFSIGNALED(fds[2]) || WTERMSIG(fds[2]) != SIGABRT ||
	    !strstr(err, "gmp: a task that called fork() ended in the child"))
		fail_msg("status %#x, stderr:\n%s", fds[2], err);
}

/* ---- exec ----------------------------------------------------------------------------- */

/* Runs /bin/sh listing its descriptors from a child of fork; returns the
 * listing. The runtime's epoll instance and eventfds are close-on-exec. */
static void exec_listing(char *out, size_t size)
{
	int p[2];
	T_ASSERT(pipe(p) == 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execl("/bin/sh", "sh", "-c",
		      "ls -l /proc/self/fd/ && echo exec-ok", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < size && (r = read(p[0], out + n, size - n - 1)) > 0)
		n += (size_t)r;
	out[n] = 0;
	close(p[0]);
	int status;
	T_ASSERT(waitpid(pid, &status, 0) == pid);
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static char task_listing[8192];
static atomic_int task_listed;

static void exec_task(void *arg)
{
	(void)arg;
	gmp_enter_syscall();
	exec_listing(task_listing, sizeof task_listing);
	gmp_exit_syscall();
	atomic_store(&task_listed, 1);
}

static void test_fork_exec_works_and_leaks_no_descriptor(void **s)
{
	(void)s;
	busy_start(2, 2); /* its I/O makes the epoll instance */
	char listing[8192];
	exec_listing(listing, sizeof listing);
	assert_true(gmp_go(exec_task, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&task_listed));
	assert_true(atomic_load(&task_listed));
	busy_stop();
	const char *ls[] = { listing, task_listing };
	for (int i = 0; i < 2; i++) {
		if (!strstr(ls[i], "exec-ok") || strstr(ls[i], "eventpoll") ||
		    strstr(ls[i], "eventfd"))
			fail_msg("exec from %s saw:\n%s",
				 i ? "a task" : "a thread", ls[i]);
	}
}

GMP_TEST_MAIN(cmocka_unit_test(test_fork_child_starts_fresh_runtime),
	      cmocka_unit_test(test_fork_repeated_while_busy),
	      cmocka_unit_test(test_fork_from_a_task),
	      cmocka_unit_test(test_fork_task_ending_in_child_aborts),
	      cmocka_unit_test(test_fork_exec_works_and_leaks_no_descriptor))
