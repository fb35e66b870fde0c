/* read, write and their kin (hook.h, design.md §32).
 *
 * Outside a task each is libc's. In a task the call is made by kind of
 * descriptor (hook.c learns it once per file):
 *
 *   a socket      with MSG_DONTWAIT added, which cannot block whatever
 *                 the descriptor's O_NONBLOCK says; read and write become
 *                 recvfrom and sendto, readv and writev recvmsg and
 *                 sendmsg, which the kernel answers the same way
 *   a pipe, FIFO, eventfd...
 *                 preadv2/pwritev2 at the current position (-1) with
 *                 RWF_NOWAIT, which is to them what MSG_DONTWAIT is to a
 *                 socket (a file that refuses it, a terminal, is a
 *                 "pollwait" descriptor from then on)
 *   a terminal (pollwait)
 *                 the task waits in the poller until the descriptor is
 *                 readable, then reads inside gmp_enter_syscall: should
 *                 another reader take the data first, the read blocks its
 *                 thread as libc's would, and sysmon hands the P on;
 *                 writes are made in the bracket at once
 *   a regular file or a block device
 *                 libgmp's gmp_read, gmp_write, gmp_pread and gmp_pwrite
 *                 (io_uring where the kernel has it); the vector forms in
 *                 the syscall bracket
 *   anything else the plain call in the bracket
 *
 * When the attempt finds nothing to do (EAGAIN) and neither the program's
 * flags (O_NONBLOCK, MSG_DONTWAIT) nor its SO_RCVTIMEO/SO_SNDTIMEO say to
 * give up, the task parks in the poller and tries again, as io.c's calls
 * do, holding a reference on the descriptor while it waits so that a
 * close (fd.c) wakes it with EBADF. A blocking write writes everything,
 * as the kernel's does: a short write goes on with the rest, and an error
 * or a timeout after some bytes returns that count. Results and errno
 * are the kernel's own.
 */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hook.h"

#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif

enum {
	OP_RECVFROM,
	OP_RECVMSG,
	OP_PREADV2,
	OP_SENDTO,
	OP_SENDMSG,
	OP_PWRITEV2,
};

/* One call in progress. */
struct op {
	int what; /* OP_* */
	int fd;
	int flags;   /* the caller's MSG_* flags */
	char *buf;   /* recvfrom, sendto */
	size_t n;    /* the bytes asked for (all of them, for a write) */
	size_t done; /* written so far */
	union {
		struct { /* recvfrom's source */
			struct sockaddr *from;
			socklen_t *fromlen, fromlen0;
		};
		struct { /* sendto's destination */
			const struct sockaddr *to;
			socklen_t tolen;
		};
		struct { /* recvmsg, sendmsg; and readv, writev */
			struct msghdr *msg;
			socklen_t namelen0;
			size_t controllen0;
		};
		struct { /* preadv2, pwritev2 */
			const struct iovec *iov;
			int iovcnt;
		};
	};
};

/* The vectors that follow `done` bytes of iov[0..n), the first cut to its
 * unwritten part, at most HK_WINDOW (a short write goes on from a copy:
 * the caller's vectors are never modified). */
#define HK_WINDOW 64

static int iov_window(const struct iovec *iov, int n, size_t done,
		      struct iovec *win)
{
	int i = 0;
	while (i < n && done >= iov[i].iov_len)
		done -= iov[i++].iov_len;
	int k = 0;
	for (; i < n && k < HK_WINDOW; i++, k++) {
		win[k] = iov[i];
		if (k == 0) {
			win[0].iov_base = (char *)win[0].iov_base + done;
			win[0].iov_len -= done;
		}
	}
	return k;
}

static ssize_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - t)
			return -EINVAL;
		t += iov[i].iov_len;
	}
	return (ssize_t)t;
}

