/* The vectored, datagram and message calls (design.md §11.4): UDP echo with
 * addresses, readv/writev (a writev that must park on a full socket),
 * descriptors passed with SCM_RIGHTS, deadlines on them, blocking
 * descriptors, plain threads, and the edge answers. */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "gmp_test.h"

#include "export_test.h"

/* ---- helpers ---------------------------------------------------------------- */

static void nb_socketpair(int type, int sv[2])
{
	T_ASSERT(socketpair(AF_UNIX, type | SOCK_NONBLOCK, 0, sv) == 0);
}

/* A non-blocking UDP socket bound to 127.0.0.1 and an ephemeral port. */
static int udp_bound(struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	T_ASSERT(fd >= 0);
	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_ASSERT(bind(fd, (struct sockaddr *)sa, sizeof *sa) == 0);
	socklen_t len = sizeof *sa;
	T_ASSERT(getsockname(fd, (struct sockaddr *)sa, &len) == 0);
	return fd;
}

static bool same_addr(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_family == b->sin_family && a->sin_port == b->sin_port &&
	       a->sin_addr.s_addr == b->sin_addr.s_addr;
}

/* ---- UDP echo with addresses -------------------------------------------------- */

#define UDP_CLIENTS 8
#define UDP_ROUNDS 200

static int udp_srv;
static struct sockaddr_in udp_srv_addr;
static atomic_int udp_clients_done;

static void udp_server(void *arg)
{
	(void)arg;
	char buf[2048];
	for (;;) {
		struct sockaddr_in from;
		socklen_t len = sizeof from;
		ssize_t n = gmp_recvfrom(udp_srv, buf, sizeof buf, 0,
					 (struct sockaddr *)&from, &len);
		if (n == -EBADF)
			return; /* gmp_close: the test is over */
		T_ASSERT(n >= 0);
		T_ASSERT(len == sizeof from);
		T_ASSERT(gmp_sendto(udp_srv, buf, (size_t)n, 0,
				    (struct sockaddr *)&from, len) == n);
	}
}

static void udp_client(void *arg)
{
	int id = (int)(intptr_t)arg;
	struct sockaddr_in me;
	int fd = udp_bound(&me);
	for (int i = 0; i < UDP_ROUNDS; i++) {
		char out[64], in[128];
		int len =
			snprintf(out, sizeof out, "client %d round %d", id, i);
		T_ASSERT(gmp_sendto(fd, out, (size_t)len, 0,
				    (struct sockaddr *)&udp_srv_addr,
				    sizeof udp_srv_addr) == len);
		struct sockaddr_in from;
		socklen_t fl = sizeof from;
		ssize_t n = gmp_recvfrom(fd, in, sizeof in, 0,
					 (struct sockaddr *)&from, &fl);
		T_ASSERT(n == len);
		T_ASSERT(memcmp(in, out, (size_t)len) == 0);
		T_ASSERT(same_addr(&from, &udp_srv_addr));
	}
	T_ASSERT(gmp_close(fd) == 0);
	atomic_fetch_add(&udp_clients_done, 1);
}

