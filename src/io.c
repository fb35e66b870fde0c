/* The I/O calls (design.md §11 is the contract, §30.8 the design):
 * gmp_read, gmp_write, gmp_readv, gmp_writev, gmp_recvfrom, gmp_sendto,
 * gmp_recvmsg, gmp_sendmsg, gmp_accept, gmp_connect, gmp_poll_fd,
 * gmp_pread, gmp_pwrite, gmp_set_deadline and gmp_close; Go's
 * internal/poll.FD, in C. They pair with pollfd.h (the descriptor's
 * reference and the waits), uring.h (the ring engine, to which the files
 * section below sends a regular file's reads and writes, design.md §31)
 * and tls.c (errno).
 *
 * Every call has the same shape: take a reference on the descriptor
 * (-EBADF once gmp_close has begun), then loop: make the system call; on
 * success or a real error, return; on EAGAIN, wait and retry. A task
 * waits in the network poller (gmp__pd_wait), holding no thread; anyone
 * else (a thread of the program, or a task inside a gmp_enter_syscall
 * window) blocks in poll(2) (gmp__pd_wait_thread). Whether a call may
 * block is never decided from a cache of O_NONBLOCK:
 *
 *   on a socket, every attempt is first made with MSG_DONTWAIT, outside
 *   the syscall bracket; only when it finds nothing to do on
 *   a socket not known to be non-blocking (gmp__pd_nonblock, else one
 *   fcntl) does the plain call follow, inside the bracket;
 *   anything else (a pipe, a terminal, a file without the ring) makes
 *   every attempt inside the bracket.
 *
 * Every system call is made through sys.h: the instruction itself outside
 * the sanitizer builds (no cancellation bookkeeping, no errno, and never
 * libgmp-hook's functions, design.md §32.3), returning -errno.
 *
 * errno: a task may move to another thread at every switch point, so
 * every access goes through gmp__errno_get/set (tls.c), and each call
 * restores the caller's errno before it returns.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "pollfd.h"
#include "preempt.h"
#include "sema.h"
#include "sys.h"
#include "uring.h"

/* Regular files and block devices go to file_io (below gmp_pwrite), which
 * learns the kind with an fstat the first time (and every time after for
 * a file: a stale "file" must never send a socket through the ring). */
static inline bool maybe_file(const gmp__pd *pd)
{
	int kind = gmp__pd_kind(pd);
	return kind == GMP__PD_KIND_UNKNOWN || kind == GMP__PD_KIND_FILE;
}

/* What file_io returns for a descriptor that is neither a regular file nor
 * a block device: the caller goes its own way (the poller). */
#define NOT_FILE ((ssize_t)INT64_MIN)

enum {
	FILE_READ = 0,   /* read(2): the file offset, advanced */
	FILE_WRITE = 1,  /* write(2) of all n bytes, the offset */
	FILE_PREAD = 2,  /* pread(2) at off; the offset left alone */
	FILE_PWRITE = 3, /* pwrite(2) of all n bytes at off */
};

/* One file operation on fd, whose reference pd the caller holds, for the
 * caller (task: a running task inside the runtime, which may park; else a
 * thread that blocks). Returns what the libc call returns (-errno for -1),
 * or NOT_FILE for READ and WRITE when fd is not a regular file or a block
 * device (learnt with fstat and kept in the descriptor's kind). PREAD and
 * PWRITE on anything else run the plain call and return its answer
 * (-ESPIPE, -EISDIR, ...). */
static ssize_t file_io(gmp__pd *pd, int fd, int how, void *buf, size_t n,
		       int64_t off, bool task);

/* One call in progress. */
struct io {
	gmp__pd *pd;
	int fd;
	bool task;       /* parks in the poller; brackets its syscalls */
	gmp_g *g;        /* the task, inside the runtime (preempt.h) */
	uint8_t was;     /* its mark before the call */
	int saved_errno; /* the caller's, restored on return */
	gmp__pd_op op;
};

static int io_begin(struct io *io, int fd)
{
	io->saved_errno = gmp__errno_get();
	io->fd = fd;
	io->g = gmp__enter_task(&io->was);
	io->task = io->g != NULL; /* a task that may park */
	io->op.seq = 0;
	io->op.edges = 0;
	io->op.armed = false;
	io->op.trusted = false;
	if (io->task)
		/* I/O calls are switch points (design.md §2.2) */
		gmp_preempt_point();
	int err = 0;
	io->pd = gmp__pd_acquire(fd, &err);
	return err;
}

static ssize_t io_end(struct io *io, ssize_t result)
{
	if (io->pd)
		gmp__pd_release(io->pd);
	gmp__leave_task(io->g, io->was);
	gmp__errno_set(io->saved_errno);
	return result;
}

/* Before each attempt: a task notes the descriptor's edge count (so that
 * a wait after EAGAIN can tell whether readiness came since), then enters
 * the syscall bracket. */
static inline void sys_enter(struct io *io)
{
	if (io->task) {
		gmp__pd_snapshot(io->pd, &io->op);
		gmp_enter_syscall();
	}
}

static inline void sys_exit(const struct io *io)
{
	if (io->task)
		gmp_exit_syscall();
}

/* Waits until the descriptor may be ready for mode; 0 (retry the call)
 * or -errno. */
static int io_wait(struct io *io, int mode)
{
	if (io->task)
		return gmp__pd_wait(io->pd, mode, &io->op);
	int r = gmp__pd_wait_thread(
		io->pd, mode == GMP__PD_READ ? POLLIN : POLLOUT, -1, mode);
	return r < 0 ? r : 0;
}

/* ---- socket calls that cannot block ------------------------------------------------ */

/* recvfrom(2), sendto(2), recvmsg(2) and sendmsg(2) with MSG_DONTWAIT
 * added, outside the syscall bracket (see the top). Return the result or
 * -errno, and leave errno alone. */