/* One attempt that cannot block. */
static ssize_t attempt(struct op *o)
{
	int fl = o->flags | MSG_DONTWAIT;
	struct iovec win[HK_WINDOW];
	switch (o->what) {
	case OP_RECVFROM:
		if (o->fromlen)
			*o->fromlen = o->fromlen0;
		return HK_SYS(SYS_recvfrom, o->fd, o->buf, o->n, fl, o->from,
			      o->fromlen);
	case OP_RECVMSG:
		o->msg->msg_namelen = o->namelen0;
		o->msg->msg_controllen = o->controllen0;
		return HK_SYS(SYS_recvmsg, o->fd, o->msg, fl, 0, 0, 0);
	case OP_PREADV2:
		return HK_SYS(SYS_preadv2, o->fd, o->iov, o->iovcnt, -1L, 0,
			      RWF_NOWAIT);
	case OP_SENDTO:
		return HK_SYS(SYS_sendto, o->fd, o->buf + o->done,
			      o->n - o->done, fl, o->to, o->tolen);
	case OP_SENDMSG: {
		if (o->done == 0)
			return HK_SYS(SYS_sendmsg, o->fd, o->msg, fl, 0, 0, 0);
		/* The rest, without the control data: the kernel sent it
		 * with the first bytes. */
		struct msghdr rest = *o->msg;
		rest.msg_control = NULL;
		rest.msg_controllen = 0;
		rest.msg_iov = win;
		rest.msg_iovlen = (size_t)iov_window(
			o->msg->msg_iov, (int)o->msg->msg_iovlen, o->done, win);
		return HK_SYS(SYS_sendmsg, o->fd, &rest, fl, 0, 0, 0);
	}
	case OP_PWRITEV2: {
		const struct iovec *v = o->iov;
		int cnt = o->iovcnt;
		if (o->done) {
			cnt = iov_window(o->iov, o->iovcnt, o->done, win);
			v = win;
		}
		return HK_SYS(SYS_pwritev2, o->fd, v, cnt, -1L, 0, RWF_NOWAIT);
	}
	}
	return -EINVAL;
}

static bool is_write(const struct op *o)
{
	return o->what >= OP_SENDTO;
}

/* What the kernel's blocking call would do with a partial result: a write
 * on a stream socket or a pipe goes on until everything is written. */
static bool writes_all(const struct op *o, int kind)
{
	return is_write(o) && (kind == HK_STREAM || kind == HK_NOWAIT);
}

/* Runs o in a task on fd, of kind HK_STREAM, HK_SOCK or HK_NOWAIT: attempt,
 * and on EAGAIN park and attempt again, until the call has an answer.
 * Returns the result or -errno; -ENOTSOCK or -EOPNOTSUPP when the kind
 * turned out wrong (the caller learns it again).
 *
 * The first attempt is made holding no reference on the descriptor (a
 * call that does not wait is over before a close could matter to it):
 * only a call that is about to park takes one, keeping the snapshot it
 * took before its attempt. */
static ssize_t run(hk_fd *f, int kind, struct op *o)
{
	gmp__hook_fd h;
	int err;
	if (HK_UNLIKELY(!hk_fd_pd(f, o->fd, &h, &err)))
		return err;
	bool held = false;
	int mode = is_write(o) ? 1 : 0;
	bool all = writes_all(o, kind);
	int nb = -1;           /* the program's O_NONBLOCK, once asked */
	int64_t deadline = -2; /* SO_RCVTIMEO/SO_SNDTIMEO's, once asked */
	/* A stream that a short read of a task left empty needs no read
	 * until readiness comes (pollfd.c's drained reads), on a socket
	 * the program keeps blocking. */
	bool skip = kind == HK_STREAM && o->what == OP_RECVFROM && o->n > 0 &&
		    !(o->flags & (MSG_DONTWAIT | MSG_PEEK)) &&
		    hk_nonblock_known(f) == 0 && hk.rt->fd_drained(&h);
	ssize_t r;
	for (;;) {
		bool skipped = skip;
		if (skip) {
			r = -EAGAIN; /* what the read would say */
			skip = false;
		} else {
			hk.rt->fd_snapshot(&h);
			r = attempt(o);
			if (kind == HK_STREAM && o->what == OP_RECVFROM &&
			    r > 0 && (size_t)r < o->n)
				hk.rt->fd_drained_at(&h);
		}
		if (r > 0 && all) {
			o->done += (size_t)r;
			if (o->done == o->n) {
				r = (ssize_t)o->done;
				break;
			}
			r = -EAGAIN; /* the rest waits for room */
		}
		if (HK_LIKELY(r != -EAGAIN)) {
			if (r == 0 && all)
				r = (ssize_t)o->done;
			break;
		}
		/* Nothing to do: give up if the program asked not to wait. */
		if (o->flags & MSG_DONTWAIT)
			break;
		if (nb < 0)
			nb = hk_nonblock(o->fd, f);
		if (nb != 0) {
			if (nb < 0)
				r = nb;
			break;
		}
		if (deadline == -2) {
			int64_t t = kind == HK_NOWAIT
					    ? 0
					    : hk_timeout(o->fd, f, mode);
			deadline = t > 0 ? hk_deadline(t) : -1;
		} else if (!skipped && deadline >= 0 && hk_now() >= deadline) {
			break; /* SO_RCVTIMEO/SO_SNDTIMEO: EAGAIN */
		}
		if (!held) {
			if ((err = hk.rt->fd_hold(&h)) != 0) {
				r = err;
				break;
			}
			held = true;
		}
		int w = hk.rt->fd_wait(&h, mode, deadline);
		if (w == 0)
			continue;
		if (w == -ETIMEDOUT && skipped)
			continue; /* data the poller has not reported yet is
				     still returned: read once for real */
		/* A file epoll cannot watch: not the kind we took it for. */
		r = w == GMP__HOOK_UNPOLLABLE ? -ENOTSOCK : w;
		break;
	}
	if (held)
		hk.rt->fd_end(&h);
	if (all && o->done && r < 0 && r != -ENOTSOCK)
		r = (ssize_t)o->done; /* an error after some bytes */
	return r;
}

