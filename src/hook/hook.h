/* libgmp-hook's internals, shared by its files (design.md §32).
 *
 * The library defines libc's blocking entry points (read, recv, poll,
 * nanosleep, getaddrinfo, ...). Each one asks first whether the calling
 * thread is running a task that may park (hk_task: one thread-local load
 * when it is not, for a thread of the program's); if not, it calls libc's
 * own function (found with dlsym(RTLD_NEXT)), and the call is libc's in
 * every respect. In a task, the call is made so that it cannot block
 * (MSG_DONTWAIT, RWF_NOWAIT, a zero timeout), and when it finds nothing
 * to do the task parks in libgmp's network poller, on a timer, or in the
 * io_uring of its P, and tries again when woken; calls that have nothing
 * to poll run inside gmp_enter_syscall_block. Descriptor flags are never
 * changed (but for one connect(2), see sock.c), so what the program,
 * its other threads, a child process and the kernel see is the program's
 * own doing.
 *
 * Files: hook.c (loading, libc's functions, the descriptor table),
 * rw.c (read, write and their kin), sock.c (accept, connect, socket
 * options, the calls that make descriptors), poll.c (poll, select,
 * epoll_wait), sleep.c, fd.c (close, dup, fcntl, ioctl), block.c (the
 * calls run in the blocking-syscall bracket). The private interface to
 * libgmp is src/hookrt.h.
 */
#ifndef GMP_HOOK_H
#define GMP_HOOK_H

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include <gmp.h>

#include "atomic.h"
#include "ctx.h"
#include "hookrt.h"

/* Every symbol of the library is hidden but the libc names it defines,
 * which are marked HK_EXPORT. */
#define HK_EXPORT __attribute__((visibility("default")))

#define HK_LIKELY(x) __builtin_expect(!!(x), 1)
#define HK_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- the runtime, and who is calling -------------------------------------- */

struct hk_state {
	/* Written once by the constructor, before `on` is stored. */
	const gmp__hookrt *rt;
	intptr_t tls_m, tls_preempt;
	uint32_t m_curg, g_status, g_inrt, g_running;
	/* Whether the hooks act (attached, GMP_HOOK not off). Written by
	 * the constructor only, last; read by every call (hk_on). */
	volatile uint8_t on;
	/* Bumped before every fork (pthread_atfork) and posix_spawn: a
	 * descriptor born before is shared with a child (hook.c). Atomic. */
	volatile uint32_t forkgen;
};
extern struct hk_state hk;

/* Whether the hooks act. acquire: pairs with the constructor's release of
 * `on`, which follows the fields it sets (a plain load on x86-64). */
static inline __attribute__((always_inline)) bool hk_on(void)
{
	return gmp__load8_acq(&hk.on) != 0;
}

/* Whether the calling thread runs a task that may park (hookrt.h says
 * what that means). A thread of the program's costs one thread-local
 * load (its M slot is 0). The asm is volatile and clobbers memory, so
 * that a compiler never reuses a thread pointer read before a switch. */
static inline __attribute__((always_inline)) bool hk_task(void)
{
	if (HK_UNLIKELY(!hk_on()))
		return false;
	char *m;
#if defined(__x86_64__)
	__asm__ __volatile__("movq %%fs:(%1), %0"
			     : "=r"(m)
			     : "r"(hk.tls_m)
			     : "memory");
#elif defined(__aarch64__)
	char *tp;
	__asm__ __volatile__("mrs %0, tpidr_el0" : "=r"(tp) : : "memory");
	m = gmp__loadp_rlx((char **)(tp + hk.tls_m));
#else
#error "libgmp-hook supports x86-64 and aarch64 only"
#endif
	if (HK_LIKELY(!m))
		return false;
	/* Relaxed: the M's current G is this thread's own to change, and
	 * the G's status and runtime mark are its own while it runs; others
	 * (sysmon retaking a system call) may write them concurrently, but
	 * what this thread needs is its own last write. */
	char *g = gmp__loadp_rlx((char **)(m + hk.m_curg));
	return g &&
	       gmp__load32_rlx((uint32_t *)(g + hk.g_status)) == hk.g_running &&
	       gmp__load8_rlx((uint8_t *)(g + hk.g_inrt)) == 0;
}

