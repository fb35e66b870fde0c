/* The I/O calls (design.md §11): tasks parked on sockets hold no thread,
 * poll timeouts, an echo round trip over loopback TCP, blocking
 * descriptors that must not stall a P, gmp_close waking every kind of
 * waiter, a number reused after a plain close(), SIGPIPE, and callers that
 * are not tasks. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include "gmp_test.h"

#include "export_test.h"

/* ---- helpers ---------------------------------------------------------------- */

static void set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);
	T_ASSERT(fl >= 0);
	T_ASSERT(fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) ==
		 0);
}

static void nb_socketpair(int sv[2])
{
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
}

/* Moves fd to a number at or above 512 and returns it. Tests whose calls
 * may come after a gmp_close has finished need this: the kernel hands
 * out the lowest free number, so a freshly closed low number is taken at
 * once by whatever opens a file next (the runtime's epoll instance, or
 * sysmon reading /proc/self/mountinfo for its CPU-count check, or a
 * thread's /proc stat when a slice runs long on a busy machine), and a
 * late call would then read that file, not fail with -EBADF; a dup2 onto
 * it would replace sysmon's file (or fail with EBUSY while its open is
 * under way). A high number stays free while lower ones are. */
static int move_high(int fd)
{
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, 512);
	T_ASSERT(hi >= 512);
	T_ASSERT(close(fd) == 0);
	return hi;
}

/* Whether the runtime has gone quiet: every P idle and no M spinning,
 * which also means that no M is being started. */
static bool settled(void)
{
	gmp_stats st = tu_stats();
	return st.procs_idle == st.procs && st.threads_spinning == 0;
}

/* Reads exactly n bytes (a task or a thread). */
static void read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = gmp_read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			fprintf(stderr, "read_full: fd %d got %zd\n", fd, r);
		T_ASSERT(r > 0);
		got += (size_t)r;
	}
}

