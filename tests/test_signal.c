/* Stack overflow detection (design.md §2.4, §6): a task that overflows its
 * stack into the guard page is reported and the program aborts; every
 * other SIGSEGV reaches the handler that was there before gmp_init (the
 * program's, a sanitizer's, or the default action). Each case that crashes
 * runs in a forked child. */
#include <pthread.h>

#include "gmp_test.h"
#include "export_test.h"

/* A child exits with this when the task it runs got no guard page (the
 * parent then skips: there is nothing to catch the overflow). */
enum { NO_GUARD = 77, OWN_HANDLER = 42 };

/* ---- deep recursion ----------------------------------------------------------- */

/* Frames of a few hundred bytes, so the recursion walks into the guard
 * page instead of jumping over it. Not instrumented by ASan: its fake
 * stacks (detect_stack_use_after_return) would move the frames off the
 * task's stack. */
__attribute__((noinline, no_sanitize_address)) static int
recurse(volatile char *up, int depth)
{
	volatile char frame[384];
	if (depth < 0)
		return 0; /* never: keeps -Winfinite-recursion quiet */
	frame[0] = (char)depth;
	frame[sizeof frame - 1] = up ? up[0] : 0;
	return recurse(frame, depth + 1) + frame[1];
}

static void overflow_task(void *arg)
{
	(void)arg;
	gmp_g *g = gmp_current();
	if (!g->stack.guarded)
		_exit(NO_GUARD);
	/* Tell the parent which task and stack to expect in the message. */
	fprintf(stderr, "task %lld stack %#lx-%#lx\n", (long long)gmp_self(),
		(unsigned long)g->stack.lo, (unsigned long)g->stack.hi);
	recurse(NULL, 0);
}

static void blocked_reader(void *arg)
{
	int fd = *(int *)arg;
	char c;
	gmp_enter_syscall();
	ssize_t r = read(fd, &c, 1);
	gmp_exit_syscall();
	(void)r;
}

struct overflow_args {
	int procs;
	int blocked; /* tasks to keep in blocked syscalls first (more Ms) */
};

static void child_overflow(void *arg)
{
	struct overflow_args *a = arg;
	static int fds[2];
	T_ASSERT(pipe(fds) == 0);
	tu_init(a->procs);
	for (int i = 0; i < a->blocked; i++)
		T_ASSERT(gmp_go(blocked_reader, &fds[0]) > 0);
	TU_WAIT_FOR(tu_stats().tasks_in_syscall >= (uint64_t)a->blocked);
	T_ASSERT(gmp_go(overflow_task, NULL) > 0);
	sleep(20); /* the overflow aborts long before */
}

static void expect_overflow_report(struct overflow_args *a)
{
	char err[8192];
	int status = tu_run_child(child_overflow, a, err, sizeof err);
	if (WIFEXITED(status) && WEXITSTATUS(status) == NO_GUARD)
		skip(); /* e.g. GMP_STACK_GUARD=never, or no guard installed */
	long long id = 0;
	unsigned long lo = 0, hi = 0;
	const char *line = strstr(err, "task ");
	if (!line ||
	    sscanf(line, "task %lld stack %lx-%lx", &id, &lo, &hi) != 3)
		fail_msg("child printed no task line; status %#x, stderr:\n%s",
			 status, err);
	char want[160];
	snprintf(want, sizeof want,
		 "gmp: stack overflow in task %lld (stack %#lx-%#lx)\n", id, lo,
		 hi);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT ||
	    !strstr(err, want))
		fail_msg("expected SIGABRT and '%s'; status %#x, stderr:\n%s",
			 want, status, err);
}

static void test_signal_stack_overflow_reported(void **s)
{
	(void)s;
	struct overflow_args a = { 1, 0 };
	expect_overflow_report(&a);
}

/* Every M has its alternate stack, not only the first: the overflowing
 * task here runs on one of many Ms made while others block. */
static void test_signal_stack_overflow_on_a_later_thread(void **s)
{
	(void)s;
	struct overflow_args a = { 2, 12 };
	expect_overflow_report(&a);
}

/* ---- every M has an alternate signal stack ------------------------------------ */

static atomic_int altstack_ok;

static void check_altstack(void *arg)
{
	(void)arg;
	stack_t ss;
	T_ASSERT(sigaltstack(NULL, &ss) == 0);
	if (!(ss.ss_flags & SS_DISABLE) && ss.ss_size >= 16 * 1024)
		atomic_fetch_add(&altstack_ok, 1);
	int fd[2];
	T_ASSERT(pipe(fd) == 0);
	/* Block the thread a moment, so the next tasks need other Ms. */
	tu_syscall_sleep(20 * MS, false);
	close(fd[0]);
	close(fd[1]);
}

static void test_signal_every_thread_has_an_altstack(void **s)
{
	(void)s;
	atomic_store(&altstack_ok, 0);
	tu_init(2);
	for (int i = 0; i < 16; i++)
		assert_true(gmp_go(check_altstack, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&altstack_ok), 16);
}

/* ---- faults that are not overflows ---------------------------------------------- */

/* A NULL-page dereference, as `p->field = 1` with p NULL does; not NULL
 * itself, which UBSan would report before the fault happened. */
