/* File I/O without a thread (uring.h): one io_uring per P.
 *
 * Why per P
 * ---------
 * A P is what an M holds while it runs tasks; an M that blocks in a system
 * call or goes idle leaves its P, and the P's ring, to the next holder. So
 * there are gomaxprocs rings however many threads come and go, and the
 * submitter of an operation is the one M that holds the P (no contention
 * in the common case). A ring is made on the first operation its P
 * submits, and lives as long as the P, that is until gmp_shutdown: a P
 * that gmp_set_maxprocs retires keeps its ring, whose completions are
 * still reaped, and a revived P finds it again.
 *
 * One operation
 * -------------
 * The task describes the operation in a `uop` on its own stack and parks;
 * the park's unlock function (on g0, once the task is WAITING) takes the
 * ring's lock, fills an SQE whose user_data is the uop, links the uop on
 * the ring's list of operations in flight and submits. Submitting after
 * the task is WAITING is what lets any M ready it the moment the
 * completion is reaped, even before the unlock function has returned
 * (pollfd.c's block_commit works the same way). A submission the kernel
 * refuses for now (-EAGAIN, -EBUSY: completions it cannot post yet) is
 * retried after reaping; an SQE, once taken from the ring, is never
 * dropped. If the P has no ring and none can be made, or the descriptor
 * is being closed, the unlock function says "do not park" and the task
 * goes on with the system call path (io.c) or -EBADF. An operation the kernel
 * finished inside the submission (a read from the page cache) is taken
 * from the completion queue there and then, and the task does not park.
 *
 * Reaping
 * -------
 * Each ring's lock covers its submission queue, its completion queue and
 * its list: any M may reap any ring. That is what makes the awkward cases
 * plain: a task that resumes on another P, a P that retired, a P whose M
 * sits in a long system call, all leave completions in a ring that someone
 * else reaps. Reapers are findrunnable (before the network poller, a
 * non-blocking look at every ring whose completion queue is not empty:
 * two loads per ring) and the M blocked in epoll: every ring has the same
 * eventfd registered (io_uring_register_eventfd), which epoll watches, so
 * a completion wakes an idle runtime. The reaper writes the result into
 * the uop and appends the task to its queue; the task reads it once it
 * runs again. Every operation in flight counts as a network-poll waiter,
 * so that the last M to go idle blocks in epoll rather than on its futex.
 *
 * Closing
 * -------
 * gmp_close sets CLOSING on the descriptor and then asks every ring to
 * cancel what it has in flight on that number (IORING_OP_ASYNC_CANCEL by
 * user_data). A submitter checks CLOSING under the ring's lock, and the
 * canceller walks the list under it, so an operation is either seen and
 * cancelled or never submitted. A cancelled operation's task returns
 * -EBADF, as every waiter woken by gmp_close does; one that completed
 * anyway (a disk read cannot be stopped once it is under way) returns its
 * result. The descriptor's number stays open until the last operation has
 * left (pollfd.c's references).
 *
 * read(2) and write(2) use the offset -1, the current position; io.c
 * holds the position locks that make them atomic (file_io).
 *
 * Fork
 * ----
 * A child inherits the parent's rings as shared mappings: it unmaps them
 * and closes its copies of their descriptors, and has none until its own
 * gmp_init. Shutdown waits for every task, hence every operation, so it
 * finds the rings idle; a program that ends with gmp_main's return ends
 * its operations with the process.
 */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "export_test.h"
#include "netpoll.h"
#include "preempt.h"
#include "runtime.h"
#include "scheduler.h"
#include "task.h"
#include "uring.h"

#ifdef GMP_HAVE_LIBURING
#include <liburing.h>

#include <dlfcn.h>

/* liburing's few functions that are not inline in its header are found
 * at run time (dlopen of its soname), so that libgmp.a and libgmp.so need
 * nothing more at link time: a program links libgmp.a with -pthread alone,
 * as the README shows. Without liburing.so.2 on the machine the probe
 * fails and every call takes the system call path. */
static struct {
	int (*queue_init)(unsigned, struct io_uring *, unsigned);
	void (*queue_exit)(struct io_uring *);
	int (*submit)(struct io_uring *);
	struct io_uring_probe *(*get_probe_ring)(struct io_uring *);
	void (*free_probe)(struct io_uring_probe *);
	int (*register_eventfd)(struct io_uring *, int);
	int (*get_events)(struct io_uring *);
} lu;