/* A non-blocking TCP listener on 127.0.0.1 and an ephemeral port. */
static int listen_loopback(uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	T_ASSERT(fd >= 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_ASSERT(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	T_ASSERT(listen(fd, 512) == 0);
	socklen_t len = sizeof sa;
	T_ASSERT(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static int dial_loopback(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	T_ASSERT(fd >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int r = gmp_connect(fd, (struct sockaddr *)&sa, sizeof sa);
	if (r != 0)
		fprintf(stderr, "gmp_connect: %d\n", r);
	T_ASSERT(r == 0);
	return fd;
}

/* ---- 100 tasks parked in gmp_read hold no thread --------------------------- */

#define NPARKED 100

static int parked_sv[NPARKED][2];
static atomic_int parked_done;

static void parked_reader(void *arg)
{
	int i = (int)(uintptr_t)arg;
	char buf[64];
	ssize_t r = gmp_read(parked_sv[i][0], buf, sizeof buf);
	T_ASSERT(r == (ssize_t)sizeof(int));
	int v;
	memcpy(&v, buf, sizeof v);
	T_ASSERT(v == i * 7 + 1); /* its own data */
	atomic_fetch_add(&parked_done, 1);
}

static void test_io_hundred_parked_readers_hold_no_thread(void **s)
{
	(void)s;
	tu_init(2);
	atomic_store(&parked_done, 0);
	for (int i = 0; i < NPARKED; i++)
		nb_socketpair(parked_sv[i]);
	for (int i = 0; i < NPARKED; i++)
		assert_true(gmp_go(parked_reader, (void *)(uintptr_t)i) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= NPARKED);
	TU_WAIT_FOR(settled()); /* the Ms are in the poller or idle */
	gmp_stats st;
	gmp_stats_read(&st);
	/* The Ms that run the Ps, one spinning, one in the poller, and
	 * sysmon; plus one for each P that sysmon took from a task in a
	 * system call or past its slice (slow builds meet both while the
	 * hundred spawn), whose thread goes on without it. None per
	 * reader. */
	uint64_t bound = st.procs + 3 + st.retakes + st.detaches;
	if (st.threads_total > bound)
		print_message("threads %llu: procs %llu, retakes %llu, "
			      "detaches %llu\n",
			      (unsigned long long)st.threads_total,
			      (unsigned long long)st.procs,
			      (unsigned long long)st.retakes,
			      (unsigned long long)st.detaches);
	assert_true(st.threads_total <= bound);
	assert_int_equal(atomic_load(&parked_done), 0);
	for (int i = NPARKED - 1; i >= 0; i--) {
		int v = i * 7 + 1;
		assert_int_equal(write(parked_sv[i][1], &v, sizeof v),
				 sizeof v);
	}
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&parked_done), NPARKED);
	for (int i = 0; i < NPARKED; i++) {
		close(parked_sv[i][0]);
		close(parked_sv[i][1]);
	}
}

/* ---- gmp_poll_fd: timeouts and readiness ------------------------------------ */

static int poll_sv[2];
static gmp_wg poll_writer_wg = GMP_WG_INIT;

static void late_writer(void *arg)
{
	(void)arg;
	gmp_sleep(30 * 1000000);
	T_ASSERT(write(poll_sv[1], "y", 1) == 1);
	gmp_wg_done(&poll_writer_wg);
}

static void poll_task(void *arg)
{
	(void)arg;
	int64_t t0 = tu_now_ns();
	T_ASSERT(gmp_poll_fd(poll_sv[0], POLLIN, 20 * 1000000) == 0);
	T_ASSERT(tu_now_ns() - t0 >= 20 * 1000000);
	/* Timeout 0: just a look. */
	T_ASSERT(gmp_poll_fd(poll_sv[0], POLLIN, 0) == 0);
	/* Writable at once. */
	T_ASSERT(gmp_poll_fd(poll_sv[0], POLLOUT, -1) == POLLOUT);
	/* Readable once the peer has written. */
	T_ASSERT(write(poll_sv[1], "x", 1) == 1);
	int r = gmp_poll_fd(poll_sv[0], POLLIN, 1000 * 1000000LL);
	T_ASSERT(r == POLLIN);
	char c;
	T_ASSERT(gmp_read(poll_sv[0], &c, 1) == 1 && c == 'x');
	/* A long timeout that readiness ends early: late_writer writes 30 ms
	 * from now. */
	gmp_wg_add(&poll_writer_wg, 1);
	T_ASSERT(gmp_go(late_writer, NULL) > 0);
	t0 = tu_now_ns();
	r = gmp_poll_fd(poll_sv[0], POLLIN, 5000 * 1000000LL);
	T_ASSERT(r == POLLIN);
	T_ASSERT(tu_now_ns() - t0 < 4000 * 1000000LL);
	T_ASSERT(gmp_read(poll_sv[0], &c, 1) == 1 && c == 'y');
	/* The peer hangs up: POLLIN (EOF), and POLLHUP though not asked.
	 * Once late_writer is done with its end: the data it wrote does not
	 * order its write before our close for ThreadSanitizer, which does
	 * not see through a socket pair. */
	gmp_wg_wait(&poll_writer_wg);
	close(poll_sv[1]);
	r = gmp_poll_fd(poll_sv[0], POLLIN, -1);
	T_ASSERT(r & POLLIN);
}

static void test_io_poll_timeout(void **s)
{
	(void)s;
	tu_init(2);
	nb_socketpair(poll_sv);
	assert_true(gmp_go(poll_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	close(poll_sv[0]);
}

/* 200 tasks time out together: the timers, not threads, wake them. */
static int many_fd;
static atomic_int many_ok;

static void timeout_poller(void *arg)
{
	(void)arg;
	int64_t t0 = tu_now_ns();
	T_ASSERT(gmp_poll_fd(many_fd, POLLIN, 10 * 1000000) == 0);
	T_ASSERT(tu_now_ns() - t0 >= 10 * 1000000);
	atomic_fetch_add(&many_ok, 1);
}

static void test_io_poll_timeout_many_tasks(void **s)
{
	(void)s;
	tu_init(1);
	int sv[2];
	nb_socketpair(sv);
	many_fd = sv[0];
	atomic_store(&many_ok, 0);
	for (int i = 0; i < 200; i++)
		assert_true(gmp_go(timeout_poller, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&many_ok), 200);
	close(sv[0]);
	close(sv[1]);
}

/* ---- 50 connections echo over loopback ------------------------------------------ */

#define ECHO_CONNS 50
#define ECHO_ROUNDS 200

static int echo_listener;
static uint16_t echo_port;
static atomic_int echo_clients_done;
static gmp_wg echo_wg;

static void echo_handler(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	for (;;) {
		ssize_t n = gmp_read(fd, buf, sizeof buf);
		T_ASSERT(n >= 0);
		if (n == 0)
			break;
		T_ASSERT(gmp_write(fd, buf, (size_t)n) == n);
	}
	T_ASSERT(gmp_close(fd) == 0);
}

static void echo_acceptor(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = gmp_accept(echo_listener, NULL, NULL);
		if (fd == -EBADF)
			break; /* gmp_close'd */
		T_ASSERT(fd >= 0);
		/* The listener is non-blocking: so is the new socket. */
		T_ASSERT(fcntl(fd, F_GETFL) & O_NONBLOCK);
		T_ASSERT(gmp_go(echo_handler, (void *)(intptr_t)fd) > 0);
	}
}

static void echo_client(void *arg)
{
	int id = (int)(intptr_t)arg;
	int fd = dial_loopback(echo_port);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	unsigned char out[3000], in[3000]; /* tasks move between threads */
	unsigned seed = (unsigned)id * 2654435761u;
	for (int r = 0; r < ECHO_ROUNDS; r++) {
		size_t n = 1 + (seed = seed * 1103515245u + 12345u) % 3000;
		for (size_t k = 0; k < n; k++)
			out[k] = (unsigned char)(id + r + k * 31);
		T_ASSERT(gmp_write(fd, out, n) == (ssize_t)n);
		read_full(fd, in, n);
		T_ASSERT(memcmp(in, out, n) == 0);
	}
	T_ASSERT(gmp_close(fd) == 0);
	atomic_fetch_add(&echo_clients_done, 1);
	gmp_wg_done(&echo_wg);
}

static void echo_main(void *arg)
{
	(void)arg;
	echo_listener = listen_loopback(&echo_port);
	T_ASSERT(gmp_go(echo_acceptor, NULL) > 0);
	gmp_wg_add(&echo_wg, ECHO_CONNS);
	for (int i = 0; i < ECHO_CONNS; i++)
		T_ASSERT(gmp_go(echo_client, (void *)(intptr_t)i) > 0);
	gmp_wg_wait(&echo_wg);
	/* Wakes the acceptor parked in gmp_accept with -EBADF. */
	T_ASSERT(gmp_close(echo_listener) == 0);
}

static void echo_at(int procs)
{
	tu_init(procs);
	atomic_store(&echo_clients_done, 0);
	memset(&echo_wg, 0, sizeof echo_wg);
	assert_true(gmp_go(echo_main, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&echo_clients_done), ECHO_CONNS);
}

static void test_io_echo_50_connections_maxprocs_1(void **s)
{
	(void)s;
	echo_at(1);
}

static void test_io_echo_50_connections_maxprocs_2(void **s)
{
	(void)s;
	echo_at(2);
}

static void test_io_echo_50_connections_maxprocs_4(void **s)
{
	(void)s;
	echo_at(4);
}

/* ---- several acceptors on one listener ------------------------------------------ */

static atomic_int accepted;

static void acceptor(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	for (;;) {
		int fd = gmp_accept(lfd, NULL, NULL);
		if (fd == -EBADF)
			return;
		T_ASSERT(fd >= 0);
		char c;
		read_full(fd, &c, 1);
		T_ASSERT(c == 'h');
		atomic_fetch_add(&accepted, 1);
		T_ASSERT(gmp_close(fd) == 0);
	}
}

static void dialer(void *arg)
{
	uint16_t port = (uint16_t)(uintptr_t)arg;
	int fd = dial_loopback(port);
	T_ASSERT(gmp_write(fd, "h", 1) == 1);
	char c;
	T_ASSERT(gmp_read(fd, &c, 1) == 0); /* the acceptor closes */
	T_ASSERT(gmp_close(fd) == 0);
}

static void test_io_many_acceptors_one_listener(void **s)
{
	(void)s;
	tu_init(2);
	atomic_store(&accepted, 0);
	uint16_t port;
	int lfd = listen_loopback(&port);
	for (int i = 0; i < 4; i++)
		assert_true(gmp_go(acceptor, (void *)(intptr_t)lfd) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 4);
	for (int i = 0; i < 40; i++)
		assert_true(gmp_go(dialer, (void *)(uintptr_t)port) > 0);
	TU_WAIT_FOR(atomic_load(&accepted) >= 40);
	assert_int_equal(gmp_close(lfd), 0); /* wakes all four */
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&accepted), 40);
}

/* ---- a stream's end right behind its last data ----------------------------------- */

/* gmp_read skips the attempt that would fail with EAGAIN after a short
 * read of a stream (gmp__pd_drained): not when the end of the stream came
 * with the data, whose edge the poller has already taken by then. */
static int eof_sv[2], eof_wake[2];
static atomic_int eof_stage;

static void eof_reader(void *arg)
{
	(void)arg;
	char buf[100];
	/* A short read: the descriptor is now known as a drained stream. */
	T_ASSERT(gmp_read(eof_sv[0], buf, sizeof buf) == 1);
	atomic_store(&eof_stage, 1);
	/* Park elsewhere while the peer writes its last bytes and hangs up;
	 * the poller harvests that edge with the one that wakes us. */
	T_ASSERT(gmp_read(eof_wake[0], buf, 1) == 1);
	T_ASSERT(gmp_read(eof_sv[0], buf, sizeof buf) == 3);
	T_ASSERT(memcmp(buf, "abc", 3) == 0);
	T_ASSERT(gmp_read(eof_sv[0], buf, sizeof buf) == 0); /* not a hang */
	T_ASSERT(gmp_read(eof_sv[0], buf, sizeof buf) == 0);
	atomic_store(&eof_stage, 2);
}

static void test_io_eof_after_short_read(void **s)
{
	(void)s;
	for (int sock = 0; sock < 2; sock++) {
		tu_init(1);
		atomic_store(&eof_stage, 0);
		if (sock) {
			uint16_t port;
			int lfd = listen_loopback(&port);
			eof_sv[1] = socket(AF_INET, SOCK_STREAM, 0);
			struct sockaddr_in sa = { .sin_family = AF_INET,
						  .sin_port = htons(port),
						  .sin_addr.s_addr = htonl(
							  INADDR_LOOPBACK) };
			assert_int_equal(connect(eof_sv[1],
						 (struct sockaddr *)&sa,
						 sizeof sa),
					 0);
			set_nonblock(lfd, false);
			eof_sv[0] = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
			assert_true(eof_sv[0] >= 0);
			close(lfd);
		} else {
			nb_socketpair(eof_sv);
		}
		nb_socketpair(eof_wake);
		assert_true(gmp_go(eof_reader, NULL) > 0);
		TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
		assert_int_equal(write(eof_sv[1], "x", 1), 1);
		TU_WAIT_FOR(atomic_load(&eof_stage) != 0);
		TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
		assert_int_equal(write(eof_sv[1], "abc", 3), 3);
		close(eof_sv[1]);
		/* A pause before the wakeup, as the case always had; no order
		 * hangs on it: the kernel queues the stream's edge first. */
		usleep(10 * 1000);
		assert_int_equal(write(eof_wake[1], "w", 1), 1);
		assert_int_equal(gmp_shutdown(), 0);
		assert_int_equal(atomic_load(&eof_stage), 2);
		close(eof_sv[0]);
		close(eof_wake[0]);
		close(eof_wake[1]);
	}
}

/* ---- a blocking descriptor does not stall the other tasks ----------------------- */

static int block_pipe[2];
static atomic_int other_ran, blocked_read_done;

static void blocking_reader(void *arg)
{
	(void)arg;
	char buf[8];
	ssize_t r = gmp_read(block_pipe[0], buf, sizeof buf);
	T_ASSERT(r == 5 && memcmp(buf, "hello", 5) == 0);
	atomic_store(&blocked_read_done, 1);
}

static void other_task(void *arg)
{
	(void)arg;
	atomic_store(&other_ran, 1);
}

static void test_io_blocking_pipe_does_not_stall_maxprocs_1(void **s)
{
	(void)s;
	tu_init(1);
	atomic_store(&other_ran, 0);
	atomic_store(&blocked_read_done, 0);
	assert_int_equal(pipe(block_pipe), 0); /* blocking */
	assert_true(gmp_go(blocking_reader, NULL) > 0);
	/* The reader is in its read(2), holding the only P. */
	TU_WAIT_FOR(tu_stats().tasks_in_syscall == 1);
	assert_true(gmp_go(other_task, NULL) > 0);
	/* sysmon retakes the only P from the reader's syscall. */
	TU_WAIT_FOR(atomic_load(&other_ran) != 0);
	assert_int_equal(atomic_load(&blocked_read_done), 0);
	assert_int_equal(write(block_pipe[1], "hello", 5), 5);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&blocked_read_done), 1);
	close(block_pipe[0]);
	close(block_pipe[1]);
}

