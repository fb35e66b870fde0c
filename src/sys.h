/* The runtime's system calls: libgmp never calls libc for a function that
 * libgmp-hook interposes (design.md §32).
 *
 * Once libgmp-hook.so is in the process, a call libgmp made through libc's
 * read, close or poll would land in the hooks: at best a detour, at worst
 * a recursion (the hooks' close keeps the poller's books through libgmp,
 * whose close would call the hooks' close again). So every such call of
 * the runtime is made here, with the system-call instruction
 * (gmp__ctx_syscall6). Each returns the result or -errno, leaves errno
 * alone, and is no cancellation point, which the runtime's calls never
 * want to be. tests/ecosystem/check_imports.cmake fails if libgmp.so
 * imports any symbol that libgmp-hook.so defines.
 *
 * The sanitizer builds are the exception, for every call but those that
 * change the descriptor table: there ASan's interceptors check the
 * buffers the runtime passes and TSan's record the synchronisation that
 * data through a descriptor carries between threads, so the calls go
 * through libc, and through the sanitizer's interceptor, on to the hooks
 * if they are loaded, which let them straight through: the runtime makes
 * them on g0, from a thread that is not a task, or from a task inside the
 * runtime (hookrt.h), never from a task's own code. close, dup3 and
 * close_range are made directly in every build: the hooks' versions of
 * those keep the poller's books even outside a task, so they must never
 * see the runtime's own. The sanitizers are told of each close through
 * their hooks for system calls made directly, as their close interceptor
 * would tell them: TSan keeps a record per descriptor number, and one
 * that outlived its file would make the number's next file look shared
 * with the thread that opened the old one. (dup3 is reached only from
 * the hooks' dup2 and dup3, whose interceptor has told it already.)
 */
#ifndef GMP_SYS_H
#define GMP_SYS_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GMP__SYS_LIBC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||     \
	__has_feature(memory_sanitizer)
#define GMP__SYS_LIBC 1
#endif
#endif
#ifndef GMP__SYS_LIBC
#define GMP__SYS_LIBC 0
#endif

#if GMP__SYS_LIBC
int gmp__errno_get(void); /* tls.c */
void gmp__errno_set(int e);
#endif

#define GMP__SYS(nr, a, b, c, d, e, f)                                         \
	gmp__ctx_syscall6((nr), (long)(a), (long)(b), (long)(c), (long)(d),    \
			  (long)(e), (long)(f))

/* In the sanitizer builds: libc's call, its -1 turned into -errno, errno
 * as it was. errno through tls.c's out-of-line functions: these are
 * inlined into functions that park, across which a compiler may keep
 * errno's address (glibc declares __errno_location const), and the task
 * may come back on another thread. */
#define GMP__SYS_LIBC_CALL(type, call)                                         \
	({                                                                     \
		int gmp_saved_ = gmp__errno_get();                             \
		type gmp_r_ = (call);                                          \
		if (gmp_r_ < 0) {                                              \
			gmp_r_ = (type)-gmp__errno_get();                      \
			gmp__errno_set(gmp_saved_);                            \
		}                                                              \
		gmp_r_;                                                        \
	})

#if GMP__SYS_LIBC
#define GMP__SYSCALL(type, libc, nr, a, b, c, d, e, f)                         \
	GMP__SYS_LIBC_CALL(type, libc)
#else
#define GMP__SYSCALL(type, libc, nr, a, b, c, d, e, f)                         \
	((type)GMP__SYS(nr, a, b, c, d, e, f))
#endif

/* ---- the descriptor table: the system call in every build ----------------- */

#ifdef SYS_close_range
#define GMP__NR_CLOSE_RANGE SYS_close_range
#else
#define GMP__NR_CLOSE_RANGE 436 /* the same on every architecture */
#endif

#if GMP__SYS_LIBC
#include <linux/close_range.h>
#include <sys/resource.h>
/* The sanitizers' own (sanitizer_common), for a close they did not see. */
void __sanitizer_syscall_pre_impl_close(long fd);
void __sanitizer_syscall_post_impl_close(long res, long fd);
#endif

/* close(2): 0 or -errno. EINTR counts as closed (Linux frees the number
 * before it can be interrupted). */
static inline int gmp__sys_close(int fd)
{
#if GMP__SYS_LIBC
	__sanitizer_syscall_pre_impl_close(fd);
#endif
	long r = GMP__SYS(SYS_close, fd, 0, 0, 0, 0, 0);
#if GMP__SYS_LIBC
	__sanitizer_syscall_post_impl_close(r, fd);
#endif
	return r == -EINTR ? 0 : (int)r;
}

/* dup3(2): newfd or -errno. */
static inline int gmp__sys_dup3(int oldfd, int newfd, int flags)
{
	return (int)GMP__SYS(SYS_dup3, oldfd, newfd, flags, 0, 0, 0);
}

/* close_range(2): 0 or -errno (-ENOSYS before Linux 5.9). */
static inline int gmp__sys_close_range(unsigned lo, unsigned hi, int flags)
{
	int r = (int)GMP__SYS(GMP__NR_CLOSE_RANGE, lo, hi, flags, 0, 0, 0);
#if GMP__SYS_LIBC
	/* Each number that can be open, as closed one by one. */
	struct rlimit rl;
	if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC) &&
	    getrlimit(RLIMIT_NOFILE, &rl) == 0)
		for (unsigned fd = lo; fd <= hi && fd < rl.rlim_cur; fd++) {
			__sanitizer_syscall_pre_impl_close(fd);
			__sanitizer_syscall_post_impl_close(0, fd);
		}
#endif
	return r;
}

/* ---- everything else --------------------------------------------------------- */