/* ---- terminals, files and the rest ------------------------------------------ */

/* A read on a descriptor with no call that cannot block: readiness in the
 * poller, then the read in the syscall bracket. */
static ssize_t pollwait_read(hk_fd *f, int fd, ssize_t (*call)(void *),
			     void *arg)
{
	int nb = hk_nonblock(fd, f);
	if (nb != 0)
		return nb < 0 ? nb : call(arg);
	gmp__hook_fd h;
	int err = hk.rt->fd_begin(fd, &h);
	if (err)
		return err;
	for (;;) {
		hk.rt->fd_snapshot(&h);
		int p = hk_poll_now(fd, POLLIN);
		if (p != 0)
			break; /* ready, an error, or POLLNVAL: the read says */
		int w = hk.rt->fd_poll(&h, POLLIN, -1);
		if (w < 0 && w != GMP__HOOK_UNPOLLABLE) {
			hk.rt->fd_end(&h);
			return w;
		}
		if (w == GMP__HOOK_UNPOLLABLE)
			break; /* always ready for epoll's purposes */
	}
	/* No reference held across a call that may block in the kernel: a
	 * close must not wait for it (fd.c). */
	hk.rt->fd_end(&h);
	return HK_BRACKET(false, call(arg));
}

struct rd_args {
	int fd;
	void *buf;
	size_t n;
	const struct iovec *iov;
	int iovcnt;
};

static ssize_t sys_read(void *p)
{
	struct rd_args *a = p;
	return HK_SYS(SYS_read, a->fd, a->buf, a->n, 0, 0, 0);
}

static ssize_t sys_readv(void *p)
{
	struct rd_args *a = p;
	return HK_SYS(SYS_readv, a->fd, a->iov, a->iovcnt, 0, 0, 0);
}

/* Whether fd is still a regular file or block device (a file's kind is
 * checked at every call: a number closed behind the hooks' back and
 * reused must never send a socket to the ring). */
static bool still_file(int fd)
{
	struct stat st;
	if (HK_SYS(SYS_fstat, fd, &st, 0, 0, 0, 0) < 0)
		return true; /* the call itself says EBADF */
	return S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
}

/* ---- read --------------------------------------------------------------------- */

/* Whether a run() on a descriptor of `kind` found the kind wrong: a
 * socket call on something else (ENOTSOCK, also run's word for a file
 * epoll cannot watch), or a pipe call refused (EOPNOTSUPP, ENOSYS: no
 * RWF_NOWAIT here; the descriptor waits for readiness from now on). */
static bool kind_wrong(hk_fd *f, int kind, ssize_t r)
{
	if (kind == HK_NOWAIT && (r == -EOPNOTSUPP || r == -ENOSYS)) {
		hk_kind_set(f, HK_POLLWAIT);
		return true;
	}
	if (r == -ENOTSOCK) {
		hk_kind_wrong(f);
		return true;
	}
	return false;
}