/* gmp_preempt_point, for a task (hk_task): a hooked call is a switch
 * point, as libgmp's own I/O calls are. One load when nothing is
 * pending. */
static inline __attribute__((always_inline)) void hk_preempt_point(void)
{
	uint32_t v;
#if defined(__x86_64__)
	__asm__ __volatile__("movl %%fs:(%1), %0"
			     : "=r"(v)
			     : "r"(hk.tls_preempt)
			     : "memory");
#else
	char *tp;
	__asm__ __volatile__("mrs %0, tpidr_el0" : "=r"(tp) : : "memory");
	v = gmp__load32_rlx((uint32_t *)(tp + hk.tls_preempt));
#endif
	if (HK_UNLIKELY(v != 0))
		gmp_preempt_point_slow_();
}

/* ---- ThreadSanitizer --------------------------------------------------------- */

#if defined(__SANITIZE_THREAD__)
#define HK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HK_TSAN 1
#endif
#endif
#ifndef HK_TSAN
#define HK_TSAN 0
#endif

#if HK_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#endif

/* ---- errno ------------------------------------------------------------------ */

/* A task may come back from a park on another thread, and glibc declares
 * __errno_location const, so within one function a compiler may keep the
 * old thread's errno address across the park. These are out of line and
 * opaque, so each reaches the current thread's errno. */
void hk_errno_set(int e);
int hk_errno_get(void);

/* The usual end of a hooked call: r >= 0 is the result, r < 0 is -errno,
 * which becomes errno and -1. */
static inline ssize_t hk_ret(ssize_t r)
{
	if (r < 0) {
		hk_errno_set((int)-r);
		return -1;
	}
	return r;
}

/* glibc's, for the _FORTIFY_SOURCE entry points (__read_chk, __poll_chk,
 * ...), which a program built with it calls instead of read or poll: the
 * hooks' versions check the buffer's size as glibc's do and go on with
 * the hooked call. */
extern void __chk_fail(void) __attribute__((noreturn));
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *from, socklen_t *fromlen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		const sigset_t *mask, size_t fdslen);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dir, const char *path, int flags);
int __openat64_2(int dir, const char *path, int flags);

/* ---- the system call instruction -------------------------------------------- */

/* The hooks' own attempts go to the kernel directly: they leave errno
 * alone, return -errno, and are no cancellation points (a task's thread
 * runs other tasks, and no pthread_cancel is aimed at it). */
#define HK_SYS(nr, a, b, c, d, e, f)                                           \
	gmp__ctx_syscall6((nr), (long)(a), (long)(b), (long)(c), (long)(d),    \
			  (long)(e), (long)(f))

/* The kernel's sigset_t, which ppoll, pselect6 and epoll_pwait take the
 * size of (glibc's sigset_t is larger). */
#define HK_SIGSETSIZE (_NSIG / 8)

/* ---- libc's own functions --------------------------------------------------- */

