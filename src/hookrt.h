/* The private interface between libgmp and libgmp-hook (design.md §32).
 *
 * libgmp-hook.so interposes libc's blocking calls and needs a little more
 * than gmp.h offers: to know, without a call, whether the thread it runs
 * on is running a task that may park; to wait on a descriptor in the
 * network poller the way libgmp's own I/O calls do, with a timeout of the
 * call's own (SO_RCVTIMEO) beside gmp_set_deadline's; and to close or
 * replace a descriptor (close, dup2, dup3, close_range) while keeping the
 * poller's books, waking the tasks parked on it. This header is that
 * interface, and nothing else: one exported function, gmp_hookrt_v1_,
 * returns a table of offsets and function pointers. The name is not API
 * (gmp.h does not declare it); tests/ecosystem/check_exports.cmake lets
 * exactly this one name through besides gmp.h's.
 *
 * The hook library reads the running task through offsets rather than
 * through libgmp's internal headers, so that a libgmp-hook.so and a
 * libgmp.so built from different trees cannot misread each other: the
 * version and size below must match what the hook was built with, and
 * the hook refuses to run otherwise ("gmp: ...", abort).
 *
 * Who is calling: the thread's M is the word at `tls_m` bytes from the
 * thread pointer (initial-exec TLS, the same offset on every thread); a
 * thread of the program's has none (0). An M runs a task when its `curg`
 * is set; the task may park when its status is `g_running` (not in a
 * gmp_enter_syscall window) and its `inrt` byte is 0: it runs its own
 * code, not libgmp's (libgmp's own system calls in a task are made inside
 * the runtime, and so never park through the hooks). A task that sysmon
 * has detached from its P (design.md §37) is such a task too: the wait
 * functions below enter the runtime, which takes a P back first, as every
 * libgmp call that needs one does.
 */
#ifndef GMP_HOOKRT_H
#define GMP_HOOKRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>

#define GMP__HOOKRT_VERSION 1

/* One hooked call's hold on a descriptor, on the hook's stack: its poll
 * descriptor (and, once fd_hold has taken it, a reference on it, so that
 * a close waits for the call to leave rather than close the number under
 * it), and what the call knows of the descriptor's file (the poller's
 * edge count before its latest attempt, the file's generation). Read and
 * written by libgmp only, but for this: a number's poll descriptor is the
 * same for the life of the process, so the hooks may keep the pd that
 * fd_look found and fill a fresh gmp__hook_fd with it, fd, and op all
 * zeros (nothing known yet) themselves. */
typedef struct gmp__hook_fd {
	void *pd;
	uint64_t op[2];
	int fd;
} gmp__hook_fd;

/* fd_wait's and fd_poll's answer for a descriptor epoll cannot watch (a
 * regular file, a directory): the caller must not wait on it in the
 * poller. */
#define GMP__HOOK_UNPOLLABLE (-EPERM)

/* fd_close's answer when the runtime has nothing on the descriptor (never
 * waited on, no operation in flight): the caller closes it with libc's
 * close, as it would have. */
#define GMP__HOOK_PLAIN 1

