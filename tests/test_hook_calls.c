/* libgmp-hook's calls, each made twice on descriptors set up the same way:
 * once from a plain thread (where the hooks are libc) and once from a
 * task (where a call that would block parks): the two must answer the
 * same, result, errno and data, to the byte (design.md §12, §32).
 *
 * The table below is the whole test: a descriptor fixture, what is done
 * to it before the call (data written, an end closed, a flag set), a
 * helper thread that acts after a delay (so that the call has to wait:
 * in a task it parks), the call itself, and libc's answer, which the
 * thread's run is checked against first. Each row is its own case. */
#include "gmp_test.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

/* ---- fixtures ------------------------------------------------------------------ */

enum {
	FX_STREAM, /* socketpair(AF_UNIX, SOCK_STREAM): a and b */
	FX_DGRAM,  /* socketpair(AF_UNIX, SOCK_DGRAM) */
	FX_TCP,    /* a loopback connection: a the server's end, b the
		      client's, c the listener */
	FX_UDP,    /* two loopback UDP sockets, each connected to the other */
	FX_PIPE,   /* pipe: a reads, b writes */
	FX_FILE,   /* a regular file of 64 known bytes, a open on it */
	FX_EVENTFD,
	FX_LISTEN, /* a TCP listener c on port, nothing connected */
	FX_DIR,    /* a open on a directory */
};

struct fx {
	int a, b, c;
	int port;
	char path[64];
	pthread_t helper;
	bool helping;
	int64_t delay;
	void (*help)(struct fx *);
};

static const char content[] =
	"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!?";

