/* close, dup and its kin, fcntl, ioctl, and the calls that open files
 * (hook.h, design.md §32).
 *
 * close, dup2, dup3, close_range and closefrom keep libgmp's books in
 * every caller, a plain thread included: the tasks parked on the
 * descriptor wake with EBADF (never with another file's data: the number
 * is closed, or replaced, only once they have left), its operations in
 * the rings are cancelled, and it leaves the poller. The runtime's own
 * descriptors (its epoll instance, eventfds and rings) cannot be closed
 * or replaced: EBADF, as for a number that is not open. A descriptor the
 * runtime never waited on is closed by libc's close, as it would have been.
 *
 * Every call that makes a descriptor, or changes the program's flags on
 * one, tells hook.c, which keeps what the hooks may trust (hook.c's
 * table): this bookkeeping is done outside tasks too, a few stores.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hook.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

/* ---- close ------------------------------------------------------------------- */

HK_EXPORT int close(int fd)
{
	if (!hk_on())
		return HK_REAL(close)(fd);
	int r = hk.rt->fd_close(fd);
	if (r == GMP__HOOK_PLAIN)
		r = HK_REAL(close)(fd);
	else
		r = (int)hk_ret(r);
	hk_fd_forget(fd);
	return r;
}

HK_EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
	if (!hk_on())
		return HK_REAL(close_range)(lo, hi, flags);
	/* With UNSHARE the caller's thread gets a descriptor table of its
	 * own: a task's thread runs other tasks, and the runtime's threads
	 * must share one table. */
	if ((flags & CLOSE_RANGE_UNSHARE) && hk_task())
		return (int)hk_ret(-EINVAL);
	int r = hk.rt->fd_close_range(lo, hi, flags);
	if (r == 0)
		hk_fd_forget_range(lo, hi);
	return (int)hk_ret(r);
}

HK_EXPORT void closefrom(int lo)
{
	if (!hk_on() || lo < 0) {
		HK_REAL(closefrom)(lo);
		return;
	}
	int saved = hk_errno_get();
	int r = hk.rt->fd_close_range((unsigned)lo, ~0U, 0);
	if (r == -ENOSYS) {
		/* No close_range (Linux before 5.9, some emulators): one
		 * close per number up to the limit. */
		struct rlimit rl;
		unsigned end = 1u << 20;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < end)
			end = (unsigned)rl.rlim_cur;
		for (unsigned fd = (unsigned)lo; fd < end; fd++)
			if (!hk.rt->fd_owned((int)fd))
				close((int)fd);
	}
	hk_fd_forget_range((unsigned)lo, ~0U);
	hk_errno_set(saved);
}

/* ---- dup ---------------------------------------------------------------------- */

/* newfd now names oldfd's file: both numbers share it from now on. */
static void duped(int oldfd, int newfd)
{
	hk_fd_shared(oldfd);
	hk_fd_forget(newfd);
	hk.rt->fd_new(newfd);
}

HK_EXPORT int dup(int fd)
{
	int r = HK_REAL(dup)(fd);
	if (r >= 0 && hk_on())
		duped(fd, r);
	return r;
}

/* dup2 and dup3 onto a number that may be in use: newfd's tasks wake with
 * EBADF first. oldfd is checked before anything of newfd is touched, as
 * the kernel does. */
static int replace(int oldfd, int newfd, int flags)
{
	long ok = HK_SYS(SYS_fcntl, oldfd, F_GETFD, 0, 0, 0, 0);
	if (ok < 0)
		return (int)ok;
	int r = hk.rt->fd_dup(oldfd, newfd, flags);
	if (r == GMP__HOOK_PLAIN)
		r = (int)HK_SYS(SYS_dup3, oldfd, newfd, flags, 0, 0, 0);
	return r < 0 ? r : newfd;
}

HK_EXPORT int dup2(int oldfd, int newfd)
{
	if (!hk_on() || oldfd == newfd)
		return HK_REAL(dup2)(oldfd, newfd);
	int r = (int)hk_ret(replace(oldfd, newfd, 0));
	if (r >= 0)
		duped(oldfd, newfd);
	return r;
}

HK_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (!hk_on() || oldfd == newfd || (flags & ~O_CLOEXEC))
		return HK_REAL(dup3)(oldfd, newfd, flags);
	int r = (int)hk_ret(replace(oldfd, newfd, flags));
	if (r >= 0)
		duped(oldfd, newfd);
	return r;
}

/* ---- fcntl and ioctl ---------------------------------------------------------- */

