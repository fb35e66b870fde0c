/* libgmp-hook: what a hooked call does while it waits (design.md §12,
 * §32). Tasks blocked in hooked calls hold no thread; a close or dup2
 * over a descriptor a task is parked on wakes it with EBADF; a reused
 * number is a new file; the calls of plain threads, of a forked child and
 * of a task inside gmp_enter_syscall block their thread as libc's do,
 * and a task that sysmon detached takes a P back to park; the runtime's
 * own descriptors cannot be closed; a descriptor's flags are never
 * changed behind its other holders' backs. */
#include "gmp_test.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

/* ---- helpers ------------------------------------------------------------------ */

static int tcp_listener(int *port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(l >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_ASSERT(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0);
	T_ASSERT(listen(l, 128) == 0);
	socklen_t len = sizeof sa;
	T_ASSERT(getsockname(l, (struct sockaddr *)&sa, &len) == 0);
	*port = ntohs(sa.sin_port);
	return l;
}

static int tcp_connect(int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_ASSERT(connect(s, (struct sockaddr *)&sa, sizeof sa) == 0);
	return s;
}

static uint64_t tasks_waiting(void)
{
	return tu_stats().tasks_waiting;
}

/* A task that ticks every 5 ms while `ticking`, counting. */
static _Atomic int ticking, ticks;
static gmp_wg ticker_wg;

static void ticker(void *arg)
{
	(void)arg;
	while (atomic_load_explicit(&ticking, memory_order_acquire)) {
		struct timespec ts = { 0, 5 * MS };
		nanosleep(&ts, NULL); /* hooked: a timer */
		atomic_fetch_add_explicit(&ticks, 1, memory_order_release);
	}
	gmp_wg_done(&ticker_wg);
}

static void ticker_start(void)
{
	ticks = 0;
	ticking = 1;
	gmp_wg_add(&ticker_wg, 1);
	assert_true(gmp_go(ticker, NULL) > 0);
}

static void ticker_stop(void)
{
	atomic_store_explicit(&ticking, 0, memory_order_release);
	gmp_wg_wait(&ticker_wg);
}

/* ---- tasks blocked in hooked calls hold no thread ----------------------------- */

enum { W_READ, W_PIPE, W_POLL, W_SELECT, W_SLEEP, W_KINDS };

struct blocked {
	int kind;
	int fd, peer;
	_Atomic long got;
};

static gmp_wg blocked_wg;
static _Atomic int sleepers_stop;

static void blocked_task(void *arg)
{
	struct blocked *b = arg;
	char buf[8];
	switch (b->kind) {
	case W_READ:
	case W_PIPE:
		b->got = read(b->fd, buf, sizeof buf);
		break;
	case W_POLL: {
		struct pollfd p = { b->fd, POLLIN, 0 };
		b->got = poll(&p, 1, -1) == 1 ? read(b->fd, buf, sizeof buf)
					      : -1;
		break;
	}
	case W_SELECT: {
		fd_set r;
		FD_ZERO(&r);
		FD_SET(b->fd, &r);
		b->got = select(b->fd + 1, &r, NULL, NULL, NULL) == 1
				 ? read(b->fd, buf, sizeof buf)
				 : -1;
		break;
	}
	case W_SLEEP: {
		/* Short sleeps until told: one long sleep could end before
		 * the slowest build has parked them all. */
		int r = 0;
		while (r == 0 && !atomic_load(&sleepers_stop))
			r = usleep(10 * 1000);
		b->got = r == 0 ? 2 : -1;
		break;
	}
	}
	gmp_wg_done(&blocked_wg);
}

/* Whether no thread is held by a blocked task: every thread of the
 * runtime is idle but sysmon, the M blocked in the poller and one that
 * runs the ticker (or spins a moment after it). */
static bool threads_free(void)
{
	gmp_stats st = tu_stats();
	return st.threads_total - st.threads_idle <= 3;
}

/* At maxprocs 2, hundreds of tasks blocked in read, poll, select and
 * sleep hold no thread, and a ticker task keeps ticking. The runtime's
 * threads are the Ps' Ms, sysmon, and Ms it keeps idle: usually
 * maxprocs + 3 in all, but how many Ms the spawning burst needed at one
 * moment depends on the timing (under TSan each spinning M that finds
 * work starts the next before the others are idle again: five in all);
 * the bound is the one that does not depend on the number of tasks. */
static void test_hook_wait_blocked_tasks_hold_no_thread(void **s)
{
	(void)s;
	tu_init(2);
	int n = TU_TSAN ? 100 : 500;
	struct blocked *b = calloc((size_t)n, sizeof *b);
	assert_non_null(b);
	for (int i = 0; i < n; i++) {
		int sv[2];
		b[i].kind = i % W_KINDS;
		if (b[i].kind == W_PIPE)
			assert_int_equal(pipe(sv), 0);
		else
			assert_int_equal(
				socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		b[i].fd = sv[0];
		b[i].peer = sv[1];
	}
	ticker_start();
	sleepers_stop = 0;
	gmp_wg_add(&blocked_wg, n);
	for (int i = 0; i < n; i++)
		assert_true(gmp_go(blocked_task, &b[i]) > 0);
	TU_WAIT_FOR(tasks_waiting() >= (uint64_t)n);
	TU_WAIT_FOR(threads_free());
	int t0 = atomic_load_explicit(&ticks, memory_order_acquire);
	gmp_stats st = tu_stats();
	print_message("%d tasks parked: %llu threads, %llu idle\n", n,
		      (unsigned long long)st.threads_total,
		      (unsigned long long)st.threads_idle);
	assert_true(st.threads_total <= 2 * (2 + 3));
	/* The ticker goes on ticking (every 5 ms; a loose bound). */
	TU_WAIT_FOR(atomic_load_explicit(&ticks, memory_order_acquire) >=
		    t0 + 10);
	for (int i = 0; i < n; i++)
		if (b[i].kind != W_SLEEP)
			assert_int_equal(write(b[i].peer, "wake", 4), 4);
	sleepers_stop = 1;
	gmp_wg_wait(&blocked_wg);
	for (int i = 0; i < n; i++) {
		assert_int_equal(b[i].got, b[i].kind == W_SLEEP ? 2 : 4);
		close(b[i].fd);
		close(b[i].peer);
	}
	TU_WAIT_FOR(threads_free());
	assert_true(tu_stats().threads_total <= 2 * (2 + 3));
	ticker_stop();
	free(b);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- close and dup2 over a parked task ------------------------------------------ */

struct parked {
	int fd;
	_Atomic long got;
	_Atomic int err;
	_Atomic int done;
};

static void parked_reader(void *arg)
{
	struct parked *p = arg;
	char buf[16];
	long r = read(p->fd, buf, sizeof buf);
	p->err = r < 0 ? errno : 0;
	p->got = r;
	atomic_store_explicit(&p->done, 1, memory_order_release);
}

struct closer {
	int fd, other;
	bool dup;
	_Atomic int r;
};

static int closer_task(void *arg)
{
	struct closer *c = arg;
	c->r = c->dup ? dup2(c->other, c->fd) : close(c->fd);
	return 0;
}

static void *closer_thread(void *arg)
{
	closer_task(arg);
	return NULL;
}

static void over_parked(bool dup, bool from_thread)
{
	tu_init(2);
	int sv[2], ov[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, ov), 0);
	struct parked p = { .fd = sv[0] };
	assert_true(gmp_go(parked_reader, &p) > 0);
	TU_WAIT_FOR(tasks_waiting() >= 1);
	struct closer c = { sv[0], ov[0], dup, -2 };
	if (from_thread) {
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, closer_thread, &c),
				 0);
		assert_int_equal(pthread_join(t, NULL), 0);
	} else {
		assert_int_equal(gmp_main(closer_task, &c), 0);
	}
	assert_int_equal(c.r, dup ? sv[0] : 0);
	TU_WAIT_FOR(atomic_load_explicit(&p.done, memory_order_acquire));
	assert_int_equal(p.got, -1);
	assert_int_equal(p.err, EBADF);
	if (dup) {
		/* The number now names ov[0]'s file, and only that. */
		assert_int_equal(write(ov[1], "new", 3), 3);
		char buf[8];
		assert_int_equal(read(sv[0], buf, sizeof buf), 3);
		assert_memory_equal(buf, "new", 3);
		close(sv[0]);
	}
	/* The old peer sees the file gone (for dup2 too). */
	assert_int_equal(write(sv[1], "x", 1), -1);
	assert_int_equal(errno, EPIPE);
	close(sv[1]);
	close(ov[0]);
	close(ov[1]);
	assert_int_equal(gmp_shutdown(), 0);
}

