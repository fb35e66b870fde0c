/* Poll descriptors: what the runtime knows about each file descriptor that
 * the I/O calls (io.c) have used. The network poller's half of Go's
 * pollDesc (runtime/netpoll.go) and the reference count of Go's fdMutex
 * (internal/poll/fd_mutex.go), in one object per descriptor number.
 *
 * io.c brackets every call on fd with gmp__pd_acquire/gmp__pd_release
 * (the reference that keeps gmp_close from closing the number under it),
 * makes the system call, and on EAGAIN waits here: a task in the poller
 * (gmp__pd_wait), any other caller in poll(2) (gmp__pd_wait_thread).
 * design.md §30 explains the states and the protocols.
 */
#ifndef GMP_POLLFD_H
#define GMP_POLLFD_H

#include "internal.h"

typedef struct gmp__pd gmp__pd;

/* What one I/O call knows about its descriptor while it runs: the
 * generation of the file it works on (learnt when it first registers with
 * the poller), so that it can tell when the number has come to mean
 * another file, and the edge count before its latest attempt. Lives on
 * the caller's stack. */
typedef struct gmp__pd_op {
	uint32_t seq;   /* the file's generation, once armed */
	uint32_t edges; /* the descriptor's edge count before the call's
			   latest attempt (gmp__pd_snapshot) */
	bool armed;     /* registration checked during this call */
	bool trusted;   /* parked on a registration checked earlier (a
			   later check may replace it: see pollfd.c) */
} gmp__pd_op;

enum { GMP__PD_READ = 0, GMP__PD_WRITE = 1 };

/* What kind of file a descriptor is, as far as gmp_read and gmp_write
 * care (a racy hint, set and corrected by the calls themselves from their
 * results; see io.c). */
enum {
	GMP__PD_KIND_UNKNOWN = 0,
	GMP__PD_KIND_SOCKET = 1,       /* a socket of a type not asked yet */
	GMP__PD_KIND_STREAM = 2,       /* a SOCK_STREAM socket */
	GMP__PD_KIND_SOCKET_OTHER = 3, /* a socket of another type */
	GMP__PD_KIND_OTHER = 4,        /* not a socket */
	GMP__PD_KIND_FILE = 5          /* a regular file or a block device
					  (io.c: file_io) */
};

/* Whether gmp_close has begun on the descriptor (acquire). */
bool gmp__pd_closing(const gmp__pd *pd);

/* Takes a reference on fd's descriptor, creating it on first use. Returns
 * it, or NULL with *err set: -EBADF for a negative fd or one being
 * gmp_close()d, -EMFILE beyond the table (fd >= GMP__PD_MAX_FD), -ENOMEM. */
gmp__pd *gmp__pd_acquire(int fd, int *err);

/* fd's descriptor, made on first use, without a reference (descriptors
 * are never freed): for what may be read racily (the edge count, the
 * drained-read state). NULL with *err as gmp__pd_acquire's. */
gmp__pd *gmp__pd_lookup(int fd, int *err);

/* Drops the reference. The last one out after a gmp_close closes the
 * descriptor. Never blocks. */
void gmp__pd_release(gmp__pd *pd);

/* Records in op the descriptor's edge count; a task calls it before each
 * attempt at a system call that may end in EAGAIN, so that gmp__pd_wait
 * can tell whether readiness came after the attempt. One load. */
void gmp__pd_snapshot(gmp__pd *pd, gmp__pd_op *op);

/* A stream socket's receive queue was empty when a task's read returned
 * short (fewer bytes than asked): gmp__pd_drained_at records that, with
 * the edge count the reader snapshot before its read. gmp__pd_drained
 * says whether no edge has come since, i.e. the queue is still empty (any
 * data that arrived since made an edge): then a task may skip straight to
 * gmp__pd_wait, with op's snapshot set to that count, instead of making a
 * read that would only fail with EAGAIN. */
void gmp__pd_drained_at(gmp__pd *pd, const gmp__pd_op *op);
bool gmp__pd_drained(gmp__pd *pd, gmp__pd_op *op);

/* After an attempt that failed with EAGAIN (snapshot taken before it), a
 * task waits until the descriptor may be ready for `mode` (a spurious
 * return is possible: retry the call, and on EAGAIN wait again). Returns
 * 0, -ETIMEDOUT when mode's deadline (gmp_set_deadline) has passed (the
 * wait ends when it passes; the retry after it reports it), -EBADF when
 * gmp_close'd (or the number now names another file), or -errno when the
 * descriptor cannot be registered with epoll. A switch point. Call from a
 * task only. */
int gmp__pd_wait(gmp__pd *pd, int mode, gmp__pd_op *op);

/* Any other caller: blocks the thread in poll(2) until fd is ready for
 * `events` (poll bits), gmp_close wakes it, or the absolute deadline
 * (gmp__nanotime; < 0 none) passes. mode (GMP__PD_READ/WRITE, or -1 for
 * none) names the direction whose gmp_set_deadline deadline also applies,
 * changes made while it waits included. Returns the ready bits (> 0), 0
 * at `deadline`, -ETIMEDOUT at mode's deadline, or -errno (-EBADF when
 * closed). */
int gmp__pd_wait_thread(gmp__pd *pd, int events, int64_t deadline, int mode);