static inline ssize_t nb_recvfrom(int fd, void *buf, size_t n, int flags,
				  struct sockaddr *addr, socklen_t *len)
{
	return gmp__sys_recvfrom(fd, buf, n, flags | MSG_DONTWAIT, addr, len);
}

static inline ssize_t nb_sendto(int fd, const void *buf, size_t n, int flags,
				const struct sockaddr *addr, socklen_t len)
{
	return gmp__sys_sendto(fd, buf, n, flags | MSG_DONTWAIT, addr, len);
}

static inline ssize_t nb_recvmsg(int fd, struct msghdr *m, int flags)
{
	return gmp__sys_recvmsg(fd, m, flags | MSG_DONTWAIT);
}

static inline ssize_t nb_sendmsg(int fd, const struct msghdr *m, int flags)
{
	return gmp__sys_sendmsg(fd, m, flags | MSG_DONTWAIT);
}

/* Whether a receive with the caller's flags tries the call that cannot
 * block first. Not with MSG_WAITALL on a socket that may be blocking:
 * there the plain call waits for every byte asked, where MSG_DONTWAIT
 * would return the part already there. */
static inline bool nb_first(const struct io *io, int flags)
{
	return !(flags & MSG_WAITALL) || gmp__pd_nonblock(io->pd);
}

/* The attempt found nothing to do and the hint is not set: whether the
 * socket is non-blocking now, asked of the descriptor (F_GETFL cannot
 * block, so it needs no bracket); if so, the hint is set. Once per file
 * on a non-blocking socket (a socketpair, a socket the program made and
 * connected itself); on a blocking one, once per call that will block. */
static __attribute__((noinline)) bool probe_nonblock(const struct io *io)
{
	int fl = gmp__sys_fcntl(io->fd, F_GETFL, 0);
	if (fl < 0 || !(fl & O_NONBLOCK))
		return false; /* the plain call follows, and answers */
	gmp__pd_set_nonblock(io->pd);
	return true;
}

/* After a call that cannot block returned r on a socket: whether r is the
 * attempt's answer, or the plain call must follow in the bracket (it
 * found nothing to do and the socket is not known to be non-blocking;
 * see the top). `flags` are the caller's: with MSG_DONTWAIT among them,
 * EAGAIN is the answer. */
static inline bool nb_final(const struct io *io, ssize_t r, int flags)
{
	return r != -EAGAIN || (flags & MSG_DONTWAIT) ||
	       gmp__pd_nonblock(io->pd) || probe_nonblock(io);
}

/* The plain call in the bracket answered r: EAGAIN without MSG_DONTWAIT
 * in the caller's flags proves the descriptor non-blocking. */
static inline void learn_nonblock(struct io *io, ssize_t r, int flags)
{
	if (r == -EAGAIN && !(flags & MSG_DONTWAIT))
		gmp__pd_set_nonblock(io->pd);
}

/* ---- gmp_read ----------------------------------------------------------------- */

static ssize_t sys_read(struct io *io, void *buf, size_t n)
{
	sys_enter(io);
	ssize_t r = gmp__sys_read(io->fd, buf, n);
	sys_exit(io);
	return r;
}

/* One attempt at gmp_read: on a socket (as far as we know), the receive
 * that cannot block first (see the top); a stale kind (ENOTSOCK) is
 * corrected and the plain read made instead. */
static ssize_t read_once(struct io *io, void *buf, size_t n)
{
	int kind = gmp__pd_kind(io->pd);
	if (kind != GMP__PD_KIND_OTHER && kind != GMP__PD_KIND_UNKNOWN) {
		if (io->task)
			gmp__pd_snapshot(io->pd, &io->op);
		ssize_t r = nb_recvfrom(io->fd, buf, n, 0, NULL, NULL);
		if (r != -ENOTSOCK) {
			if (nb_final(io, r, 0))
				return r;
		} else {
			gmp__pd_set_kind(io->pd, GMP__PD_KIND_OTHER);
		}
	}
	ssize_t r = sys_read(io, buf, n);
	learn_nonblock(io, r, 0);
	return r;
}

/* Learns whether a socket is a stream, once per file (a getsockopt). */
static int learn_type(struct io *io, int kind)
{
	int type = 0;
	socklen_t len = sizeof type;
	int r = gmp__sys_getsockopt(io->fd, SOL_SOCKET, SO_TYPE, &type, &len);
	if (r == 0)
		kind = type == SOCK_STREAM ? GMP__PD_KIND_STREAM
					   : GMP__PD_KIND_SOCKET_OTHER;
	else if (r == -ENOTSOCK)
		kind = GMP__PD_KIND_OTHER;
	else
		return kind;
	gmp__pd_set_kind(io->pd, kind);
	return kind;
}

/* A task's read returned short: on a stream socket that means the receive
 * queue was empty then, which lets the next read skip its attempt while
 * no edge has come since (gmp__pd_drained). Only a stream: a datagram
 * socket returns one datagram however many are queued, and a terminal one
 * line. */
static void note_short_read(struct io *io)
{
	int kind = gmp__pd_kind(io->pd);
	if (kind == GMP__PD_KIND_UNKNOWN || kind == GMP__PD_KIND_SOCKET)
		kind = learn_type(io, kind);
	if (kind == GMP__PD_KIND_STREAM)
		gmp__pd_drained_at(io->pd, &io->op);
}

/* read(2). A task parks on EAGAIN until the poller reports the descriptor
 * readable; any other caller blocks its thread in poll(2). Returns the
 * byte count (0 at end of file), or -errno: -EBADF for a bad descriptor
 * or one gmp_close()d meanwhile. EINTR is retried, never returned (as Go
 * does). From a task or any thread; a switch point.
 *
 * A request-response server reads a request (short: the socket is
 * drained), writes the response, and reads again, when the socket is
 * almost always still empty. On a stream socket a task skips that read,
 * which could only fail with EAGAIN, and goes straight to the poller, as
 * long as no readiness edge has come since its last short read (see
 * gmp__pd_drained): one system call fewer per request. */