/* ---- blocking and non-blocking sockets ------------------------------------------ */

/* A socket call is tried first with MSG_DONTWAIT, outside the syscall
 * bracket; on a blocking socket that finds nothing, the plain call must
 * follow in the bracket and block there, as on any blocking descriptor
 * (and sysmon hands the P on), for every receive call, and for a write
 * that fills the socket. */

static int bsock[2];
static atomic_int bsock_done;

static void blocking_sock_reader(void *arg)
{
	int how = (int)(intptr_t)arg;
	char buf[8] = { 0 };
	struct iovec v = { .iov_base = buf, .iov_len = sizeof buf };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	ssize_t r;
	switch (how) {
	case 0:
		r = gmp_read(bsock[0], buf, sizeof buf);
		break;
	case 1:
		r = gmp_readv(bsock[0], &v, 1);
		break;
	case 2:
		r = gmp_recvfrom(bsock[0], buf, sizeof buf, 0, NULL, NULL);
		break;
	default:
		r = gmp_recvmsg(bsock[0], &m, 0);
		break;
	}
	T_ASSERT(r == 5 && memcmp(buf, "hello", 5) == 0);
	atomic_store(&bsock_done, 1);
}

enum { BSOCK_BIG = 4 << 20 };

static void blocking_sock_writer(void *arg)
{
	(void)arg;
	char *big = malloc(BSOCK_BIG);
	T_ASSERT(big != NULL);
	memset(big, 'w', BSOCK_BIG);
	T_ASSERT(gmp_write(bsock[1], big, BSOCK_BIG) == BSOCK_BIG);
	free(big);
	atomic_store(&bsock_done, 1);
}

static void test_io_blocking_socket_blocks_in_kernel(void **s)
{
	(void)s;
	for (int how = 0; how < 5; how++) {
		tu_init(1);
		atomic_store(&other_ran, 0);
		atomic_store(&bsock_done, 0);
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, bsock), 0);
		if (how < 4)
			assert_true(gmp_go(blocking_sock_reader,
					   (void *)(intptr_t)how) > 0);
		else
			assert_true(gmp_go(blocking_sock_writer, NULL) > 0);
		/* In its blocking call, in the bracket, holding the only P
		 * until sysmon retakes it. */
		TU_WAIT_FOR(tu_stats().tasks_in_syscall == 1);
		assert_true(gmp_go(other_task, NULL) > 0);
		TU_WAIT_FOR(atomic_load(&other_ran) != 0);
		assert_int_equal(atomic_load(&bsock_done), 0);
		if (how < 4) {
			assert_int_equal(write(bsock[1], "hello", 5), 5);
		} else {
			static char sink[65536];
			size_t got = 0;
			while (got < BSOCK_BIG) {
				ssize_t r = read(bsock[0], sink, sizeof sink);
				assert_true(r > 0);
				for (ssize_t i = 0; i < r; i++)
					assert_int_equal(sink[i], 'w');
				got += (size_t)r;
			}
		}
		assert_int_equal(gmp_shutdown(), 0);
		assert_int_equal(atomic_load(&bsock_done), 1);
		close(bsock[0]);
		close(bsock[1]);
	}
}

/* MSG_WAITALL on a blocking socket waits for every byte asked, even when
 * part of them is there already (a receive with MSG_DONTWAIT would return
 * that part). */
static void waitall_reader(void *arg)
{
	(void)arg;
	char buf[10];
	struct iovec v = { .iov_base = buf, .iov_len = sizeof buf };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	T_ASSERT(gmp_recvfrom(bsock[0], buf, 10, MSG_WAITALL, NULL, NULL) ==
		 10);
	T_ASSERT(memcmp(buf, "helloworld", 10) == 0);
	T_ASSERT(gmp_recvmsg(bsock[0], &m, MSG_WAITALL) == 10);
	T_ASSERT(memcmp(buf, "0123456789", 10) == 0);
	atomic_store(&bsock_done, 1);
}

static void test_io_blocking_socket_waitall(void **s)
{
	(void)s;
	tu_init(1);
	atomic_store(&bsock_done, 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, bsock), 0);
	assert_int_equal(write(bsock[1], "hello", 5), 5);
	assert_true(gmp_go(waitall_reader, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_in_syscall == 1);
	assert_int_equal(write(bsock[1], "world01234", 10), 10);
	TU_WAIT_FOR(tu_stats().tasks_in_syscall == 1);
	assert_int_equal(atomic_load(&bsock_done), 0);
	assert_int_equal(write(bsock[1], "56789", 5), 5);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&bsock_done), 1);
	close(bsock[0]);
	close(bsock[1]);
}

/* The runtime remembers that a socket was non-blocking (from an EAGAIN);
 * a program that clears O_NONBLOCK afterwards has its task's calls wait
 * in the poller, holding no thread, and still get their data. */
static void nb_forgotten_reader(void *arg)
{
	(void)arg;
	char buf[8] = { 0 };
	/* First read: EAGAIN, then the poller, which teaches the hint. */
	T_ASSERT(gmp_read(bsock[0], buf, sizeof buf) == 3);
	T_ASSERT(memcmp(buf, "one", 3) == 0);
	atomic_store(&bsock_done, 1);
	T_ASSERT(gmp_read(bsock[0], buf, sizeof buf) == 3);
	T_ASSERT(memcmp(buf, "two", 3) == 0);
	atomic_store(&bsock_done, 2);
}