static int tcp_listener(int *port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(l >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_ASSERT(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0);
	T_ASSERT(listen(l, 16) == 0);
	socklen_t len = sizeof sa;
	T_ASSERT(getsockname(l, (struct sockaddr *)&sa, &len) == 0);
	*port = ntohs(sa.sin_port);
	return l;
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	return sa;
}

static void fx_make(struct fx *f, int kind)
{
	memset(f, 0, sizeof *f);
	f->a = f->b = f->c = -1;
	int sv[2];
	switch (kind) {
	case FX_STREAM:
	case FX_DGRAM:
		T_ASSERT(
			socketpair(AF_UNIX,
				   kind == FX_STREAM ? SOCK_STREAM : SOCK_DGRAM,
				   0, sv) == 0);
		f->a = sv[0];
		f->b = sv[1];
		break;
	case FX_TCP: {
		f->c = tcp_listener(&f->port);
		f->b = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = loopback(f->port);
		T_ASSERT(connect(f->b, (struct sockaddr *)&sa, sizeof sa) == 0);
		f->a = accept(f->c, NULL, NULL);
		T_ASSERT(f->a >= 0);
		break;
	}
	case FX_UDP: {
		int s[2];
		struct sockaddr_in sa[2];
		for (int i = 0; i < 2; i++) {
			s[i] = socket(AF_INET, SOCK_DGRAM, 0);
			sa[i] = loopback(0);
			T_ASSERT(bind(s[i], (struct sockaddr *)&sa[i],
				      sizeof sa[i]) == 0);
			socklen_t l = sizeof sa[i];
			T_ASSERT(getsockname(s[i], (struct sockaddr *)&sa[i],
					     &l) == 0);
		}
		for (int i = 0; i < 2; i++)
			T_ASSERT(connect(s[i], (struct sockaddr *)&sa[1 - i],
					 sizeof sa[1 - i]) == 0);
		f->a = s[0];
		f->b = s[1];
		break;
	}
	case FX_PIPE:
		T_ASSERT(pipe(sv) == 0);
		f->a = sv[0];
		f->b = sv[1];
		break;
	case FX_FILE:
		snprintf(f->path, sizeof f->path, "/tmp/gmp-hook-calls-XXXXXX");
		f->a = mkstemp(f->path);
		T_ASSERT(f->a >= 0);
		T_ASSERT(write(f->a, content, 64) == 64);
		T_ASSERT(lseek(f->a, 0, SEEK_SET) == 0);
		break;
	case FX_EVENTFD:
		f->a = eventfd(0, 0);
		T_ASSERT(f->a >= 0);
		break;
	case FX_LISTEN:
		f->c = tcp_listener(&f->port);
		break;
	case FX_DIR:
		f->a = open("/tmp", O_RDONLY | O_DIRECTORY);
		T_ASSERT(f->a >= 0);
		break;
	}
}

static void fx_free(struct fx *f)
{
	if (f->helping)
		T_ASSERT(pthread_join(f->helper, NULL) == 0);
	for (int *p = &f->a; p <= &f->c; p++)
		if (*p >= 0)
			close(*p);
	if (f->path[0])
		unlink(f->path);
}

static void *helper_main(void *arg)
{
	struct fx *f = arg;
	tu_sleep(f->delay);
	f->help(f);
	return NULL;
}

/* ---- the record of one run ------------------------------------------------------ */

struct rec {
	long ret;
	int err;
	size_t n; /* bytes of buf that the call produced */
	unsigned char buf[512];
	long aux[4]; /* whatever else the case compares */
	bool in_task;
};

/* ---- the cases ------------------------------------------------------------------ */

struct hcase {
	const char *name;
	int kind;
	void (*pre)(struct fx *);  /* before the call, on the test's thread */
	void (*help)(struct fx *); /* after `delay`, on a thread of its own */
	int64_t delay;
	void (*call)(struct fx *, struct rec *);
	long want_ret; /* libc's answer (checked on the thread's run) */
	int want_err;
};

#define RET(r) (o->ret = (long)(r), o->err = o->ret < 0 ? errno : 0)

/* pre and help steps */
static void put_hello(struct fx *f)
{
	T_ASSERT(write(f->b, "hello", 5) == 5);
}
static void put_abc(struct fx *f)
{
	T_ASSERT(write(f->b, "abc", 3) == 3);
}
static void shut_b(struct fx *f)
{
	T_ASSERT(shutdown(f->b, SHUT_WR) == 0);
}
static void close_b(struct fx *f)
{
	close(f->b);
	f->b = -1;
}
static void close_a(struct fx *f)
{
	close(f->a);
	f->a = -1;
}
/* Moves a high up, where the kernel gives out no number while lower
 * ones are free: the runtime opens and closes files of its own (sysmon
 * reads /proc), and a low number closed by the case could be given out
 * again at once, to be read by the case's next call. */
static void move_a_high(struct fx *f)
{
	struct rlimit rl;
	T_ASSERT(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	int high = rl.rlim_cur > 1024 ? 1000 : (int)rl.rlim_cur - 24;
	T_ASSERT(dup2(f->a, high) == high);
	close(f->a);
	f->a = high;
}
/* Closes a but keeps a number of its for the call, which must forget
 * it: the number of a copy made high up. */
static void close_a_keep(struct fx *f)
{
	move_a_high(f);
	close(f->a);
}
static void nb_fcntl(struct fx *f)
{
	T_ASSERT(fcntl(f->a, F_SETFL, fcntl(f->a, F_GETFL) | O_NONBLOCK) == 0);
}
static void nb_fionbio(struct fx *f)
{
	int on = 1;
	T_ASSERT(ioctl(f->a, FIONBIO, &on) == 0);
}
static void nb_on_dup(struct fx *f)
{
	/* One open file, two numbers, one flag: set through the other. */
	int d = dup(f->a);
	T_ASSERT(d >= 0);
	T_ASSERT(fcntl(d, F_SETFL, O_NONBLOCK) == 0);
	close(d);
}
static void nb_b(struct fx *f)
{
	T_ASSERT(fcntl(f->b, F_SETFL, O_NONBLOCK) == 0);
}
static void rcvtimeo_30ms(struct fx *f)
{
	struct timeval tv = { 0, 30000 };
	T_ASSERT(setsockopt(f->a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) ==
		 0);
}
static void sndtimeo_30ms_b(struct fx *f)
{
	struct timeval tv = { 0, 30000 };
	T_ASSERT(setsockopt(f->b, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) ==
		 0);
}
static void put_two_dgrams(struct fx *f)
{
	T_ASSERT(send(f->b, "one", 3, 0) == 3);
	T_ASSERT(send(f->b, "second", 6, 0) == 6);
}
static void put_counter(struct fx *f)
{
	uint64_t v = 42;
	T_ASSERT(write(f->a, &v, 8) == 8);
}
static void help_counter(struct fx *f)
{
	uint64_t v = 7;
	T_ASSERT(write(f->a, &v, 8) == 8);
}
static void help_connect(struct fx *f)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = loopback(f->port);
	T_ASSERT(connect(s, (struct sockaddr *)&sa, sizeof sa) == 0);
	T_ASSERT(write(s, "x", 1) == 1);
	tu_sleep(50 * MS); /* long enough for the peer to read it */
	close(s);
}
/* Reads everything the other side writes, slowly at first. */
static void help_drain(struct fx *f)
{
	char buf[65536];
	ssize_t r;
	while ((r = read(f->a, buf, sizeof buf)) > 0)
		;
}
static void help_waitall(struct fx *f)
{
	T_ASSERT(write(f->b, "abc", 3) == 3);
	tu_sleep(20 * MS);
	T_ASSERT(write(f->b, "def", 3) == 3);
}

/* calls */
static void c_read16(struct fx *f, struct rec *o)
{
	RET(read(f->a, o->buf, 16));
	o->n = o->ret > 0 ? (size_t)o->ret : 0;
}
static void c_read_twice(struct fx *f, struct rec *o)
{
	/* two datagrams: two reads, each whole */
	RET(read(f->a, o->buf, 16));
	long r2 = read(f->a, o->buf + 16, 16);
	o->aux[0] = r2;
	o->n = 32;
}
static void c_read4(struct fx *f, struct rec *o)
{
	RET(read(f->a, o->buf, 4));
	o->n = 4;
}
static void c_read8(struct fx *f, struct rec *o)
{
	RET(read(f->a, o->buf, 8));
	o->n = 8;
}
static void c_read_then_peek(struct fx *f, struct rec *o)
{
	RET(recv(f->a, o->buf, 16, MSG_PEEK));
	o->aux[0] = read(f->a, o->buf + 16, 16);
	o->n = 32;
}
static void c_recv_dontwait(struct fx *f, struct rec *o)
{
	RET(recv(f->a, o->buf, 16, MSG_DONTWAIT));
}
static void c_recv_waitall(struct fx *f, struct rec *o)
{
	RET(recv(f->a, o->buf, 6, MSG_WAITALL));
	o->n = 6;
}
static void c_recvfrom_udp(struct fx *f, struct rec *o)
{
	struct sockaddr_in from;
	socklen_t len = sizeof from;
	memset(&from, 0, sizeof from);
	RET(recvfrom(f->a, o->buf, 16, 0, (struct sockaddr *)&from, &len));
	o->n = 16;
	o->aux[0] = len;
	o->aux[1] = from.sin_family;
	o->aux[2] = from.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
}
static void c_recvmsg_iov(struct fx *f, struct rec *o)
{
	struct iovec iov[2] = { { o->buf, 2 }, { o->buf + 8, 8 } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
	RET(recvmsg(f->a, &m, 0));
	o->n = 16;
	o->aux[0] = m.msg_flags;
}
static void c_readv(struct fx *f, struct rec *o)
{
	struct iovec iov[2] = { { o->buf, 2 }, { o->buf + 8, 8 } };
	RET(readv(f->a, iov, 2));
	o->n = 16;
}
static void c_readv_neg(struct fx *f, struct rec *o)
{
	struct iovec iov[1] = { { o->buf, 8 } };
	volatile int n = -1; /* out of the compiler's sight: it is the point */
	RET(readv(f->a, iov, n));
}
static void c_readv_toomany(struct fx *f, struct rec *o)
{
	static struct iovec iov[IOV_MAX + 1];
	for (int i = 0; i <= IOV_MAX; i++)
		iov[i] = (struct iovec){ o->buf, 1 };
	RET(readv(f->a, iov, IOV_MAX + 1));
}
static void c_write5(struct fx *f, struct rec *o)
{
	RET(write(f->b, "world", 5));
	o->aux[0] = read(f->a, o->buf, 16);
	o->n = 16;
}
static void c_write_big(struct fx *f, struct rec *o)
{
	static char big[4 << 20];
	RET(write(f->b, big, sizeof big));
	close(f->b); /* ends the helper's drain */
	f->b = -1;
}
static void c_write_timeo(struct fx *f, struct rec *o)
{
	/* Nobody reads: SO_SNDTIMEO ends it after what fitted. */
	static char big[4 << 20];
	RET(write(f->b, big, sizeof big));
	o->ret = o->ret > 0 && o->ret < (long)sizeof big ? 1 : o->ret;
}
static void c_write_nonblock_big(struct fx *f, struct rec *o)
{
	static char big[4 << 20];
	RET(write(f->b, big, sizeof big));
	o->aux[0] = o->ret > 0 && o->ret < (long)sizeof big; /* partial */
	long r2 = write(f->b, big, sizeof big);
	o->aux[1] = r2;
	o->aux[2] = r2 < 0 ? errno : 0;
	o->ret = o->ret > 0; /* the partial count depends on buffer sizes */
}
static void c_write_a(struct fx *f, struct rec *o)
{
	RET(write(f->a, "x", 1));
}
static void c_write_b(struct fx *f, struct rec *o)
{
	RET(write(f->b, "x", 1));
}
static void c_send_nosignal(struct fx *f, struct rec *o)
{
	RET(send(f->b, "x", 1, MSG_NOSIGNAL));
}
static void c_writev(struct fx *f, struct rec *o)
{
	struct iovec iov[3] = { { "ab", 2 }, { "", 0 }, { "cdef", 4 } };
	RET(writev(f->b, iov, 3));
	o->aux[0] = read(f->a, o->buf, 16);
	o->n = 16;
}
static void c_sendto_udp(struct fx *f, struct rec *o)
{
	RET(sendto(f->b, "dgram", 5, 0, NULL, 0));
	o->aux[0] = recv(f->a, o->buf, 16, 0);
	o->n = 16;
}
static void c_sendmsg(struct fx *f, struct rec *o)
{
	struct iovec iov[2] = { { "he", 2 }, { "llo", 3 } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
	RET(sendmsg(f->b, &m, 0));
	o->aux[0] = read(f->a, o->buf, 16);
	o->n = 16;
}
static void c_pread(struct fx *f, struct rec *o)
{
	RET(pread(f->a, o->buf, 10, 20));
	o->n = 10;
	o->aux[0] = lseek(f->a, 0, SEEK_CUR);
}
static void c_pread_neg(struct fx *f, struct rec *o)
{
	RET(pread(f->a, o->buf, 10, -1));
}
static void c_pwrite(struct fx *f, struct rec *o)
{
	RET(pwrite(f->a, "XYZ", 3, 5));
	o->aux[0] = pread(f->a, o->buf, 10, 0);
	o->n = 10;
}
static void c_read_file(struct fx *f, struct rec *o)
{
	RET(read(f->a, o->buf, 10));
	o->aux[0] = read(f->a, o->buf + 10, 100);
	o->aux[1] = read(f->a, o->buf + 110, 10); /* end of file */
	o->n = 120;
}
static void c_write_file(struct fx *f, struct rec *o)
{
	RET(write(f->a, "written", 7));
	o->aux[0] = lseek(f->a, 0, SEEK_CUR);
	o->aux[1] = pread(f->a, o->buf, 16, 0);
	o->n = 16;
}
static void c_readv_file(struct fx *f, struct rec *o)
{
	struct iovec iov[2] = { { o->buf, 3 }, { o->buf + 8, 5 } };
	RET(readv(f->a, iov, 2));
	o->n = 16;
}
static void c_accept(struct fx *f, struct rec *o)
{
	int s = accept(f->c, NULL, NULL);
	RET(s >= 0 ? 1 : s);
	if (s >= 0) {
		o->aux[0] = read(s, o->buf, 4);
		o->n = 4;
		o->aux[1] = fcntl(s, F_GETFL) & O_NONBLOCK;
		close(s);
	}
}
static void c_accept4_nb(struct fx *f, struct rec *o)
{
	int s = accept4(f->c, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	RET(s >= 0 ? 1 : s);
	if (s >= 0) {
		o->aux[0] = fcntl(s, F_GETFL) & O_NONBLOCK;
		o->aux[1] = fcntl(s, F_GETFD) & FD_CLOEXEC;
		close(s);
	}
}
static void c_accept_nb_empty(struct fx *f, struct rec *o)
{
	T_ASSERT(fcntl(f->c, F_SETFL, O_NONBLOCK) == 0);
	RET(accept(f->c, NULL, NULL));
}
static void c_accept_timeout(struct fx *f, struct rec *o)
{
	struct timeval tv = { 0, 30000 };
	T_ASSERT(setsockopt(f->c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) ==
		 0);
	RET(accept(f->c, NULL, NULL));
}
static void c_connect_ok(struct fx *f, struct rec *o)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = loopback(f->port);
	RET(connect(s, (struct sockaddr *)&sa, sizeof sa));
	o->aux[0] = fcntl(s, F_GETFL) & O_NONBLOCK; /* left as it was */
	o->aux[1] = connect(s, (struct sockaddr *)&sa, sizeof sa);
	o->aux[2] = errno; /* EISCONN */
	close(s);
}
static void c_connect_refused(struct fx *f, struct rec *o)
{
	/* The listener's port, once the listener is gone. */
	close(f->c);
	f->c = -1;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = loopback(f->port);
	RET(connect(s, (struct sockaddr *)&sa, sizeof sa));
	close(s);
}
static void c_connect_notsock(struct fx *f, struct rec *o)
{
	struct sockaddr_in sa = loopback(1);
	RET(connect(f->a, (struct sockaddr *)&sa, sizeof sa));
}
static void c_poll_in(struct fx *f, struct rec *o)
{
	struct pollfd p[1] = { { f->a, POLLIN, 0 } };
	RET(poll(p, 1, 5000));
	o->aux[0] = p[0].revents;
}
static void c_poll_timeout(struct fx *f, struct rec *o)
{
	struct pollfd p[1] = { { f->a, POLLIN, 0 } };
	int64_t t0 = tu_now_ns();
	RET(poll(p, 1, 30));
	o->aux[0] = p[0].revents;
	o->aux[1] = tu_now_ns() - t0 >= 30 * MS;
}
static void c_poll_mixed(struct fx *f, struct rec *o)
{
	/* A pipe with nothing to read and a regular file, always ready. */
	int fd = open("/etc/passwd", O_RDONLY);
	struct pollfd p[3] = { { f->a, POLLIN, 0 },
			       { fd, POLLIN | POLLOUT, 0 },
			       { -1, POLLIN, 0 } };
	RET(poll(p, 3, 5000));
	o->aux[0] = p[0].revents;
	o->aux[1] = p[1].revents;
	o->aux[2] = p[2].revents;
	close(fd);
}
static void c_poll_two_later(struct fx *f, struct rec *o)
{
	/* Two sockets, the second becomes readable later. */
	int sv[2];
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	struct pollfd p[3] = { { sv[0], POLLIN, 0 },
			       { f->a, POLLIN, 0 },
			       { f->a, POLLOUT, 0 } };
	p[2].fd = sv[1];
	p[2].events = POLLIN;
	RET(poll(p, 3, 5000));
	o->aux[0] = p[0].revents;
	o->aux[1] = p[1].revents;
	o->aux[2] = p[2].revents;
	close(sv[0]);
	close(sv[1]);
}
static void c_poll_nval(struct fx *f, struct rec *o)
{
	struct pollfd p[1] = { { f->a, POLLIN, 0 } };
	RET(poll(p, 1, 5000));
	o->aux[0] = p[0].revents;
	f->a = -1;
}
static void c_poll_none(struct fx *f, struct rec *o)
{
	int64_t t0 = tu_now_ns();
	RET(poll(NULL, 0, 30));
	o->aux[0] = tu_now_ns() - t0 >= 30 * MS;
}
static void c_ppoll_in(struct fx *f, struct rec *o)
{
	struct pollfd p[1] = { { f->a, POLLIN, 0 } };
	struct timespec ts = { 5, 0 };
	sigset_t mask;
	sigemptyset(&mask);
	RET(ppoll(p, 1, &ts, &mask));
	o->aux[0] = p[0].revents;
}
static void c_ppoll_einval(struct fx *f, struct rec *o)
{
	struct pollfd p[1] = { { f->a, POLLIN, 0 } };
	struct timespec ts = { 0, 2000000000 };
	RET(ppoll(p, 1, &ts, NULL));
}
static void c_select_in(struct fx *f, struct rec *o)
{
	fd_set r, w;
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(f->a, &r);
	FD_SET(f->a, &w); /* a pipe's read end is never writable */
	struct timeval tv = { 5, 0 };
	RET(select(f->a + 1, &r, &w, NULL, &tv));
	o->aux[0] = FD_ISSET(f->a, &r);
	o->aux[1] = FD_ISSET(f->a, &w);
	o->aux[2] = tv.tv_sec < 5; /* time used was taken off */
}
static void c_select_timeout(struct fx *f, struct rec *o)
{
	fd_set r;
	FD_ZERO(&r);
	FD_SET(f->a, &r);
	struct timeval tv = { 0, 30000 };
	RET(select(f->a + 1, &r, NULL, NULL, &tv));
	o->aux[0] = FD_ISSET(f->a, &r);
	o->aux[1] = tv.tv_sec == 0 && tv.tv_usec == 0;
}
static void c_select_einval(struct fx *f, struct rec *o)
{
	struct timeval tv = { 0, 30000 };
	RET(select(-1, NULL, NULL, NULL, &tv));
}
static void c_select_badfd(struct fx *f, struct rec *o)
{
	fd_set r;
	FD_ZERO(&r);
	FD_SET(f->a, &r);
	struct timeval tv = { 1, 0 };
	RET(select(f->a + 1, &r, NULL, NULL, &tv));
	f->a = -1;
}
static void c_pselect_in(struct fx *f, struct rec *o)
{
	fd_set r;
	FD_ZERO(&r);
	FD_SET(f->a, &r);
	struct timespec ts = { 5, 0 };
	RET(pselect(f->a + 1, &r, NULL, NULL, &ts, NULL));
	o->aux[0] = FD_ISSET(f->a, &r);
}
static void c_epoll_in(struct fx *f, struct rec *o)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 77 };
	T_ASSERT(epoll_ctl(ep, EPOLL_CTL_ADD, f->a, &ev) == 0);
	struct epoll_event out[4];
	RET(epoll_wait(ep, out, 4, 5000));
	o->aux[0] = o->ret > 0 ? (long)out[0].data.u64 : -1;
	o->aux[1] = o->ret > 0 ? (long)out[0].events : -1;
	close(ep);
}
static void c_epoll_timeout(struct fx *f, struct rec *o)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 77 };
	T_ASSERT(epoll_ctl(ep, EPOLL_CTL_ADD, f->a, &ev) == 0);
	struct epoll_event out[4];
	int64_t t0 = tu_now_ns();
	RET(epoll_pwait(ep, out, 4, 30, NULL));
	o->aux[0] = tu_now_ns() - t0 >= 30 * MS;
	close(ep);
}
static void c_epoll_einval(struct fx *f, struct rec *o)
{
	struct epoll_event out[4];
	RET(epoll_wait(f->a, out, 4, 30)); /* not an epoll instance */
}
static void c_nanosleep(struct fx *f, struct rec *o)
{
	struct timespec ts = { 0, 20 * MS }, rem = { 9, 9 };
	int64_t t0 = tu_now_ns();
	RET(nanosleep(&ts, &rem));
	o->aux[0] = tu_now_ns() - t0 >= 20 * MS;
	o->aux[1] = rem.tv_sec; /* untouched */
}
static void c_nanosleep_einval(struct fx *f, struct rec *o)
{
	struct timespec ts = { 0, 1000000000 };
	RET(nanosleep(&ts, NULL));
}
static void c_usleep_sleep(struct fx *f, struct rec *o)
{
	int64_t t0 = tu_now_ns();
	RET(usleep(20000));
	o->aux[0] = sleep(0);
	o->aux[1] = tu_now_ns() - t0 >= 20 * MS;
}
static void c_clock_abs(struct fx *f, struct rec *o)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += 20 * MS;
	if (ts.tv_nsec >= SEC) {
		ts.tv_sec++;
		ts.tv_nsec -= SEC;
	}
	o->ret = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	o->aux[0] = now.tv_sec > ts.tv_sec ||
		    (now.tv_sec == ts.tv_sec && now.tv_nsec >= ts.tv_nsec);
	/* relative on the real-time clock, and a clock it cannot sleep on */
	struct timespec rel = { 0, 5 * MS };
	o->aux[1] = clock_nanosleep(CLOCK_REALTIME, 0, &rel, NULL);
	o->aux[2] = clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &rel, NULL);
	struct timespec bad = { 0, -1 };
	o->aux[3] = clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL);
}
static void c_fcntl_flags(struct fx *f, struct rec *o)
{
	/* After reads and writes that parked, the program's flags are as it
	 * left them; and what it sets, it reads back. */
	o->aux[0] = fcntl(f->a, F_GETFL) & O_NONBLOCK;
	RET(fcntl(f->a, F_SETFL, O_NONBLOCK));
	o->aux[1] = fcntl(f->a, F_GETFL) & O_NONBLOCK;
	o->aux[2] = read(f->a, o->buf, 4);
	o->aux[3] = errno;
}
static void c_fcntl_dupfd(struct fx *f, struct rec *o)
{
	int d = fcntl(f->a, F_DUPFD_CLOEXEC, 100);
	RET(d >= 100);
	o->aux[0] = fcntl(d, F_GETFD) & FD_CLOEXEC;
	o->aux[1] = read(d, o->buf, 5);
	o->n = 5;
	close(d);
}
static void c_dup2_read(struct fx *f, struct rec *o)
{
	int d = dup(f->c >= 0 ? f->c : f->a); /* some number in use */
	RET(dup2(f->a, d) == d);
	o->aux[0] = read(d, o->buf, 5);
	o->n = 5;
	close(d);
}
static void c_dup3_einval(struct fx *f, struct rec *o)
{
	RET(dup3(f->a, f->a, 0));
}
static void c_close_read(struct fx *f, struct rec *o)
{
	RET(close(f->a));
	o->aux[0] = read(f->a, o->buf, 4);
	o->aux[1] = errno;
	o->aux[2] = close(f->a);
	o->aux[3] = errno;
	f->a = -1;
}
static void c_fsync(struct fx *f, struct rec *o)
{
	RET(fsync(f->a));
	o->aux[0] = fdatasync(f->a);
}
static void c_getaddrinfo(struct fx *f, struct rec *o)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	RET(getaddrinfo("localhost", "80", &hints, &res));
	o->err = 0;
	if (o->ret == 0) {
		struct sockaddr_in *sa = (struct sockaddr_in *)res->ai_addr;
		o->aux[0] = ntohl(sa->sin_addr.s_addr);
		o->aux[1] = ntohs(sa->sin_port);
		freeaddrinfo(res);
	}
	struct hostent *h = gethostbyname("localhost");
	o->aux[2] = h ? h->h_addrtype : -1;
	hints.ai_flags = AI_NUMERICHOST; /* no name server is asked */
	o->aux[3] = getaddrinfo("not-a-number", NULL, &hints, &res);
}