#define HK_REAL_FUNCS(X)                                                       \
	X(read, ssize_t, (int, void *, size_t))                                \
	X(readv, ssize_t, (int, const struct iovec *, int))                    \
	X(write, ssize_t, (int, const void *, size_t))                         \
	X(writev, ssize_t, (int, const struct iovec *, int))                   \
	X(pread, ssize_t, (int, void *, size_t, off_t))                        \
	X(pwrite, ssize_t, (int, const void *, size_t, off_t))                 \
	X(preadv, ssize_t, (int, const struct iovec *, int, off_t))            \
	X(pwritev, ssize_t, (int, const struct iovec *, int, off_t))           \
	X(recv, ssize_t, (int, void *, size_t, int))                           \
	X(recvfrom, ssize_t,                                                   \
	  (int, void *, size_t, int, struct sockaddr *, socklen_t *))          \
	X(recvmsg, ssize_t, (int, struct msghdr *, int))                       \
	X(send, ssize_t, (int, const void *, size_t, int))                     \
	X(sendto, ssize_t,                                                     \
	  (int, const void *, size_t, int, const struct sockaddr *,            \
	   socklen_t))                                                         \
	X(sendmsg, ssize_t, (int, const struct msghdr *, int))                 \
	X(accept, int, (int, struct sockaddr *, socklen_t *))                  \
	X(accept4, int, (int, struct sockaddr *, socklen_t *, int))            \
	X(connect, int, (int, const struct sockaddr *, socklen_t))             \
	X(socket, int, (int, int, int))                                        \
	X(socketpair, int, (int, int, int, int *))                             \
	X(setsockopt, int, (int, int, int, const void *, socklen_t))           \
	X(getsockopt, int, (int, int, int, void *, socklen_t *))               \
	X(poll, int, (struct pollfd *, nfds_t, int))                           \
	X(ppoll, int,                                                          \
	  (struct pollfd *, nfds_t, const struct timespec *,                   \
	   const sigset_t *))                                                  \
	X(select, int, (int, fd_set *, fd_set *, fd_set *, struct timeval *))  \
	X(pselect, int,                                                        \
	  (int, fd_set *, fd_set *, fd_set *, const struct timespec *,         \
	   const sigset_t *))                                                  \
	X(epoll_wait, int, (int, struct epoll_event *, int, int))              \
	X(epoll_pwait, int,                                                    \
	  (int, struct epoll_event *, int, int, const sigset_t *))             \
	X(sleep, unsigned, (unsigned))                                         \
	X(usleep, int, (useconds_t))                                           \
	X(nanosleep, int, (const struct timespec *, struct timespec *))        \
	X(clock_nanosleep, int,                                                \
	  (clockid_t, int, const struct timespec *, struct timespec *))        \
	X(close, int, (int))                                                   \
	X(dup, int, (int))                                                     \
	X(dup2, int, (int, int))                                               \
	X(dup3, int, (int, int, int))                                          \
	X(fcntl, int, (int, int, ...))                                         \
	X(ioctl, int, (int, unsigned long, ...))                               \
	X(open, int, (const char *, int, ...))                                 \
	X(openat, int, (int, const char *, int, ...))                          \
	X(creat, int, (const char *, mode_t))                                  \
	X(pipe, int, (int *))                                                  \
	X(pipe2, int, (int *, int))                                            \
	X(eventfd, int, (unsigned, int))                                       \
	X(epoll_create, int, (int))                                            \
	X(epoll_create1, int, (int))                                           \
	X(fsync, int, (int))                                                   \
	X(fdatasync, int, (int))                                               \
	X(syncfs, int, (int))                                                  \
	X(flock, int, (int, int))                                              \
	X(lockf, int, (int, int, off_t))                                       \
	X(wait, pid_t, (int *))                                                \
	X(waitpid, pid_t, (pid_t, int *, int))                                 \
	X(wait3, pid_t, (int *, int, struct rusage *))                         \
	X(wait4, pid_t, (pid_t, int *, int, struct rusage *))                  \
	X(waitid, int, (idtype_t, id_t, siginfo_t *, int))                     \
	X(system, int, (const char *))                                         \
	X(popen, FILE *, (const char *, const char *))                         \
	X(pclose, int, (FILE *))                                               \
	X(getaddrinfo, int,                                                    \
	  (const char *, const char *, const struct addrinfo *,                \
	   struct addrinfo **))                                                \
	X(getnameinfo, int,                                                    \
	  (const struct sockaddr *, socklen_t, char *, socklen_t, char *,      \
	   socklen_t, int))                                                    \
	X(gethostbyname, struct hostent *, (const char *))                     \
	X(gethostbyname_r, int,                                                \
	  (const char *, struct hostent *, char *, size_t, struct hostent **,  \
	   int *))                                                             \
	X(gethostbyname2, struct hostent *, (const char *, int))               \
	X(gethostbyname2_r, int,                                               \
	  (const char *, int, struct hostent *, char *, size_t,                \
	   struct hostent **, int *))                                          \
	X(gethostbyaddr, struct hostent *, (const void *, socklen_t, int))     \
	X(gethostbyaddr_r, int,                                                \
	  (const void *, socklen_t, int, struct hostent *, char *, size_t,     \
	   struct hostent **, int *))                                          \
	X(close_range, int, (unsigned, unsigned, int))                         \
	X(closefrom, void, (int))                                              \
	X(posix_spawn, int,                                                    \
	  (pid_t *, const char *, const posix_spawn_file_actions_t *,          \
	   const posix_spawnattr_t *, char *const[], char *const[]))           \
	X(posix_spawnp, int,                                                   \
	  (pid_t *, const char *, const posix_spawn_file_actions_t *,          \
	   const posix_spawnattr_t *, char *const[], char *const[]))