static void test_io_nonblock_cleared_later_waits_in_poller(void **s)
{
	(void)s;
	tu_init(1);
	atomic_store(&bsock_done, 0);
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, bsock), 0);
	assert_true(gmp_go(nb_forgotten_reader, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting == 1);
	assert_int_equal(write(bsock[1], "one", 3), 3);
	TU_WAIT_FOR(atomic_load(&bsock_done) == 1);
	set_nonblock(bsock[0], false);
	/* The second read waits, parked: no task in a system call. */
	TU_WAIT_FOR(tu_stats().tasks_waiting == 1);
	assert_int_equal(tu_stats().tasks_in_syscall, 0);
	assert_int_equal(atomic_load(&bsock_done), 1);
	assert_int_equal(write(bsock[1], "two", 3), 3);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&bsock_done), 2);
	close(bsock[0]);
	close(bsock[1]);
}

/* ---- bad input -------------------------------------------------------------------- */

static void bad_fd_checks(void)
{
	char c = 0;
	/* A number that is certainly closed (a freshly closed low number
	 * could be taken at once by the runtime's own epoll descriptor). */
	int fd = 100000;
	T_ASSERT(fcntl(fd, F_GETFD) < 0);
	errno = 1234;
	T_ASSERT(gmp_read(-1, &c, 1) == -EBADF);
	T_ASSERT(gmp_read(fd, &c, 1) == -EBADF);
	T_ASSERT(gmp_write(fd, &c, 1) == -EBADF);
	T_ASSERT(gmp_write(-5, &c, 1) == -EBADF);
	T_ASSERT(gmp_poll_fd(fd, POLLIN, 0) == -EBADF);
	int pr = gmp_poll_fd(fd, POLLIN, 1000000);
	if (pr != -EBADF)
		fprintf(stderr, "poll_fd(closed): %d\n", pr);
	T_ASSERT(pr == -EBADF);
	T_ASSERT(gmp_poll_fd(-1, POLLIN, -1) == -EBADF);
	T_ASSERT(gmp_accept(fd, NULL, NULL) == -EBADF);
	T_ASSERT(gmp_close(fd) == -EBADF);
	T_ASSERT(gmp_close(-1) == -EBADF);
	T_ASSERT(errno == 1234); /* left alone */
	/* gmp_close twice: the second finds nothing to close. */
	int sv[2];
	nb_socketpair(sv);
	sv[0] = move_high(sv[0]);
	T_ASSERT(gmp_close(sv[0]) == 0);
	T_ASSERT(gmp_close(sv[0]) == -EBADF);
	T_ASSERT(gmp_read(sv[0], &c, 1) == -EBADF);
	T_ASSERT(gmp_close(sv[1]) == 0);
	/* Not a socket: gmp_accept and gmp_connect say so. */
	int p[2];
	T_ASSERT(pipe(p) == 0);
	T_ASSERT(gmp_accept(p[0], NULL, NULL) == -ENOTSOCK);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	T_ASSERT(gmp_connect(p[0], (struct sockaddr *)&sa, sizeof sa) ==
		 -ENOTSOCK);
	/* A zero-byte read and write are what read(2)/write(2) give. */
	T_ASSERT(gmp_write(p[1], "", 0) == 0);
	T_ASSERT(gmp_read(p[0], &c, 0) == 0);
	T_ASSERT(gmp_close(p[0]) == 0 && gmp_close(p[1]) == 0);
	T_ASSERT(errno == 1234);
}

static void bad_fd_task(void *arg)
{
	(void)arg;
	bad_fd_checks();
}

static void test_io_bad_input(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(bad_fd_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	bad_fd_checks(); /* and from a thread, runtime stopped */
}

static void refused_task(void *arg)
{
	(void)arg;
	uint16_t port;
	int lfd = listen_loopback(&port);
	close(lfd); /* nobody listens there now */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_ASSERT(gmp_connect(fd, (struct sockaddr *)&sa, sizeof sa) ==
		 -ECONNREFUSED);
	T_ASSERT(gmp_close(fd) == 0);
}

static void test_io_connect_refused(void **s)
{
	(void)s;
	tu_init(1);
	assert_true(gmp_go(refused_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* gmp_accept's new descriptor has the listener's O_NONBLOCK. */
static void accept_mode_task(void *arg)
{
	(void)arg;
	for (int blocking = 0; blocking < 2; blocking++) {
		uint16_t port;
		int lfd = listen_loopback(&port);
		set_nonblock(lfd, !blocking);
		int c = dial_loopback(port);
		int a = gmp_accept(lfd, NULL, NULL);
		T_ASSERT(a >= 0);
		bool nb = (fcntl(a, F_GETFL) & O_NONBLOCK) != 0;
		T_ASSERT(nb == !blocking);
		/* Either way, data flows through the same calls. */
		T_ASSERT(gmp_write(c, "ping", 4) == 4);
		char buf[4];
		read_full(a, buf, 4);
		T_ASSERT(memcmp(buf, "ping", 4) == 0);
		T_ASSERT(gmp_close(a) == 0 && gmp_close(c) == 0);
		T_ASSERT(gmp_close(lfd) == 0);
	}
}

static void test_io_accept_inherits_listener_mode(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(accept_mode_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- gmp_close wakes every waiter ---------------------------------------------------- */

static int closing_sv[2];
static atomic_int close_results;

static void closing_reader(void *arg)
{
	(void)arg;
	char c;
	T_ASSERT(gmp_read(closing_sv[0], &c, 1) == -EBADF);
	atomic_fetch_add(&close_results, 1);
}

static void closing_reader2(void *arg)
{
	(void)arg;
	char c;
	/* The second reader waits on the descriptor's list, not its slot. */
	T_ASSERT(gmp_read(closing_sv[0], &c, 1) == -EBADF);
	atomic_fetch_add(&close_results, 1);
}

static void closing_poller(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_poll_fd(closing_sv[0], POLLIN, -1) == -EBADF);
	atomic_fetch_add(&close_results, 1);
}

static void closing_timed_poller(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_poll_fd(closing_sv[0], POLLIN, 60 * 1000000000LL) ==
		 -EBADF);
	atomic_fetch_add(&close_results, 1);
}

static atomic_int closing_threads_in; /* threads about to wait */

static void *closing_thread_reader(void *arg)
{
	(void)arg;
	char c;
	atomic_fetch_add(&closing_threads_in, 1);
	T_ASSERT(gmp_read(closing_sv[0], &c, 1) == -EBADF);
	atomic_fetch_add(&close_results, 1);
	return NULL;
}

static void *closing_thread_poller(void *arg)
{
	(void)arg;
	atomic_fetch_add(&closing_threads_in, 1);
	T_ASSERT(gmp_poll_fd(closing_sv[0], POLLIN, -1) == -EBADF);
	atomic_fetch_add(&close_results, 1);
	return NULL;
}

static void closer_task(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_close(closing_sv[0]) == 0);
}

static void test_io_close_wakes_every_waiter(void **s)
{
	(void)s;
	tu_init(2);
	atomic_store(&close_results, 0);
	atomic_store(&closing_threads_in, 0);
	nb_socketpair(closing_sv);
	closing_sv[0] = move_high(closing_sv[0]); /* fcntl after close */
	gmp_go(closing_reader, NULL);
	gmp_go(closing_reader2, NULL);
	gmp_go(closing_poller, NULL);
	gmp_go(closing_timed_poller, NULL);
	pthread_t t1, t2;
	pthread_create(&t1, NULL, closing_thread_reader, NULL);
	pthread_create(&t2, NULL, closing_thread_poller, NULL);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 4);
	TU_WAIT_FOR(atomic_load(&closing_threads_in) == 2);
	/* Nothing the tests can see shows a thread blocked in poll(2): this
	 * sleep only makes it likely that both are by now. (One that comes
	 * late gets -EBADF all the same, without the wakeup.) */
	usleep(20 * 1000);
	gmp_go(closer_task, NULL);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&close_results), 6);
	/* The number was really closed. */
	assert_int_equal(fcntl(closing_sv[0], F_GETFL), -1);
	/* The peer sees EOF. */
	char c;
	assert_int_equal(read(closing_sv[1], &c, 1), 0);
	close(closing_sv[1]);
}