static ssize_t task_read(int fd, void *buf, size_t n)
{
	hk_preempt_point();
	hk_fd *f = hk_fd_get(fd);
	struct rd_args a = { fd, buf, n, NULL, 0 };
	for (int tries = 0; f && tries < 4; tries++) {
		int kind = hk_kind(fd, f, NULL);
		struct iovec one;
		ssize_t r;
		switch (kind) {
		case HK_STREAM:
		case HK_SOCK: {
			struct op o = { .what = OP_RECVFROM,
					.fd = fd,
					.buf = buf,
					.n = n };
			r = run(f, kind, &o);
			break;
		}
		case HK_NOWAIT: {
			one = (struct iovec){ buf, n };
			struct op o = { .what = OP_PREADV2,
					.fd = fd,
					.n = n,
					.iov = &one,
					.iovcnt = 1 };
			r = run(f, kind, &o);
			break;
		}
		case HK_POLLWAIT:
			return pollwait_read(f, fd, sys_read, &a);
		case HK_FILE:
			if (still_file(fd))
				return gmp_read(fd, buf, n);
			hk_kind_wrong(f);
			continue;
		case HK_PLAIN:
			return HK_BRACKET(false, sys_read(&a));
		default:
			return sys_read(&a); /* not open: EBADF */
		}
		if (!kind_wrong(f, kind, r))
			return r;
	}
	return HK_BRACKET(false, sys_read(&a));
}

HK_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	if (!hk_task())
		return HK_REAL(read)(fd, buf, n);
	return hk_ret(hk_io_read(fd, task_read(fd, buf, n)));
}

HK_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return read(fd, buf, n);
}

static ssize_t task_readv(int fd, const struct iovec *iov, int cnt)
{
	hk_preempt_point();
	if (cnt < 0 || cnt > IOV_MAX)
		return -EINVAL;
	ssize_t total = iov_total(iov, cnt);
	if (total < 0)
		return total;
	hk_fd *f = hk_fd_get(fd);
	struct rd_args a = { fd, NULL, 0, iov, cnt };
	for (int tries = 0; f && tries < 4; tries++) {
		int kind = hk_kind(fd, f, NULL);
		struct msghdr m = { .msg_iov = (struct iovec *)iov,
				    .msg_iovlen = (size_t)cnt };
		struct op o = { .fd = fd, .n = (size_t)total };
		ssize_t r;
		switch (kind) {
		case HK_STREAM:
		case HK_SOCK:
			o.what = OP_RECVMSG;
			o.msg = &m;
			r = run(f, kind, &o);
			break;
		case HK_NOWAIT:
			o.what = OP_PREADV2;
			o.iov = iov;
			o.iovcnt = cnt;
			r = run(f, kind, &o);
			break;
		case HK_POLLWAIT:
			return pollwait_read(f, fd, sys_readv, &a);
		case HK_FILE:
		case HK_PLAIN:
			return HK_BRACKET(false, sys_readv(&a));
		default:
			return sys_readv(&a);
		}
		if (!kind_wrong(f, kind, r))
			return r;
	}
	return HK_BRACKET(false, sys_readv(&a));
}

HK_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	if (!hk_task())
		return HK_REAL(readv)(fd, iov, cnt);
	return hk_ret(hk_io_read(fd, task_readv(fd, iov, cnt)));
}

/* ---- recv, recvfrom, recvmsg -------------------------------------------------- */

/* MSG_WAITALL on a blocking stream socket waits for every byte asked,
 * which no attempt that cannot block does: the task waits for the first
 * bytes in the poller and makes the plain call in the syscall bracket
 * for the rest. MSG_OOB and MSG_ERRQUEUE never wait. Sockets only: on
 * anything else the plain call answers ENOTSOCK. */
static bool plain_recv_flags(int flags)
{
	return (flags & (MSG_OOB | MSG_ERRQUEUE)) != 0;
}

struct rf_args {
	int fd;
	void *buf;
	size_t n;
	int flags;
	struct sockaddr *from;
	socklen_t *fromlen;
	struct msghdr *msg;
};

static ssize_t sys_recvfrom(void *p)
{
	struct rf_args *a = p;
	return HK_SYS(SYS_recvfrom, a->fd, a->buf, a->n, a->flags, a->from,
		      a->fromlen);
}

static ssize_t sys_recvmsg(void *p)
{
	struct rf_args *a = p;
	return HK_SYS(SYS_recvmsg, a->fd, a->msg, a->flags, 0, 0, 0);
}