static bool lu_load(void)
{
	void *h = dlopen("liburing.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return false;
#define LU_SYM(f) (*(void **)&lu.f = dlsym(h, "io_uring_" #f)) != NULL
	bool ok = LU_SYM(queue_init) && LU_SYM(queue_exit) && LU_SYM(submit) &&
		  LU_SYM(get_probe_ring) && LU_SYM(free_probe) &&
		  LU_SYM(register_eventfd) && LU_SYM(get_events);
#undef LU_SYM
	return ok; /* the handle stays open for the process's life */
}
#endif

char gmp__uring_cookie;

#ifdef GMP_HAVE_LIBURING

/* ---- rings ------------------------------------------------------------------- */

#define RING_ENTRIES 256u

/* For tests: the size of the rings made from now on (0: RING_ENTRIES). */
static unsigned ring_entries;

void gmp__uring_set_entries(unsigned n)
{
	ring_entries = n;
}

typedef struct uop uop;

typedef struct gmp__ring {
	gmp__mutex lock; /* everything below */
	struct io_uring ring;
	uop *inflight;          /* lock: submitted, not yet reaped */
	volatile uint64_t nops; /* lock; racy reads by stats */
	struct gmp__ring *next; /* ur.all, under ur.lock */
} gmp__ring;

/* An operation in flight, on its task's stack. */
struct uop {
	uop *next, *prev; /* ring->inflight; ring lock */
	gmp_g *g;
	gmp__pd *pd;
	int fd;
	uint8_t opcode;
	bool cancelled; /* ring lock: a cancel was submitted for it */
	uint32_t n;
	void *buf;
	uint64_t off;
	int res; /* written by the reaper before the task is readied */
};

/* The user_data of cancel requests, whose completions nobody awaits. */
static char cancel_cookie;

enum { PROBE_UNKNOWN = 0, PROBE_YES = 1, PROBE_NO = 2 };

static struct {
	const char *why_off;        /* for tests: why the ring is not used */
	gmp__mutex lock;            /* all, evfd's life */
	volatile uint32_t probed;   /* atomic: PROBE_*, once per process */
	volatile uint32_t on;       /* atomic: the ring is used (this run) */
	int evfd;                   /* the eventfd every ring signals */
	gmp__ring *all;             /* every ring made, for fork */
	volatile uint32_t inflight; /* atomic: operations in all rings */
} ur = { .evfd = -1 };

static bool probe(void)
{
	uint32_t v = gmp__load32_acq(&ur.probed);
	if (v != PROBE_UNKNOWN)
		return v == PROBE_YES;
	int saved = errno;
	bool ok = false;
	struct io_uring r;
	if (lu_load() && lu.queue_init(4, &r, 0) == 0) {
		const unsigned need = IORING_FEAT_RW_CUR_POS |
				      IORING_FEAT_NODROP;
		struct io_uring_probe *pr = lu.get_probe_ring(&r);
		ok = (r.features & need) == need && pr &&
		     io_uring_opcode_supported(pr, IORING_OP_READ) &&
		     io_uring_opcode_supported(pr, IORING_OP_WRITE) &&
		     io_uring_opcode_supported(pr, IORING_OP_ASYNC_CANCEL);
		if (pr)
			lu.free_probe(pr);
		lu.queue_exit(&r);
	}
	errno = saved;
	gmp__store32_rel(&ur.probed, ok ? PROBE_YES : PROBE_NO);
	return ok;
}

void gmp__uring_start(void)
{
	gmp__store32_rlx(&ur.on, 0);
	gmp__store32_rlx(&ur.inflight, 0);
	ur.why_off = "GMP_IO_URING=off";
	if (!gmp__cfg.io_uring)
		return;
	ur.why_off = "the kernel refuses io_uring, or lacks IORING_OP_READ, "
		     "IORING_OP_WRITE or the current-position offset (or "
		     "liburing.so.2 is not installed)";
	if (!probe())
		return;
	ur.why_off = "no eventfd for the rings";
	int saved = errno;
	int e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	errno = saved;
	if (e < 0)
		return;
	if (gmp__netpoll_open(e, &gmp__uring_cookie) != 0) {
		close(e);
		errno = saved;
		return;
	}
	ur.why_off = NULL;
	ur.evfd = e;
	gmp__store32_rel(&ur.on, 1);
}

static gmp__ring *ring_of(gmp__p *p)
{
	/* acquire: pairs with ring_make's release */
	return gmp__loadp_acq(&p->ring);
}

/* The P's ring, made on first use by its holder (on g0). NULL when none
 * can be made: then the ring is off for the rest of this run. */
static gmp__ring *ring_get(gmp__p *p)
{
	gmp__ring *r = ring_of(p);
	if (GMP__LIKELY(r))
		return r;
	if (!gmp__load32_acq(&ur.on))
		return NULL;
	r = gmp__calloc(1, sizeof *r);
	int saved = errno;
	unsigned entries = ring_entries ? ring_entries : RING_ENTRIES;
	if (r && lu.queue_init(entries, &r->ring, 0) == 0) {
		if (lu.register_eventfd(&r->ring, ur.evfd) == 0) {
			errno = saved;
			gmp__lock(&ur.lock);
			r->next = ur.all;
			ur.all = r;
			gmp__unlock(&ur.lock);
			gmp__storep_rel(&p->ring, r); /* publishes the ring */
			return r;
		}
		lu.queue_exit(&r->ring);
	}
	errno = saved;
	gmp__free(r);
	ur.why_off = "a ring could not be made";
	gmp__store32_rel(&ur.on, 0); /* ENOMEM, a limit: the syscall path */
	return NULL;
}

/* ---- reaping ------------------------------------------------------------------ */

static void list_add(gmp__ring *r, uop *op)
{
	op->prev = NULL;
	op->next = r->inflight;
	if (r->inflight)
		r->inflight->prev = op;
	r->inflight = op;
}

static void list_del(gmp__ring *r, uop *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		r->inflight = op->next;
	if (op->next)
		op->next->prev = op->prev;
}

/* Whether the completion queue may hold something: lock-free (the kernel
 * writes the tail; reapers write the head with a release under the
 * lock), or the kernel holds completions that did not fit (it keeps them,
 * IORING_FEAT_NODROP, and says so in the submission queue's flags). */
static bool cq_nonempty(gmp__ring *r)
{
	return gmp__load32_acq(r->ring.cq.ktail) !=
		       gmp__load32_rlx(r->ring.cq.khead) ||
	       (gmp__load32_rlx(r->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW);
}

/* Under r->lock: every completion to q, including those the kernel kept
 * aside while the queue was full (io_uring_get_events moves them in, and
 * posts nothing else: a completion queue that overflowed is only ever
 * refilled from the overflow list on a system call). */
static int reap_locked(gmp__ring *r, gmp__gqueue *q)
{
	struct io_uring_cqe *cqe;
	int n = 0;
	for (;;) {
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&r->ring, head, cqe)
		{
			seen++;
			uop *op = io_uring_cqe_get_data(cqe);
			if ((void *)op == &cancel_cookie)
				continue;
			list_del(r, op);
			op->res = cqe->res;
			gmp_g *g = op->g; /* op is gone once g runs */
			gmp__gq_push(q, g);
			n++;
		}
		io_uring_cq_advance(&r->ring, seen);
		if (!io_uring_cq_has_overflow(&r->ring))
			break;
		int rc = lu.get_events(&r->ring);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
			gmp__throw("io_uring: flushing completions failed "
				   "(errno %d)",
				   -rc);
	}
	if (n) {
		gmp__store64_rlx(&r->nops, r->nops + (uint64_t)n);
		gmp__add32_full(&ur.inflight, -n);
		gmp__netpoll_adjust_waiters(-n);
	}
	return n;
}

int gmp__uring_reap(gmp__gqueue *q)
{
	if (gmp__load32_rlx(&ur.inflight) == 0)
		return 0;
	int n = 0;
	uint32_t np = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < np; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		gmp__ring *r = p ? ring_of(p) : NULL;
		if (!r || !cq_nonempty(r))
			continue;
		gmp__lock(&r->lock);
		n += reap_locked(r, q);
		gmp__unlock(&r->lock);
	}
	return n;
}