static void test_hook_wait_close_from_task_wakes_parked(void **s)
{
	(void)s;
	signal(SIGPIPE, SIG_IGN);
	over_parked(false, false);
}

static void test_hook_wait_close_from_thread_wakes_parked(void **s)
{
	(void)s;
	signal(SIGPIPE, SIG_IGN);
	over_parked(false, true);
}

static void test_hook_wait_dup2_from_task_wakes_parked(void **s)
{
	(void)s;
	signal(SIGPIPE, SIG_IGN);
	over_parked(true, false);
}

static void test_hook_wait_dup2_from_thread_wakes_parked(void **s)
{
	(void)s;
	signal(SIGPIPE, SIG_IGN);
	over_parked(true, true);
}

/* ---- a number reused ---------------------------------------------------------- */

struct reuse {
	int fd;
	_Atomic long got;
	char buf[16];
};

static void reuse_reader(void *arg)
{
	struct reuse *r = arg;
	r->got = read(r->fd, r->buf, sizeof r->buf);
}

/* A task waits on a descriptor, is woken, and the number is then closed
 * (by code the hooks do not see: the system call itself) and reused for a
 * new file: a task reading the number gets the new file's data. The number
 * is a high one, put back with dup3 made as a system call (which the
 * hooks do not see either): a low number just closed may be taken by a
 * file the runtime opens meanwhile (sysmon reads /proc), so the kernel's
 * next pipe() need not get it back. */