#define ROW(name, kind, pre, help, delay, call, ret, err)                      \
	{                                                                      \
#name, kind, pre, help, delay, call, ret, err                  \
	}

static const struct hcase cases[] = {
	/* reads on a stream socket */
	ROW(read_ready, FX_STREAM, put_hello, NULL, 0, c_read16, 5, 0),
	ROW(read_later, FX_STREAM, NULL, put_hello, 30 * MS, c_read16, 5, 0),
	ROW(read_short, FX_STREAM, put_hello, NULL, 0, c_read4, 4, 0),
	ROW(read_eof, FX_STREAM, shut_b, NULL, 0, c_read16, 0, 0),
	ROW(read_eof_later, FX_STREAM, NULL, shut_b, 30 * MS, c_read16, 0, 0),
	ROW(read_badfd, FX_STREAM, close_a, NULL, 0, c_read16, -1, EBADF),
	ROW(read_nonblock, FX_STREAM, nb_fcntl, NULL, 0, c_read16, -1, EAGAIN),
	ROW(read_fionbio, FX_STREAM, nb_fionbio, NULL, 0, c_read16, -1, EAGAIN),
	ROW(read_nonblock_by_dup, FX_STREAM, nb_on_dup, NULL, 0, c_read16, -1,
	    EAGAIN),
	ROW(read_rcvtimeo, FX_STREAM, rcvtimeo_30ms, NULL, 0, c_read16, -1,
	    EAGAIN),
	ROW(read_tcp_later, FX_TCP, NULL, put_hello, 30 * MS, c_read16, 5, 0),
	ROW(read_tcp_peer_closes, FX_TCP, NULL, close_b, 30 * MS, c_read16, 0,
	    0),
	ROW(read_dgram, FX_DGRAM, put_two_dgrams, NULL, 0, c_read_twice, 3, 0),
	ROW(read_dir, FX_DIR, NULL, NULL, 0, c_read16, -1, EISDIR),
	ROW(recv_peek, FX_STREAM, put_abc, NULL, 0, c_read_then_peek, 3, 0),
	ROW(recv_dontwait, FX_STREAM, NULL, NULL, 0, c_recv_dontwait, -1,
	    EAGAIN),
	ROW(recv_waitall, FX_STREAM, NULL, help_waitall, 20 * MS,
	    c_recv_waitall, 6, 0),
	ROW(recvfrom_udp_later, FX_UDP, NULL, put_hello, 30 * MS,
	    c_recvfrom_udp, 5, 0),
	ROW(recvmsg_iov, FX_STREAM, NULL, put_hello, 30 * MS, c_recvmsg_iov, 5,
	    0),
	ROW(readv_later, FX_STREAM, NULL, put_hello, 30 * MS, c_readv, 5, 0),
	ROW(readv_negative, FX_STREAM, NULL, NULL, 0, c_readv_neg, -1, EINVAL),
	ROW(readv_too_many, FX_STREAM, NULL, NULL, 0, c_readv_toomany, -1,
	    EINVAL),
	/* writes on sockets */
	ROW(write_stream, FX_STREAM, NULL, NULL, 0, c_write5, 5, 0),
	ROW(write_big_blocks, FX_STREAM, NULL, help_drain, 30 * MS, c_write_big,
	    4 << 20, 0),
	ROW(write_big_tcp, FX_TCP, NULL, help_drain, 30 * MS, c_write_big,
	    4 << 20, 0),
	ROW(write_nonblock_full, FX_STREAM, nb_b, NULL, 0, c_write_nonblock_big,
	    1, 0),
	ROW(write_sndtimeo, FX_STREAM, sndtimeo_30ms_b, NULL, 0, c_write_timeo,
	    1, 0),
	ROW(write_epipe, FX_STREAM, close_a, NULL, 0, c_write_b, -1, EPIPE),
	ROW(send_nosignal_epipe, FX_STREAM, close_a, NULL, 0, c_send_nosignal,
	    -1, EPIPE),
	ROW(writev_stream, FX_STREAM, NULL, NULL, 0, c_writev, 6, 0),
	ROW(sendto_udp, FX_UDP, NULL, NULL, 0, c_sendto_udp, 5, 0),
	ROW(sendmsg_stream, FX_STREAM, NULL, NULL, 0, c_sendmsg, 5, 0),
	/* pipes and eventfds */
	ROW(pipe_read_later, FX_PIPE, NULL, put_hello, 30 * MS, c_read16, 5, 0),
	ROW(pipe_read_eof, FX_PIPE, close_b, NULL, 0, c_read16, 0, 0),
	ROW(pipe_read_eof_later, FX_PIPE, NULL, close_b, 30 * MS, c_read16, 0,
	    0),
	ROW(pipe_read_nonblock, FX_PIPE, nb_fcntl, NULL, 0, c_read16, -1,
	    EAGAIN),
	ROW(pipe_write_epipe, FX_PIPE, close_a, NULL, 0, c_write_b, -1, EPIPE),
	ROW(pipe_write_big, FX_PIPE, NULL, help_drain, 30 * MS, c_write_big,
	    4 << 20, 0),
	ROW(pipe_write_to_read_end, FX_PIPE, NULL, NULL, 0, c_write_a, -1,
	    EBADF),
	ROW(eventfd_read, FX_EVENTFD, put_counter, NULL, 0, c_read8, 8, 0),
	ROW(eventfd_read_later, FX_EVENTFD, NULL, help_counter, 30 * MS,
	    c_read8, 8, 0),
	ROW(eventfd_read_short, FX_EVENTFD, put_counter, NULL, 0, c_read4, -1,
	    EINVAL),
	/* files */
	ROW(file_read, FX_FILE, NULL, NULL, 0, c_read_file, 10, 0),
	ROW(file_write, FX_FILE, NULL, NULL, 0, c_write_file, 7, 0),
	ROW(file_pread, FX_FILE, NULL, NULL, 0, c_pread, 10, 0),
	ROW(file_pread_negative, FX_FILE, NULL, NULL, 0, c_pread_neg, -1,
	    EINVAL),
	ROW(file_pwrite, FX_FILE, NULL, NULL, 0, c_pwrite, 3, 0),
	ROW(file_readv, FX_FILE, NULL, NULL, 0, c_readv_file, 8, 0),
	ROW(pipe_pread, FX_PIPE, NULL, NULL, 0, c_pread, -1, ESPIPE),
	ROW(file_fsync, FX_FILE, NULL, NULL, 0, c_fsync, 0, 0),
	ROW(pipe_fsync, FX_PIPE, NULL, NULL, 0, c_fsync, -1, EINVAL),
	/* accept and connect */
	ROW(accept_later, FX_LISTEN, NULL, help_connect, 30 * MS, c_accept, 1,
	    0),
	ROW(accept4_nonblock, FX_LISTEN, NULL, help_connect, 30 * MS,
	    c_accept4_nb, 1, 0),
	ROW(accept_nonblock_empty, FX_LISTEN, NULL, NULL, 0, c_accept_nb_empty,
	    -1, EAGAIN),
	ROW(accept_rcvtimeo, FX_LISTEN, NULL, NULL, 0, c_accept_timeout, -1,
	    EAGAIN),
	ROW(connect_ok, FX_LISTEN, NULL, NULL, 0, c_connect_ok, 0, 0),
	ROW(connect_refused, FX_LISTEN, NULL, NULL, 0, c_connect_refused, -1,
	    ECONNREFUSED),
	ROW(connect_not_socket, FX_PIPE, NULL, NULL, 0, c_connect_notsock, -1,
	    ENOTSOCK),
	/* poll, select, epoll */
	ROW(poll_later, FX_PIPE, NULL, put_hello, 30 * MS, c_poll_in, 1, 0),
	ROW(poll_timeout, FX_PIPE, NULL, NULL, 0, c_poll_timeout, 0, 0),
	ROW(poll_mixed_file, FX_PIPE, NULL, NULL, 0, c_poll_mixed, 1, 0),
	ROW(poll_two_later, FX_STREAM, NULL, put_hello, 30 * MS,
	    c_poll_two_later, 1, 0),
	ROW(poll_nval, FX_PIPE, close_a_keep, NULL, 0, c_poll_nval, 1, 0),
	ROW(poll_nothing, FX_PIPE, NULL, NULL, 0, c_poll_none, 0, 0),
	ROW(ppoll_later, FX_STREAM, NULL, put_hello, 30 * MS, c_ppoll_in, 1, 0),
	ROW(ppoll_einval, FX_STREAM, NULL, NULL, 0, c_ppoll_einval, -1, EINVAL),
	ROW(select_later, FX_PIPE, NULL, put_hello, 30 * MS, c_select_in, 1, 0),
	ROW(select_timeout, FX_PIPE, NULL, NULL, 0, c_select_timeout, 0, 0),
	ROW(select_einval, FX_PIPE, NULL, NULL, 0, c_select_einval, -1, EINVAL),
	ROW(select_badfd, FX_PIPE, close_a_keep, NULL, 0, c_select_badfd, -1,
	    EBADF),
	ROW(pselect_later, FX_STREAM, NULL, put_hello, 30 * MS, c_pselect_in, 1,
	    0),
	ROW(epoll_later, FX_PIPE, NULL, put_hello, 30 * MS, c_epoll_in, 1, 0),
	ROW(epoll_timeout, FX_PIPE, NULL, NULL, 0, c_epoll_timeout, 0, 0),
	ROW(epoll_not_epoll, FX_PIPE, NULL, NULL, 0, c_epoll_einval, -1,
	    EINVAL),
	/* sleeps */
	ROW(nanosleep, FX_PIPE, NULL, NULL, 0, c_nanosleep, 0, 0),
	ROW(nanosleep_einval, FX_PIPE, NULL, NULL, 0, c_nanosleep_einval, -1,
	    EINVAL),
	ROW(usleep_sleep, FX_PIPE, NULL, NULL, 0, c_usleep_sleep, 0, 0),
	ROW(clock_nanosleep, FX_PIPE, NULL, NULL, 0, c_clock_abs, 0, 0),
	/* descriptors */
	ROW(fcntl_flags, FX_STREAM, NULL, NULL, 0, c_fcntl_flags, 0, 0),
	ROW(fcntl_dupfd, FX_STREAM, put_hello, NULL, 0, c_fcntl_dupfd, 1, 0),
	ROW(dup2_read, FX_STREAM, put_hello, NULL, 0, c_dup2_read, 1, 0),
	ROW(dup3_same, FX_STREAM, NULL, NULL, 0, c_dup3_einval, -1, EINVAL),
	ROW(close_then_read, FX_STREAM, move_a_high, NULL, 0, c_close_read, 0,
	    0),
	/* the resolver (names from /etc/hosts) */
	ROW(getaddrinfo, FX_PIPE, NULL, NULL, 0, c_getaddrinfo, 0, 0),
};