int gmp__uring_evfd_ready(gmp__gqueue *q)
{
	/* Consume the count first: a completion posted after this read
	 * signals again. */
	uint64_t v;
	int saved = errno;
	while (read(ur.evfd, &v, sizeof v) < 0 && errno == EINTR)
		;
	errno = saved;
	return gmp__uring_reap(q);
}

/* ---- submitting ---------------------------------------------------------------- */

/* Under r->lock: an SQE, flushing the queue to the kernel while it is
 * full. */
static struct io_uring_sqe *sqe_get(gmp__ring *r, gmp__gqueue *q)
{
	struct io_uring_sqe *sqe;
	while (!(sqe = io_uring_get_sqe(&r->ring))) {
		int rc = lu.submit(&r->ring);
		if (rc == -EAGAIN || rc == -EBUSY) {
			reap_locked(r, q);
			gmp__osyield();
		} else if (rc < 0 && rc != -EINTR) {
			gmp__throw("io_uring_submit failed (errno %d)", -rc);
		}
	}
	return sqe;
}

/* Under r->lock: everything queued to the kernel. -EAGAIN and -EBUSY mean
 * "not now" (completions are waiting to be posted): reap and retry. */
static void submit_all(gmp__ring *r, gmp__gqueue *q)
{
	for (;;) {
		int rc = lu.submit(&r->ring);
		if (rc >= 0 || rc == -EINTR) {
			if (rc >= 0 && io_uring_sq_ready(&r->ring) == 0)
				return;
			continue;
		}
		if (rc != -EAGAIN && rc != -EBUSY)
			gmp__throw("io_uring_submit failed (errno %d)", -rc);
		reap_locked(r, q);
		gmp__osyield();
	}
}