static void test_hook_wait_number_reused(void **s)
{
	(void)s;
	tu_init(1);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	int num = fcntl(sv[0], F_DUPFD_CLOEXEC, 600);
	assert_true(num >= 600);
	assert_int_equal(close(sv[0]), 0);
	struct reuse r = { .fd = num };
	assert_true(gmp_go(reuse_reader, &r) > 0);
	TU_WAIT_FOR(tasks_waiting() >= 1);
	assert_int_equal(write(sv[1], "first", 5), 5);
	TU_WAIT_FOR(r.got == 5);
	/* Closed behind the hooks' back, then reused by a pipe. */
	assert_int_equal(syscall(SYS_close, num), 0);
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(syscall(SYS_dup3, p[0], num, 0), num);
	assert_int_equal(syscall(SYS_close, p[0]), 0);
	r.got = 0;
	assert_true(gmp_go(reuse_reader, &r) > 0);
	TU_WAIT_FOR(tasks_waiting() >= 1);
	assert_int_equal(write(p[1], "second", 6), 6);
	TU_WAIT_FOR(r.got == 6);
	assert_memory_equal(r.buf, "second", 6);
	/* And once more with a close the hooks see, reused by a socket. */
	assert_int_equal(close(num), 0);
	int sv2[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2), 0);
	assert_int_equal(syscall(SYS_dup3, sv2[0], num, 0), num);
	assert_int_equal(syscall(SYS_close, sv2[0]), 0);
	r.got = 0;
	assert_true(gmp_go(reuse_reader, &r) > 0);
	TU_WAIT_FOR(tasks_waiting() >= 1);
	assert_int_equal(write(sv2[1], "third", 5), 5);
	TU_WAIT_FOR(r.got == 5);
	assert_memory_equal(r.buf, "third", 5);
	close(sv[1]);
	close(p[1]);
	close(num);
	close(sv2[1]);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- flags are never changed behind the program's back -------------------------- */

static _Atomic int sampling;
static _Atomic int saw_nonblock;

static void *sample_flags(void *arg)
{
	int fd = *(int *)arg;
	while (atomic_load_explicit(&sampling, memory_order_acquire)) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0 && (fl & O_NONBLOCK))
			saw_nonblock = 1;
	}
	return NULL;
}

/* A pipe the hooks did not see made (as a parent's would be) and a socket
 * they did: while tasks wait on them, another thread watching the file
 * status flags never sees O_NONBLOCK. */