/* ---- running a case both ways ------------------------------------------------- */

struct run {
	const struct hcase *c;
	struct fx *f;
	struct rec *o;
};

static void call_it(struct run *r)
{
	if (r->c->help) {
		r->f->help = r->c->help;
		r->f->delay = r->c->delay;
		T_ASSERT(pthread_create(&r->f->helper, NULL, helper_main,
					r->f) == 0);
		r->f->helping = true;
	}
	r->o->in_task = gmp_self() != 0;
	errno = 0;
	r->c->call(r->f, r->o);
}

static void *on_thread(void *arg)
{
	call_it(arg);
	return NULL;
}

static int in_task(void *arg)
{
	call_it(arg);
	return 0;
}

static void run_one(const struct hcase *c, bool task, struct rec *o)
{
	struct fx f;
	fx_make(&f, c->kind);
	if (c->pre)
		c->pre(&f);
	struct run r = { c, &f, o };
	if (task) {
		assert_int_equal(gmp_main(in_task, &r), 0);
		assert_true(o->in_task);
	} else {
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, on_thread, &r), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_false(o->in_task);
	}
	fx_free(&f);
}

static void run_case(const char *name)
{
	const struct hcase *c = NULL;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!strcmp(cases[i].name, name))
			c = &cases[i];
	assert_non_null(c);
	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(gmp_hook_active(), 1);
	tu_init(2);
	static struct rec thr, tsk;
	memset(&thr, 0, sizeof thr);
	memset(&tsk, 0, sizeof tsk);
	/* The thread's run, with the runtime up: libc's answer. */
	run_one(c, false, &thr);
	if (thr.ret != c->want_ret || thr.err != c->want_err)
		fail_msg("%s on a thread: %ld (errno %d), libc's answer was "
			 "expected to be %ld (errno %d)",
			 name, thr.ret, thr.err, c->want_ret, c->want_err);
	run_one(c, true, &tsk);
	if (tsk.ret != thr.ret || tsk.err != thr.err)
		fail_msg("%s in a task: %ld (errno %d); on a thread %ld "
			 "(errno %d)",
			 name, tsk.ret, tsk.err, thr.ret, thr.err);
	for (int i = 0; i < 4; i++)
		if (tsk.aux[i] != thr.aux[i])
			fail_msg("%s: aux[%d] %ld in a task, %ld on a thread",
				 name, i, tsk.aux[i], thr.aux[i]);
	assert_int_equal(tsk.n, thr.n);
	assert_memory_equal(tsk.buf, thr.buf, thr.n);
	assert_int_equal(gmp_shutdown(), 0);
}

