/* File I/O that holds no thread (design.md §11.5, §31): one io_uring per P,
 * the engine.
 *
 * io.c decides which way a file operation goes (file_io: the ring for a
 * task while gmp__uring_usable says so, else the plain system call) and
 * holds the position locks; here are the rings. A task submits its
 * operation to the ring of the P it runs on and parks; whoever reaps the
 * completion (findrunnable before the network poller, or the M blocked in
 * epoll, woken through the eventfd every ring signals) readies it. See
 * uring.c.
 */
#ifndef GMP_URING_H
#define GMP_URING_H

#include <limits.h>
#include <sys/types.h>

#include "internal.h"
#include "pollfd.h"

/* What gmp__uring_rw returns when the operation was not submitted: the
 * calling task's P has no ring and none can be made. */
#define GMP__URING_NONE INT_MIN

/* Whether file I/O goes through the rings in this run (gmp__uring_start
 * decided so, and no ring has failed to be made since). */
bool gmp__uring_usable(void);

/* One IORING_OP_READ or IORING_OP_WRITE of n bytes at off (-1: the file's
 * current position, used and advanced) on fd, whose reference pd the
 * caller holds, through the ring of the calling task's P: the task parks
 * until the completion is reaped, unless the kernel finished it inside the
 * submission. From a running task inside the runtime only. Returns the
 * operation's result (bytes, or -errno; -EBADF once gmp_close cancelled
 * it), or GMP__URING_NONE. */
int gmp__uring_rw(gmp__pd *pd, int fd, bool write, void *buf, uint32_t n,
		  uint64_t off);

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