static void test_hook_wait_flags_left_alone(void **s)
{
	(void)s;
	tu_init(2);
	int p[2], sv[2];
	assert_int_equal(syscall(SYS_pipe2, p, 0), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct reuse r1 = { .fd = p[0] }, r2 = { .fd = sv[0] };
	saw_nonblock = 0;
	sampling = 1;
	pthread_t t1, t2;
	assert_int_equal(pthread_create(&t1, NULL, sample_flags, &p[0]), 0);
	assert_int_equal(pthread_create(&t2, NULL, sample_flags, &sv[0]), 0);
	for (int round = 0; round < 20; round++) {
		r1.got = r2.got = 0;
		assert_true(gmp_go(reuse_reader, &r1) > 0);
		assert_true(gmp_go(reuse_reader, &r2) > 0);
		TU_WAIT_FOR(tasks_waiting() >= 2);
		assert_int_equal(write(p[1], "ab", 2), 2);
		assert_int_equal(write(sv[1], "cd", 2), 2);
		TU_WAIT_FOR(r1.got == 2 && r2.got == 2);
	}
	atomic_store_explicit(&sampling, 0, memory_order_release);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	assert_int_equal(saw_nonblock, 0);
	for (int i = 0; i < 2; i++) {
		close(p[i]);
		close(sv[i]);
	}
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- calls that block their thread, as libc's ------------------------------------- */

struct delayed {
	int fd;
	int64_t delay;
};

static void *write_later(void *arg)
{
	struct delayed *d = arg;
	tu_sleep(d->delay);
	T_ASSERT(write(d->fd, "late", 4) == 4);
	return NULL;
}

/* From a plain thread of the program's, with the runtime running, a read
 * waits in the kernel as libc's does. */
static void test_hook_wait_foreign_thread_blocks_in_kernel(void **s)
{
	(void)s;
	tu_init(1);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct delayed d = { sv[1], 30 * MS };
	pthread_t t;
	int64_t t0 = tu_now_ns(); /* before the writer starts its sleep */
	assert_int_equal(pthread_create(&t, NULL, write_later, &d), 0);
	char buf[8];
	assert_int_equal(read(sv[0], buf, sizeof buf), 4);
	assert_true(tu_now_ns() - t0 >= 30 * MS);
	assert_int_equal(gmp_self(), 0);
	pthread_join(t, NULL);
	/* poll from the thread, with a timeout */
	struct pollfd p = { sv[0], POLLIN, 0 };
	t0 = tu_now_ns();
	assert_int_equal(poll(&p, 1, 30), 0);
	assert_true(tu_now_ns() - t0 >= 30 * MS);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(gmp_shutdown(), 0);
}

static _Atomic long in_bracket_got;

static void in_bracket_task(void *arg)
{
	int fd = *(int *)arg;
	char buf[8];
	gmp_enter_syscall();
	in_bracket_got = read(fd, buf, sizeof buf); /* libc's: blocks */
	gmp_exit_syscall();
}

/* A task inside gmp_enter_syscall may block its thread: there the hooks
 * are libc. (Its P moves on: sysmon retakes it.) */
static void test_hook_wait_syscall_bracket_is_libc(void **s)
{
	(void)s;
	tu_init(1);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	in_bracket_got = 0;
	assert_true(gmp_go(in_bracket_task, &sv[0]) > 0);
	TU_WAIT_FOR(tu_stats().tasks_in_syscall == 1);
	assert_int_equal(tasks_waiting(), 0); /* not parked: in the kernel */
	assert_int_equal(write(sv[1], "data", 4), 4);
	TU_WAIT_FOR(in_bracket_got == 4);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(gmp_shutdown(), 0);
}

static _Atomic int hog_done, hog_go;
static _Atomic long hog_got;

static void hog_task(void *arg)
{
	int fd = *(int *)arg;
	/* Run past the time slice without a switch point until the test's
	 * thread, which watches for sysmon's detach, says go. */
	while (!atomic_load_explicit(&hog_go, memory_order_acquire))
		;
	char buf[8];
	hog_got = read(fd, buf, sizeof buf);
	atomic_store_explicit(&hog_done, 1, memory_order_release);
}

/* A task that sysmon detached from its P runs its own code on a thread of
 * its own; when its hooked read has to wait, the hook takes a P back (as
 * every libgmp call that needs one does) and parks the task, which then
 * holds no thread, rather than block that thread in the kernel for as
 * long as the read waits. */
static void test_hook_wait_detached_task_parks(void **s)
{
	(void)s;
	tu_init(1);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	hog_done = hog_go = 0;
	ticker_start();
	assert_true(gmp_go(hog_task, &sv[0]) > 0);
	TU_WAIT_FOR(tu_stats().detaches >= 1);
	/* The P runs the ticker meanwhile. */
	int t0 = atomic_load_explicit(&ticks, memory_order_acquire);
	TU_WAIT_FOR(atomic_load_explicit(&ticks, memory_order_acquire) >=
		    t0 + 5);
	ticker_stop();
	atomic_store_explicit(&hog_go, 1, memory_order_release);
	/* Parked in the poller: the one task left, waiting. */
	TU_WAIT_FOR(tasks_waiting() == 1);
	assert_false(atomic_load_explicit(&hog_done, memory_order_acquire));
	assert_int_equal(write(sv[1], "hog!", 4), 4);
	TU_WAIT_FOR(atomic_load_explicit(&hog_done, memory_order_acquire));
	assert_int_equal(hog_got, 4);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- fork ------------------------------------------------------------------------ */

static void child_reads(void *arg)
{
	int *p = arg;
	/* The runtime is off here: the hooks are libc. */
	T_ASSERT(gmp_self() == 0);
	char buf[8];
	T_ASSERT(write(p[1], "kid", 3) == 3);
	T_ASSERT(read(p[0], buf, sizeof buf) == 3);
	struct pollfd pf = { p[0], POLLIN, 0 };
	T_ASSERT(poll(&pf, 1, 10) == 0);
	T_ASSERT(usleep(1000) == 0);
}

/* fork with tasks parked in hooked calls: the child's calls are libc's,
 * and the parent's tasks finish once woken. */
static void test_hook_wait_fork_with_parked_tasks(void **s)
{
	(void)s;
	tu_init(2);
	enum { N = 16 };
	static struct blocked b[N];
	for (int i = 0; i < N; i++) {
		int sv[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		b[i] = (struct blocked){ .kind = W_READ,
					 .fd = sv[0],
					 .peer = sv[1] };
	}
	gmp_wg_add(&blocked_wg, N);
	for (int i = 0; i < N; i++)
		assert_true(gmp_go(blocked_task, &b[i]) > 0);
	TU_WAIT_FOR(tasks_waiting() >= N);
	int p[2];
	assert_int_equal(pipe(p), 0);
	char err[1024];
	int status = tu_run_child(child_reads, p, err, sizeof err);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("child: status %#x: %s", status, err);
	for (int i = 0; i < N; i++)
		assert_int_equal(write(b[i].peer, "wake", 4), 4);
	gmp_wg_wait(&blocked_wg);
	for (int i = 0; i < N; i++) {
		assert_int_equal(b[i].got, 4);
		close(b[i].fd);
		close(b[i].peer);
	}
	close(p[0]);
	close(p[1]);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- timeouts --------------------------------------------------------------------- */

static _Atomic long timeo_got;
static _Atomic int timeo_err;
static _Atomic int64_t timeo_took;

static int timeo_task(void *arg)
{
	int fd = *(int *)arg;
	char buf[8];
	int64_t t0 = tu_now_ns();
	timeo_got = read(fd, buf, sizeof buf);
	timeo_err = errno;
	timeo_took = tu_now_ns() - t0;
	return 0;
}

/* SO_RCVTIMEO ends a task's wait with EAGAIN, and gmp_set_deadline with
 * ETIMEDOUT; neither holds the thread meanwhile (the ticker runs at
 * maxprocs 1). */
static void test_hook_wait_timeouts(void **s)
{
	(void)s;
	tu_init(1);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct timeval tv = { 0, 100 * 1000 };
	assert_int_equal(
		setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
	ticker_start();
	int t0 = atomic_load_explicit(&ticks, memory_order_acquire);
	assert_int_equal(gmp_main(timeo_task, &sv[0]), 0);
	assert_int_equal(timeo_got, -1);
	assert_int_equal(timeo_err, EAGAIN);
	assert_true(timeo_took >= 100 * MS && timeo_took < 10 * SEC);
	assert_true(atomic_load_explicit(&ticks, memory_order_acquire) >
		    t0 + 3);
	/* A gmp_set_deadline deadline, on a socket without SO_RCVTIMEO */
	tv.tv_usec = 0;
	assert_int_equal(
		setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
	assert_int_equal(
		gmp_set_deadline(sv[0], GMP_READ, gmp_nanotime() + 50 * MS), 0);
	assert_int_equal(gmp_main(timeo_task, &sv[0]), 0);
	assert_int_equal(timeo_got, -1);
	assert_int_equal(timeo_err, ETIMEDOUT);
	assert_true(timeo_took >= 40 * MS);
	ticker_stop();
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- accept from many tasks -------------------------------------------------------- */

static int acc_listener;
static _Atomic int accepted;

static void acceptor(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(acc_listener, NULL, NULL);
		if (c < 0)
			break; /* the listener is closed */
		char buf[4];
		T_ASSERT(read(c, buf, 4) == 4);
		T_ASSERT(write(c, buf, 4) == 4);
		close(c);
		atomic_fetch_add_explicit(&accepted, 1, memory_order_release);
	}
	gmp_wg_done(&blocked_wg);
}

/* Tasks accepting on one blocking listener take turns; none blocks a
 * thread in accept(2); a close of the listener ends them all. */
static void test_hook_wait_acceptors_share_a_listener(void **s)
{
	(void)s;
	tu_init(2);
	int port;
	acc_listener = tcp_listener(&port);
	accepted = 0;
	gmp_wg_add(&blocked_wg, 8);
	for (int i = 0; i < 8; i++)
		assert_true(gmp_go(acceptor, NULL) > 0);
	for (int i = 0; i < 50; i++) {
		int c = tcp_connect(port);
		char buf[4];
		assert_int_equal(write(c, "ping", 4), 4);
		assert_int_equal(read(c, buf, 4), 4);
		close(c);
	}
	TU_WAIT_FOR(accepted == 50);
	TU_WAIT_FOR(tasks_waiting() >= 8);
	assert_true(tu_stats().threads_total <= 2 + 3);
	assert_int_equal(close(acc_listener), 0);
	gmp_wg_wait(&blocked_wg);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- the runtime's own descriptors ------------------------------------------------- */

/* The runtime's epoll instance: the test makes none of its own. */
static int runtime_epoll(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;
	while (d && (e = readdir(d))) {
		char path[300], link[64];
		snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, link, sizeof link - 1);
		if (n > 0) {
			link[n] = 0;
			if (strstr(link, "eventpoll") &&
			    atoi(e->d_name) != dirfd(d))
				found = atoi(e->d_name);
		}
	}
	if (d)
		closedir(d);
	return found;
}

static int sleeper(void *arg)
{
	(void)arg;
	return usleep(10 * 1000);
}

static void test_hook_wait_runtime_descriptors_protected(void **s)
{
	(void)s;
	tu_init(1);
	int ep = runtime_epoll();
	assert_true(ep >= 0);
	assert_int_equal(close(ep), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(dup2(0, ep), -1);
	assert_int_equal(errno, EBADF);
	/* closefrom and close_range spare them too. (High numbers for the
	 * test's own: the runtime may open a file meanwhile, at the lowest
	 * free number.) */
	for (int round = 0; round < 2; round++) {
		int a = open("/dev/null", O_RDONLY);
		assert_int_equal(dup2(a, 700), 700);
		assert_int_equal(dup2(a, 701), 701);
		close(a);
		if (round == 0)
			assert_int_equal(close_range((unsigned)ep, 800, 0), 0);
		else
			closefrom(ep);
		assert_int_equal(fcntl(700, F_GETFD), -1);
		assert_int_equal(fcntl(701, F_GETFD), -1);
		assert_true(fcntl(ep, F_GETFD) >= 0);
	}
	/* and the runtime works: a timer, and I/O in the poller */
	assert_int_equal(gmp_main(sleeper, NULL), 0);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct reuse r = { .fd = sv[0] };
	assert_true(gmp_go(reuse_reader, &r) > 0);
	TU_WAIT_FOR(tasks_waiting() >= 1);
	assert_int_equal(write(sv[1], "ok", 2), 2);
	TU_WAIT_FOR(r.got == 2);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(gmp_shutdown(), 0);
}

/* Before gmp_init, from any thread. */
static void test_hook_wait_active_before_init(void **s)
{
	(void)s;
	assert_int_equal(gmp_hook_active(), 1);
}

GMP_TEST_MAIN(cmocka_unit_test(test_hook_wait_active_before_init),
	      cmocka_unit_test(test_hook_wait_blocked_tasks_hold_no_thread),
	      cmocka_unit_test(test_hook_wait_close_from_task_wakes_parked),
	      cmocka_unit_test(test_hook_wait_close_from_thread_wakes_parked),
	      cmocka_unit_test(test_hook_wait_dup2_from_task_wakes_parked),
	      cmocka_unit_test(test_hook_wait_dup2_from_thread_wakes_parked),
	      cmocka_unit_test(test_hook_wait_number_reused),
	      cmocka_unit_test(test_hook_wait_flags_left_alone),
	      cmocka_unit_test(test_hook_wait_foreign_thread_blocks_in_kernel),
	      cmocka_unit_test(test_hook_wait_syscall_bracket_is_libc),
	      cmocka_unit_test(test_hook_wait_detached_task_parks),
	      cmocka_unit_test(test_hook_wait_fork_with_parked_tasks),
	      cmocka_unit_test(test_hook_wait_timeouts),
	      cmocka_unit_test(test_hook_wait_acceptors_share_a_listener),
	      cmocka_unit_test(test_hook_wait_runtime_descriptors_protected))