static int do_fcntl(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	switch (cmd) {
	case F_SETLKW:
	case F_OFD_SETLKW:
		/* A lock that waits for another holder: nothing to poll. */
		if (hk_task())
			return HK_BRACKET(true, real(fd, cmd, arg));
		return real(fd, cmd, arg);
	case F_SETFL: {
		int r = real(fd, cmd, arg);
		if (r == 0 && hk_on())
			hk_fd_setfl(fd, (int)(intptr_t)arg);
		return r;
	}
	case F_DUPFD:
	case F_DUPFD_CLOEXEC: {
		int r = real(fd, cmd, arg);
		if (r >= 0 && hk_on())
			duped(fd, r);
		return r;
	}
	default:
		return real(fd, cmd, arg);
	}
}

/* fcntl's third argument is an int or a pointer by command; it is read
 * as a pointer and passed on as one, as glibc's own fcntl does (both
 * travel in one register). */
HK_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(HK_REAL(fcntl), fd, cmd, arg);
}

HK_EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

HK_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	int r = HK_REAL(ioctl)(fd, req, arg);
	if (r == 0 && req == FIONBIO && hk_on() && arg)
		hk_fd_setfl(fd, *(const int *)arg ? O_NONBLOCK : 0);
	return r;
}

/* ---- opening files ------------------------------------------------------------ */

/* A new file: opening may block (a FIFO waits for its other end, a slow
 * file system), so a task opens inside gmp_enter_syscall. */
static int opened(int r, int flags)
{
	if (r >= 0 && hk_on()) {
		hk_fd_born(r, HK_UNKNOWN, false, (flags & O_NONBLOCK) != 0);
		hk.rt->fd_new(r);
	}
	return r;
}

static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

HK_EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	int r = hk_task() ? HK_BRACKET(false, HK_REAL(open)(path, flags, mode))
			  : HK_REAL(open)(path, flags, mode);
	return opened(r, flags);
}

HK_EXPORT int open64(const char *path, int flags, ...)
	__attribute__((alias("open")));

HK_EXPORT int __open_2(const char *path, int flags)
{
	if (flags & (O_CREAT | O_TMPFILE))
		__chk_fail(); /* glibc's check: a mode was needed */
	return open(path, flags);
}

HK_EXPORT int __open64_2(const char *path, int flags)
	__attribute__((alias("__open_2")));

HK_EXPORT int openat(int dir, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	int r = hk_task() ? HK_BRACKET(false,
				       HK_REAL(openat)(dir, path, flags, mode))
			  : HK_REAL(openat)(dir, path, flags, mode);
	return opened(r, flags);
}

HK_EXPORT int openat64(int dir, const char *path, int flags, ...)
	__attribute__((alias("openat")));

HK_EXPORT int __openat_2(int dir, const char *path, int flags)
{
	if (flags & (O_CREAT | O_TMPFILE))
		__chk_fail();
	return openat(dir, path, flags);
}

HK_EXPORT int __openat64_2(int dir, const char *path, int flags)
	__attribute__((alias("__openat_2")));

HK_EXPORT int creat(const char *path, mode_t mode)
{
	int r = hk_task() ? HK_BRACKET(false, HK_REAL(creat)(path, mode))
			  : HK_REAL(creat)(path, mode);
	return opened(r, O_CREAT | O_WRONLY | O_TRUNC);
}

HK_EXPORT int creat64(const char *path, mode_t mode)
	__attribute__((alias("creat")));

/* ---- pipes, eventfds, epoll instances ---------------------------------------- */

HK_EXPORT int pipe(int fds[2])
{
	int r = HK_REAL(pipe)(fds);
	if (r == 0 && hk_on()) {
		for (int i = 0; i < 2; i++) {
			hk_fd_born(fds[i], HK_NOWAIT, false, false);
			hk.rt->fd_new(fds[i]);
		}
	}
	return r;
}

HK_EXPORT int pipe2(int fds[2], int flags)
{
	int r = HK_REAL(pipe2)(fds, flags);
	if (r == 0 && hk_on()) {
		for (int i = 0; i < 2; i++) {
			hk_fd_born(fds[i], HK_NOWAIT, false,
				   (flags & O_NONBLOCK) != 0);
			hk.rt->fd_new(fds[i]);
		}
	}
	return r;
}

HK_EXPORT int eventfd(unsigned count, int flags)
{
	int r = HK_REAL(eventfd)(count, flags);
	if (r >= 0 && hk_on()) {
		hk_fd_born(r, HK_NOWAIT, false, (flags & EFD_NONBLOCK) != 0);
		hk.rt->fd_new(r);
	}
	return r;
}

HK_EXPORT int epoll_create(int size)
{
	return opened(HK_REAL(epoll_create)(size), 0);
}

HK_EXPORT int epoll_create1(int flags)
{
	return opened(HK_REAL(epoll_create1)(flags), 0);
}
