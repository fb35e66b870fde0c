/* accept, connect, the socket options, and the calls that make sockets
 * (hook.h, design.md §32).
 *
 * accept and connect have no flag that makes one call non-blocking, as
 * MSG_DONTWAIT does for the data calls, and the hooks do not change a
 * descriptor's flags behind the program's back. So in a task:
 *
 *   accept on a blocking listener waits in the poller until a connection
 *   is pending, then accepts inside gmp_enter_syscall. Tasks of the
 *   process accepting on one listener take turns (a gmp_mutex per
 *   listener), so that they never race each other for one connection;
 *   another process that shares the listener may still take it first,
 *   and then the accept blocks its thread, as libc's would, while sysmon
 *   hands the P on.
 *
 *   connect on a blocking TCP socket is the one call for which the hooks
 *   touch a flag: the socket is made non-blocking for the connect(2)
 *   call alone and put back at once, and the task waits for the
 *   handshake in the poller (SO_SNDTIMEO honoured: EINPROGRESS when it
 *   passes, as the kernel says). A socket being connected is in no one
 *   else's use. Other sockets (AF_UNIX, datagrams) connect at once, in
 *   the syscall bracket.
 *
 * Every call that makes a descriptor tells hook.c (and libgmp's poller)
 * that a new file is behind the number, also outside a task: what was
 * known of the number's previous file must not be used for this one.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "hook.h"

#ifndef SO_RCVTIMEO_NEW
#define SO_RCVTIMEO_NEW 66
#define SO_SNDTIMEO_NEW 67
#endif

/* A new socket behind fd, made by a hooked call. */
static void born(int fd, int type, int domain)
{
	int kind = (type & 0xf) == SOCK_STREAM ? HK_STREAM : HK_SOCK;
	hk_fd_born(fd, kind, domain == AF_INET || domain == AF_INET6,
		   (type & SOCK_NONBLOCK) != 0);
	hk.rt->fd_new(fd);
}

/* ---- accept ------------------------------------------------------------------- */

static int task_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	hk_preempt_point();
	hk_fd *f = hk_fd_get(fd);
	bool inet = false;
	int kind = f ? hk_kind(fd, f, &inet) : HK_UNKNOWN;
	int nb = f && (kind == HK_STREAM || kind == HK_SOCK)
			 ? hk_nonblock(fd, f)
			 : -1;
	if (nb > 0) /* EAGAIN or a connection, at once */
		return (int)HK_SYS(SYS_accept4, fd, addr, len, flags, 0, 0);
	if (nb < 0)
		/* Not a socket (the kernel says so at once), or one the
		 * hooks do not know yet. */
		return (int)HK_BRACKET(false, HK_SYS(SYS_accept4, fd, addr, len,
						     flags, 0, 0));
	int64_t t = hk_timeout(fd, f, 0);
	int64_t deadline = t > 0 ? hk_deadline(t) : -1;
	gmp_mutex *mu = hk_fd_accept_lock(f);
	gmp_mutex_lock(mu);
	gmp__hook_fd h;
	int r = hk.rt->fd_begin(fd, &h);
	if (r == 0) {
		for (;;) {
			hk.rt->fd_snapshot(&h);
			int p = hk_poll_now(fd, POLLIN);
			if (p != 0) {
				r = p < 0 ? p : 0;
				break; /* a connection, an error: accept says */
			}
			if (deadline >= 0 && hk_now() >= deadline) {
				r = -EAGAIN; /* SO_RCVTIMEO */
				break;
			}
			int w = hk.rt->fd_wait(&h, 0, deadline);
			if (w != 0 && w != GMP__HOOK_UNPOLLABLE) {
				r = w;
				break;
			}
		}
		/* No reference across the accept, which may block. */
		hk.rt->fd_end(&h);
	}
	if (r == 0)
		r = (int)HK_BRACKET(false, HK_SYS(SYS_accept4, fd, addr, len,
						  flags, 0, 0));
	gmp_mutex_unlock(mu);
	return r;
}

static int after_accept(int r, int fd, int flags)
{
	if (r >= 0 && hk_on()) {
		hk_fd *f = hk_fd_get(fd);
		bool inet = false;
		int kind = f ? hk_kind(fd, f, &inet) : HK_STREAM;
		born(r,
		     (kind == HK_SOCK ? SOCK_SEQPACKET : SOCK_STREAM) | flags,
		     inet ? AF_INET : AF_UNIX);
	}
	return r;
}

HK_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	int r;
	if (!hk_task())
		r = HK_REAL(accept)(fd, addr, len);
	else
		r = (int)hk_ret(task_accept(fd, addr, len, 0));
	return after_accept(r, fd, 0);
}

HK_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int r;
	if (!hk_task())
		r = HK_REAL(accept4)(fd, addr, len, flags);
	else
		r = (int)hk_ret(task_accept(fd, addr, len, flags));
	return after_accept(r, fd, flags);
}