static ssize_t task_recv(int fd, void *buf, size_t n, int flags,
			 struct sockaddr *from, socklen_t *fromlen,
			 struct msghdr *msg)
{
	hk_preempt_point();
	struct rf_args a = { fd, buf, n, flags, from, fromlen, msg };
	ssize_t (*sys)(void *) = msg ? sys_recvmsg : sys_recvfrom;
	hk_fd *f = hk_fd_get(fd);
	if (!f || plain_recv_flags(flags))
		return sys(&a);
	int kind = hk_kind(fd, f, NULL);
	if (kind != HK_STREAM && kind != HK_SOCK) {
		/* Not a socket (ENOTSOCK), or not open (EBADF): the kernel
		 * answers at once. A socket whose kind went stale says so
		 * here too, once. */
		ssize_t r = sys(&a);
		if (r != -ENOTSOCK && r != -EBADF)
			hk_kind_wrong(f);
		return r;
	}
	if ((flags & MSG_WAITALL) && kind == HK_STREAM &&
	    !(flags & MSG_DONTWAIT) && hk_nonblock(fd, f) == 0)
		return pollwait_read(f, fd, sys, &a);
	struct op o = { .fd = fd, .flags = flags & ~MSG_WAITALL };
	if (msg) {
		o.what = OP_RECVMSG;
		o.msg = msg;
		o.namelen0 = msg->msg_namelen;
		o.controllen0 = msg->msg_controllen;
		ssize_t t = iov_total(msg->msg_iov, (int)msg->msg_iovlen);
		o.n = t > 0 ? (size_t)t : 0;
	} else {
		o.what = OP_RECVFROM;
		o.buf = buf;
		o.n = n;
		o.from = from;
		o.fromlen = fromlen;
		o.fromlen0 = fromlen ? *fromlen : 0;
	}
	ssize_t r = run(f, kind, &o);
	if (r == -ENOTSOCK)
		hk_kind_wrong(f);
	return r;
}

HK_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	if (!hk_task())
		return HK_REAL(recv)(fd, buf, n, flags);
	return hk_ret(
		hk_io_read(fd, task_recv(fd, buf, n, flags, NULL, NULL, NULL)));
}

HK_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen,
			     int flags)
{
	if (n > buflen)
		__chk_fail();
	return recv(fd, buf, n, flags);
}

HK_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags,
			   struct sockaddr *from, socklen_t *fromlen)
{
	if (!hk_task())
		return HK_REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
	return hk_ret(hk_io_read(fd, task_recv(fd, buf, n, flags, from, fromlen,
					       NULL)));
}

HK_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen,
				 int flags, struct sockaddr *from,
				 socklen_t *fromlen)
{
	if (n > buflen)
		__chk_fail();
	return recvfrom(fd, buf, n, flags, from, fromlen);
}

/* Descriptors received with SCM_RIGHTS are new files at their numbers,
 * shared with the sender. */
static void note_received(const struct msghdr *msg)
{
	if (!msg->msg_control || msg->msg_controllen < sizeof(struct cmsghdr))
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)msg); c;
	     c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		const unsigned char *p = CMSG_DATA(c);
		for (size_t i = 0; i < n; i++) {
			int nfd;
			memcpy(&nfd, p + i * sizeof(int), sizeof nfd);
			hk_fd_forget(nfd);
		}
	}
}

HK_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t r;
	if (!hk_task())
		r = HK_REAL(recvmsg)(fd, msg, flags);
	else if (!msg) /* the kernel's answer, without touching it */
		r = hk_ret(HK_SYS(SYS_recvmsg, fd, NULL, flags, 0, 0, 0));
	else
		r = hk_ret(hk_io_read(fd, task_recv(fd, NULL, 0, flags, NULL,
						    NULL, msg)));
	if (r >= 0 && msg && hk_on())
		note_received(msg);
	return r;
}

/* ---- write -------------------------------------------------------------------- */

struct wr_args {
	int fd;
	const void *buf;
	size_t n;
	const struct iovec *iov;
	int iovcnt;
};

static ssize_t sys_write(void *p)
{
	struct wr_args *a = p;
	return HK_SYS(SYS_write, a->fd, a->buf, a->n, 0, 0, 0);
}

static ssize_t sys_writev(void *p)
{
	struct wr_args *a = p;
	return HK_SYS(SYS_writev, a->fd, a->iov, a->iovcnt, 0, 0, 0);
}

