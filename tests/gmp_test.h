/* Shared scaffolding for the cmocka suites: the main function, and every
 * helper that more than one suite uses. A helper only one suite needs
 * stays in that suite.
 *
 * Each test program takes an optional case name as argv[1] and runs only
 * that case, so CTest can give every case its own process and timeout.
 *
 * Ordering. Tests do not order events by sleeping "long enough" (start a
 * task, sleep 50 ms, assume it has parked): a slow host (qemu-user, TSan,
 * a loaded CI machine) breaks every such guess. They wait instead, with
 * TU_WAIT_FOR, for something they can observe: a flag the other side
 * sets, a task's status or a primitive's waiter count (through
 * export_test.h), a count in gmp_stats. Sleeps are left where time itself
 * is what is tested (a timeout, a sleep's length, what sysmon does once a
 * call has lasted so long, the time a child is given to abort), and where
 * nothing observable marks the moment, as for a thread of the test's own
 * blocked inside poll(2) (a comment there says so). */
#ifndef GMP_TEST_H
#define GMP_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <gmp.h>

#define GMP_TEST_MAIN(...)                                                     \
	int main(int argc, char **argv)                                        \
	{                                                                      \
		const struct CMUnitTest gmp_tests_[] = { __VA_ARGS__ };        \
		if (argc > 1)                                                  \
			cmocka_set_test_filter(argv[1]);                       \
		return cmocka_run_group_tests(gmp_tests_, NULL, NULL);         \
	}

/* Durations in nanoseconds, the unit of every gmp_ call and of the
 * helpers here. */
#define US ((int64_t)1000)
#define MS ((int64_t)1000000)
#define SEC ((int64_t)1000000000)

/* An assertion for code running inside tasks or on other threads, where
 * cmocka's assert macros (which longjmp to the test's thread) must not be
 * used: it reports and aborts the whole test program. */
#define T_ASSERT(c)                                                            \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: T_ASSERT(%s) failed\n",        \
				__FILE__, __LINE__, #c);                       \
			abort();                                               \
		}                                                              \
	} while (0)

/* ThreadSanitizer runs every live task on a fiber of its own and allows
 * about 8,000 of them at once, and it is 5-15x slower; AddressSanitizer
 * with detect_stack_use_after_return gives every task a fake stack. Tests
 * scale their task counts with TU_SCALE(n): n normally, n/100 (at least
 * 1000) under TSan, n/10 under ASan. */
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifndef TU_TSAN
#define TU_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif
#define TU_SCALE(n)                                                            \
	(TU_TSAN   ? ((n) / 100 > 1000 ? (n) / 100 : 1000)                     \
	 : TU_ASAN ? (n) / 10                                                  \
		   : (n))

/* An arm64 binary that reads an x86 /proc/cpuinfo runs under qemu-user
 * (which passes the host's through). */
static inline bool tu_under_qemu(void)
{
#if defined(__aarch64__)
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];
	bool x86 = false;
	while (f && !x86 && fgets(line, sizeof line, f))
		x86 = !strncmp(line, "vendor_id", 9);
	if (f)
		fclose(f);
	return x86;
#else
	return false;
#endif
}

/* How many times longer than natively a host thread may take to run once
 * it is woken: qemu-user emulates every thread, TSan slows each by 5-15x,
 * and either shares the two CPUs here with whatever else CI runs. For
 * bounds on how late something wakes where the host scheduler, not the
 * runtime, decides most of the delay; not for the runtime's own
 * timeouts. */
static inline int tu_host_slowdown(void)
{
	return TU_TSAN || tu_under_qemu() ? 5 : 1;
}

/* ---- time, threads, the runtime ------------------------------------------ */

static inline int64_t tu_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline pid_t tu_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static inline void tu_init(int procs)
{
	gmp_config c = { .maxprocs = procs };
	assert_int_equal(gmp_init(&c), 0);
}

/* A snapshot of the runtime's counters (all 0 while it is off). From
 * anywhere: a task, a thread, a forked child. */
static inline gmp_stats tu_stats(void)
{
	gmp_stats st;
	T_ASSERT(gmp_stats_read(&st) == 0);
	return st;
}

/* Sleeps the calling thread for ns, however many signals interrupt it.
 * In a task it holds the task's thread and P, as any plain blocking call
 * does: the task stays RUNNING, which is sometimes the point. */