/* Takes g out of q if it is there. */
static bool gq_remove(gmp__gqueue *q, gmp_g *g)
{
	gmp_g *prev = NULL;
	for (gmp_g *x = q->head; x; prev = x, x = x->schedlink) {
		if (x != g)
			continue;
		if (prev)
			prev->schedlink = x->schedlink;
		else
			q->head = x->schedlink;
		if (q->tail == x)
			q->tail = prev;
		q->n--;
		x->schedlink = NULL;
		return true;
	}
	return false;
}

/* gmp__park's unlock function, on g0 with the task WAITING. */
static bool uop_commit(gmp_g *g, void *arg)
{
	uop *op = arg;
	gmp__m *m = gmp__getm();
	gmp__ring *r = ring_get(m->p);
	if (!r) {
		op->res = GMP__URING_NONE;
		return false;
	}
	gmp__gqueue q = { 0 };
	gmp__lock(&r->lock);
	if (gmp__pd_closing(op->pd)) {
		gmp__unlock(&r->lock);
		op->res = -EBADF;
		return false;
	}
	struct io_uring_sqe *sqe = sqe_get(r, &q);
	if (op->opcode == IORING_OP_READ)
		io_uring_prep_read(sqe, op->fd, op->buf, op->n, op->off);
	else
		io_uring_prep_write(sqe, op->fd, op->buf, op->n, op->off);
	io_uring_sqe_set_data(sqe, op);
	list_add(r, op);
	gmp__add32_full(&ur.inflight, 1);
	gmp__netpoll_adjust_waiters(1);
	submit_all(r, &q);
	/* Done already? A read from the page cache completes inside the
	 * submission: then the task goes on without parking. */
	if (cq_nonempty(r))
		reap_locked(r, &q);
	bool done = gq_remove(&q, g);
	/* else op belongs to the reaper from here */
	gmp__unlock(&r->lock);
	if (q.head)
		gmp__injectglist(&q);
	return !done;
}

/* One operation through the ring, from a task inside the runtime. Returns
 * its result, or GMP__URING_NONE. */
int gmp__uring_rw(gmp__pd *pd, int fd, bool write, void *buf, uint32_t n,
		  uint64_t off)
{
	uop op = {
		.g = gmp_current(),
		.pd = pd,
		.fd = fd,
		.opcode = write ? IORING_OP_WRITE : IORING_OP_READ,
		.n = n,
		.buf = buf,
		.off = off,
		.res = GMP__URING_NONE,
	};
	gmp__park(uop_commit, &op,
		  write ? GMP__WAIT_IO_WRITE : GMP__WAIT_IO_READ);
	if (op.cancelled && (op.res == -ECANCELED || op.res == -EINTR))
		return -EBADF;
	return op.res;
}

/* Every ring, under its lock, even with nothing counted in flight: a
 * submitter that has not seen CLOSING yet holds the lock. */
static void cancel_fd(int fd)
{
	uint32_t np = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < np; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		gmp__ring *r = p ? ring_of(p) : NULL;
		if (!r)
			continue;
		gmp__gqueue q = { 0 };
		bool any = false;
		gmp__lock(&r->lock);
		/* From the head each time: taking an SQE may reap, which
		 * takes operations off the list. */
		for (;;) {
			uop *op = r->inflight;
			while (op && (op->fd != fd || op->cancelled))
				op = op->next;
			if (!op)
				break;
			op->cancelled = true;
			struct io_uring_sqe *sqe = sqe_get(r, &q);
			io_uring_prep_cancel(sqe, op, 0);
			io_uring_sqe_set_data(sqe, &cancel_cookie);
			any = true;
		}
		if (any)
			submit_all(r, &q);
		gmp__unlock(&r->lock);
		if (q.head)
			gmp__injectglist(&q);
	}
}