static void test_io_close_from_thread(void **s)
{
	(void)s;
	tu_init(1);
	atomic_store(&close_results, 0);
	nb_socketpair(closing_sv);
	gmp_go(closing_reader, NULL);
	gmp_go(closing_poller, NULL);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 2);
	assert_int_equal(gmp_close(closing_sv[0]), 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&close_results), 2);
	close(closing_sv[1]);
}

/* A blocking descriptor: a reader sits in read(2), so gmp_close does not
 * wait for it; the number stays open until the reader leaves, and the
 * reader closes it on the way out. */
static int bclose_pipe[2];
static atomic_int bclose_stage;

static void bclose_reader(void *arg)
{
	(void)arg;
	char buf[8];
	atomic_store(&bclose_stage, 1);
	T_ASSERT(gmp_read(bclose_pipe[0], buf, sizeof buf) == 2);
	atomic_store(&bclose_stage, 2);
}

static void test_io_close_blocking_descriptor_in_use(void **s)
{
	(void)s;
	tu_init(2);
	atomic_store(&bclose_stage, 0);
	assert_int_equal(pipe(bclose_pipe), 0);
	assert_true(gmp_go(bclose_reader, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&bclose_stage) != 0);
	/* In its read(2): past the point where a gmp_close would fail it. */
	TU_WAIT_FOR(tu_stats().tasks_in_syscall == 1);
	int64_t t0 = tu_now_ns();
	assert_int_equal(gmp_close(bclose_pipe[0]), 0);
	assert_true(tu_now_ns() - t0 < 1000 * 1000000LL);
	/* Not reused under the reader: still open, and new calls fail. */
	assert_true(fcntl(bclose_pipe[0], F_GETFD) >= 0);
	char c;
	assert_int_equal(gmp_read(bclose_pipe[0], &c, 1), -EBADF);
	assert_int_equal(write(bclose_pipe[1], "hi", 2), 2);
	TU_WAIT_FOR(atomic_load(&bclose_stage) == 2);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(fcntl(bclose_pipe[0], F_GETFD), -1); /* closed */
	close(bclose_pipe[1]);
}

/* gmp_close racing with busy readers and writers, tasks and a thread:
 * everyone ends with an error, nobody hangs, the number is closed. A
 * caller may start after the close has finished (the closer sleeps 0 in
 * some rounds), so the number is a high one (move_high). */
#define RACE_ROUNDS 200

static int race_sv[2];
static atomic_int race_left;

static void race_reader(void *arg)
{
	(void)arg;
	char buf[256];
	ssize_t r;
	while ((r = gmp_read(race_sv[0], buf, sizeof buf)) > 0)
		;
	T_ASSERT(r == -EBADF);
	atomic_fetch_sub(&race_left, 1);
}

static void race_writer(void *arg)
{
	(void)arg;
	char buf[1024] = { 0 };
	ssize_t r;
	while ((r = gmp_write(race_sv[0], buf, sizeof buf)) > 0)
		;
	T_ASSERT(r == -EBADF);
	atomic_fetch_sub(&race_left, 1);
}

static void race_poller(void *arg)
{
	(void)arg;
	int r;
	while ((r = gmp_poll_fd(race_sv[0], POLLIN, 1000000)) >= 0)
		gmp_yield();
	T_ASSERT(r == -EBADF);
	atomic_fetch_sub(&race_left, 1);
}

static void *race_thread(void *arg)
{
	(void)arg;
	char buf[256];
	ssize_t r;
	while ((r = gmp_read(race_sv[0], buf, sizeof buf)) > 0)
		;
	T_ASSERT(r == -EBADF);
	atomic_fetch_sub(&race_left, 1);
	return NULL;
}

/* The peer: echoes a little, drains the rest, so both directions move. */
static void race_peer(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t r;
	while ((r = gmp_read(fd, buf, sizeof buf)) > 0)
		gmp_write(fd, buf, (size_t)r < 300 ? (size_t)r : 300);
	/* EOF once the other end is really closed, by the last user out
	 * (or a reset, when it went with data unread) */
	T_ASSERT(r == 0 || r == -ECONNRESET);
	atomic_fetch_sub(&race_left, 1);
}

static void race_closer(void *arg)
{
	int64_t us = (int64_t)(intptr_t)arg;
	gmp_sleep(us * 1000);
	T_ASSERT(gmp_close(race_sv[0]) == 0);
	atomic_fetch_sub(&race_left, 1);
}

static void close_races_at(int procs)
{
	tu_init(procs);
	for (int i = 0; i < RACE_ROUNDS; i++) {
		nb_socketpair(race_sv);
		race_sv[0] = move_high(race_sv[0]);
		atomic_store(&race_left, 8);
		gmp_go(race_peer, (void *)(intptr_t)race_sv[1]);
		gmp_go(race_reader, NULL);
		gmp_go(race_reader, NULL);
		gmp_go(race_writer, NULL);
		gmp_go(race_writer, NULL);
		gmp_go(race_poller, NULL);
		pthread_t t;
		pthread_create(&t, NULL, race_thread, NULL);
		gmp_go(race_closer, (void *)(intptr_t)(i % 7 * 50));
		pthread_join(t, NULL);
		TU_WAIT_FOR(atomic_load(&race_left) == 0);
		assert_int_equal(gmp_close(race_sv[1]), 0);
	}
	assert_int_equal(gmp_shutdown(), 0);
}

static void test_io_close_races_with_io_maxprocs_2(void **s)
{
	(void)s;
	close_races_at(2);
}

static void test_io_close_races_with_io_maxprocs_4(void **s)
{
	(void)s;
	close_races_at(4);
}

/* ---- a number closed with plain close() and reused ---------------------------------- */

static int reuse_fd;
static atomic_int reuse_stage;
static _Atomic(gmp_g *) reuse_g; /* the reader */

/* Whether task g is parked in the poller, waiting to read. */
static bool parked_reading(gmp_g *g)
{
	return g && gmp__readgstatus(g) == GMP__G_WAITING &&
	       gmp__load32_rlx(&g->waitreason) == GMP__WAIT_IO_READ;
}

static void reuse_reader(void *arg)
{
	(void)arg;
	char buf[16];
	atomic_store(&reuse_g, gmp_current());
	/* First file: parks, so the number gets registered. */
	T_ASSERT(gmp_read(reuse_fd, buf, sizeof buf) == 3);
	T_ASSERT(memcmp(buf, "one", 3) == 0);
	atomic_store(&reuse_stage, 1);
	while (atomic_load(&reuse_stage) != 2)
		gmp_sleep(1000000);
	/* Second file behind the same number: parks again, and the poller
	 * must watch the new file, not the old one (which still lives, in
	 * a dup, and gets data of its own meanwhile). */
	ssize_t r = gmp_read(reuse_fd, buf, sizeof buf);
	if (r != 3)
		fprintf(stderr, "reuse_reader: %zd\n", r);
	T_ASSERT(r == 3);
	T_ASSERT(memcmp(buf, "two", 3) == 0);
	atomic_store(&reuse_stage, 3);
}