typedef struct gmp__hookrt {
	uint32_t version; /* GMP__HOOKRT_VERSION */
	uint32_t size;    /* sizeof(gmp__hookrt) */

	/* Who is calling (see the top). */
	intptr_t tls_m;
	/* gmp_preempt_pending_'s offset from the thread pointer: the hooks
	 * make their calls switch points, as libgmp's I/O calls are, with
	 * one load (gmp.h's inline check would reach it through
	 * __tls_get_addr from a shared library). */
	intptr_t tls_preempt;
	uint32_t m_curg, g_status, g_inrt;
	uint32_t g_running;

	/* The hook library's constructor, once: whether it is active
	 * (GMP_HOOK is on). gmp_hook_active answers from it. Returns 0, or
	 * -EEXIST if another libgmp-hook registered first. */
	int (*attach)(bool active);
	/* Whether a hook library has attached (active or not). */
	bool (*hooked)(void);

	/* fd_look finds fd's poll descriptor, without a reference: enough to
	 * snapshot and to look at the drained-read state before a first
	 * attempt, which needs no hold (a call that does not wait is over
	 * before a close could matter to it). fd_hold takes the reference a
	 * call must hold before it waits (so that a close waits for it to
	 * leave rather than close the number under it), fd_release drops it;
	 * fd_begin is fd_look then fd_hold. 0, or -EBADF (fd < 0, or being
	 * closed), -EMFILE (past the poller's table), -ENOMEM. Any thread;
	 * never switch. */
	int (*fd_look)(int fd, gmp__hook_fd *h);
	int (*fd_hold)(gmp__hook_fd *h);
	int (*fd_begin)(int fd, gmp__hook_fd *h);
	void (*fd_end)(gmp__hook_fd *h);
	/* Before each attempt at a call that may find nothing to do: notes
	 * the descriptor's edge count, so that a wait after EAGAIN returns at
	 * once if readiness came in between. One load. */
	void (*fd_snapshot)(gmp__hook_fd *h);
	/* A stream socket's read returned short (the queue is empty now):
	 * fd_drained_at records it with the edge count of the attempt's
	 * snapshot; fd_drained says whether no edge has come since, so that
	 * a task may skip a read that could only say EAGAIN and go straight
	 * to fd_wait (as io.c's gmp_read does). */
	void (*fd_drained_at)(gmp__hook_fd *h);
	bool (*fd_drained)(gmp__hook_fd *h);
	/* A task only, after an attempt in direction mode (0 read, 1 write)
	 * found nothing to do: parks until the descriptor may be ready, the
	 * absolute deadline (gmp_nanotime's clock; < 0 none) passes, or it
	 * is closed. Returns 0 (attempt again; the caller checks its own
	 * deadline), -ETIMEDOUT when gmp_set_deadline's deadline for the
	 * direction has passed, -EBADF when closed, GMP__HOOK_UNPOLLABLE, or
	 * another -errno from epoll. A switch point. */
	int (*fd_wait)(gmp__hook_fd *h, int mode, int64_t deadline);
	/* A task only: as fd_wait, for poll(2) bits `events`, ignoring
	 * gmp_set_deadline. Returns the ready bits the poller saw (a hint:
	 * the caller asks the kernel for the truth), 0 to look again, -EBADF,
	 * GMP__HOOK_UNPOLLABLE or -errno. A switch point. */
	int (*fd_poll)(gmp__hook_fd *h, int events, int64_t deadline);

	/* close(2) of fd keeping the books: the tasks parked on it wake with
	 * -EBADF, its operations in flight are cancelled, it leaves the
	 * poller, and once those calls have left the number is closed.
	 * Returns close's 0 / -errno, GMP__HOOK_PLAIN when the runtime has
	 * nothing on fd (the caller closes it), -EBADF for a descriptor the
	 * runtime owns (its epoll instance, its eventfds, its rings). Any
	 * thread; a switch point for a task (it may wait for those calls). */
	int (*fd_close)(int fd);
	/* dup3(2) (dup2 with flags 0, oldfd != newfd) with newfd's books
	 * kept as fd_close keeps them: 0, -errno (-EBADF when newfd is the
	 * runtime's), or GMP__HOOK_PLAIN when the runtime has nothing on
	 * newfd (the caller calls libc's dup2 or dup3). */
	int (*fd_dup)(int oldfd, int newfd, int flags);
	/* close_range(2) of [lo, hi] (flags as there), sparing the
	 * runtime's own descriptors and keeping the books of each one in
	 * the range. 0 or -errno. */
	int (*fd_close_range)(unsigned lo, unsigned hi, int flags);
	/* Whether fd is one of the runtime's own descriptors. */
	bool (*fd_owned)(int fd);
	/* A call of the program's made a new file behind fd (socket,
	 * accept, open...): what the poller knew of the number's previous
	 * file no longer holds (tasks still parked on that file, closed
	 * behind the runtime's back, wake with -EBADF). Any thread; never
	 * switches. */
	void (*fd_new)(int fd);
} gmp__hookrt;

/* The one exported name of this interface (defined in hookrt.c). */
const gmp__hookrt *gmp_hookrt_v1_(void);

/* gmp_init (runtime.c): refuses a program that runs a copy of libgmp of
 * its own while the hooks are bound to libgmp.so. libgmp only. */
void gmp__hookrt_check(void);

#endif