static inline void tu_sleep(int64_t ns)
{
	struct timespec ts = { ns / SEC, ns % SEC };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A system call of ns that blocks, wrapped as gmp.h asks: with
 * gmp_enter_syscall (sysmon may retake the P), or with block,
 * gmp_enter_syscall_block (the P is handed off at once). */
static inline void tu_syscall_sleep(int64_t ns, bool block)
{
	if (block)
		gmp_enter_syscall_block();
	else
		gmp_enter_syscall();
	tu_sleep(ns);
	gmp_exit_syscall();
}

/* ---- waiting for a condition --------------------------------------------- */

/* How long TU_WAIT_FOR waits before it gives up: far longer than any wait
 * here takes under qemu-user or a sanitizer on a loaded host, and shorter
 * than CTest's native 120 s per case, so that a hang reports what it was
 * waiting for. */
#define TU_WAIT_NS (100 * SEC)

/* Whether the caller may use cmocka's assertions: the test's own thread,
 * not a task, not a forked child (tu_run_child). */
static inline bool *tu_in_child_(void)
{
	static bool in_child;
	return &in_child;
}

static inline bool tu_on_test_thread_(void)
{
	return !*tu_in_child_() && gmp_current() == NULL &&
	       tu_gettid() == getpid();
}

/* The end of a TU_WAIT_FOR that timed out: names the condition and the
 * scheduler's state (so that a lost wakeup reads as one), then fails the
 * case, or aborts where cmocka cannot be used. */
static inline void tu_wait_failed_(const char *file, int line, const char *what)
{
	gmp_stats st;
	gmp_stats_read(&st);
	char msg[1024];
	snprintf(msg, sizeof msg,
		 "%s:%d: gave up after %lld s waiting for: %s\n"
		 "  tasks: live %llu, runnable %llu, waiting %llu, in syscall "
		 "%llu; procs %llu (idle %llu); threads %llu (idle %llu, "
		 "spinning %llu); global runq %llu",
		 file, line, (long long)(TU_WAIT_NS / SEC), what,
		 (unsigned long long)st.tasks_live,
		 (unsigned long long)st.tasks_runnable,
		 (unsigned long long)st.tasks_waiting,
		 (unsigned long long)st.tasks_in_syscall,
		 (unsigned long long)st.procs,
		 (unsigned long long)st.procs_idle,
		 (unsigned long long)st.threads_total,
		 (unsigned long long)st.threads_idle,
		 (unsigned long long)st.threads_spinning,
		 (unsigned long long)st.global_runq_len);
	if (tu_on_test_thread_()) {
		print_error("%s\n", msg);
		_fail(file, line);
	}
	fprintf(stderr, "%s\n", msg);
	abort();
}

/* Between two looks: a task yields (so that, on one P, what it waits for
 * can run), anything else sleeps its thread briefly. Inside a
 * gmp_enter_syscall window gmp_yield does nothing, so a task must not
 * wait there with TU_WAIT_FOR (it would spin). */
static inline void tu_wait_pause_(void)
{
	if (gmp_current())
		gmp_yield();
	else
		tu_sleep(100 * US);
}

/* Waits until cond holds, looking again and again for up to TU_WAIT_NS;
 * then fails the test, naming cond. From the test's thread, a task, a
 * thread of the test's own, or a forked child. cond is evaluated many
 * times. */
#define TU_WAIT_FOR(cond)                                                      \
	do {                                                                   \
		int64_t tu_deadline_ = tu_now_ns() + TU_WAIT_NS;               \
		while (!(cond)) {                                              \
			if (tu_now_ns() > tu_deadline_)                        \
				tu_wait_failed_(__FILE__, __LINE__, #cond);    \
			tu_wait_pause_();                                      \
		}                                                              \
	} while (0)

/* ---- forked children ----------------------------------------------------- */

/* Runs fn(arg) in a forked child with stderr captured; returns the child's
 * wait status and copies what it wrote to stderr into err (NUL-ended). */
static inline int tu_run_child(void (*fn)(void *), void *arg, char *err,
			       size_t errsz)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		*tu_in_child_() = true;
		dup2(fds[1], 2);
		close(fds[0]);
		/* No core dumps from deliberate aborts. */
		signal(SIGABRT, SIG_DFL);
		fn(arg);
		_exit(0);
	}
	close(fds[1]);
	size_t n = 0;
	ssize_t r;
	while (n + 1 < errsz && (r = read(fds[0], err + n, errsz - n - 1)) > 0)
		n += (size_t)r;
	err[n] = 0;
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

/* Asserts that fn aborts with a "gmp: " message containing `want`. */
static inline void tu_expect_abort(void (*fn)(void *), void *arg,
				   const char *want)
{
	char err[4096];
	int status = tu_run_child(fn, arg, err, sizeof err);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT ||
	    !strstr(err, "gmp: ") || !strstr(err, want)) {
		fprintf(stderr, "child status %#x, stderr:\n%s\n", status, err);
		fail_msg("expected an abort with 'gmp: ...%s'", want);
	}
}

#endif