static void test_io_fd_reuse_after_plain_close(void **s)
{
	(void)s;
	tu_init(2);
	atomic_store(&reuse_stage, 0);
	int a[2], b[2];
	nb_socketpair(a);
	a[0] = move_high(a[0]); /* closed and then reused with dup2 */
	reuse_fd = a[0];
	atomic_store(&reuse_g, NULL);
	assert_true(gmp_go(reuse_reader, NULL) > 0);
	TU_WAIT_FOR(parked_reading(atomic_load(&reuse_g)));
	assert_int_equal(write(a[1], "one", 3), 3);
	TU_WAIT_FOR(atomic_load(&reuse_stage) != 0);
	/* Plain close, but the old file lives on in a dup, so epoll keeps
	 * its registration under our cookie. */
	int keep = dup(a[0]);
	assert_true(keep >= 0);
	nb_socketpair(b);
	close(a[0]);
	assert_int_equal(dup2(b[0], reuse_fd), reuse_fd);
	close(b[0]);
	atomic_store(&reuse_stage, 2);
	/* Parked on the new file (not in its gmp_sleep, which waits too). */
	TU_WAIT_FOR(parked_reading(atomic_load(&reuse_g)));
	/* Data for the old file: must not disturb the new file's reader,
	 * not within 20 ms at least. */
	assert_int_equal(write(a[1], "old", 3), 3);
	usleep(20 * 1000);
	assert_int_equal(atomic_load(&reuse_stage), 2);
	assert_int_equal(write(b[1], "two", 3), 3);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&reuse_stage), 3);
	close(keep);
	close(a[1]);
	close(b[1]);
	close(reuse_fd);
}

/* The number comes back as a blocking pipe: the reader must not hold the
 * only P while it blocks. */
static void reuse_blocking_reader(void *arg)
{
	(void)arg;
	char buf[16];
	atomic_store(&reuse_g, gmp_current());
	T_ASSERT(gmp_read(reuse_fd, buf, sizeof buf) == 3);
	atomic_store(&reuse_stage, 1);
	while (atomic_load(&reuse_stage) != 2)
		gmp_sleep(1000000);
	T_ASSERT(gmp_read(reuse_fd, buf, sizeof buf) == 4);
	T_ASSERT(memcmp(buf, "pipe", 4) == 0);
	atomic_store(&reuse_stage, 3);
}

static void test_io_fd_reuse_as_blocking_pipe(void **s)
{
	(void)s;
	tu_init(1);
	atomic_store(&reuse_stage, 0);
	atomic_store(&other_ran, 0);
	int a[2], p[2];
	nb_socketpair(a);
	a[0] = move_high(a[0]); /* closed and then reused with dup2 */
	reuse_fd = a[0];
	atomic_store(&reuse_g, NULL);
	assert_true(gmp_go(reuse_blocking_reader, NULL) > 0);
	TU_WAIT_FOR(parked_reading(atomic_load(&reuse_g)));
	assert_int_equal(write(a[1], "one", 3), 3);
	TU_WAIT_FOR(atomic_load(&reuse_stage) != 0);
	assert_int_equal(pipe(p), 0); /* blocking */
	close(a[0]);
	close(a[1]);
	assert_int_equal(dup2(p[0], reuse_fd), reuse_fd);
	close(p[0]);
	atomic_store(&reuse_stage, 2);
	/* The reader blocks in read(2), holding the only P. */
	TU_WAIT_FOR(tu_stats().tasks_in_syscall == 1);
	assert_true(gmp_go(other_task, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&other_ran) != 0);
	assert_int_equal(write(p[1], "pipe", 4), 4);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&reuse_stage), 3);
	close(p[1]);
	close(reuse_fd);
}

/* The same without a dup: the old file is gone, so epoll has forgotten
 * it, and the reader's next read parks on trust (its stream was drained)
 * on a file the poller does not watch. The deferred check must notice the
 * new file and the reader get the new file's data, well within a second
 * (it takes a millisecond or two). */
static void reuse_late_reader(void *arg)
{
	(void)arg;
	char buf[16];
	atomic_store(&reuse_g, gmp_current());
	T_ASSERT(gmp_read(reuse_fd, buf, sizeof buf) == 3);
	atomic_store(&reuse_stage, 1);
	while (atomic_load(&reuse_stage) != 2)
		gmp_sleep(1000000);
	ssize_t r = gmp_read(reuse_fd, buf, sizeof buf);
	T_ASSERT(r == 3);
	T_ASSERT(memcmp(buf, "new", 3) == 0);
	atomic_store(&reuse_stage, 3);
	/* Until the main thread has stopped looking at this task (TSan:
	 * its looks happen before our exit rewrites the G). */
	while (atomic_load(&reuse_stage) != 4)
		gmp_sleep(1000000);
}

static void test_io_fd_reuse_noticed_by_deferred_check(void **s)
{
	(void)s;
	tu_init(2);
	atomic_store(&reuse_stage, 0);
	int a[2], b[2];
	nb_socketpair(a);
	a[0] = move_high(a[0]);
	reuse_fd = a[0];
	atomic_store(&reuse_g, NULL);
	assert_true(gmp_go(reuse_late_reader, NULL) > 0);
	TU_WAIT_FOR(parked_reading(atomic_load(&reuse_g)));
	assert_int_equal(write(a[1], "one", 3), 3);
	TU_WAIT_FOR(atomic_load(&reuse_stage) != 0);
	close(a[0]);
	close(a[1]);
	nb_socketpair(b);
	assert_int_equal(dup2(b[0], reuse_fd), reuse_fd);
	close(b[0]);
	atomic_store(&reuse_stage, 2);
	TU_WAIT_FOR(parked_reading(atomic_load(&reuse_g)));
	/* No edge reaches the poller for this: only the check finds it. */
	assert_int_equal(write(b[1], "new", 3), 3);
	int64_t t0 = tu_now_ns();
	TU_WAIT_FOR(atomic_load(&reuse_stage) == 3);
	assert_true(tu_now_ns() - t0 < 1000 * 1000000LL);
	atomic_store(&reuse_stage, 4);
	assert_int_equal(gmp_shutdown(), 0);
	close(b[1]);
	close(reuse_fd);
}

/* A reader parked on trust on a number closed with plain close() and not
 * reused: the check finds no file there, and the retried read says
 * -EBADF, rather than the reader waiting for ever. */
static void closed_under_reader(void *arg)
{
	(void)arg;
	char buf[16];
	atomic_store(&reuse_g, gmp_current());
	T_ASSERT(gmp_read(reuse_fd, buf, sizeof buf) == 3);
	atomic_store(&reuse_stage, 1);
	while (atomic_load(&reuse_stage) != 2)
		gmp_sleep(1000000);
	T_ASSERT(gmp_read(reuse_fd, buf, sizeof buf) == -EBADF);
	atomic_store(&reuse_stage, 3);
	while (atomic_load(&reuse_stage) != 4) /* as reuse_late_reader */
		gmp_sleep(1000000);
}

static void test_io_plain_close_under_parked_reader_noticed(void **s)
{
	(void)s;
	/* The plain close() behind the runtime's back is the point of this
	 * case, and TSan models a descriptor's close as a write racing the
	 * runtime's epoll_ctl on it: the misuse it is meant to survive. */
	if (TU_TSAN) {
		print_message("skipped under TSan: it closes a descriptor "
			      "behind the runtime's back on purpose\n");
		skip();
	}
	tu_init(1);
	atomic_store(&reuse_stage, 0);
	int a[2];
	nb_socketpair(a);
	a[0] = move_high(a[0]);
	reuse_fd = a[0];
	atomic_store(&reuse_g, NULL);
	assert_true(gmp_go(closed_under_reader, NULL) > 0);
	TU_WAIT_FOR(parked_reading(atomic_load(&reuse_g)));
	assert_int_equal(write(a[1], "one", 3), 3);
	TU_WAIT_FOR(atomic_load(&reuse_stage) != 0);
	atomic_store(&reuse_stage, 2);
	TU_WAIT_FOR(parked_reading(atomic_load(&reuse_g)));
	close(a[0]); /* the peer stays open: no hang-up edge either */
	TU_WAIT_FOR(atomic_load(&reuse_stage) == 3);
	atomic_store(&reuse_stage, 4);
	assert_int_equal(gmp_shutdown(), 0);
	close(a[1]);
}