static ssize_t task_write(int fd, const void *buf, size_t n)
{
	hk_preempt_point();
	hk_fd *f = hk_fd_get(fd);
	struct wr_args a = { fd, buf, n, NULL, 0 };
	for (int tries = 0; f && tries < 4; tries++) {
		int kind = hk_kind(fd, f, NULL);
		struct iovec one;
		ssize_t r;
		switch (kind) {
		case HK_STREAM:
		case HK_SOCK: {
			struct op o = { .what = OP_SENDTO,
					.fd = fd,
					.buf = (char *)buf,
					.n = n };
			r = run(f, kind, &o);
			break;
		}
		case HK_NOWAIT: {
			one = (struct iovec){ (void *)buf, n };
			struct op o = { .what = OP_PWRITEV2,
					.fd = fd,
					.n = n,
					.iov = &one,
					.iovcnt = 1 };
			r = run(f, kind, &o);
			break;
		}
		case HK_FILE:
			if (still_file(fd))
				return gmp_write(fd, buf, n);
			hk_kind_wrong(f);
			continue;
		case HK_POLLWAIT:
		case HK_PLAIN:
			return HK_BRACKET(false, sys_write(&a));
		default:
			return sys_write(&a);
		}
		if (!kind_wrong(f, kind, r))
			return r;
	}
	return HK_BRACKET(false, sys_write(&a));
}

HK_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	if (!hk_task())
		return HK_REAL(write)(fd, buf, n);
	hk_io_wrote(fd);
	return hk_ret(task_write(fd, buf, n));
}

static ssize_t task_writev(int fd, const struct iovec *iov, int cnt)
{
	hk_preempt_point();
	if (cnt < 0 || cnt > IOV_MAX)
		return -EINVAL;
	ssize_t total = iov_total(iov, cnt);
	if (total < 0)
		return total;
	hk_fd *f = hk_fd_get(fd);
	struct wr_args a = { fd, NULL, 0, iov, cnt };
	for (int tries = 0; f && tries < 4; tries++) {
		int kind = hk_kind(fd, f, NULL);
		struct msghdr m = { .msg_iov = (struct iovec *)iov,
				    .msg_iovlen = (size_t)cnt };
		struct op o = { .fd = fd, .n = (size_t)total };
		ssize_t r;
		switch (kind) {
		case HK_STREAM:
		case HK_SOCK:
			o.what = OP_SENDMSG;
			o.msg = &m;
			r = run(f, kind, &o);
			break;
		case HK_NOWAIT:
			o.what = OP_PWRITEV2;
			o.iov = iov;
			o.iovcnt = cnt;
			r = run(f, kind, &o);
			break;
		case HK_FILE:
		case HK_POLLWAIT:
		case HK_PLAIN:
			return HK_BRACKET(false, sys_writev(&a));
		default:
			return sys_writev(&a);
		}
		if (!kind_wrong(f, kind, r))
			return r;
	}
	return HK_BRACKET(false, sys_writev(&a));
}

HK_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	if (!hk_task())
		return HK_REAL(writev)(fd, iov, cnt);
	hk_io_wrote(fd);
	return hk_ret(task_writev(fd, iov, cnt));
}

/* ---- send, sendto, sendmsg ------------------------------------------------------ */

static ssize_t task_send(int fd, const void *buf, size_t n, int flags,
			 const struct sockaddr *to, socklen_t tolen,
			 const struct msghdr *msg)
{
	hk_preempt_point();
	hk_fd *f = hk_fd_get(fd);
	int kind = f ? hk_kind(fd, f, NULL) : HK_UNKNOWN;
	if (kind != HK_STREAM && kind != HK_SOCK) {
		ssize_t r =
			msg ? HK_SYS(SYS_sendmsg, fd, msg, flags, 0, 0, 0)
			    : HK_SYS(SYS_sendto, fd, buf, n, flags, to, tolen);
		if (f && r != -ENOTSOCK && r != -EBADF)
			hk_kind_wrong(f);
		return r;
	}
	struct op o = { .fd = fd, .flags = flags };
	if (msg) {
		if (msg->msg_iovlen > IOV_MAX)
			return -EMSGSIZE;
		ssize_t t = iov_total(msg->msg_iov, (int)msg->msg_iovlen);
		if (t < 0)
			return t;
		o.what = OP_SENDMSG;
		o.msg = (struct msghdr *)msg;
		o.n = (size_t)t;
	} else {
		o.what = OP_SENDTO;
		o.buf = (char *)buf;
		o.n = n;
		o.to = to;
		o.tolen = tolen;
	}
	ssize_t r = run(f, kind, &o);
	if (r == -ENOTSOCK)
		hk_kind_wrong(f);
	return r;
}

