/* File I/O that holds no thread (design.md §11, §34): one io_uring per P.
 *
 * gmp_pread and gmp_pwrite, and gmp_read and gmp_write on a regular file or
 * a block device, come here (io.c hands them over after it has taken its
 * reference on the descriptor). A task submits its operation to the ring of
 * the P it runs on and parks; whoever reaps the completion (findrunnable
 * before the network poller, or the M blocked in epoll, woken through the
 * eventfd every ring signals) readies it. Without a ring (no liburing at
 * build time, a kernel that refuses io_uring, GMP_IO_URING=off) and for
 * callers that are not tasks, the plain system call runs, wrapped in
 * gmp_enter_syscall/gmp_exit_syscall for a task. See uring.c.
 */
#ifndef GMP_URING_H
#define GMP_URING_H

#include <sys/types.h>

#include "internal.h"
#include "pollfd.h"

/* What gmp__file_io returns for a descriptor that is neither a regular
 * file nor a block device: the caller goes its own way (the poller). */
#define GMP__NOT_FILE ((ssize_t)INT64_MIN)

enum {
	GMP__FILE_READ = 0,   /* read(2): the file offset, advanced */
	GMP__FILE_WRITE = 1,  /* write(2) of all n bytes, the offset */
	GMP__FILE_PREAD = 2,  /* pread(2) at off; the offset left alone */
	GMP__FILE_PWRITE = 3, /* pwrite(2) of all n bytes at off */
};

/* One file operation on fd, whose reference pd the caller holds, for the
 * caller (task: a running task inside the runtime, which may park; else a
 * thread that blocks). Returns what the libc call returns (-errno for -1),
 * or GMP__NOT_FILE for READ and WRITE when fd is not a regular file or a
 * block device (learnt with fstat and kept in the descriptor's kind).
 * PREAD and PWRITE on anything else run the plain call and return its
 * answer (-ESPIPE, -EISDIR, ...). */
ssize_t gmp__file_io(gmp__pd *pd, int fd, int how, void *buf, size_t n,
		     int64_t off, bool task);

/* gmp_init, once the poller exists: decides whether the ring is used
 * (GMP_IO_URING, the build, a probe of the kernel made once per process)
 * and, if so, makes the completion eventfd and has epoll watch it. Never
 * fails: without a ring every call takes the system call path. */
void gmp__uring_start(void);

/* gmp_shutdown, every task ended, before the Ps are freed: closes every
 * P's ring and the eventfd. */
void gmp__uring_stop(void);

/* In the child of fork(), before sched is cleared: forgets the parent's
 * rings (unmaps them and closes the copies of their descriptors) and the
 * eventfd; the child has no ring until its gmp_init. */
void gmp__uring_forked(void);

/* Reaps every ring's completions (any thread, no locks held): appends the
 * tasks they ready to q, still WAITING. Returns how many. Cheap when no
 * operation is in flight. */
int gmp__uring_reap(gmp__gqueue *q);

/* netpoll.c: the epoll cookie of the completion eventfd; when epoll
 * reports it, gmp__uring_evfd_ready consumes the count and reaps. */
extern char gmp__uring_cookie;
int gmp__uring_evfd_ready(gmp__gqueue *q);

/* gmp_close (pollfd.c), with CLOSING set and its own reference held:
 * cancels every operation in flight on fd in every ring. Their tasks
 * return -EBADF, unless the operation had completed. */
void gmp__uring_cancel_fd(int fd);

/* Operations completed through the rings (gmp_stats.uring_ops). */
uint64_t gmp__uring_ops(void);

#endif