void gmp__uring_cancel_fd(int fd)
{
	/* A thread that is not the runtime's holds the runtime while it
	 * walks the Ps, which gmp_shutdown frees (none to walk when off). */
	bool foreign = gmp__getm() == NULL;
	if (foreign && gmp__rt_hold(false) != 0)
		return;
	cancel_fd(fd);
	if (foreign)
		gmp__rt_release();
}

uint64_t gmp__uring_ops(void)
{
	uint64_t n = 0;
	uint32_t np = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < np; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		gmp__ring *r = p ? ring_of(p) : NULL;
		if (r)
			n += gmp__load64_rlx(&r->nops);
	}
	return n;
}

void gmp__uring_stop(void)
{
	for (int i = 0; i < GMP__MAXPROCS_LIMIT; i++) {
		gmp__p *p = gmp__sched.allp[i];
		if (p)
			gmp__storep_rlx(&p->ring, NULL);
	}
	gmp__lock(&ur.lock);
	gmp__ring *r = ur.all;
	ur.all = NULL;
	int e = ur.evfd;
	ur.evfd = -1;
	gmp__store32_rel(&ur.on, 0);
	gmp__unlock(&ur.lock);
	int saved = errno;
	while (r) {
		gmp__ring *next = r->next;
		if (r->inflight)
			gmp__throw("io_uring: an operation is still in flight "
				   "at shutdown");
		lu.queue_exit(&r->ring);
		gmp__free(r);
		r = next;
	}
	if (e >= 0)
		close(e);
	errno = saved;
}

void gmp__uring_forked(void)
{
	int saved = errno;
	for (gmp__ring *r = ur.all; r; r = r->next)
		lu.queue_exit(&r->ring); /* munmap and close only */
	if (ur.evfd >= 0)
		close(ur.evfd);
	errno = saved;
	ur.lock = (gmp__mutex)GMP__MUTEX_INIT;
	ur.all = NULL; /* the structs are the parent's leftovers */
	ur.evfd = -1;
	ur.on = 0;
	ur.inflight = 0;
}

bool gmp__uring_usable(void)
{
	return gmp__load32_acq(&ur.on) != 0;
}

const char *gmp__uring_off_reason(void)
{
	return gmp__uring_usable() ? NULL : ur.why_off;
}

uint32_t gmp__uring_inflight(void)
{
	return gmp__load32_acq(&ur.inflight);
}

ssize_t gmp__uring_test_read(int fd, void *buf, size_t n)
{
	uint8_t was;
	gmp_g *g = gmp__enter_task(&was);
	int err = 0;
	gmp__pd *pd = g ? gmp__pd_acquire(fd, &err) : NULL;
	int r = -ENOSYS;
	if (pd) {
		if (gmp__uring_usable())
			r = gmp__uring_rw(pd, fd, false, buf, (uint32_t)n,
					  (uint64_t)-1);
		if (r == GMP__URING_NONE)
			r = -ENOSYS;
		gmp__pd_release(pd);
	} else if (g) {
		r = err;
	}
	gmp__leave_task(g, was);
	return r;
}

#else /* !GMP_HAVE_LIBURING */

void gmp__uring_start(void)
{
}
void gmp__uring_stop(void)
{
}
void gmp__uring_forked(void)
{
}
int gmp__uring_reap(gmp__gqueue *q)
{
	return 0;
}
int gmp__uring_evfd_ready(gmp__gqueue *q)
{
	return 0;
}
void gmp__uring_cancel_fd(int fd)
{
}
uint64_t gmp__uring_ops(void)
{
	return 0;
}
bool gmp__uring_usable(void)
{
	return false;
}
const char *gmp__uring_off_reason(void)
{
	return "libgmp was built without liburing";
}
uint32_t gmp__uring_inflight(void)
{
	return 0;
}
ssize_t gmp__uring_test_read(int fd, void *buf, size_t n)
{
	return -ENOSYS;
}
void gmp__uring_set_entries(unsigned n)
{
}
int gmp__uring_rw(gmp__pd *pd, int fd, bool write, void *buf, uint32_t n,
		  uint64_t off)
{
	return GMP__URING_NONE;
}

#endif
