/* gmp_set_deadline (design.md §11.3): deadlines on read, write, accept and
 * connect; a deadline set, moved or cleared while a call waits; past and
 * cleared deadlines; several waiters in one direction; plain threads,
 * including a deadline changed while they wait in poll(2); gmp_close
 * clearing it; bad arguments. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include "gmp_test.h"

#include "export_test.h"

/* ---- helpers ---------------------------------------------------------------- */

static void nb_socketpair(int sv[2])
{
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
}

static int listen_loopback(uint16_t *port, int backlog)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	T_ASSERT(fd >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_ASSERT(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	T_ASSERT(listen(fd, backlog) == 0);
	socklen_t len = sizeof sa;
	T_ASSERT(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Whether thread tid is blocked in ppoll(2) now (/proc's view of it: the
 * kernel function it sleeps in, which qemu-user passes through as the
 * host's, or else its system call number). */
static bool in_ppoll(pid_t tid)
{
	char path[64], buf[128];
	snprintf(path, sizeof path, "/proc/self/task/%d/wchan", (int)tid);
	FILE *f = fopen(path, "r");
	bool r = false;
	if (f) {
		r = fgets(buf, sizeof buf, f) && strstr(buf, "poll");
		fclose(f);
	}
	if (r)
		return true;
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
	if (!(f = fopen(path, "r")))
		return false;
	r = fgets(buf, sizeof buf, f) && atol(buf) == SYS_ppoll;
	fclose(f);
	return r;
}

/* A call that returned -ETIMEDOUT did so at its deadline or after it, and
 * not absurdly later. */
static void check_timed_out(int64_t deadline)
{
	int64_t now = gmp_nanotime();
	T_ASSERT(now >= deadline);
	T_ASSERT(now - deadline < 10 * SEC);
}

/* ---- read, write, accept, connect from a task ------------------------------------ */

static void read_task(void *arg)
{
	(void)arg;
	int sv[2];
	nb_socketpair(sv);
	char buf[16];
	int64_t dl = gmp_nanotime() + 50 * MS;
	T_ASSERT(gmp_set_deadline(sv[0], GMP_READ, dl) == 0);
	T_ASSERT(gmp_read(sv[0], buf, sizeof buf) == -ETIMEDOUT);
	check_timed_out(dl);
	/* The deadline holds until changed: the next read fails at once. */
	int64_t t0 = gmp_nanotime();
	T_ASSERT(gmp_read(sv[0], buf, sizeof buf) == -ETIMEDOUT);
	T_ASSERT(gmp_nanotime() - t0 < SEC);
	/* Data already there is returned, deadline or not. */
	T_ASSERT(write(sv[1], "abc", 3) == 3);
	T_ASSERT(gmp_read(sv[0], buf, sizeof buf) == 3);
	/* Only reads: a write goes through. */
	T_ASSERT(gmp_write(sv[0], "x", 1) == 1);
	T_ASSERT(gmp_close(sv[0]) == 0);
	T_ASSERT(close(sv[1]) == 0);
}

static void test_deadline_read(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(read_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* A read whose deadline was cleared waits until data comes. */
static int clr_sv[2];

static void cleared_reader(void *arg)
{
	(void)arg;
	char c;
	T_ASSERT(gmp_set_deadline(clr_sv[0], GMP_READ, gmp_nanotime() - 1) ==
		 0);
	T_ASSERT(gmp_read(clr_sv[0], &c, 1) == -ETIMEDOUT);
	T_ASSERT(gmp_set_deadline(clr_sv[0], GMP_READ, 0) == 0);
	T_ASSERT(gmp_read(clr_sv[0], &c, 1) == 1);
	T_ASSERT(c == 'z');
}

static void test_deadline_past_and_cleared(void **s)
{
	(void)s;
	nb_socketpair(clr_sv);
	tu_init(1);
	/* A past deadline with data there returns the data. */
	assert_int_equal(write(clr_sv[1], "q", 1), 1);
	assert_int_equal(gmp_set_deadline(clr_sv[0], GMP_READ, 1), 0);
	char c;
	assert_int_equal(gmp_read(clr_sv[0], &c, 1), 1);
	assert_int_equal(gmp_set_deadline(clr_sv[0], GMP_READ, -5), 0);
	assert_int_equal(gmp_read(clr_sv[0], &c, 1), -ETIMEDOUT);
	assert_int_equal(gmp_set_deadline(clr_sv[0], GMP_READ, 0), 0);
	assert_true(gmp_go(cleared_reader, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
	tu_sleep(50 * MS); /* it must still be waiting: no deadline */
	assert_int_equal(tu_stats().tasks_waiting, 1);
	assert_int_equal(write(clr_sv[1], "z", 1), 1);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp_close(clr_sv[0]), 0);
	close(clr_sv[1]);
}

static void write_task(void *arg)
{
	(void)arg;
	int sv[2];
	nb_socketpair(sv);
	int small = 4096;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	size_t n = 4 << 20;
	char *buf = calloc(1, n);
	T_ASSERT(buf);
	int64_t dl = gmp_nanotime() + 50 * MS;
	T_ASSERT(gmp_set_deadline(sv[0], GMP_WRITE, dl) == 0);
	/* Stopped by the deadline after some bytes: that count. */
	ssize_t r = gmp_write(sv[0], buf, n);
	T_ASSERT(r > 0 && (size_t)r < n);
	check_timed_out(dl);
	/* Full, deadline past: nothing written, -ETIMEDOUT at once. */
	T_ASSERT(gmp_write(sv[0], buf, n) == -ETIMEDOUT);
	/* A read deadline does not touch writes and vice versa. */
	T_ASSERT(gmp_set_deadline(sv[0], GMP_READ, 1) == 0);
	T_ASSERT(gmp_set_deadline(sv[0], GMP_WRITE, 0) == 0);
	char c;
	T_ASSERT(gmp_read(sv[0], &c, 1) == -ETIMEDOUT);
	free(buf);
	T_ASSERT(gmp_close(sv[0]) == 0);
	T_ASSERT(close(sv[1]) == 0);
}

static void test_deadline_write_full_socket(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(write_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

static void accept_task(void *arg)
{
	(void)arg;
	uint16_t port;
	int lfd = listen_loopback(&port, 16);
	int64_t dl = gmp_nanotime() + 50 * MS;
	T_ASSERT(gmp_set_deadline(lfd, GMP_READ, dl) == 0);
	T_ASSERT(gmp_accept(lfd, NULL, NULL) == -ETIMEDOUT);
	check_timed_out(dl);
	T_ASSERT(gmp_close(lfd) == 0);
}

static void test_deadline_accept(void **s)
{
	(void)s;
	tu_init(1);
	assert_true(gmp_go(accept_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* A listener whose backlog is full and who never accepts: the kernel
 * drops further SYNs, so a connect stays in progress until its deadline. */
static void connect_task(void *arg)
{
	(void)arg;
	uint16_t port;
	int lfd = listen_loopback(&port, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fds[64], nfds = 0;
	bool timed_out = false;
	while (nfds < 64 && !timed_out) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		T_ASSERT(fd >= 0);
		fds[nfds++] = fd;
		int64_t dl = gmp_nanotime() + 100 * MS;
		T_ASSERT(gmp_set_deadline(fd, GMP_WRITE, dl) == 0);
		int r = gmp_connect(fd, (struct sockaddr *)&sa, sizeof sa);
		if (r == -ETIMEDOUT) {
			check_timed_out(dl);
			timed_out = true;
		} else {
			T_ASSERT(r == 0);
		}
	}
	T_ASSERT(timed_out);
	for (int i = 0; i < nfds; i++)
		T_ASSERT(gmp_close(fds[i]) == 0);
	T_ASSERT(gmp_close(lfd) == 0);
}

static void test_deadline_connect_full_backlog(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(connect_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- changed while a task waits ------------------------------------------------ */

static int wt_sv[2];
static atomic_llong wt_result;
static atomic_llong wt_at;

static void waiting_reader(void *arg)
{
	(void)arg;
	char c;
	ssize_t r = gmp_read(wt_sv[0], &c, 1);
	atomic_store(&wt_at, (long long)gmp_nanotime());
	atomic_store(&wt_result, (long long)r);
}

static void start_waiting_reader(void)
{
	atomic_store(&wt_result, 1000);
	assert_true(gmp_go(waiting_reader, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
}

static void test_deadline_set_while_task_waits(void **s)
{
	(void)s;
	nb_socketpair(wt_sv);
	tu_init(2);
	/* Set from this thread (no P) while the task is parked. */
	start_waiting_reader();
	int64_t dl = gmp_nanotime() + 30 * MS;
	assert_int_equal(gmp_set_deadline(wt_sv[0], GMP_READ, dl), 0);
	TU_WAIT_FOR(atomic_load(&wt_result) != 1000);
	assert_int_equal(atomic_load(&wt_result), -ETIMEDOUT);
	assert_true(atomic_load(&wt_at) >= dl);

	/* Moved later while it waits: it waits for the later one. */
	assert_int_equal(gmp_set_deadline(wt_sv[0], GMP_READ, 0), 0);
	start_waiting_reader();
	assert_int_equal(gmp_set_deadline(wt_sv[0], GMP_READ,
					  gmp_nanotime() + 20 * MS),
			 0);
	dl = gmp_nanotime() + 300 * MS;
	assert_int_equal(gmp_set_deadline(wt_sv[0], GMP_READ, dl), 0);
	TU_WAIT_FOR(atomic_load(&wt_result) != 1000);
	assert_int_equal(atomic_load(&wt_result), -ETIMEDOUT);
	assert_true(atomic_load(&wt_at) >= dl);

	/* Set and then cleared while it waits: data ends the wait. */
	assert_int_equal(gmp_set_deadline(wt_sv[0], GMP_READ, 0), 0);
	start_waiting_reader();
	assert_int_equal(gmp_set_deadline(wt_sv[0], GMP_READ,
					  gmp_nanotime() + 30 * MS),
			 0);
	assert_int_equal(gmp_set_deadline(wt_sv[0], GMP_READ, 0), 0);
	tu_sleep(100 * MS);
	assert_int_equal(atomic_load(&wt_result), 1000);
	assert_int_equal(write(wt_sv[1], "d", 1), 1);
	TU_WAIT_FOR(atomic_load(&wt_result) != 1000);
	assert_int_equal(atomic_load(&wt_result), 1);

	/* Moved into the past while it waits: it fails now. */
	start_waiting_reader();
	assert_int_equal(gmp_set_deadline(wt_sv[0], GMP_READ, 1), 0);
	TU_WAIT_FOR(atomic_load(&wt_result) != 1000);
	assert_int_equal(atomic_load(&wt_result), -ETIMEDOUT);

	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp_close(wt_sv[0]), 0);
	close(wt_sv[1]);
}

/* Several tasks in one direction (the slot and the list) and a task in
 * gmp_poll_fd, which no deadline touches. */
static int many_sv[2];
static atomic_int many_timed_out;
static atomic_int poll_done;

static void many_reader(void *arg)
{
	(void)arg;
	char c;
	if (gmp_read(many_sv[0], &c, 1) == -ETIMEDOUT)
		atomic_fetch_add(&many_timed_out, 1);
}

static void many_poller(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_poll_fd(many_sv[0], POLLIN, -1) & POLLIN);
	atomic_store(&poll_done, 1);
}

static void test_deadline_many_waiters(void **s)
{
	(void)s;
	nb_socketpair(many_sv);
	tu_init(2);
	assert_true(gmp_go(many_poller, NULL) > 0);
	for (int i = 0; i < 8; i++)
		assert_true(gmp_go(many_reader, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 9);
	assert_int_equal(gmp_set_deadline(many_sv[0], GMP_READ,
					  gmp_nanotime() + 20 * MS),
			 0);
	TU_WAIT_FOR(atomic_load(&many_timed_out) == 8);
	tu_sleep(20 * MS);
	assert_int_equal(atomic_load(&poll_done), 0);
	assert_int_equal(write(many_sv[1], "p", 1), 1);
	TU_WAIT_FOR(atomic_load(&poll_done) == 1);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp_close(many_sv[0]), 0);
	close(many_sv[1]);
}

/* ---- plain threads ------------------------------------------------------------- */

static int th_sv[2];
static atomic_int th_ready;

struct th_arg {
	pid_t tid;
	atomic_llong result;
	atomic_llong at;
};

static void *thread_reader(void *p)
{
	struct th_arg *a = p;
	a->tid = tu_gettid();
	atomic_store(&th_ready, 1);
	char c;
	ssize_t r = gmp_read(th_sv[0], &c, 1);
	atomic_store(&a->at, (long long)gmp_nanotime());
	atomic_store(&a->result, (long long)r);
	return NULL;
}

static void thread_cases(void)
{
	nb_socketpair(th_sv);
	char c;
	/* A deadline set before the wait. */
	int64_t dl = gmp_nanotime() + 40 * MS;
	assert_int_equal(gmp_set_deadline(th_sv[0], GMP_READ, dl), 0);
	assert_int_equal(gmp_read(th_sv[0], &c, 1), -ETIMEDOUT);
	assert_true(gmp_nanotime() >= dl);
	assert_int_equal(gmp_set_deadline(th_sv[0], GMP_READ, 0), 0);

	/* Set while two threads wait in poll(2); then a wait without a
	 * deadline still blocks (the eventfd was emptied) and data ends it. */
	for (int round = 0; round < 2; round++) {
		struct th_arg a[2];
		pthread_t t[2];
		for (int i = 0; i < 2; i++) {
			atomic_store(&th_ready, 0);
			atomic_store(&a[i].result, 1000);
			assert_int_equal(pthread_create(&t[i], NULL,
							thread_reader, &a[i]),
					 0);
			TU_WAIT_FOR(atomic_load(&th_ready));
			TU_WAIT_FOR(in_ppoll(a[i].tid));
		}
		if (round == 0) {
			dl = gmp_nanotime() + 30 * MS;
			assert_int_equal(
				gmp_set_deadline(th_sv[0], GMP_READ, dl), 0);
			for (int i = 0; i < 2; i++) {
				pthread_join(t[i], NULL);
				assert_int_equal(atomic_load(&a[i].result),
						 -ETIMEDOUT);
				assert_true(atomic_load(&a[i].at) >= dl);
			}
			assert_int_equal(
				gmp_set_deadline(th_sv[0], GMP_READ, 0), 0);
		} else {
			/* A deadline set and moved later, then cleared: they
			 * go back to waiting, in poll(2) again. */
			assert_int_equal(
				gmp_set_deadline(th_sv[0], GMP_READ,
						 gmp_nanotime() + 20 * MS),
				0);
			assert_int_equal(
				gmp_set_deadline(th_sv[0], GMP_READ, 0), 0);
			tu_sleep(60 * MS);
			for (int i = 0; i < 2; i++) {
				assert_int_equal(atomic_load(&a[i].result),
						 1000);
				TU_WAIT_FOR(in_ppoll(a[i].tid));
			}
			assert_int_equal(write(th_sv[1], "ab", 2), 2);
			for (int i = 0; i < 2; i++)
				pthread_join(t[i], NULL);
			for (int i = 0; i < 2; i++)
				assert_int_equal(atomic_load(&a[i].result), 1);
		}
	}
	assert_int_equal(gmp_close(th_sv[0]), 0);
	close(th_sv[1]);
}

static void test_deadline_plain_thread(void **s)
{
	(void)s;
	thread_cases(); /* runtime off */
	tu_init(2);
	thread_cases(); /* runtime on */
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- gmp_close clears it; bad arguments -------------------------------------------- */

static void test_deadline_close_clears(void **s)
{
	(void)s;
	tu_init(1);
	int sv[2], tv[2];
	nb_socketpair(sv);
	/* A high number, which nothing else takes once it is closed. */
	int num = fcntl(sv[0], F_DUPFD_CLOEXEC, 600);
	assert_true(num >= 600);
	close(sv[0]);
	sv[0] = num;
	assert_int_equal(gmp_set_deadline(sv[0], GMP_READ | GMP_WRITE, 1), 0);
	assert_int_equal(gmp_close(sv[0]), 0);
	assert_int_equal(gmp_set_deadline(num, GMP_READ, 1), -EBADF);
	/* The number's next file starts without a deadline. */
	nb_socketpair(tv);
	assert_true(dup2(tv[0], num) == num);
	assert_int_equal(write(tv[1], "n", 1), 1);
	char c;
	assert_int_equal(gmp_poll_fd(num, POLLIN, 5 * SEC), POLLIN);
	assert_int_equal(gmp_read(num, &c, 1), 1);
	/* Nothing there and no deadline: the poll times out, the read is
	 * not failed by the old file's deadline. */
	assert_int_equal(gmp_poll_fd(num, POLLIN, 20 * MS), 0);
	assert_int_equal(gmp_write(num, "w", 1), 1);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp_close(num), 0);
	close(tv[0]);
	close(tv[1]);
	close(sv[1]);
}

static void test_deadline_bad_arguments(void **s)
{
	(void)s;
	int sv[2];
	nb_socketpair(sv);
	for (int on = 0; on < 2; on++) {
		if (on)
			tu_init(1);
		assert_int_equal(gmp_set_deadline(sv[0], 0, 1), -EINVAL);
		assert_int_equal(gmp_set_deadline(sv[0], 4, 1), -EINVAL);
		assert_int_equal(gmp_set_deadline(sv[0], GMP_READ | 8, 1),
				 -EINVAL);
		assert_int_equal(gmp_set_deadline(sv[0], -1, 1), -EINVAL);
		assert_int_equal(gmp_set_deadline(-1, GMP_READ, 1), -EBADF);
		assert_int_equal(gmp_set_deadline(900 + on, GMP_READ, 1),
				 -EBADF);
		assert_int_equal(
			gmp_set_deadline(sv[0], GMP_READ | GMP_WRITE, 0), 0);
		if (on)
			assert_int_equal(gmp_shutdown(), 0);
	}
	close(sv[0]);
	close(sv[1]);
}

/* ---- a deadline pushed ahead before every request ----------------------------------- */

/* A server that pushes a connection's read deadline a minute ahead before
 * each read arms the descriptor's deadline timer once, not at every
 * read (design.md §11.3). The peer thread answers each of the reader's
 * parks with a byte. */
enum { PUSH_ROUNDS = 200 };
static int push_sv[2];
static atomic_int push_round;

static void *push_peer(void *arg)
{
	(void)arg;
	for (int i = 0; i < PUSH_ROUNDS; i++) {
		/* The reader is parked in round i (tasks_waiting counts it). */
		TU_WAIT_FOR(atomic_load(&push_round) == i &&
			    tu_stats().tasks_waiting >= 1);
		T_ASSERT(write(push_sv[1], "x", 1) == 1);
	}
	return NULL;
}

static void push_reader(void *arg)
{
	(void)arg;
	uint64_t before = gmp__pd_deadline_arms();
	char c;
	for (int i = 0; i < PUSH_ROUNDS; i++) {
		T_ASSERT(gmp_set_deadline(push_sv[0], GMP_READ,
					  gmp_nanotime() + 60 * SEC) == 0);
		atomic_store(&push_round, i);
		T_ASSERT(gmp_read(push_sv[0], &c, 1) == 1);
	}
	uint64_t arms = gmp__pd_deadline_arms() - before;
	if (arms > 2)
		fprintf(stderr, "%llu arms for %d reads\n",
			(unsigned long long)arms, PUSH_ROUNDS);
	T_ASSERT(arms >= 1 && arms <= 2);
}

static void test_deadline_pushed_ahead_arms_once(void **s)
{
	(void)s;
	tu_init(2);
	nb_socketpair(push_sv);
	atomic_store(&push_round, -1);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, push_peer, NULL), 0);
	assert_true(gmp_go(push_reader, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	close(push_sv[0]);
	close(push_sv[1]);
}

/* The timer armed for an earlier deadline fires before a later one that
 * replaced it; the wait it ends must park again and still time out at
 * the later deadline, not before. */
static void moved_later_task(void *arg)
{
	(void)arg;
	int sv[2];
	nb_socketpair(sv);
	char c;
	/* Arm the descriptor's timer for 100 ms from now; data at once. */
	T_ASSERT(gmp_set_deadline(sv[0], GMP_READ, gmp_nanotime() + 100 * MS) ==
		 0);
	T_ASSERT(write(sv[1], "a", 1) == 1);
	T_ASSERT(gmp_read(sv[0], &c, 1) == 1);
	/* A wait that parks: the timer is armed for 100 ms, before this. */
	int64_t dl = gmp_nanotime() + 100 * MS;
	T_ASSERT(gmp_set_deadline(sv[0], GMP_READ, dl) == 0);
	T_ASSERT(gmp_read(sv[0], &c, 1) == -ETIMEDOUT);
	check_timed_out(dl);
	/* Now the deadline moves later while nobody waits; the timer is
	 * idle (it fired) or armed for before it. */
	dl = gmp_nanotime() + 150 * MS;
	T_ASSERT(gmp_set_deadline(sv[0], GMP_READ, dl) == 0);
	T_ASSERT(gmp_read(sv[0], &c, 1) == -ETIMEDOUT);
	check_timed_out(dl);
	/* Armed for a minute, then moved to 50 ms: the wait re-arms it
	 * earlier. */
	T_ASSERT(gmp_set_deadline(sv[0], GMP_READ, gmp_nanotime() + 60 * SEC) ==
		 0);
	T_ASSERT(write(sv[1], "b", 1) == 1);
	T_ASSERT(gmp_read(sv[0], &c, 1) == 1);
	dl = gmp_nanotime() + 50 * MS;
	T_ASSERT(gmp_set_deadline(sv[0], GMP_READ, dl) == 0);
	T_ASSERT(gmp_read(sv[0], &c, 1) == -ETIMEDOUT);
	check_timed_out(dl);
	T_ASSERT(gmp_nanotime() - dl < 5 * SEC);
	T_ASSERT(gmp_close(sv[0]) == 0);
	close(sv[1]);
}

static void test_deadline_moved_later_and_earlier(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(moved_later_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

GMP_TEST_MAIN(cmocka_unit_test(test_deadline_read),
	      cmocka_unit_test(test_deadline_past_and_cleared),
	      cmocka_unit_test(test_deadline_write_full_socket),
	      cmocka_unit_test(test_deadline_accept),
	      cmocka_unit_test(test_deadline_connect_full_backlog),
	      cmocka_unit_test(test_deadline_set_while_task_waits),
	      cmocka_unit_test(test_deadline_many_waiters),
	      cmocka_unit_test(test_deadline_plain_thread),
	      cmocka_unit_test(test_deadline_close_clears),
	      cmocka_unit_test(test_deadline_bad_arguments),
	      cmocka_unit_test(test_deadline_pushed_ahead_arms_once),
	      cmocka_unit_test(test_deadline_moved_later_and_earlier))