#define HK_REAL_FIELD(name, ret, args) ret(*name) args;
struct hk_real {
	HK_REAL_FUNCS(HK_REAL_FIELD)
};
extern struct hk_real hk_real;

/* Looks every one of them up (the constructor does; a call that comes
 * before it, from another library's constructor, does it then). */
void hk_real_resolve(void);

/* libc's own f. */
/* Relaxed: a pointer to code that is mapped already, nothing to publish
 * with it; every writer stores the same value. */
#define HK_REAL(f)                                                             \
	({                                                                     \
		__typeof__(hk_real.f) hk_real_ = gmp__loadp_rlx(&hk_real.f);   \
		HK_LIKELY(hk_real_ != NULL)                                    \
		? hk_real_ : (hk_real_resolve(), gmp__loadp_rlx(&hk_real.f));  \
	})

/* ---- what the hooks know of each descriptor (hook.c) ---------------------- */

/* Kinds: how a task's call on the descriptor is made. */
enum {
	HK_UNKNOWN = 0,
	HK_STREAM = 1,   /* a stream socket: MSG_DONTWAIT, and the
			    drained-read shortcut */
	HK_SOCK = 2,     /* another socket (datagrams, seqpacket) */
	HK_NOWAIT = 3,   /* a pipe, FIFO, eventfd...: RWF_NOWAIT */
	HK_POLLWAIT = 4, /* pollable, but no call that cannot block (a
			    terminal): readiness in the poller, then the call
			    in the syscall bracket */
	HK_FILE = 5,     /* a regular file or block device: libgmp's file
			    calls (io_uring) */
	HK_PLAIN = 6,    /* anything else (a directory): the call in the
			    syscall bracket */
};

/* One descriptor's entry (hook.c says what each field means). */
typedef struct hk_fd {
	volatile uint32_t word;
	volatile uint32_t forkgen;
	volatile uint64_t tmo[2];
	gmp_mutex accept_mu;
	void *volatile pd; /* libgmp's poll descriptor of the number, once
			      looked up (it is the number's for good) */
} hk_fd;

#define HK_KIND_MASK 0xfu
#define HK_CHUNK_SHIFT 10
#define HK_CHUNK (1 << HK_CHUNK_SHIFT)
#define HK_MAX_FD (1 << 24)

extern hk_fd *volatile hk_chunks[HK_MAX_FD >> HK_CHUNK_SHIFT];
hk_fd *hk_chunk_new(int i);

/* The entry of fd, made on first use; NULL for a negative number, one
 * beyond the table (2^24), or no memory. Never freed. */
static inline hk_fd *hk_fd_get(int fd)
{
	if (HK_UNLIKELY((unsigned)fd >= HK_MAX_FD))
		return NULL;
	int i = fd >> HK_CHUNK_SHIFT;
	/* acquire: pairs with hk_chunk_new's publication */
	hk_fd *c = gmp__loadp_acq(&hk_chunks[i]);
	if (HK_UNLIKELY(!c) && !(c = hk_chunk_new(i)))
		return NULL;
	return &c[fd & (HK_CHUNK - 1)];
}

/* What TSan's interceptors record of a read or a write, for a task's
 * hooked call, whose system calls it does not see: data written to a
 * descriptor and read from it carries what the writer did before to the
 * reader. Keyed by the descriptor's entry + 1, an address nothing else
 * uses. Nothing outside the TSan build. */
static inline void hk_io_wrote(int fd)
{
#if HK_TSAN
	hk_fd *f = hk_fd_get(fd);
	if (f)
		__tsan_release((char *)f + 1);
#else
	(void)fd;
#endif
}

static inline ssize_t hk_io_read(int fd, ssize_t r)
{
#if HK_TSAN
	hk_fd *f = r >= 0 ? hk_fd_get(fd) : NULL;
	if (f)
		__tsan_acquire((char *)f + 1);
#else
	(void)fd;
#endif
	return r;
}

/* Fills h for a call on fd (entry f) that holds no reference yet: the
 * poll descriptor, remembered in f after the first look. false, with
 * *err (-EBADF, -EMFILE, -ENOMEM), if there is none. */