static void test_iocalls_udp_echo_with_addresses(void **s)
{
	(void)s;
	tu_init(2);
	udp_srv = udp_bound(&udp_srv_addr);
	assert_true(gmp_go(udp_server, NULL) > 0);
	for (int i = 0; i < UDP_CLIENTS; i++)
		assert_true(gmp_go(udp_client, (void *)(intptr_t)i) > 0);
	TU_WAIT_FOR(atomic_load(&udp_clients_done) == UDP_CLIENTS);
	assert_int_equal(gmp_close(udp_srv), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* From a plain thread, a UDP round trip with a task serving. */
static void test_iocalls_udp_from_plain_thread(void **s)
{
	(void)s;
	tu_init(1);
	udp_srv = udp_bound(&udp_srv_addr);
	assert_true(gmp_go(udp_server, NULL) > 0);
	struct sockaddr_in me;
	int fd = udp_bound(&me);
	for (int i = 0; i < 20; i++) {
		char in[16];
		assert_int_equal(gmp_sendto(fd, "ping", 4, 0,
					    (struct sockaddr *)&udp_srv_addr,
					    sizeof udp_srv_addr),
				 4);
		struct sockaddr_in from;
		socklen_t fl = sizeof from;
		assert_int_equal(gmp_recvfrom(fd, in, sizeof in, 0,
					      (struct sockaddr *)&from, &fl),
				 4);
		assert_true(same_addr(&from, &udp_srv_addr));
	}
	/* A deadline on a datagram read, on this thread. */
	int64_t dl = gmp_nanotime() + 30 * MS;
	assert_int_equal(gmp_set_deadline(fd, GMP_READ, dl), 0);
	char c;
	assert_int_equal(gmp_recvfrom(fd, &c, 1, 0, NULL, NULL), -ETIMEDOUT);
	assert_true(gmp_nanotime() >= dl);
	assert_int_equal(gmp_close(fd), 0);
	assert_int_equal(gmp_close(udp_srv), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- readv / writev ------------------------------------------------------------- */

static void vectors_task(void *arg)
{
	(void)arg;
	int sv[2];
	nb_socketpair(SOCK_STREAM, sv);
	struct iovec out[3] = { { "head", 4 }, { "", 0 }, { "-body", 5 } };
	T_ASSERT(gmp_writev(sv[0], out, 3) == 9);
	char a[3], b[16];
	struct iovec in[2] = { { a, sizeof a }, { b, sizeof b } };
	T_ASSERT(gmp_readv(sv[1], in, 2) == 9);
	T_ASSERT(memcmp(a, "hea", 3) == 0 && memcmp(b, "d-body", 6) == 0);
	/* A readv that parks until data comes. */
	T_ASSERT(gmp_set_deadline(sv[1], GMP_READ, gmp_nanotime() + 20 * MS) ==
		 0);
	T_ASSERT(gmp_readv(sv[1], in, 2) == -ETIMEDOUT);
	T_ASSERT(gmp_close(sv[0]) == 0);
	T_ASSERT(gmp_readv(sv[1], in, 2) == 0); /* end of stream */
	T_ASSERT(gmp_close(sv[1]) == 0);
}

static void test_iocalls_readv_writev(void **s)
{
	(void)s;
	tu_init(1);
	assert_true(gmp_go(vectors_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* A writev far larger than the socket buffer: it parks until a reader
 * that starts only once it waits drains the socket; every byte arrives in
 * order and the caller's vectors are unchanged. */
#define BIG_VECS 200
#define BIG_EACH (16 * 1024 + 7)

static int big_sv[2];
static atomic_int big_written;
static struct iovec big_iov[BIG_VECS];
static struct iovec big_copy[BIG_VECS];

static unsigned char big_byte(size_t i)
{
	return (unsigned char)(i * 131 + i / 4099);
}

static void big_writer(void *arg)
{
	(void)arg;
	ssize_t r = gmp_writev(big_sv[0], big_iov, BIG_VECS);
	T_ASSERT(r == (ssize_t)BIG_VECS * BIG_EACH);
	T_ASSERT(memcmp(big_iov, big_copy, sizeof big_iov) == 0);
	atomic_store(&big_written, 1);
}

static void test_iocalls_writev_parks_on_full_socket(void **s)
{
	(void)s;
	nb_socketpair(SOCK_STREAM, big_sv);
	int small = 4096;
	setsockopt(big_sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	size_t total = (size_t)BIG_VECS * BIG_EACH;
	unsigned char *data = malloc(total);
	assert_non_null(data);
	for (size_t i = 0; i < total; i++)
		data[i] = big_byte(i);
	for (int i = 0; i < BIG_VECS; i++) {
		big_iov[i].iov_base = data + (size_t)i * BIG_EACH;
		big_iov[i].iov_len = BIG_EACH;
	}
	memcpy(big_copy, big_iov, sizeof big_iov);
	tu_init(2);
	assert_true(gmp_go(big_writer, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 1); /* parked: socket full */
	assert_int_equal(atomic_load(&big_written), 0);
	unsigned char *got = malloc(total);
	assert_non_null(got);
	size_t n = 0;
	while (n < total) {
		ssize_t r = gmp_read(big_sv[1], got + n, total - n);
		assert_true(r > 0);
		n += (size_t)r;
	}
	assert_memory_equal(got, data, total);
	TU_WAIT_FOR(atomic_load(&big_written) == 1);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp_close(big_sv[0]), 0);
	assert_int_equal(gmp_close(big_sv[1]), 0);
	free(got);
	free(data);
}

/* A writev stopped by its write deadline after some bytes returns that
 * count. */
static void writev_deadline_task(void *arg)
{
	(void)arg;
	int sv[2];
	nb_socketpair(SOCK_STREAM, sv);
	size_t each = 1 << 20;
	char *buf = calloc(1, each);
	T_ASSERT(buf);
	struct iovec v[2] = { { buf, each }, { buf, each } };
	int64_t dl = gmp_nanotime() + 30 * MS;
	T_ASSERT(gmp_set_deadline(sv[0], GMP_WRITE, dl) == 0);
	ssize_t r = gmp_writev(sv[0], v, 2);
	T_ASSERT(r > 0 && (size_t)r < 2 * each);
	T_ASSERT(gmp_nanotime() >= dl);
	T_ASSERT(gmp_sendto(sv[0], buf, each, 0, NULL, 0) == -ETIMEDOUT);
	struct msghdr m = { .msg_iov = v, .msg_iovlen = 2 };
	T_ASSERT(gmp_sendmsg(sv[0], &m, 0) == -ETIMEDOUT);
	free(buf);
	T_ASSERT(gmp_close(sv[0]) == 0);
	T_ASSERT(gmp_close(sv[1]) == 0);
}

static void test_iocalls_writev_deadline_partial(void **s)
{
	(void)s;
	tu_init(1);
	assert_true(gmp_go(writev_deadline_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- SCM_RIGHTS over sendmsg / recvmsg ---------------------------------------------- */

static int scm_sv[2];
static atomic_int scm_done;

static void scm_receiver(void *arg)
{
	(void)arg;
	char data[8];
	struct iovec v = { data, sizeof data };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = { .msg_iov = &v,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof u.buf };
	ssize_t r = gmp_recvmsg(scm_sv[1], &m, MSG_CMSG_CLOEXEC); /* parks */
	T_ASSERT(r == 3 && memcmp(data, "fd!", 3) == 0);
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	T_ASSERT(c && c->cmsg_level == SOL_SOCKET &&
		 c->cmsg_type == SCM_RIGHTS);
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof fd);
	T_ASSERT(fd >= 0);
	T_ASSERT(gmp_write(fd, "through", 7) == 7);
	T_ASSERT(gmp_close(fd) == 0);
	atomic_store(&scm_done, 1);
}

static void test_iocalls_scm_rights(void **s)
{
	(void)s;
	nb_socketpair(SOCK_STREAM, scm_sv);
	int p[2];
	assert_int_equal(pipe2(p, O_NONBLOCK), 0);
	tu_init(2);
	assert_true(gmp_go(scm_receiver, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
	struct iovec v = { "fd!", 3 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr m = { .msg_iov = &v,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof u.buf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &p[1], sizeof(int));
	struct msghdr before = m;
	assert_int_equal(gmp_sendmsg(scm_sv[0], &m, 0), 3);
	assert_memory_equal(&before, &m, sizeof m);
	TU_WAIT_FOR(atomic_load(&scm_done) == 1);
	char buf[16];
	assert_int_equal(gmp_read(p[0], buf, sizeof buf), 7);
	assert_memory_equal(buf, "through", 7);
	assert_int_equal(gmp_shutdown(), 0);
	close(p[0]);
	close(p[1]);
	assert_int_equal(gmp_close(scm_sv[0]), 0);
	assert_int_equal(gmp_close(scm_sv[1]), 0);
}

/* A large sendmsg on a stream with a descriptor attached: it parks, goes
 * on without the control data, and the descriptor arrives once. */
static int scm2_sv[2];
static atomic_int scm2_sent;
#define SCM2_LEN (2 << 20)

static void scm2_sender(void *arg)
{
	int pfd = (int)(intptr_t)arg;
	char *data = malloc(SCM2_LEN);
	T_ASSERT(data);
	for (size_t i = 0; i < SCM2_LEN; i++)
		data[i] = (char)(i % 251);
	struct iovec v[2] = { { data, SCM2_LEN / 2 },
			      { data + SCM2_LEN / 2, SCM2_LEN / 2 } };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr m = { .msg_iov = v,
			    .msg_iovlen = 2,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof u.buf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pfd, sizeof(int));
	T_ASSERT(gmp_sendmsg(scm2_sv[0], &m, 0) == SCM2_LEN);
	T_ASSERT(v[0].iov_base == data && v[1].iov_len == SCM2_LEN / 2);
	free(data);
	atomic_store(&scm2_sent, 1);
}

static void test_iocalls_sendmsg_stream_parks_control_once(void **s)
{
	(void)s;
	nb_socketpair(SOCK_STREAM, scm2_sv);
	int small = 4096;
	setsockopt(scm2_sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	int p[2];
	assert_int_equal(pipe(p), 0);
	tu_init(2);
	assert_true(gmp_go(scm2_sender, (void *)(intptr_t)p[1]) > 0);
	TU_WAIT_FOR(tu_stats().tasks_waiting >= 1);
	char *got = malloc(SCM2_LEN);
	assert_non_null(got);
	size_t n = 0;
	int fds = 0;
	while (n < SCM2_LEN) {
		struct iovec v = { got + n, SCM2_LEN - n };
		union {
			char buf[CMSG_SPACE(4 * sizeof(int))];
			struct cmsghdr align;
		} u;
		struct msghdr m = { .msg_iov = &v,
				    .msg_iovlen = 1,
				    .msg_control = u.buf,
				    .msg_controllen = sizeof u.buf };
		ssize_t r = gmp_recvmsg(scm2_sv[1], &m, MSG_CMSG_CLOEXEC);
		assert_true(r > 0);
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c;
		     c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) /
				      sizeof(int));
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int),
				       sizeof fd);
				close(fd);
				fds++;
			}
		}
		n += (size_t)r;
	}
	for (size_t i = 0; i < SCM2_LEN; i++)
		if (got[i] != (char)(i % 251))
			fail_msg("byte %zu differs", i);
	assert_int_equal(fds, 1);
	TU_WAIT_FOR(atomic_load(&scm2_sent) == 1);
	assert_int_equal(gmp_shutdown(), 0);
	free(got);
	close(p[0]);
	close(p[1]);
	assert_int_equal(gmp_close(scm2_sv[0]), 0);
	assert_int_equal(gmp_close(scm2_sv[1]), 0);
}

/* ---- blocking descriptors ------------------------------------------------------ */

static int blk_pipe[2];
static atomic_int blk_other_ran;

static void blk_reader(void *arg)
{
	(void)arg;
	char a[2], b[8];
	struct iovec v[2] = { { a, sizeof a }, { b, sizeof b } };
	T_ASSERT(gmp_readv(blk_pipe[0], v, 2) == 5); /* blocks in the kernel */
	T_ASSERT(memcmp(a, "he", 2) == 0 && memcmp(b, "llo", 3) == 0);
}

static void blk_other(void *arg)
{
	(void)arg;
	atomic_store(&blk_other_ran, 1);
	struct iovec v[2] = { { "he", 2 }, { "llo", 3 } };
	T_ASSERT(gmp_writev(blk_pipe[1], v, 2) == 5);
}

/* At maxprocs 1 a readv blocked in the kernel on a blocking pipe loses its
 * P, so the task that will write can run. */
static void test_iocalls_blocking_pipe_readv_maxprocs_1(void **s)
{
	(void)s;
	assert_int_equal(pipe(blk_pipe), 0);
	tu_init(1);
	assert_true(gmp_go(blk_reader, NULL) > 0);
	TU_WAIT_FOR(tu_stats().tasks_in_syscall >= 1);
	assert_true(gmp_go(blk_other, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&blk_other_ran), 1);
	close(blk_pipe[0]);
	close(blk_pipe[1]);
}

/* ---- edge answers ---------------------------------------------------------------- */

/* Equal, in a task or on any thread. */
#define EQ(a, b) T_ASSERT((long long)(a) == (long long)(b))

static void edges_checks(void)
{
	int sv[2];
	nb_socketpair(SOCK_STREAM, sv);
	char c;
	struct iovec v = { &c, 1 };
	/* 0 vectors: 0, even with nothing to read; negative counts. */
	EQ(gmp_readv(sv[0], &v, 0), 0);
	EQ(gmp_readv(sv[0], NULL, 0), 0);
	EQ(gmp_writev(sv[0], &v, 0), 0);
	EQ(gmp_readv(sv[0], &v, -1), -EINVAL);
	EQ(gmp_writev(sv[0], &v, -1), -EINVAL);
	EQ(gmp_writev(sv[0], &v, IOV_MAX + 1), -EINVAL);
	struct iovec huge[2] = { { &c, SSIZE_MAX }, { &c, 2 } };
	EQ(gmp_writev(sv[0], huge, 2), -EINVAL);
	/* Bad descriptors. */
	EQ(gmp_readv(-1, &v, 1), -EBADF);
	EQ(gmp_writev(-1, &v, 1), -EBADF);
	EQ(gmp_readv(903, &v, 1), -EBADF);
	EQ(gmp_recvfrom(-1, &c, 1, 0, NULL, NULL), -EBADF);
	EQ(gmp_recvfrom(904, &c, 1, 0, NULL, NULL), -EBADF);
	EQ(gmp_sendto(-1, &c, 1, 0, NULL, 0), -EBADF);
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	EQ(gmp_recvmsg(-1, &m, 0), -EBADF);
	EQ(gmp_sendmsg(905, &m, 0), -EBADF);
	/* Not a socket. */
	int p[2];
	EQ(pipe2(p, O_NONBLOCK), 0);
	EQ(gmp_recvfrom(p[0], &c, 1, 0, NULL, NULL), -ENOTSOCK);
	/* MSG_DONTWAIT never waits. */
	EQ(gmp_recvfrom(sv[0], &c, 1, MSG_DONTWAIT, NULL, NULL), -EAGAIN);
	EQ(gmp_recvmsg(sv[0], &m, MSG_DONTWAIT), -EAGAIN);
	/* A datagram too large. */
	struct sockaddr_in a, b;
	int u1 = udp_bound(&a), u2 = udp_bound(&b);
	size_t big = 70000;
	char *buf = calloc(1, big);
	T_ASSERT(buf);
	EQ(gmp_sendto(u1, buf, big, 0, (struct sockaddr *)&b, sizeof b),
	   -EMSGSIZE);
	struct iovec bv[2] = { { buf, big / 2 }, { buf, big / 2 } };
	struct msghdr bm = { .msg_name = &b,
			     .msg_namelen = sizeof b,
			     .msg_iov = bv,
			     .msg_iovlen = 2 };
	EQ(gmp_sendmsg(u1, &bm, 0), -EMSGSIZE);
	/* Datagrams are never split: one sendmsg of two vectors arrives as
	 * one datagram, and a short buffer truncates it (MSG_TRUNC). */
	bv[0].iov_len = 100;
	bv[1].iov_len = 200;
	EQ(gmp_sendmsg(u1, &bm, 0), 300);
	struct iovec rv = { buf, 50 };
	struct msghdr rm = { .msg_iov = &rv, .msg_iovlen = 1 };
	EQ(gmp_recvmsg(u2, &rm, 0), 50);
	T_ASSERT(rm.msg_flags & MSG_TRUNC);
	/* Nothing left of it. */
	EQ(gmp_recvfrom(u2, buf, big, MSG_DONTWAIT, NULL, NULL), -EAGAIN);
	free(buf);
	/* A peer that is gone: -EPIPE, no SIGPIPE (which would kill us). */
	EQ(gmp_close(sv[1]), 0);
	struct iovec w = { "x", 1 };
	struct msghdr wm = { .msg_iov = &w, .msg_iovlen = 1 };
	EQ(gmp_writev(sv[0], &w, 1), -EPIPE);
	EQ(gmp_sendmsg(sv[0], &wm, 0), -EPIPE);
	EQ(gmp_sendto(sv[0], "x", 1, 0, NULL, 0), -EPIPE);
	EQ(close(p[0]), 0);
	EQ(gmp_writev(p[1], &w, 1), -EPIPE);
	EQ(close(p[1]), 0);
	EQ(gmp_close(sv[0]), 0);
	EQ(gmp_close(u1), 0);
	EQ(gmp_close(u2), 0);
}

static void edges_task(void *arg)
{
	(void)arg;
	edges_checks();
}

static void test_iocalls_edge_answers(void **s)
{
	(void)s;
	edges_checks(); /* runtime off */
	tu_init(2);
	edges_checks(); /* a plain thread, runtime on */
	assert_true(gmp_go(edges_task, NULL) > 0); /* a task */
	assert_int_equal(gmp_shutdown(), 0);
}

GMP_TEST_MAIN(cmocka_unit_test(test_iocalls_udp_echo_with_addresses),
	      cmocka_unit_test(test_iocalls_udp_from_plain_thread),
	      cmocka_unit_test(test_iocalls_readv_writev),
	      cmocka_unit_test(test_iocalls_writev_parks_on_full_socket),
	      cmocka_unit_test(test_iocalls_writev_deadline_partial),
	      cmocka_unit_test(test_iocalls_scm_rights),
	      cmocka_unit_test(test_iocalls_sendmsg_stream_parks_control_once),
	      cmocka_unit_test(test_iocalls_blocking_pipe_readv_maxprocs_1),
	      cmocka_unit_test(test_iocalls_edge_answers))
