/* Helpers shared by the scheduler-level test suites. */
#ifndef GMP_TEST_UTIL_H
#define GMP_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gmp.h>

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