GMP_EXTERN ssize_t gmp_read(int fd, void *buf, size_t n)
{
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	if (GMP__UNLIKELY(maybe_file(io.pd))) {
		ssize_t r = file_io(io.pd, fd, FILE_READ, buf, n, 0, io.task);
		if (r != NOT_FILE)
			return io_end(&io, r);
	}
	bool skip = io.task && n > 0 &&
		    gmp__pd_kind(io.pd) == GMP__PD_KIND_STREAM;
	for (;;) {
		ssize_t r;
		bool skipped = false;
		if (skip && gmp__pd_drained(io.pd, &io.op)) {
			r = -EAGAIN; /* what the read would say */
			skipped = true;
		} else {
			r = read_once(&io, buf, n);
			if (r > 0 && (size_t)r < n && io.task)
				note_short_read(&io);
		}
		skip = false; /* after a wait, always read */
		if (r == -EINTR)
			continue;
		if (r != -EAGAIN)
			return io_end(&io, r);
		if ((err = io_wait(&io, GMP__PD_READ)) == -ETIMEDOUT && skipped)
			continue; /* data the poller has not reported yet is
				     still returned: read once for real */
		if (err)
			return io_end(&io, err);
	}
}

/* ---- gmp_write ---------------------------------------------------------------- */

/* writev(2) to something that is not a socket, with no SIGPIPE: the signal
 * a write to a pipe without readers raises is directed at the writing
 * thread, so we block it on this thread around the call, take it back
 * with sigtimedwait if our write raised it, and restore the mask. If the
 * caller had SIGPIPE blocked already, a pending one is left pending, just
 * as a plain write would leave it. (A SIGPIPE sent to the whole process
 * by kill() at that very instant could be taken too; the classic caveat
 * of this technique.) Runs inside the syscall bracket, so on one thread. */