/* ---- SIGPIPE --------------------------------------------------------------------------- */

static void epipe_task(void *arg)
{
	(void)arg;
	char buf[1000];
	memset(buf, 'z', sizeof buf);
	/* A UNIX socket whose peer is gone. */
	int sv[2];
	nb_socketpair(sv);
	close(sv[1]);
	T_ASSERT(gmp_write(sv[0], buf, sizeof buf) == -EPIPE);
	T_ASSERT(gmp_write(sv[0], buf, sizeof buf) == -EPIPE);
	T_ASSERT(gmp_close(sv[0]) == 0);
	/* TCP: the peer closes; the first write may still succeed (the RST
	 * comes back), then -EPIPE (or -ECONNRESET). */
	uint16_t port;
	int lfd = listen_loopback(&port);
	int c = dial_loopback(port);
	int a = gmp_accept(lfd, NULL, NULL);
	T_ASSERT(a >= 0);
	T_ASSERT(gmp_close(a) == 0);
	ssize_t r = 0;
	for (int i = 0; i < 100 && r >= 0; i++) {
		r = gmp_write(c, buf, sizeof buf);
		gmp_sleep(1000000);
	}
	T_ASSERT(r == -EPIPE || r == -ECONNRESET);
	T_ASSERT(gmp_close(c) == 0 && gmp_close(lfd) == 0);
	/* A pipe without readers, blocking and not. */
	int p[2];
	T_ASSERT(pipe(p) == 0);
	close(p[0]);
	T_ASSERT(gmp_write(p[1], buf, sizeof buf) == -EPIPE);
	set_nonblock(p[1], true);
	T_ASSERT(gmp_write(p[1], buf, sizeof buf) == -EPIPE);
	T_ASSERT(gmp_close(p[1]) == 0);
	sigset_t pend;
	sigpending(&pend);
	T_ASSERT(!sigismember(&pend, SIGPIPE)); /* none left pending */
}

static void test_io_write_to_closed_peer_epipe_no_sigpipe(void **s)
{
	(void)s;
	/* SIGPIPE keeps its default action: raising it would kill us. */
	signal(SIGPIPE, SIG_DFL);
	tu_init(2);
	assert_true(gmp_go(epipe_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	epipe_task(NULL); /* and from a thread */
}

/* ---- gmp_write parks when the socket is full ------------------------------------------ */

#define BIG (4u << 20)

static int big_sv[2];
static unsigned char *big_out, *big_in;

static void big_writer(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_write(big_sv[0], big_out, BIG) == (ssize_t)BIG);
}

static void big_reader(void *arg)
{
	(void)arg;
	size_t got = 0;
	while (got < BIG) {
		size_t want = BIG - got < 1000 ? BIG - got : 1000;
		ssize_t r = gmp_read(big_sv[1], big_in + got, want);
		T_ASSERT(r > 0);
		got += (size_t)r;
		if ((got / 1000) % 64 == 0)
			gmp_yield();
	}
}

static void test_io_write_all_bytes_parking(void **s)
{
	(void)s;
	big_out = malloc(BIG);
	big_in = malloc(BIG);
	for (size_t i = 0; i < BIG; i++)
		big_out[i] = (unsigned char)(i * 7 + i / 251);
	tu_init(2);
	nb_socketpair(big_sv);
	assert_true(gmp_go(big_writer, NULL) > 0);
	assert_true(gmp_go(big_reader, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_memory_equal(big_in, big_out, BIG);
	close(big_sv[0]);
	close(big_sv[1]);
	free(big_out);
	free(big_in);
}

/* ---- gmp_write stopped by an error after some bytes --------------------------- */

/* The peer takes part of a large write and then goes away: gmp_write
 * returns the bytes it wrote, not -EPIPE (gmp.h); the next write says
 * -EPIPE. The same when gmp_close stops it. */
static int part_sv[2];
static atomic_llong part_result;

static void part_writer(void *arg)
{
	(void)arg;
	atomic_store(&part_result, gmp_write(part_sv[0], big_out, BIG));
}

static void partial_write(bool close_own)
{
	big_out = calloc(1, BIG);
	big_in = malloc(BIG);
	tu_init(2);
	nb_socketpair(part_sv);
	atomic_store(&part_result, 1);
	assert_true(gmp_go(part_writer, NULL) > 0);
	/* The writer fills the socket and parks; take some of it. */
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
	ssize_t got = read(part_sv[1], big_in, 100000);
	assert_true(got > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
	if (close_own)
		assert_int_equal(gmp_close(part_sv[0]), 0);
	else
		close(part_sv[1]);
	assert_int_equal(gmp_shutdown(), 0);
	long long r = atomic_load(&part_result);
	assert_true(r >= got);
	assert_true(r < (long long)BIG);
	if (close_own) {
		close(part_sv[1]);
	} else {
		signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would kill us */
		assert_int_equal(gmp_write(part_sv[0], big_out, 10), -EPIPE);
		assert_int_equal(gmp_close(part_sv[0]), 0);
	}
	free(big_out);
	free(big_in);
}

static void test_io_write_partial_when_peer_closes(void **s)
{
	(void)s;
	partial_write(false);
}

static void test_io_write_partial_when_closed(void **s)
{
	(void)s;
	partial_write(true);
}

/* ---- callers that are not tasks -------------------------------------------------------- */

static int fsv[2];
static atomic_int fstage;

static void *foreign_thread(void *arg)
{
	(void)arg;
	char buf[8];
	/* Blocks this thread in poll(2) until a task writes. */
	atomic_store(&fstage, 1);
	T_ASSERT(gmp_read(fsv[0], buf, sizeof buf) == 4);
	T_ASSERT(memcmp(buf, "task", 4) == 0);
	/* Poll with a timeout. */
	int64_t t0 = tu_now_ns();
	T_ASSERT(gmp_poll_fd(fsv[0], POLLIN, 15 * 1000000) == 0);
	T_ASSERT(tu_now_ns() - t0 >= 15 * 1000000);
	T_ASSERT(gmp_poll_fd(fsv[0], POLLOUT, -1) == POLLOUT);
	/* Write to the task, which is parked in gmp_read. */
	T_ASSERT(gmp_write(fsv[0], "thread", 6) == 6);
	atomic_store(&fstage, 2);
	T_ASSERT(gmp_poll_fd(fsv[0], POLLIN, -1) == POLLIN);
	T_ASSERT(gmp_read(fsv[0], buf, sizeof buf) == 3);
	return NULL;
}

static void foreign_peer_task(void *arg)
{
	(void)arg;
	gmp_sleep(10 * 1000000);
	T_ASSERT(gmp_write(fsv[1], "task", 4) == 4);
	char buf[8];
	read_full(fsv[1], buf, 6);
	T_ASSERT(memcmp(buf, "thread", 6) == 0);
	gmp_sleep(5 * 1000000);
	T_ASSERT(gmp_write(fsv[1], "bye", 3) == 3);
}

/* A task inside its own syscall window counts as a thread: it blocks. */
static void syscall_window_task(void *arg)
{
	(void)arg;
	int sv[2];
	nb_socketpair(sv);
	T_ASSERT(write(sv[1], "w", 1) == 1);
	gmp_enter_syscall();
	char c;
	T_ASSERT(gmp_read(sv[0], &c, 1) == 1 && c == 'w');
	T_ASSERT(gmp_poll_fd(sv[0], POLLIN, 2 * 1000000) == 0);
	gmp_exit_syscall();
	T_ASSERT(gmp_close(sv[0]) == 0 && gmp_close(sv[1]) == 0);
}

static void test_io_foreign_thread_read_and_poll(void **s)
{
	(void)s;
	tu_init(2);
	atomic_store(&fstage, 0);
	nb_socketpair(fsv);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, foreign_thread, NULL), 0);
	assert_true(gmp_go(foreign_peer_task, NULL) > 0);
	assert_true(gmp_go(syscall_window_task, NULL) > 0);
	pthread_join(t, NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&fstage), 2);
	close(fsv[0]);
	close(fsv[1]);
}

static void *thread_only(void *arg)
{
	(void)arg;
	int sv[2];
	nb_socketpair(sv);
	int64_t t0 = tu_now_ns();
	T_ASSERT(gmp_poll_fd(sv[0], POLLIN, 5 * 1000000) == 0);
	T_ASSERT(tu_now_ns() - t0 >= 5 * 1000000);
	T_ASSERT(gmp_write(sv[1], "abc", 3) == 3);
	char buf[4];
	read_full(sv[0], buf, 3);
	T_ASSERT(gmp_close(sv[0]) == 0 && gmp_close(sv[1]) == 0);
	return NULL;
}

static void test_io_threads_without_runtime(void **s)
{
	(void)s;
	/* The runtime is not running: threads' I/O needs no poller. */
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thread_only, NULL), 0);
	pthread_join(t, NULL);
	gmp_stats st;
	gmp_stats_read(&st);
	assert_int_equal(st.threads_total, 0);
}