HK_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	if (!hk_task())
		return HK_REAL(send)(fd, buf, n, flags);
	hk_io_wrote(fd);
	return hk_ret(task_send(fd, buf, n, flags, NULL, 0, NULL));
}

HK_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			 const struct sockaddr *to, socklen_t tolen)
{
	if (!hk_task())
		return HK_REAL(sendto)(fd, buf, n, flags, to, tolen);
	hk_io_wrote(fd);
	return hk_ret(task_send(fd, buf, n, flags, to, tolen, NULL));
}

/* A descriptor sent to another process (SCM_RIGHTS) is shared from then
 * on: the hooks stop trusting what they saw set on it (hook.c). */
static void note_rights(const struct msghdr *msg)
{
	if (!msg->msg_control || msg->msg_controllen < sizeof(struct cmsghdr))
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)msg); c;
	     c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		const unsigned char *p = CMSG_DATA(c);
		for (size_t i = 0; i < n; i++) {
			int sfd;
			memcpy(&sfd, p + i * sizeof(int), sizeof sfd);
			hk_fd_shared(sfd);
		}
	}
}

HK_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (msg && hk_on())
		note_rights(msg);
	if (!hk_task())
		return HK_REAL(sendmsg)(fd, msg, flags);
	if (!msg)
		return hk_ret(HK_SYS(SYS_sendmsg, fd, NULL, flags, 0, 0, 0));
	hk_io_wrote(fd);
	return hk_ret(task_send(fd, NULL, 0, flags, NULL, 0, msg));
}

/* ---- at an offset: pread, pwrite, preadv, pwritev ------------------------------ */

/* Only a file has an offset: anything else answers ESPIPE (or EBADF) at
 * once, without blocking. */
static ssize_t task_pio(int fd, void *buf, size_t n, off_t off, bool wr,
			const struct iovec *iov, int cnt)
{
	hk_preempt_point();
	hk_fd *f = hk_fd_get(fd);
	int kind = f ? hk_kind(fd, f, NULL) : HK_UNKNOWN;
	bool file = kind == HK_FILE && still_file(fd);
	if (f && kind == HK_FILE && !file)
		hk_kind_wrong(f);
	if (!iov && file)
		return wr ? gmp_pwrite(fd, buf, n, off)
			  : gmp_pread(fd, buf, n, off);
	long nr = iov ? (wr ? SYS_pwritev : SYS_preadv)
		      : (wr ? SYS_pwrite64 : SYS_pread64);
	long a2 = iov ? (long)iov : (long)buf;
	long a3 = iov ? (long)cnt : (long)n;
	if (!file)
		return gmp__ctx_syscall6(nr, fd, a2, a3, (long)off, 0, 0);
	return HK_BRACKET(false,
			  gmp__ctx_syscall6(nr, fd, a2, a3, (long)off, 0, 0));
}

HK_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	if (!hk_task())
		return HK_REAL(pread)(fd, buf, n, off);
	return hk_ret(
		hk_io_read(fd, task_pio(fd, buf, n, off, false, NULL, 0)));
}

HK_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
	__attribute__((alias("pread")));

HK_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off,
			      size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return pread(fd, buf, n, off);
}

HK_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off,
				size_t buflen)
	__attribute__((alias("__pread_chk")));

HK_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (!hk_task())
		return HK_REAL(pwrite)(fd, buf, n, off);
	hk_io_wrote(fd);
	return hk_ret(task_pio(fd, (void *)buf, n, off, true, NULL, 0));
}

HK_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
	__attribute__((alias("pwrite")));

HK_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	if (!hk_task())
		return HK_REAL(preadv)(fd, iov, cnt, off);
	return hk_ret(
		hk_io_read(fd, task_pio(fd, NULL, 0, off, false, iov, cnt)));
}

HK_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off_t off)
	__attribute__((alias("preadv")));

HK_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	if (!hk_task())
		return HK_REAL(pwritev)(fd, iov, cnt, off);
	hk_io_wrote(fd);
	return hk_ret(task_pio(fd, NULL, 0, off, true, iov, cnt));
}

HK_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
	__attribute__((alias("pwritev")));