static ssize_t writev_nosigpipe(int fd, const struct iovec *iov, int n)
{
	sigset_t pipe, old;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &old);
	ssize_t r = gmp__sys_writev(fd, iov, n);
	if (r < 0) {
		if (r == -EPIPE && !sigismember(&old, SIGPIPE)) {
			static const struct timespec zero = { 0, 0 };
			while (sigtimedwait(&pipe, NULL, &zero) < 0 &&
			       gmp__errno_get() == EINTR)
				;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

/* What a send on a descriptor of cached kind `kind` taught us: ENOTSOCK
 * means not a socket (write from now on), any other outcome but EBADF a
 * socket. Returns the kind to go on with. */
static int learn_from_send(struct io *io, int kind, ssize_t r)
{
	if (r == -ENOTSOCK) {
		gmp__pd_set_kind(io->pd, GMP__PD_KIND_OTHER);
		return GMP__PD_KIND_OTHER;
	}
	if (kind == GMP__PD_KIND_UNKNOWN && r != -EBADF)
		gmp__pd_set_kind(io->pd, GMP__PD_KIND_SOCKET);
	return kind;
}

/* One attempt. Sockets get send(MSG_NOSIGNAL), which raises no SIGPIPE at
 * all (first the one that cannot block, see the top); everything else
 * writev_nosigpipe. Which is which is learnt from the
 * calls themselves and cached in the descriptor: send on a non-socket
 * fails with ENOTSOCK (then we use write from now on), and any other
 * outcome but EBADF means a socket. If the number is reused for the other
 * kind, the cache corrects itself the same way (a socket reached through
 * writev_nosigpipe is merely slower), so no fstat is ever needed. */
static ssize_t sys_write(struct io *io, const void *buf, size_t n)
{
	int kind = gmp__pd_kind(io->pd);
	ssize_t r = 0;
	if (kind != GMP__PD_KIND_OTHER) {
		if (io->task)
			gmp__pd_snapshot(io->pd, &io->op);
		r = nb_sendto(io->fd, buf, n, MSG_NOSIGNAL, NULL, 0);
		kind = learn_from_send(io, kind, r);
		if (kind != GMP__PD_KIND_OTHER) {
			if (nb_final(io, r, 0))
				return r;
			sys_enter(io);
			r = gmp__sys_sendto(io->fd, buf, n, MSG_NOSIGNAL, NULL,
					    0);
			sys_exit(io);
			learn_nonblock(io, r, 0);
			return r;
		}
	}
	struct iovec one = { .iov_base = (void *)buf, .iov_len = n };
	sys_enter(io);
	r = writev_nosigpipe(io->fd, &one, 1);
	sys_exit(io);
	return r;
}

/* One attempt of a write-all loop at what is left after `done` bytes:
 * what the system call answered, or -errno. `arg` is the call's own
 * description of what to write. */
typedef ssize_t (*write_attempt)(struct io *io, const void *arg, size_t done);

/* The loop of gmp_write, gmp_writev, gmp_sendto and gmp_sendmsg, after
 * io_begin: attempts until all `total` bytes are written, going on after
 * a short write with the rest, and after EAGAIN waiting (a task parks, a
 * thread blocks in poll(2)) unless the caller's flags say MSG_DONTWAIT. A
 * 0 from the call (nothing to write, or a device that takes no more)
 * ends it too. Returns through io_end: the total; if an error stops it
 * after some bytes, that count; else -errno. SIGPIPE is each attempt's
 * business (MSG_NOSIGNAL, or writev_nosigpipe). Inline in each caller,
 * where `attempt` is a constant and inlines too (each is always_inline:
 * the loop of each call compiles as it did when it was written out). */
static inline __attribute__((always_inline)) ssize_t
write_all(struct io *io, size_t total, int flags, write_attempt attempt,
	  const void *arg)
{
	size_t done = 0;
	for (;;) {
		ssize_t r = attempt(io, arg, done);
		if (r > 0) {
			done += (size_t)r;
			if (done == total)
				break;
			continue;
		}
		if (r == 0)
			break;
		if (r == -EINTR)
			continue;
		if (r == -EAGAIN && !(flags & MSG_DONTWAIT) &&
		    (r = io_wait(io, GMP__PD_WRITE)) == 0)
			continue;
		return io_end(io, done ? (ssize_t)done : r);
	}
	return io_end(io, (ssize_t)done);
}

/* What gmp_write writes, and its attempt at the rest after `done`. */
struct write_buf {
	const void *buf;
	size_t n;
};

static inline __attribute__((always_inline)) ssize_t
write_attempt_buf(struct io *io, const void *arg, size_t done)
{
	const struct write_buf *b = arg;
	return sys_write(io, (const char *)b->buf + done, b->n - done);
}

/* write(2) of all n bytes: loops over partial writes, parking (a task) or
 * blocking in poll(2) (anyone else) whenever the descriptor is full.
 * Returns n; if an error stops it after some bytes, that count; else
 * -errno (-EINVAL for n > SSIZE_MAX). Never raises SIGPIPE: on a socket it
 * uses send(MSG_NOSIGNAL), elsewhere it blocks and consumes the signal
 * (see writev_nosigpipe); a reader that is gone is -EPIPE. From a task or
 * any thread; a switch point. */
GMP_EXTERN ssize_t gmp_write(int fd, const void *buf, size_t n)
{
	if (n > SSIZE_MAX)
		return -EINVAL;
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	if (GMP__UNLIKELY(maybe_file(io.pd))) {
		ssize_t r = file_io(io.pd, fd, FILE_WRITE, (void *)buf, n, 0,
				    io.task);
		if (r != NOT_FILE)
			return io_end(&io, r);
	}
	struct write_buf b = { buf, n };
	return write_all(&io, n, 0, write_attempt_buf, &b);
}

/* ---- gmp_pread, gmp_pwrite ------------------------------------------------------ */

/* pread(2) and pwrite(2) (gmp.h): file_io does the work, through the ring
 * of the task's P or the wrapped system call. */
GMP_EXTERN ssize_t gmp_pread(int fd, void *buf, size_t n, off_t off)
{
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	return io_end(&io, file_io(io.pd, fd, FILE_PREAD, buf, n, (int64_t)off,
				   io.task));
}

GMP_EXTERN ssize_t gmp_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (n > SSIZE_MAX)
		return -EINVAL;
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	return io_end(&io, file_io(io.pd, fd, FILE_PWRITE, (void *)buf, n,
				   (int64_t)off, io.task));
}

/* ---- files: the ring or the system call ------------------------------------------ */

/* Which way a file operation goes (design.md §31): through the io_uring of
 * the task's P (uring.c, the engine) or as the plain system call, and the
 * position locks that keep gmp_read and gmp_write atomic with respect to
 * one another. */

/* The most one read(2) or write(2) moves (Linux's MAX_RW_COUNT). */
#define RW_MAX 0x7ffff000u

static ssize_t sys_once(int fd, int how, void *buf, size_t n, int64_t off)
{
	switch (how) {
	case FILE_READ:
		return gmp__sys_read(fd, buf, n);
	case FILE_WRITE:
		return gmp__sys_write(fd, buf, n);
	case FILE_PREAD:
		return gmp__sys_pread(fd, buf, n, (off_t)off);
	default:
		return gmp__sys_pwrite(fd, buf, n, (off_t)off);
	}
}

/* One attempt, wrapped for a task (design.md §4). */
static ssize_t sys_call(int fd, int how, void *buf, size_t n, int64_t off,
			bool task)
{
	if (task)
		gmp_enter_syscall();
	ssize_t r;
	do
		r = sys_once(fd, how, buf, n, off);
	while (r == -EINTR);
	if (task)
		gmp_exit_syscall();
	return r;
}

/* read(2) and write(2) use and advance the file offset. The ring does the
 * same for an offset of -1 (IORING_FEAT_RW_CUR_POS, Linux 5.6; without it
 * no ring is used), but without the file's position lock that read(2)
 * takes, so two operations on one open file could read the same bytes.
 * gmp_read and gmp_write on a file therefore take one of 64 locks picked
 * by the descriptor number for every engine, which makes them as atomic
 * with respect to one another as read and write are. O_APPEND is the
 * kernel's, as for write(2).
 *
 * A lock is a runtime semaphore (sema.h) with a count of one: a task
 * parks on it, any other caller blocks its thread, and the runtime's own
 * wait takes no public gmp_mutex. As Go's poll.fdMutex, which sleeps on
 * the same semaphores, a release does not hand the lock over: whoever
 * asks first takes it. The acquire's CAS (acquire) pairs with the
 * release's full increment, so an operation begins after the one before
 * it on the lock has completed. Each word sits apart from the next, so
 * that no two share a root of the semaphore table. */
static struct {
	volatile uint32_t sema; /* 1: free; 0: held */
	uint32_t unused;
} pos_locks[64] = { [0 ... 63] = { .sema = 1 } };

static void pos_lock(int fd)
{
	gmp__semacquire(&pos_locks[(unsigned)fd % 64].sema, false,
			GMP__WAIT_MUTEX);
}

static void pos_unlock(int fd)
{
	gmp__semrelease(&pos_locks[(unsigned)fd % 64].sema, false);
}

/* One attempt by the best engine: the ring for a task that has one (a
 * result of -EAGAIN there means an O_NONBLOCK file the ring would not
 * wait for: then the system call, which does), else the system call. */
static ssize_t attempt(gmp__pd *pd, int fd, int how, void *buf, size_t n,
		       int64_t off, bool task)
{
	if (task && gmp__uring_usable()) {
		bool wr = how == FILE_WRITE || how == FILE_PWRITE;
		uint64_t o = how == FILE_READ || how == FILE_WRITE
				     ? (uint64_t)-1
				     : (uint64_t)off;
		int r = gmp__uring_rw(pd, fd, wr, buf,
				      n > RW_MAX ? RW_MAX : (uint32_t)n, o);
		if (r != GMP__URING_NONE && r != -EAGAIN && r != -EINTR)
			return r;
	}
	return sys_call(fd, how, buf, n, off, task);
}

/* Whether fd is a regular file or a block device (fstat, which also
 * corrects the descriptor's cached kind); -errno if fstat fails. */
static int is_file(gmp__pd *pd, int fd)
{
	struct stat st;
	int saved = gmp__errno_get();
	int r = fstat(fd, &st);
	if (r < 0) {
		r = -gmp__errno_get();
		gmp__errno_set(saved);
		return r;
	}
	gmp__errno_set(saved);
	int kind = GMP__PD_KIND_OTHER;
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
		kind = GMP__PD_KIND_FILE;
	else if (S_ISSOCK(st.st_mode))
		kind = GMP__PD_KIND_SOCKET;
	int was = gmp__pd_kind(pd);
	if (kind != was &&
	    !(kind == GMP__PD_KIND_SOCKET &&
	      (was == GMP__PD_KIND_STREAM || was == GMP__PD_KIND_SOCKET_OTHER)))
		gmp__pd_set_kind(pd, kind);
	return kind == GMP__PD_KIND_FILE;
}

static ssize_t file_io(gmp__pd *pd, int fd, int how, void *buf, size_t n,
		       int64_t off, bool task)
{
	bool positioned = how == FILE_PREAD || how == FILE_PWRITE;
	if (positioned && off < 0)
		return -EINVAL;
	int f = is_file(pd, fd);
	if (f < 0)
		return f;
	if (!f) {
		if (!positioned)
			return NOT_FILE;
		/* -ESPIPE, -EISDIR, ...: whatever the kernel says */
		return sys_call(fd, how, buf, n, off, task);
	}
	bool wr = how == FILE_WRITE || how == FILE_PWRITE;
	if (!positioned)
		pos_lock(fd);
	ssize_t r;
	if (!wr) {
		r = attempt(pd, fd, how, buf, n, off, task);
	} else {
		/* all n bytes, as gmp_write promises; stopped by an error
		 * after some, that count */
		size_t done = 0;
		for (;;) {
			r = attempt(pd, fd, how, (char *)buf + done, n - done,
				    off + (int64_t)done, task);
			if (r > 0) {
				done += (size_t)r;
				if (done < n)
					continue;
			}
			if (r >= 0 || done)
				r = (ssize_t)done;
			break;
		}
	}
	if (!positioned)
		pos_unlock(fd);
	return r;
}

/* ---- gmp_accept --------------------------------------------------------------- */

static int sys_accept(struct io *io, struct sockaddr *addr, socklen_t *len,
		      int flags)
{
	sys_enter(io);
	int r = gmp__sys_accept4(io->fd, addr, len, flags);
	sys_exit(io);
	return r;
}

/* What an accepted socket is: of its listener's type, which is learnt
 * once per listening file. */
static int accepted_kind(struct io *io)
{
	int kind = gmp__pd_kind(io->pd);
	if (kind == GMP__PD_KIND_UNKNOWN || kind == GMP__PD_KIND_SOCKET)
		kind = learn_type(io, kind);
	return kind == GMP__PD_KIND_STREAM || kind == GMP__PD_KIND_SOCKET_OTHER
		       ? kind
		       : GMP__PD_KIND_SOCKET;
}

/* accept(2): waits (parking a task) for a connection and returns its new
 * descriptor, or -errno.
 *
 * The new descriptor inherits the listener's O_NONBLOCK (as accept does
 * on the BSDs): accepted from a non-blocking listener, it is non-blocking,
 * so gmp_read and gmp_write on it park tasks in the poller, which is what
 * a server built on tasks wants (Go makes every accepted socket
 * non-blocking); from a blocking listener it is blocking, as Linux's
 * accept(2) would give, and the calls on it hold a thread while they
 * block. It is not close-on-exec (accept(2)'s default). ECONNABORTED (a
 * connection reset while queued) and EINTR are retried. From a task or any
 * thread; a switch point. */
GMP_EXTERN int gmp_accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return (int)io_end(&io, err);
	int fl = gmp__sys_fcntl(fd, F_GETFL, 0);
	if (fl < 0)
		return (int)io_end(&io, fl);
	int flags = fl & O_NONBLOCK ? SOCK_NONBLOCK : 0;
	socklen_t len0 = len ? *len : 0;
	for (;;) {
		if (len)
			*len = len0;
		int r = sys_accept(&io, addr, len, flags);
		if (r == -EINTR || r == -ECONNABORTED)
			continue;
		if (r >= 0)
			gmp__pd_accepted(r, flags != 0, accepted_kind(&io));
		if (r != -EAGAIN)
			return (int)io_end(&io, r);
		if ((err = io_wait(&io, GMP__PD_READ)) != 0)
			return (int)io_end(&io, err);
	}
}