/* gmp_set_deadline: sets the deadline (absolute gmp__nanotime, 0 none;
 * negative means long past) of each direction in how (bit 1 << GMP__PD_*)
 * and sends every call waiting in it to look at the new one. No system
 * call, but the first time a descriptor is seen (one fcntl: -EBADF if the
 * number is not open). Returns 0 or -EBADF. */
int gmp__pd_set_deadline(gmp__pd *pd, int how, int64_t deadline);

/* gmp_poll_fd for a task: the ready bits, 0 at the deadline (< 0: none),
 * or -errno. A switch point. */
int gmp__pd_poll_task(gmp__pd *pd, int events, int64_t deadline);

/* poll(2) on fd without blocking: the ready bits (> 0), 0, or -errno
 * (-EBADF for a bad descriptor, where poll(2) says POLLNVAL). errno is
 * left alone. */
int gmp__poll_now(int fd, int events);

/* gmp_close: wakes every waiter with -EBADF, unregisters, and closes fd
 * once no call uses it. Returns close(2)'s result as 0 / -errno (0 if
 * another caller performs the close later), -EBADF if fd is already being
 * closed. A switch point (it may wait for woken callers to leave). */
int gmp__pd_close(int fd);

/* In the child of fork(): forgets every reference, waiter, registration
 * and thread eventfd of the parent's (see pollfd.c). fork.c calls it. */
void gmp__pd_forked(void);

/* Checks now, with a system call, that the poller watches the file behind
 * pd's number (what a task's park otherwise takes on trust and checks
 * later), and records its generation in op. For a file the runtime did
 * not create but knows is new to this call, such as the socket gmp_connect
 * is connecting. Returns 0 or -errno (-EBADF: closing). Tasks only. */
int gmp__pd_arm(gmp__pd *pd, gmp__pd_op *op);

/* gmp_accept made fd, a new file (a socket of `kind`): resets its
 * descriptor for it, waking with -EBADF any task still parked on the
 * number's old file, and for a non-blocking one (`nonblock`) registers it
 * with the poller at once, so that its calls' parks need no check. */
void gmp__pd_accepted(int fd, bool nonblock, int kind);

/* sysmon: makes the deferred checks of registrations that are due at
 * `now` (gmp__nanotime), readying through gmp__injectglist the tasks a
 * changed file wakes. Returns when the next check is due (0: none). Only
 * sysmon calls it. */
int64_t gmp__pd_watch_run(int64_t now);

/* When the next deferred check is due (0: none); lock-free. */
int64_t gmp__pd_watch_next(void);

/* ---- for the hook library (hookrt.c, design.md §32) ---- */

/* gmp__pd_wait with a deadline of the call's own (absolute gmp__nanotime,
 * < 0 none) beside gmp_set_deadline's: returns 0 when it has passed too
 * (the caller looks at its clock), and -EPERM for a descriptor epoll
 * cannot watch instead of waiting on it in poll(2). A switch point; tasks
 * only. */
int gmp__pd_wait_until(gmp__pd *pd, int mode, gmp__pd_op *op, int64_t deadline);

/* A task waits until the poller reports fd ready for poll(2) bits
 * `events` (or an error or hang-up), the deadline passes, or an edge has
 * come since op's snapshot: the ready bits it saw (> 0), 0 (look again),
 * -EBADF, -EPERM (epoll cannot watch the file) or -errno. Ignores
 * gmp_set_deadline. A switch point. */
int gmp__pd_poll_until(gmp__pd *pd, int events, gmp__pd_op *op,
		       int64_t deadline);

/* What gmp__pd_replace returns when the runtime has nothing on fd: the
 * caller closes or dups it itself. */
#define GMP__PD_PLAIN 1

/* The hook library's close (from < 0) and dup3(from, fd, flags): as
 * gmp_close, but the number is closed (or replaced) before it returns,
 * once the calls it woke have left (it always waits for them), and a
 * descriptor the runtime owns is -EBADF. Returns 0 / -errno, or
 * GMP__PD_PLAIN. A switch point (it may wait). */
int gmp__pd_replace(int fd, int from, int flags);

/* close_range(2) with the books kept: numbers the runtime owns are
 * spared, numbers it knows are closed one by one as gmp__pd_replace
 * closes them, the runs between in one system call each. 0 or -errno. */
int gmp__pd_close_range(unsigned lo, unsigned hi, int flags);

/* A new file behind fd, made by a call the hook library saw: forgets what
 * was known of the old one, waking with -EBADF any task still parked on
 * it (as gmp__pd_accepted does). */
void gmp__pd_newfile(int fd);

/* Marks fd as the runtime's own (its epoll instance, eventfds, rings) or
 * no longer; whether it is. */
void gmp__pd_own(int fd, bool own);
bool gmp__pd_owned(int fd);

/* The cached kind. Setting it keeps the non-blocking hint below. */
int gmp__pd_kind(const gmp__pd *pd);
void gmp__pd_set_kind(gmp__pd *pd, int kind);

/* Whether the file now behind the number is known to be non-blocking: a
 * call on it got EAGAIN without asking for MSG_DONTWAIT, or gmp_accept
 * made it so. A racy hint, forgotten with the file (a number found to
 * name a new file, gmp_close, gmp_accept); a program that clears
 * O_NONBLOCK with fcntl later is not noticed (io.c says what that
 * changes). */
bool gmp__pd_nonblock(const gmp__pd *pd);
void gmp__pd_set_nonblock(gmp__pd *pd);

/* The largest descriptor number the table covers, plus one. */
#define GMP__PD_MAX_FD (1 << 24)

#endif