#define FAULT_ADDR 8

static void null_deref(void *arg)
{
	(void)arg;
	volatile uintptr_t a = FAULT_ADDR;
	*(volatile int *)a = 1;
}

/* cmocka catches SIGSEGV in the test process; a child stands for a plain
 * program, which has the default action. */
static void default_segv(void)
{
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
}

static void child_null_in_task(void *arg)
{
	(void)arg;
	default_segv();
	tu_init(1);
	T_ASSERT(gmp_go(null_deref, NULL) > 0);
	sleep(20);
}

static void child_null_outside_task(void *arg)
{
	(void)arg;
	default_segv();
	tu_init(1);
	null_deref(NULL);
}

/* With no handler of the program's, the fault is the default action's:
 * death by SIGSEGV. (The child set SIG_DFL, replacing cmocka's handler and
 * a sanitizer's, which test_signal_program_handler_gets_other_faults
 * stands for.) */
static void expect_default_segv(void (*fn)(void *))
{
	char err[8192];
	int status = tu_run_child(fn, NULL, err, sizeof err);
	if (strstr(err, "stack overflow"))
		fail_msg("a plain fault was reported as an overflow:\n%s", err);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
		fail_msg("expected death by SIGSEGV; status %#x, stderr:\n%s",
			 status, err);
}

static void test_signal_null_deref_in_task_is_default_segv(void **s)
{
	(void)s;
	expect_default_segv(child_null_in_task);
}

static void test_signal_null_deref_outside_task_is_default_segv(void **s)
{
	(void)s;
	expect_default_segv(child_null_outside_task);
}

static void own_handler_siginfo(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	static const char msg[] = "own handler\n";
	ssize_t unused = write(2, msg, sizeof msg - 1);
	(void)unused;
	_exit(sig == SIGSEGV && (uintptr_t)si->si_addr == FAULT_ADDR
		      ? OWN_HANDLER
		      : 1);
}

static void own_handler_plain(int sig)
{
	static const char msg[] = "own plain handler\n";
	ssize_t unused = write(2, msg, sizeof msg - 1);
	(void)unused;
	_exit(sig == SIGSEGV ? OWN_HANDLER : 1);
}

static void child_own_handler(void *arg)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	if (arg) {
		sa.sa_sigaction = own_handler_siginfo;
		sa.sa_flags = SA_SIGINFO;
	} else {
		sa.sa_handler = own_handler_plain;
	}
	sigemptyset(&sa.sa_mask);
	T_ASSERT(sigaction(SIGSEGV, &sa, NULL) == 0);
	tu_init(2);
	T_ASSERT(gmp_go(null_deref, NULL) > 0);
	sleep(20);
}

static void test_signal_program_handler_gets_other_faults(void **s)
{
	(void)s;
	char err[4096];
	int status =
		tu_run_child(child_own_handler, (void *)1, err, sizeof err);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != OWN_HANDLER ||
	    !strstr(err, "own handler"))
		fail_msg("status %#x, stderr:\n%s", status, err);
	status = tu_run_child(child_own_handler, NULL, err, sizeof err);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != OWN_HANDLER ||
	    !strstr(err, "own plain handler"))
		fail_msg("status %#x, stderr:\n%s", status, err);
}

/* gmp_init installs the handler, gmp_shutdown puts back what was there;
 * a handler the program installs meanwhile is left alone. */
static void test_signal_handler_restored_at_shutdown(void **s)
{
	(void)s;
	struct sigaction before, during, after;
	assert_int_equal(sigaction(SIGSEGV, NULL, &before), 0);
	tu_init(1);
	assert_int_equal(sigaction(SIGSEGV, NULL, &during), 0);
	assert_true(during.sa_flags & SA_SIGINFO);
	assert_true(during.sa_flags & SA_ONSTACK);
	assert_ptr_not_equal(during.sa_sigaction, before.sa_sigaction);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(sigaction(SIGSEGV, NULL, &after), 0);
	assert_ptr_equal(after.sa_sigaction, before.sa_sigaction);
	assert_int_equal(after.sa_flags & SA_SIGINFO,
			 before.sa_flags & SA_SIGINFO);

	tu_init(1);
	struct sigaction mine, saved;
	memset(&mine, 0, sizeof mine);
	mine.sa_handler = own_handler_plain;
	sigemptyset(&mine.sa_mask);
	assert_int_equal(sigaction(SIGSEGV, &mine, &saved), 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(sigaction(SIGSEGV, NULL, &after), 0);
	assert_ptr_equal(after.sa_handler, own_handler_plain);
	assert_int_equal(sigaction(SIGSEGV, &before, NULL), 0);
}

GMP_TEST_MAIN(
	cmocka_unit_test(test_signal_stack_overflow_reported),
	cmocka_unit_test(test_signal_stack_overflow_on_a_later_thread),
	cmocka_unit_test(test_signal_every_thread_has_an_altstack),
	cmocka_unit_test(test_signal_null_deref_in_task_is_default_segv),
	cmocka_unit_test(test_signal_null_deref_outside_task_is_default_segv),
	cmocka_unit_test(test_signal_program_handler_gets_other_faults),
	cmocka_unit_test(test_signal_handler_restored_at_shutdown))