/* ---- gmp_connect -------------------------------------------------------------- */

static int sys_connect(struct io *io, const struct sockaddr *addr,
		       socklen_t len)
{
	sys_enter(io);
	int r = gmp__sys_connect(io->fd, addr, len);
	sys_exit(io);
	return r;
}

/* After EINPROGRESS: wait until the socket is writable, then ask it how
 * the connection went (SO_ERROR). A wakeup that was not about the
 * connection (a readiness edge left over from the number's previous
 * file, say) shows as SO_ERROR 0 on a socket that has no peer yet; then
 * we wait again. */
static int connect_wait(struct io *io)
{
	/* The program made this socket, unseen: if its number once named a
	 * file the poller watched, a park would trust that registration for
	 * a millisecond or more. A connect is rare; check now. */
	if (io->task) {
		int err = gmp__pd_arm(io->pd, &io->op);
		if (err && err != -EPERM)
			return err;
	}
	for (;;) {
		int err = io_wait(io, GMP__PD_WRITE);
		if (err)
			return err;
		if (io->task) /* the check below is the next attempt */
			gmp__pd_snapshot(io->pd, &io->op);
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		int g = gmp__sys_getsockopt(io->fd, SOL_SOCKET, SO_ERROR,
					    &soerr, &sl);
		if (g < 0)
			return g;
		switch (soerr) {
		case 0:
			break;
		case EINPROGRESS:
		case EALREADY:
		case EINTR:
			continue;
		case EISCONN:
			return 0;
		default:
			return -soerr;
		}
		struct sockaddr_storage ss;
		socklen_t ssl = sizeof ss;
		if (getpeername(io->fd, (struct sockaddr *)&ss, &ssl) == 0)
			return 0;
		if (gmp__errno_get() != ENOTCONN)
			return -gmp__errno_get();
	}
}