/* ---- fork ------------------------------------------------------------------------ */

/* The child of fork() inherits the descriptors but none of the parent's
 * calls: a task of the parent parked in gmp_read holds a reference that
 * must not make the child's gmp_close wait, and the child's own runtime
 * registers descriptors with its own epoll instance. */
static int fork_sv[2];
static atomic_int fork_parent_read;

static void fork_parent_reader(void *arg)
{
	(void)arg;
	char c;
	T_ASSERT(gmp_read(fork_sv[0], &c, 1) == 1 && c == 'p');
	atomic_store(&fork_parent_read, 1);
}

static int child_sv[2];

static void child_reader(void *arg)
{
	(void)arg;
	char c;
	T_ASSERT(gmp_read(child_sv[0], &c, 1) == 1 && c == 'c');
}

static void fork_child(void *arg)
{
	(void)arg;
	/* Closing the parent's busy descriptor does not wait for its task. */
	T_ASSERT(gmp_close(fork_sv[0]) == 0);
	if (TU_TSAN)
		return; /* TSan cannot start threads after a threaded fork */
	gmp_config c = { .maxprocs = 1 };
	T_ASSERT(gmp_init(&c) == 0);
	nb_socketpair(child_sv);
	T_ASSERT(gmp_go(child_reader, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 1); /* in the child's poller */
	T_ASSERT(write(child_sv[1], "c", 1) == 1);
	T_ASSERT(gmp_shutdown() == 0);
}

static void test_io_fork_child_starts_clean(void **s)
{
	(void)s;
	tu_init(2);
	atomic_store(&fork_parent_read, 0);
	nb_socketpair(fork_sv);
	assert_true(gmp_go(fork_parent_reader, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
	/* Let the runtime's threads finish starting before the fork. An M
	 * woken to spin is still inside the sanitizer's thread start (and
	 * its allocator) for a moment; gcc 12's ASan takes no allocator lock
	 * around fork, so a child forked in that moment inherits the lock
	 * held and hangs at its first malloc. Spinning Ms are counted from
	 * before their thread exists, so none spinning means none starting;
	 * the pause covers sysmon's own start. */
	TU_WAIT_FOR(tu_stats().threads_spinning == 0);
	usleep(20 * 1000);
	char err[4096];
	int status = tu_run_child(fork_child, NULL, err, sizeof err);
	if (strstr(err, "qemu_plugin") || strstr(err, "cpu_exec")) {
		/* qemu-user's own assertions when a threaded process forks */
		fprintf(stderr, "skipped: fork of a threaded process under "
				"qemu-user\n");
		assert_int_equal(write(fork_sv[1], "p", 1), 1);
		assert_int_equal(gmp_shutdown(), 0);
		skip();
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("child status %#x: %s", status, err);
	/* The parent's task and descriptor are untouched. */
	assert_int_equal(atomic_load(&fork_parent_read), 0);
	assert_int_equal(write(fork_sv[1], "p", 1), 1);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&fork_parent_read), 1);
	assert_int_equal(gmp_close(fork_sv[0]), 0);
	close(fork_sv[1]);
}

/* ---- restarts: a new epoll instance each time ------------------------------------------ */

static int restart_sv[2];

static void restart_reader(void *arg)
{
	(void)arg;
	char c;
	T_ASSERT(gmp_read(restart_sv[0], &c, 1) == 1);
	T_ASSERT(c == 'r');
}

static void test_io_restart_runtime(void **s)
{
	(void)s;
	nb_socketpair(restart_sv);
	for (int i = 0; i < 5; i++) {
		tu_init(1 + i % 2);
		assert_true(gmp_go(restart_reader, NULL) > 0);
		TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
		assert_int_equal(write(restart_sv[1], "r", 1), 1);
		assert_int_equal(gmp_shutdown(), 0);
	}
	close(restart_sv[0]);
	close(restart_sv[1]);
}

GMP_TEST_MAIN(cmocka_unit_test(test_io_hundred_parked_readers_hold_no_thread),
	      cmocka_unit_test(test_io_poll_timeout),
	      cmocka_unit_test(test_io_poll_timeout_many_tasks),
	      cmocka_unit_test(test_io_echo_50_connections_maxprocs_1),
	      cmocka_unit_test(test_io_echo_50_connections_maxprocs_2),
	      cmocka_unit_test(test_io_echo_50_connections_maxprocs_4),
	      cmocka_unit_test(test_io_many_acceptors_one_listener),
	      cmocka_unit_test(test_io_eof_after_short_read),
	      cmocka_unit_test(test_io_blocking_pipe_does_not_stall_maxprocs_1),
	      cmocka_unit_test(test_io_blocking_socket_blocks_in_kernel),
	      cmocka_unit_test(test_io_blocking_socket_waitall),
	      cmocka_unit_test(test_io_nonblock_cleared_later_waits_in_poller),
	      cmocka_unit_test(test_io_bad_input),
	      cmocka_unit_test(test_io_connect_refused),
	      cmocka_unit_test(test_io_accept_inherits_listener_mode),
	      cmocka_unit_test(test_io_close_wakes_every_waiter),
	      cmocka_unit_test(test_io_close_from_thread),
	      cmocka_unit_test(test_io_close_blocking_descriptor_in_use),
	      cmocka_unit_test(test_io_close_races_with_io_maxprocs_2),
	      cmocka_unit_test(test_io_close_races_with_io_maxprocs_4),
	      cmocka_unit_test(test_io_fd_reuse_after_plain_close),
	      cmocka_unit_test(test_io_fd_reuse_as_blocking_pipe),
	      cmocka_unit_test(test_io_fd_reuse_noticed_by_deferred_check),
	      cmocka_unit_test(test_io_plain_close_under_parked_reader_noticed),
	      cmocka_unit_test(test_io_write_to_closed_peer_epipe_no_sigpipe),
	      cmocka_unit_test(test_io_write_partial_when_peer_closes),
	      cmocka_unit_test(test_io_write_partial_when_closed),
	      cmocka_unit_test(test_io_write_all_bytes_parking),
	      cmocka_unit_test(test_io_foreign_thread_read_and_poll),
	      cmocka_unit_test(test_io_threads_without_runtime),
	      cmocka_unit_test(test_io_fork_child_starts_clean),
	      cmocka_unit_test(test_io_restart_runtime))