#define CASE(name)                                                             \
	static void test_hook_calls_##name(void **s)                           \
	{                                                                      \
		(void)s;                                                       \
		run_case(#name);                                               \
	}
CASE(read_ready)
CASE(read_later)
CASE(read_short)
CASE(read_eof)
CASE(read_eof_later)
CASE(read_badfd)
CASE(read_nonblock)
CASE(read_fionbio)
CASE(read_nonblock_by_dup)
CASE(read_rcvtimeo)
CASE(read_tcp_later)
CASE(read_tcp_peer_closes)
CASE(read_dgram)
CASE(read_dir)
CASE(recv_peek)
CASE(recv_dontwait)
CASE(recv_waitall)
CASE(recvfrom_udp_later)
CASE(recvmsg_iov)
CASE(readv_later)
CASE(readv_negative)
CASE(readv_too_many)
CASE(write_stream)
CASE(write_big_blocks)
CASE(write_big_tcp)
CASE(write_nonblock_full)
CASE(write_sndtimeo)
CASE(write_epipe)
CASE(send_nosignal_epipe)
CASE(writev_stream)
CASE(sendto_udp)
CASE(sendmsg_stream)
CASE(pipe_read_later)
CASE(pipe_read_eof)
CASE(pipe_read_eof_later)
CASE(pipe_read_nonblock)
CASE(pipe_write_epipe)
CASE(pipe_write_big)
CASE(pipe_write_to_read_end)
CASE(eventfd_read)
CASE(eventfd_read_later)
CASE(eventfd_read_short)
CASE(file_read)
CASE(file_write)
CASE(file_pread)
CASE(file_pread_negative)
CASE(file_pwrite)
CASE(file_readv)
CASE(pipe_pread)
CASE(file_fsync)
CASE(pipe_fsync)
CASE(accept_later)
CASE(accept4_nonblock)
CASE(accept_nonblock_empty)
CASE(accept_rcvtimeo)
CASE(connect_ok)
CASE(connect_refused)
CASE(connect_not_socket)
CASE(poll_later)
CASE(poll_timeout)
CASE(poll_mixed_file)
CASE(poll_two_later)
CASE(poll_nval)
CASE(poll_nothing)
CASE(ppoll_later)
CASE(ppoll_einval)
CASE(select_later)
CASE(select_timeout)
CASE(select_einval)
CASE(select_badfd)
CASE(pselect_later)
CASE(epoll_later)
CASE(epoll_timeout)
CASE(epoll_not_epoll)
CASE(nanosleep)
CASE(nanosleep_einval)
CASE(usleep_sleep)
CASE(clock_nanosleep)
CASE(fcntl_flags)
CASE(fcntl_dupfd)
CASE(dup2_read)
CASE(dup3_same)
CASE(close_then_read)
CASE(getaddrinfo)

GMP_TEST_MAIN(cmocka_unit_test(test_hook_calls_read_ready),
	      cmocka_unit_test(test_hook_calls_read_later),
	      cmocka_unit_test(test_hook_calls_read_short),
	      cmocka_unit_test(test_hook_calls_read_eof),
	      cmocka_unit_test(test_hook_calls_read_eof_later),
	      cmocka_unit_test(test_hook_calls_read_badfd),
	      cmocka_unit_test(test_hook_calls_read_nonblock),
	      cmocka_unit_test(test_hook_calls_read_fionbio),
	      cmocka_unit_test(test_hook_calls_read_nonblock_by_dup),
	      cmocka_unit_test(test_hook_calls_read_rcvtimeo),
	      cmocka_unit_test(test_hook_calls_read_tcp_later),
	      cmocka_unit_test(test_hook_calls_read_tcp_peer_closes),
	      cmocka_unit_test(test_hook_calls_read_dgram),
	      cmocka_unit_test(test_hook_calls_read_dir),
	      cmocka_unit_test(test_hook_calls_recv_peek),
	      cmocka_unit_test(test_hook_calls_recv_dontwait),
	      cmocka_unit_test(test_hook_calls_recv_waitall),
	      cmocka_unit_test(test_hook_calls_recvfrom_udp_later),
	      cmocka_unit_test(test_hook_calls_recvmsg_iov),
	      cmocka_unit_test(test_hook_calls_readv_later),
	      cmocka_unit_test(test_hook_calls_readv_negative),
	      cmocka_unit_test(test_hook_calls_readv_too_many),
	      cmocka_unit_test(test_hook_calls_write_stream),
	      cmocka_unit_test(test_hook_calls_write_big_blocks),
	      cmocka_unit_test(test_hook_calls_write_big_tcp),
	      cmocka_unit_test(test_hook_calls_write_nonblock_full),
	      cmocka_unit_test(test_hook_calls_write_sndtimeo),
	      cmocka_unit_test(test_hook_calls_write_epipe),
	      cmocka_unit_test(test_hook_calls_send_nosignal_epipe),
	      cmocka_unit_test(test_hook_calls_writev_stream),
	      cmocka_unit_test(test_hook_calls_sendto_udp),
	      cmocka_unit_test(test_hook_calls_sendmsg_stream),
	      cmocka_unit_test(test_hook_calls_pipe_read_later),
	      cmocka_unit_test(test_hook_calls_pipe_read_eof),
	      cmocka_unit_test(test_hook_calls_pipe_read_eof_later),
	      cmocka_unit_test(test_hook_calls_pipe_read_nonblock),
	      cmocka_unit_test(test_hook_calls_pipe_write_epipe),
	      cmocka_unit_test(test_hook_calls_pipe_write_big),
	      cmocka_unit_test(test_hook_calls_pipe_write_to_read_end),
	      cmocka_unit_test(test_hook_calls_eventfd_read),
	      cmocka_unit_test(test_hook_calls_eventfd_read_later),
	      cmocka_unit_test(test_hook_calls_eventfd_read_short),
	      cmocka_unit_test(test_hook_calls_file_read),
	      cmocka_unit_test(test_hook_calls_file_write),
	      cmocka_unit_test(test_hook_calls_file_pread),
	      cmocka_unit_test(test_hook_calls_file_pread_negative),
	      cmocka_unit_test(test_hook_calls_file_pwrite),
	      cmocka_unit_test(test_hook_calls_file_readv),
	      cmocka_unit_test(test_hook_calls_pipe_pread),
	      cmocka_unit_test(test_hook_calls_file_fsync),
	      cmocka_unit_test(test_hook_calls_pipe_fsync),
	      cmocka_unit_test(test_hook_calls_accept_later),
	      cmocka_unit_test(test_hook_calls_accept4_nonblock),
	      cmocka_unit_test(test_hook_calls_accept_nonblock_empty),
	      cmocka_unit_test(test_hook_calls_accept_rcvtimeo),
	      cmocka_unit_test(test_hook_calls_connect_ok),
	      cmocka_unit_test(test_hook_calls_connect_refused),
	      cmocka_unit_test(test_hook_calls_connect_not_socket),
	      cmocka_unit_test(test_hook_calls_poll_later),
	      cmocka_unit_test(test_hook_calls_poll_timeout),
	      cmocka_unit_test(test_hook_calls_poll_mixed_file),
	      cmocka_unit_test(test_hook_calls_poll_two_later),
	      cmocka_unit_test(test_hook_calls_poll_nval),
	      cmocka_unit_test(test_hook_calls_poll_nothing),
	      cmocka_unit_test(test_hook_calls_ppoll_later),
	      cmocka_unit_test(test_hook_calls_ppoll_einval),
	      cmocka_unit_test(test_hook_calls_select_later),
	      cmocka_unit_test(test_hook_calls_select_timeout),
	      cmocka_unit_test(test_hook_calls_select_einval),
	      cmocka_unit_test(test_hook_calls_select_badfd),
	      cmocka_unit_test(test_hook_calls_pselect_later),
	      cmocka_unit_test(test_hook_calls_epoll_later),
	      cmocka_unit_test(test_hook_calls_epoll_timeout),
	      cmocka_unit_test(test_hook_calls_epoll_not_epoll),
	      cmocka_unit_test(test_hook_calls_nanosleep),
	      cmocka_unit_test(test_hook_calls_nanosleep_einval),
	      cmocka_unit_test(test_hook_calls_usleep_sleep),
	      cmocka_unit_test(test_hook_calls_clock_nanosleep),
	      cmocka_unit_test(test_hook_calls_fcntl_flags),
	      cmocka_unit_test(test_hook_calls_fcntl_dupfd),
	      cmocka_unit_test(test_hook_calls_dup2_read),
	      cmocka_unit_test(test_hook_calls_dup3_same),
	      cmocka_unit_test(test_hook_calls_close_then_read),
	      cmocka_unit_test(test_hook_calls_getaddrinfo))