/* connect(2). On a non-blocking socket it waits out EINPROGRESS (parking a
 * task, blocking any other caller in poll(2)) and returns the outcome
 * from SO_ERROR: 0 or the connection's -errno (-ECONNREFUSED, ...). On a
 * blocking socket the plain call runs in the syscall bracket; if a signal
 * interrupts it (EINTR), the connection goes on in the background and we
 * wait for it as above. From a task or any thread; a switch point. */
GMP_EXTERN int gmp_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return (int)io_end(&io, err);
	int r = sys_connect(&io, addr, len);
	if (r == -EINPROGRESS || r == -EALREADY || r == -EINTR)
		r = connect_wait(&io);
	return (int)io_end(&io, r);
}

/* ---- gmp_poll_fd -------------------------------------------------------------- */

/* Waits until fd is ready for `events` (poll(2) bits: POLLIN, POLLOUT,
 * ...), at most timeout_ns (< 0: forever; 0: just look). Returns the ready
 * bits (> 0; POLLERR and POLLHUP are reported whether asked for or not),
 * 0 on timeout, or -errno: -EBADF for a bad descriptor (poll's POLLNVAL)
 * or when gmp_close wakes the wait. A task waits in the poller, with a
 * runtime timer for the timeout; any other caller in poll(2). From a task
 * or any thread; a switch point. */
GMP_EXTERN int gmp_poll_fd(int fd, int events, int64_t timeout_ns)
{
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return (int)io_end(&io, err);
	int64_t deadline = -1;
	if (timeout_ns >= 0) {
		int64_t now = gmp__nanotime();
		deadline = timeout_ns > INT64_MAX - now ? INT64_MAX
							: now + timeout_ns;
	}
	int r;
	if (timeout_ns == 0)
		r = gmp__poll_now(fd, events);
	else if (io.task)
		r = gmp__pd_poll_task(io.pd, events, deadline);
	else
		r = gmp__pd_wait_thread(io.pd, events, deadline, -1);
	return (int)io_end(&io, r);
}

/* ---- vectors: gmp_readv, gmp_writev ---------------------------------------------- */

/* The bytes in iov[0..n), or -EINVAL past SSIZE_MAX (as readv/writev). */
static ssize_t iov_total(const struct iovec *iov, int n)
{
	size_t total = 0;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	return (ssize_t)total;
}

/* How many vectors the rest of a short vectored write goes on with: the
 * caller's array is never modified, so the rest is copied into a window
 * of this many on the stack (a stream takes what it can per call; the
 * loop comes back for more). */
#define IO_WINDOW 64

/* Fills win with the vectors of iov[0..n) that come after `done` bytes
 * (the first one cut to its unwritten part), at most IO_WINDOW; returns
 * how many. */
static int iov_window(const struct iovec *iov, int n, size_t done,
		      struct iovec *win)
{
	int i = 0;
	while (i < n && done >= iov[i].iov_len)
		done -= iov[i++].iov_len;
	int k = 0;
	for (; i < n && k < IO_WINDOW; i++, k++) {
		win[k] = iov[i];
		if (k == 0) {
			win[0].iov_base = (char *)win[0].iov_base + done;
			win[0].iov_len -= done;
		}
	}
	return k;
}

/* One attempt at gmp_readv, as read_once. */
static ssize_t readv_once(struct io *io, const struct iovec *iov, int n)
{
	int kind = gmp__pd_kind(io->pd);
	if (kind != GMP__PD_KIND_OTHER && kind != GMP__PD_KIND_UNKNOWN) {
		if (io->task)
			gmp__pd_snapshot(io->pd, &io->op);
		struct msghdr m = { .msg_iov = (struct iovec *)iov,
				    .msg_iovlen = (size_t)n };
		ssize_t r = nb_recvmsg(io->fd, &m, 0);
		if (r != -ENOTSOCK) {
			if (nb_final(io, r, 0))
				return r;
		} else {
			gmp__pd_set_kind(io->pd, GMP__PD_KIND_OTHER);
		}
	}
	sys_enter(io);
	ssize_t r = gmp__sys_readv(io->fd, iov, n);
	sys_exit(io);
	learn_nonblock(io, r, 0);
	return r;
}

/* readv(2). As gmp_read, without the skipped read: 0 vectors returns 0 (or
 * -EBADF), a negative count or more than IOV_MAX -EINVAL. */
GMP_EXTERN ssize_t gmp_readv(int fd, const struct iovec *iov, int n)
{
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	if (n < 0)
		return io_end(&io, -EINVAL);
	for (;;) {
		ssize_t r = readv_once(&io, iov, n);
		if (r == -EINTR)
			continue;
		if (r != -EAGAIN)
			return io_end(&io, r);
		if ((err = io_wait(&io, GMP__PD_READ)) != 0)
			return io_end(&io, err);
	}
}