static inline bool hk_fd_pd(hk_fd *f, int fd, gmp__hook_fd *h, int *err)
{
	/* Relaxed both: the poll descriptor is libgmp's, published by it,
	 * and every writer stores the same pointer (a number's for good). */
	void *pd = gmp__loadp_rlx(&f->pd);
	if (HK_UNLIKELY(!pd)) {
		if ((*err = hk.rt->fd_look(fd, h)) != 0)
			return false;
		gmp__storep_rlx(&f->pd, h->pd);
		return true;
	}
	h->pd = pd;
	h->fd = fd;
	h->op[0] = h->op[1] = 0; /* no snapshot yet (hookrt.h) */
	return true;
}

int hk_kind_learn(int fd, hk_fd *f, bool *inet);

/* fd's kind, learnt (fstat, and for a socket its type and family) on
 * first use; HK_UNKNOWN if fd is not open. *inet: an AF_INET or AF_INET6
 * socket (connect's business). */
static inline int hk_kind(int fd, hk_fd *f, bool *inet)
{
	/* acquire: pairs with the release of the word (hook.c) */
	uint32_t w = gmp__load32_acq(&f->word);
	int kind = (int)(w & HK_KIND_MASK);
	if (HK_LIKELY(kind != HK_UNKNOWN && !inet))
		return kind;
	return hk_kind_learn(fd, f, inet);
}
/* The kind was wrong (a call said ENOTSOCK, EOPNOTSUPP...): forget it. */
void hk_kind_wrong(hk_fd *f);
/* A pipe's RWF_NOWAIT was refused: it waits for readiness instead. */
void hk_kind_set(hk_fd *f, int kind);

/* A new file behind fd, made by a call of the program's that the hooks
 * saw (socket, accept, pipe, open...): its kind (or HK_UNKNOWN) and
 * whether it is non-blocking. The descriptor is the process's alone until
 * it is dup'ed, sent away or the process forks: until then the hooks
 * trust what they saw set on it, and ask the kernel nothing. */
void hk_fd_born(int fd, int kind, bool inet, bool nonblock);
/* fd no longer names what it named (closed, dup2'ed over); every number
 * of [lo, hi] (close_range). */
void hk_fd_forget(int fd);
void hk_fd_forget_range(unsigned lo, unsigned hi);
/* fd's file is now reachable by another number or process (dup, F_DUPFD,
 * SCM_RIGHTS): the hooks ask the kernel from now on. */
void hk_fd_shared(int fd);

/* Whether the program has fd non-blocking: 1, 0, or -errno. */
int hk_nonblock(int fd, hk_fd *f);
/* The same, from what the hooks saw alone: 1, 0, or -1 when they would
 * have to ask the kernel. */
int hk_nonblock_known(hk_fd *f);
/* The program set fd's status flags (F_SETFL, FIONBIO) to `flags`. */
void hk_fd_setfl(int fd, int flags);
/* SO_RCVTIMEO (dir 0) or SO_SNDTIMEO (dir 1) of a socket in ns, 0 for
 * none. */
int64_t hk_timeout(int fd, hk_fd *f, int dir);
/* The program set one. */
void hk_fd_settimeout(int fd, int dir, const void *val, socklen_t len);

/* The gmp_mutex that serialises tasks accepting on one listener. */
gmp_mutex *hk_fd_accept_lock(hk_fd *f);

/* ---- waiting (hook.c) --------------------------------------------------------- */

/* gmp_nanotime's clock, and an absolute deadline `ns` from now (< 0:
 * none). */
int64_t hk_now(void);
int64_t hk_deadline(int64_t ns);

/* poll(2) on one descriptor without blocking: the revents, or -errno. */
int hk_poll_now(int fd, int events);

/* Runs `fn` (a call that may block in the kernel) inside
 * gmp_enter_syscall_block (block) or gmp_enter_syscall: errno, and
 * h_errno for the resolver's calls, reach the task on whichever thread
 * it continues. */
#define HK_BRACKET(block, expr)                                                \
	({                                                                     \
		if (block)                                                     \
			gmp_enter_syscall_block();                             \
		else                                                           \
			gmp_enter_syscall();                                   \
		__typeof__(expr) hk_r_ = (expr);                               \
		gmp_exit_syscall();                                            \
		hk_r_;                                                         \
	})

#endif