static inline ssize_t gmp__sys_read(int fd, void *buf, size_t n)
{
	return GMP__SYSCALL(ssize_t, read(fd, buf, n), SYS_read, fd, buf, n, 0,
			    0, 0);
}

static inline ssize_t gmp__sys_write(int fd, const void *buf, size_t n)
{
	return GMP__SYSCALL(ssize_t, write(fd, buf, n), SYS_write, fd, buf, n,
			    0, 0, 0);
}

static inline ssize_t gmp__sys_readv(int fd, const struct iovec *iov, int n)
{
	return GMP__SYSCALL(ssize_t, readv(fd, iov, n), SYS_readv, fd, iov, n,
			    0, 0, 0);
}

static inline ssize_t gmp__sys_writev(int fd, const struct iovec *iov, int n)
{
	return GMP__SYSCALL(ssize_t, writev(fd, iov, n), SYS_writev, fd, iov, n,
			    0, 0, 0);
}

static inline ssize_t gmp__sys_pread(int fd, void *buf, size_t n, off_t off)
{
	return GMP__SYSCALL(ssize_t, pread(fd, buf, n, off), SYS_pread64, fd,
			    buf, n, off, 0, 0);
}

static inline ssize_t gmp__sys_pwrite(int fd, const void *buf, size_t n,
				      off_t off)
{
	return GMP__SYSCALL(ssize_t, pwrite(fd, buf, n, off), SYS_pwrite64, fd,
			    buf, n, off, 0, 0);
}

static inline ssize_t gmp__sys_recvfrom(int fd, void *buf, size_t n, int flags,
					struct sockaddr *addr, socklen_t *len)
{
	return GMP__SYSCALL(ssize_t, recvfrom(fd, buf, n, flags, addr, len),
			    SYS_recvfrom, fd, buf, n, flags, addr, len);
}

static inline ssize_t gmp__sys_sendto(int fd, const void *buf, size_t n,
				      int flags, const struct sockaddr *addr,
				      socklen_t len)
{
	return GMP__SYSCALL(ssize_t, sendto(fd, buf, n, flags, addr, len),
			    SYS_sendto, fd, buf, n, flags, addr, len);
}

static inline ssize_t gmp__sys_recvmsg(int fd, struct msghdr *m, int flags)
{
	return GMP__SYSCALL(ssize_t, recvmsg(fd, m, flags), SYS_recvmsg, fd, m,
			    flags, 0, 0, 0);
}

static inline ssize_t gmp__sys_sendmsg(int fd, const struct msghdr *m,
				       int flags)
{
	return GMP__SYSCALL(ssize_t, sendmsg(fd, m, flags), SYS_sendmsg, fd, m,
			    flags, 0, 0, 0);
}

static inline int gmp__sys_accept4(int fd, struct sockaddr *addr,
				   socklen_t *len, int flags)
{
	return GMP__SYSCALL(int, accept4(fd, addr, len, flags), SYS_accept4, fd,
			    addr, len, flags, 0, 0);
}

static inline int gmp__sys_connect(int fd, const struct sockaddr *addr,
				   socklen_t len)
{
	return GMP__SYSCALL(int, connect(fd, addr, len), SYS_connect, fd, addr,
			    len, 0, 0, 0);
}

static inline int gmp__sys_getsockopt(int fd, int level, int name, void *val,
				      socklen_t *len)
{
	return GMP__SYSCALL(int, getsockopt(fd, level, name, val, len),
			    SYS_getsockopt, fd, level, name, val, len, 0);
}

/* fcntl with an integer argument (F_GETFL, F_GETFD, F_SETFL...). */
static inline int gmp__sys_fcntl(int fd, int cmd, long arg)
{
	return GMP__SYSCALL(int, fcntl(fd, cmd, arg), SYS_fcntl, fd, cmd, arg,
			    0, 0, 0);
}

/* ppoll(2) without a signal mask; ts NULL waits for ever. */
static inline int gmp__sys_ppoll(struct pollfd *fds, nfds_t n,
				 const struct timespec *ts)
{
	return GMP__SYSCALL(int, ppoll(fds, n, ts, NULL), SYS_ppoll, fds, n, ts,
			    NULL, 0, 0);
}

static inline int gmp__sys_epoll_wait(int epfd, struct epoll_event *evs, int n,
				      int ms)
{
	return GMP__SYSCALL(int, epoll_wait(epfd, evs, n, ms), SYS_epoll_pwait,
			    epfd, evs, n, ms, NULL, 0);
}

static inline int gmp__sys_epoll_create1(int flags)
{
	return GMP__SYSCALL(int, epoll_create1(flags), SYS_epoll_create1, flags,
			    0, 0, 0, 0, 0);
}

static inline int gmp__sys_eventfd(unsigned count, int flags)
{
	return GMP__SYSCALL(int, eventfd(count, flags), SYS_eventfd2, count,
			    flags, 0, 0, 0, 0);
}

/* open(2) at the current directory; mode matters with O_CREAT or O_TMPFILE. */
static inline int gmp__sys_open(const char *path, int flags, mode_t mode)
{
	return GMP__SYSCALL(int, open(path, flags, mode), SYS_openat, AT_FDCWD,
			    path, flags, mode, 0, 0);
}

static inline int gmp__sys_pipe2(int fds[2], int flags)
{
	return GMP__SYSCALL(int, pipe2(fds, flags), SYS_pipe2, fds, flags, 0, 0,
			    0, 0);
}

/* nanosleep(2): 0, or -EINTR with *rem what was left. */
static inline int gmp__sys_nanosleep(const struct timespec *req,
				     struct timespec *rem)
{
	return GMP__SYSCALL(int, nanosleep(req, rem), SYS_nanosleep, req, rem,
			    0, 0, 0, 0);
}

#endif