/* One vectored attempt: sendmsg(MSG_NOSIGNAL) on a socket, else
 * writev_nosigpipe; the kind is learnt and cached as sys_write does. */
static ssize_t sys_writev(struct io *io, const struct iovec *iov, int n)
{
	int kind = gmp__pd_kind(io->pd);
	ssize_t r = 0;
	if (kind != GMP__PD_KIND_OTHER) {
		struct msghdr m = { .msg_iov = (struct iovec *)iov,
				    .msg_iovlen = (size_t)n };
		if (io->task)
			gmp__pd_snapshot(io->pd, &io->op);
		r = nb_sendmsg(io->fd, &m, MSG_NOSIGNAL);
		kind = learn_from_send(io, kind, r);
		if (kind != GMP__PD_KIND_OTHER) {
			if (nb_final(io, r, 0))
				return r;
			sys_enter(io);
			r = gmp__sys_sendmsg(io->fd, &m, MSG_NOSIGNAL);
			sys_exit(io);
			learn_nonblock(io, r, 0);
			return r;
		}
	}
	sys_enter(io);
	r = writev_nosigpipe(io->fd, iov, n);
	sys_exit(io);
	return r;
}

/* What gmp_writev writes, and its attempt at the rest after `done`: the
 * caller's vectors at first, then a window of copies (iov_window). */
struct write_vec {
	const struct iovec *iov;
	int n;
};

static inline __attribute__((always_inline)) ssize_t
write_attempt_vec(struct io *io, const void *arg, size_t done)
{
	const struct write_vec *v = arg;
	struct iovec win[IO_WINDOW];
	const struct iovec *cur = v->iov;
	int cnt = v->n;
	if (done != 0) {
		cnt = iov_window(v->iov, v->n, done, win);
		cur = win;
	}
	return sys_writev(io, cur, cnt);
}

/* writev(2) of every byte, as gmp_write: a short write (only a stream
 * makes one; a datagram goes whole or not at all) goes on with the rest,
 * parking as often as needed. The caller's vectors are never modified.
 * Returns the total; if an error stops it after some bytes, that count;
 * else -errno (-EINVAL for a negative count, more than IOV_MAX vectors or
 * a total past SSIZE_MAX). Never raises SIGPIPE. */
GMP_EXTERN ssize_t gmp_writev(int fd, const struct iovec *iov, int n)
{
	if (n < 0 || n > IOV_MAX)
		return -EINVAL;
	ssize_t total = iov_total(iov, n);
	if (total < 0)
		return total;
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	struct write_vec v = { iov, n };
	return write_all(&io, (size_t)total, 0, write_attempt_vec, &v);
}

/* ---- datagrams and messages: gmp_recvfrom, gmp_sendto, gmp_recvmsg, gmp_sendmsg --- */

/* recvfrom(2). *len is an in-out argument: each attempt starts from the
 * caller's value. With MSG_DONTWAIT in flags the call never waits
 * (-EAGAIN, as recvfrom's). */
GMP_EXTERN ssize_t gmp_recvfrom(int fd, void *buf, size_t n, int flags,
				struct sockaddr *addr, socklen_t *len)
{
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	socklen_t len0 = len ? *len : 0;
	for (;;) {
		if (len)
			*len = len0;
		if (io.task)
			gmp__pd_snapshot(io.pd, &io.op);
		ssize_t r = 0;
		bool plain = !nb_first(&io, flags);
		if (!plain) {
			r = nb_recvfrom(fd, buf, n, flags, addr, len);
			plain = !nb_final(&io, r, flags);
		}
		if (plain) {
			if (len)
				*len = len0;
			sys_enter(&io);
			r = gmp__sys_recvfrom(fd, buf, n, flags, addr, len);
			sys_exit(&io);
			learn_nonblock(&io, r, flags);
		}
		if (r == -EINTR)
			continue;
		if (r != -EAGAIN || (flags & MSG_DONTWAIT))
			return io_end(&io, r);
		if ((err = io_wait(&io, GMP__PD_READ)) != 0)
			return io_end(&io, err);
	}
}

/* What gmp_sendto sends, and its attempt at the rest after `done`: the
 * call that cannot block, then the plain one if need be (see the top). */
struct send_to {
	const void *buf;
	size_t n;
	int flags;
	const struct sockaddr *addr;
	socklen_t len;
};

static inline __attribute__((always_inline)) ssize_t
send_attempt_to(struct io *io, const void *arg, size_t done)
{
	const struct send_to *s = arg;
	if (io->task)
		gmp__pd_snapshot(io->pd, &io->op);
	ssize_t r = nb_sendto(io->fd, (const char *)s->buf + done, s->n - done,
			      s->flags | MSG_NOSIGNAL, s->addr, s->len);
	if (!nb_final(io, r, s->flags)) {
		sys_enter(io);
		r = gmp__sys_sendto(io->fd, (const char *)s->buf + done,
				    s->n - done, s->flags | MSG_NOSIGNAL,
				    s->addr, s->len);
		sys_exit(io);
		learn_nonblock(io, r, s->flags);
	}
	return r;
}

/* sendto(2), always with MSG_NOSIGNAL. A datagram goes whole (one that
 * is too large is -EMSGSIZE); on a stream every byte is sent, as by
 * gmp_write (a count if an error stops it after some). MSG_DONTWAIT: never
 * waits. */
GMP_EXTERN ssize_t gmp_sendto(int fd, const void *buf, size_t n, int flags,
			      const struct sockaddr *addr, socklen_t len)
{
	if (n > SSIZE_MAX)
		return -EINVAL;
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	struct send_to s = { buf, n, flags, addr, len };
	return write_all(&io, n, flags, send_attempt_to, &s);
}