/* ---- connect ------------------------------------------------------------------ */

/* Waits until fd, whose handshake is under way, is writable or has
 * failed, at most until deadline: 0, -EINPROGRESS at the deadline (the
 * handshake goes on, as after the kernel's SO_SNDTIMEO), or -errno. */
static int connect_wait(int fd, int64_t deadline)
{
	gmp__hook_fd h;
	int r = hk.rt->fd_begin(fd, &h);
	if (r)
		return r;
	for (;;) {
		hk.rt->fd_snapshot(&h);
		int p = hk_poll_now(fd, POLLOUT);
		if (p != 0) {
			r = p < 0 ? p : 0;
			break;
		}
		if (deadline >= 0 && hk_now() >= deadline) {
			r = -EINPROGRESS;
			break;
		}
		int w = hk.rt->fd_wait(&h, 1, deadline);
		if (w != 0) {
			r = w;
			break;
		}
	}
	hk.rt->fd_end(&h);
	return r;
}

/* connect(2) on fd made non-blocking for the call alone (flags fl, the
 * program's). */
static int connect_nb(int fd, long fl, const struct sockaddr *addr,
		      socklen_t len)
{
	HK_SYS(SYS_fcntl, fd, F_SETFL, fl | O_NONBLOCK, 0, 0, 0);
	int r = (int)HK_SYS(SYS_connect, fd, addr, len, 0, 0, 0);
	HK_SYS(SYS_fcntl, fd, F_SETFL, fl, 0, 0, 0);
	return r;
}

static int task_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	hk_preempt_point();
	hk_fd *f = hk_fd_get(fd);
	bool inet = false;
	int kind = f ? hk_kind(fd, f, &inet) : HK_UNKNOWN;
	int nb = f && (kind == HK_STREAM || kind == HK_SOCK)
			 ? hk_nonblock(fd, f)
			 : -1;
	if (nb > 0) /* EINPROGRESS, or done, at once */
		return (int)HK_SYS(SYS_connect, fd, addr, len, 0, 0, 0);
	if (nb < 0 || kind != HK_STREAM || !inet)
		/* Not a socket, or one that connects at once (AF_UNIX,
		 * datagrams): the kernel's answer, in the bracket should it
		 * wait after all (a full AF_UNIX backlog). */
		return (int)HK_BRACKET(false, HK_SYS(SYS_connect, fd, addr, len,
						     0, 0, 0));
	long fl = HK_SYS(SYS_fcntl, fd, F_GETFL, 0, 0, 0, 0);
	if (fl < 0)
		return (int)fl;
	int r = connect_nb(fd, fl, addr, len);
	int64_t deadline = -2;
	/* A blocking connect waits for a handshake under way, this call's
	 * (EINPROGRESS) or an earlier one's (EALREADY). Once it has ended,
	 * connect again, as a non-blocking program does: that is what
	 * reports the outcome (0, or the handshake's error) and leaves the
	 * socket in the state the kernel's own blocking connect leaves it
	 * in (a later connect says EISCONN, or starts afresh). */
	while (r == -EINPROGRESS || r == -EALREADY) {
		if (deadline == -2) {
			int64_t t = hk_timeout(fd, f, 1);
			deadline = t > 0 ? hk_deadline(t) : -1;
		}
		int w = connect_wait(fd, deadline);
		if (w)
			return w;
		r = connect_nb(fd, fl, addr, len);
	}
	return r;
}

HK_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (!hk_task())
		return HK_REAL(connect)(fd, addr, len);
	return (int)hk_ret(task_connect(fd, addr, len));
}

/* ---- making sockets ----------------------------------------------------------- */

HK_EXPORT int socket(int domain, int type, int proto)
{
	int r = HK_REAL(socket)(domain, type, proto);
	if (r >= 0 && hk_on())
		born(r, type, domain);
	return r;
}

HK_EXPORT int socketpair(int domain, int type, int proto, int sv[2])
{
	int r = HK_REAL(socketpair)(domain, type, proto, sv);
	if (r == 0 && hk_on()) {
		born(sv[0], type, domain);
		born(sv[1], type, domain);
	}
	return r;
}

/* ---- socket options ----------------------------------------------------------- */

HK_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len)
{
	int r = HK_REAL(setsockopt)(fd, level, name, val, len);
	if (r == 0 && hk_on() && level == SOL_SOCKET) {
		if (name == SO_RCVTIMEO || name == SO_RCVTIMEO_NEW)
			hk_fd_settimeout(fd, 0, val, len);
		else if (name == SO_SNDTIMEO || name == SO_SNDTIMEO_NEW)
			hk_fd_settimeout(fd, 1, val, len);
	}
	return r;
}

/* Interposed for completeness of the set: the hooks never change an
 * option, so what the kernel says is what the program set. */
HK_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return HK_REAL(getsockopt)(fd, level, name, val, len);
}
