/* libgmp-hook with GMP_HOOK=off (tests/CMakeLists.txt sets it for this
 * program): loaded, but every hooked call is libc's, in a task too
 * (design.md §12). */
#include "gmp_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

static void test_hook_off_inactive(void **s)
{
	(void)s;
	assert_string_equal(getenv("GMP_HOOK"), "off");
	assert_int_equal(gmp_hook_active(), 0);
}

static _Atomic long got;
static _Atomic int reading;

static void reader(void *arg)
{
	char buf[8];
	atomic_store_explicit(&reading, 1, memory_order_release);
	got = read(*(int *)arg, buf, sizeof buf);
}

/* A task's read on an empty socket blocks its thread and holds its P, as
 * libc's read does: sysmon has to detach the P so that other tasks run. */
static void test_hook_off_task_read_holds_its_thread(void **s)
{
	(void)s;
	tu_init(1);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_true(gmp_go(reader, &sv[0]) > 0);
	TU_WAIT_FOR(atomic_load_explicit(&reading, memory_order_acquire));
	TU_WAIT_FOR(tu_stats().detaches >= 1);
	assert_int_equal(tu_stats().tasks_waiting, 0); /* not parked */
	assert_int_equal(write(sv[1], "x", 1), 1);
	TU_WAIT_FOR(got == 1);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(gmp_shutdown(), 0);
}

/* A value other than on or off is gmp_init's -EINVAL. */
static void test_hook_off_bad_value_fails_init(void **s)
{
	(void)s;
	setenv("GMP_HOOK", "maybe", 1);
	assert_int_equal(gmp_init(NULL), -EINVAL);
	setenv("GMP_HOOK", "on", 1);
	assert_int_equal(gmp_init(NULL), 0);
	assert_int_equal(gmp_hook_active(), 0); /* read when it loaded */
	assert_int_equal(gmp_shutdown(), 0);
	setenv("GMP_HOOK", "off", 1);
}

GMP_TEST_MAIN(cmocka_unit_test(test_hook_off_inactive),
	      cmocka_unit_test(test_hook_off_task_read_holds_its_thread),
	      cmocka_unit_test(test_hook_off_bad_value_fails_init))