/* recvmsg(2). msg_namelen and msg_controllen are in-out: each attempt
 * starts from the caller's values. MSG_DONTWAIT: never waits. */
GMP_EXTERN ssize_t gmp_recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	if (!msg)
		return io_end(&io, -EFAULT);
	socklen_t namelen = msg->msg_namelen;
	size_t controllen = msg->msg_controllen;
	for (;;) {
		msg->msg_namelen = namelen;
		msg->msg_controllen = controllen;
		if (io.task)
			gmp__pd_snapshot(io.pd, &io.op);
		ssize_t r = 0;
		bool plain = !nb_first(&io, flags);
		if (!plain) {
			r = nb_recvmsg(fd, msg, flags);
			plain = !nb_final(&io, r, flags);
		}
		if (plain) {
			msg->msg_namelen = namelen;
			msg->msg_controllen = controllen;
			sys_enter(&io);
			r = gmp__sys_recvmsg(fd, msg, flags);
			sys_exit(&io);
			learn_nonblock(&io, r, flags);
		}
		if (r == -EINTR)
			continue;
		if (r != -EAGAIN || (flags & MSG_DONTWAIT))
			return io_end(&io, r);
		if ((err = io_wait(&io, GMP__PD_READ)) != 0)
			return io_end(&io, err);
	}
}

/* What gmp_sendmsg sends, and its attempt at the rest after `done`: the
 * caller's header at first; after a short send, a copy of it without the
 * control data, with a window of copies of the vectors left. */
struct send_msg {
	const struct msghdr *msg;
	int n;
	int flags;
};

static inline __attribute__((always_inline)) ssize_t
send_attempt_msg(struct io *io, const void *arg, size_t done)
{
	const struct send_msg *s = arg;
	struct iovec win[IO_WINDOW];
	struct msghdr rest;
	const struct msghdr *cur = s->msg;
	if (done != 0) {
		rest = *s->msg;
		rest.msg_control = NULL;
		rest.msg_controllen = 0;
		rest.msg_iov = win;
		rest.msg_iovlen =
			(size_t)iov_window(s->msg->msg_iov, s->n, done, win);
		cur = &rest;
	}
	if (io->task)
		gmp__pd_snapshot(io->pd, &io->op);
	ssize_t r = nb_sendmsg(io->fd, cur, s->flags | MSG_NOSIGNAL);
	if (!nb_final(io, r, s->flags)) {
		sys_enter(io);
		r = gmp__sys_sendmsg(io->fd, cur, s->flags | MSG_NOSIGNAL);
		sys_exit(io);
		learn_nonblock(io, r, s->flags);
	}
	return r;
}

/* sendmsg(2), always with MSG_NOSIGNAL. A datagram goes whole; on a
 * stream every byte is sent: after a short send the rest goes on from a
 * copy of the header, without the control data (the kernel has sent it
 * with the first bytes: descriptors passed with SCM_RIGHTS go once). The
 * caller's header and vectors are never modified. Returns the total, a
 * count if an error stops it after some bytes, or -errno. MSG_DONTWAIT:
 * never waits. */
GMP_EXTERN ssize_t gmp_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (!msg)
		return -EFAULT;
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE; /* sendmsg's answer */
	int n = (int)msg->msg_iovlen;
	ssize_t total = iov_total(msg->msg_iov, n);
	if (total < 0)
		return total;
	struct io io;
	int err = io_begin(&io, fd);
	if (err)
		return io_end(&io, err);
	struct send_msg s = { msg, n, flags };
	return write_all(&io, (size_t)total, flags, send_attempt_msg, &s);
}

/* ---- gmp_set_deadline ---------------------------------------------------------- */

/* Go's SetReadDeadline/SetWriteDeadline (design.md §11.3): stores the
 * deadline in the descriptor (no system call) and sends the calls already
 * waiting in those directions to look at it; the per-P timer that ends a
 * task's wait is armed by the waiting task itself (pollfd_deadline.c).
 * Inside the runtime bracket, since waking a parked task uses the
 * caller's P; not a switch point. */
GMP_EXTERN int gmp_set_deadline(int fd, int how, int64_t deadline_ns)
{
	if (how == 0 || (how & ~(GMP_READ | GMP_WRITE)))
		return -EINVAL;
	if (fd < 0)
		return -EBADF;
	int saved = gmp__errno_get();
	uint8_t was;
	gmp_g *g = gmp__enter_task(&was);
	int err = 0;
	gmp__pd *pd = gmp__pd_acquire(fd, &err);
	if (pd) {
		err = gmp__pd_set_deadline(pd, how, deadline_ns);
		gmp__pd_release(pd);
	}
	gmp__leave_task(g, was);
	gmp__errno_set(saved);
	return err;
}

/* ---- gmp_close ---------------------------------------------------------------- */

/* Closes fd. First every task and thread waiting on it in these calls
 * (gmp_poll_fd included) is woken and returns -EBADF, and new calls on it
 * fail with -EBADF; the number is unregistered from the poller. Then, for
 * a non-blocking descriptor, it waits for the woken calls to leave (a
 * moment) and closes the number itself, returning 0 or close's -errno; for
 * a blocking one, calls may sit in the kernel indefinitely, so if any is
 * still inside, the last of them closes the number when it returns and
 * gmp_close returns 0 at once. Either way the number is not reused while a
 * call could still touch it. -EBADF for a negative fd or a second
 * gmp_close of the same descriptor. From a task or any thread; a switch
 * point (it may wait). */
GMP_EXTERN int gmp_close(int fd)
{
	int saved = gmp__errno_get();
	uint8_t was;
	gmp_g *g = gmp__enter_task(&was);
	int r = gmp__pd_close(fd);
	gmp__leave_task(g, was);
	gmp__errno_set(saved);
	return r;
}
