/* File I/O without a thread: one io_uring per P, the engine (uring.h).
 * design.md §31 gives the design: why one ring per P, how an operation is
 * submitted, reaped and cancelled, shutdown and fork.
 *
 * Here, in order: the kernel's interface (three system calls through
 * <linux/io_uring.h>, no library); the probe, once per process; the rings
 * (made by a P's holder on its first operation, mapped, with the
 * runtime's one eventfd registered, and kept as long as the P); reaping
 * (any M, any ring); submitting (uop_commit, the unlock function of the
 * task's park, so that the task is WAITING before the kernel can complete
 * its operation); cancelling for gmp_close; shutdown and fork; and last
 * the hooks that exist only for tests (export_test.h).
 *
 * It pairs with io.c, which chooses the ring or the system call for each
 * file operation and holds the position locks (file_io); sched.c, which
 * reaps in findrunnable and closes the rings when the runtime stops;
 * netpoll.c, which reports the eventfd (gmp__uring_evfd_ready); pollfd.c,
 * which cancels on close (gmp__uring_cancel_fd); fork.c, whose child
 * handler calls gmp__uring_forked; and runtime.c (GMP_IO_URING, and
 * gmp_stats.uring_ops).
 *
 * What the code leans on: a ring's lock covers its submission queue, its
 * completion queue and its list of operations in flight, so any M may
 * submit to or reap any ring; an entry, once queued, is never dropped
 * (-EAGAIN and -EBUSY are retried after reaping); a submitter checks
 * CLOSING under the lock that the canceller walks the list under; every
 * operation in flight counts as a network-poll waiter. The memory orders
 * on the words shared with the kernel are argued at struct gmp__ring.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/io_uring.h>

#include "export_test.h"
#include "netpoll.h"
#include "preempt.h"
#include "runtime.h"
#include "scheduler.h"
#include "sys.h"
#include "task.h"
#include "uring.h"

/* ---- the kernel's interface ------------------------------------------------------ */

/* The rings are spoken through the kernel's own header and three system
 * calls, with no library between. Everything used here is in the header
 * of Linux 5.6, the first kernel with IORING_OP_READ and IORING_OP_WRITE,
 * the probe and the current-position offset; a name newer than that is
 * defined here if the header predates it. */
#ifndef IORING_FEAT_RW_CUR_POS
#error "libgmp needs <linux/io_uring.h> of Linux 5.6 or later (linux-libc-dev)"
#endif
#ifndef IORING_SQ_CQ_OVERFLOW
#define IORING_SQ_CQ_OVERFLOW (1U << 1)
#endif
/* The same numbers on every architecture (the common table, Linux 5.1). */
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_io_uring_enter
#define __NR_io_uring_enter 426
#endif
#ifndef __NR_io_uring_register
#define __NR_io_uring_register 427
#endif

/* A system call's answer as -errno, with errno left as the caller had it
 * (these run on g0 and on reapers, never across a switch). */
static long sys_result(long r, int saved)
{
	if (r < 0)
		r = -errno;
	errno = saved;
	return r;
}

static int uring_setup(unsigned entries, struct io_uring_params *p)
{
	int saved = errno;
	return (int)sys_result(syscall(__NR_io_uring_setup, entries, p), saved);
}

/* Submits `submit` entries and waits for none. With
 * IORING_ENTER_GETEVENTS it also moves completions the kernel kept aside
 * (IORING_FEAT_NODROP) into the completion queue. */
static int uring_enter(int fd, unsigned submit, unsigned flags)
{
	int saved = errno;
	return (int)sys_result(syscall(__NR_io_uring_enter, fd, submit, 0u,
				       flags, NULL, (size_t)0),
			       saved);
}

static int uring_register(int fd, unsigned opcode, void *arg, unsigned nargs)
{
	int saved = errno;
	return (int)sys_result(
		syscall(__NR_io_uring_register, fd, opcode, arg, nargs), saved);
}

/* ---- rings ------------------------------------------------------------------- */

char gmp__uring_cookie;

#define RING_ENTRIES 256u

/* The size of the rings made from now on (0: RING_ENTRIES); a test hook
 * sets it (gmp__uring_set_entries, at the end). */
static unsigned ring_entries;

typedef struct uop uop;

/* One ring: the kernel's two queues, mapped into our memory.
 *
 * The words marked "kernel" and "ours" below are shared with the kernel,
 * which reads and writes them on any CPU while we do: they are the whole
 * protocol between us, so each access names its order and its partner in
 * the kernel (the comment at the top of the kernel's io_uring.c lists the
 * barriers it pairs with a program's). On x86 every load is an acquire
 * and every store a release, so the tests there would not notice a
 * missing one (and qemu-user has no io_uring at all); on arm64 a missing
 * acquire lets a reaper read an entry before the kernel's writes to it
 * arrive, and a missing release lets the kernel see our tail before the
 * entry it hands over.
 *
 * Our side of each queue is written by whichever thread holds the ring's
 * lock; the lock's own acquire and release order one holder's writes
 * before the next holder's, so a tail published by one thread hands the
 * kernel the entries that earlier holders filled as well. The data a read
 * brings is written by the kernel before the completion that says so, so
 * the reaper's acquire of the tail covers it too, and the run queue's own
 * release and acquire carry it on to the task. */
typedef struct gmp__ring {
	gmp__mutex lock; /* what follows (cq_nonempty peeks without it) */
	int fd;
	/* The submission queue: we fill the entry at sq_tail, then move the
	 * tail; the kernel reads entries from its head up to our tail inside
	 * io_uring_enter and moves the head past them. */
	volatile uint32_t *sq_khead;  /* kernel: acquire loads */
	volatile uint32_t *sq_ktail;  /* ours: release stores */
	volatile uint32_t *sq_kflags; /* kernel: IORING_SQ_CQ_OVERFLOW */
	uint32_t sq_mask, sq_entries;
	uint32_t sq_tail; /* lock: our copy of *sq_ktail */
	struct io_uring_sqe *sqes;
	/* The completion queue: the kernel writes entries at its tail and
	 * moves the tail; we read them from the head and move the head. */
	volatile uint32_t *cq_khead; /* ours: release stores */
	volatile uint32_t *cq_ktail; /* kernel: acquire loads */
	uint32_t cq_mask, cq_entries;
	const struct io_uring_cqe *cqes;
	/* The mappings (the queues' rings share one with
	 * IORING_FEAT_SINGLE_MMAP: then cq_map == sq_map). */
	void *sq_map, *cq_map, *sqe_map;
	size_t sq_len, cq_len, sqe_len;
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
	const char *why_off;        /* why the ring is not used, or NULL */
	gmp__mutex lock;            /* all, evfd's life, why */
	volatile uint32_t probed;   /* atomic: PROBE_*, once per process */
	volatile uint32_t on;       /* atomic: the ring is used (this run) */
	int evfd;                   /* the eventfd every ring signals */
	gmp__ring *all;             /* every ring made, for fork */
	volatile uint32_t inflight; /* atomic: operations in all rings */
	char probe_why[160];        /* the probe's no, before probed */
	char why[160];              /* room for why_off with an errno */
} ur = { .evfd = -1 };

static bool has_op(const struct io_uring_probe *p, unsigned op)
{
	return op <= p->last_op && (p->ops[op].flags & IO_URING_OP_SUPPORTED);
}

/* Whether the kernel sets up a ring with what the engine needs; if not,
 * why, in why. */
static bool probe_kernel(char *why, size_t len)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	int fd = uring_setup(4, &p);
	if (fd < 0) {
		snprintf(why, len, "io_uring_setup: %s", strerror(-fd));
		return false;
	}
	/* The probe's answer: a header, then one entry per opcode (the
	 * kernel fills as many as it knows, at most the 256 we offer). */
	union {
		struct io_uring_probe p;
		char room[sizeof(struct io_uring_probe) +
			  256 * sizeof(struct io_uring_probe_op)];
	} u;
	memset(&u, 0, sizeof u);
	int r = uring_register(fd, IORING_REGISTER_PROBE, &u.p, 256);
	const char *lacks = NULL;
	if (!(p.features & IORING_FEAT_RW_CUR_POS))
		lacks = "the current-position offset (IORING_FEAT_RW_CUR_POS)";
	else if (!(p.features & IORING_FEAT_NODROP))
		lacks = "no-drop completions (IORING_FEAT_NODROP)";
	else if (r < 0)
		snprintf(why, len, "IORING_REGISTER_PROBE: %s", strerror(-r));
	else if (!has_op(&u.p, IORING_OP_READ))
		lacks = "IORING_OP_READ";
	else if (!has_op(&u.p, IORING_OP_WRITE))
		lacks = "IORING_OP_WRITE";
	else if (!has_op(&u.p, IORING_OP_ASYNC_CANCEL))
		lacks = "IORING_OP_ASYNC_CANCEL";
	gmp__sys_close(fd);
	if (lacks)
		snprintf(why, len, "the kernel's io_uring lacks %s", lacks);
	return !lacks && r >= 0;
}

/* probe_kernel, once per process: its answer cannot change. */
static bool probe(void)
{
	/* acquire: pairs with the release below, which publishes
	 * probe_why with the answer. */
	uint32_t v = gmp__load32_acq(&ur.probed);
	if (v == PROBE_UNKNOWN) {
		v = probe_kernel(ur.probe_why, sizeof ur.probe_why) ? PROBE_YES
								    : PROBE_NO;
		gmp__store32_rel(&ur.probed, v);
	}
	return v == PROBE_YES;
}

/* With GMP_DEBUG set, says why file I/O takes the system call path. */
static void say_off(const char *why)
{
	if (gmp__cfg.debug)
		fprintf(stderr,
			"gmp: io_uring: file I/O takes the system call path: "
			"%s\n",
			why);
}

void gmp__uring_start(void)
{
	gmp__store32_rlx(&ur.on, 0);
	gmp__store32_rlx(&ur.inflight, 0);
	ur.why_off = "GMP_IO_URING=off";
	if (!gmp__cfg.io_uring)
		return;
	if (!probe()) {
		ur.why_off = ur.probe_why;
		say_off(ur.why_off);
		return;
	}
	int e = gmp__sys_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e < 0) {
		snprintf(ur.why, sizeof ur.why, "eventfd: %s", strerror(-e));
		ur.why_off = ur.why;
		say_off(ur.why_off);
		return;
	}
	if (gmp__netpoll_open(e, &gmp__uring_cookie) != 0) {
		gmp__sys_close(e);
		ur.why_off = "epoll refused the rings' eventfd";
		say_off(ur.why_off);
		return;
	}
	gmp__pd_own(e, true); /* the hook library's close must not reach it */
	ur.why_off = NULL;
	ur.evfd = e;
	gmp__store32_rel(&ur.on, 1);
}

static int map(void **at, size_t len, int fd, uint64_t what)
{
	int saved = errno;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, fd, (off_t)what);
	int err = m == MAP_FAILED ? -errno : 0;
	errno = saved;
	*at = m == MAP_FAILED ? NULL : m;
	return err;
}

/* Unmaps r's queues and closes its descriptor: whatever ring_open made. */
static void ring_close(gmp__ring *r)
{
	int saved = errno;
	if (r->sqe_map)
		munmap(r->sqe_map, r->sqe_len);
	if (r->cq_map && r->cq_map != r->sq_map)
		munmap(r->cq_map, r->cq_len);
	if (r->sq_map)
		munmap(r->sq_map, r->sq_len);
	errno = saved;
	if (r->fd >= 0) {
		gmp__pd_own(r->fd, false);
		gmp__sys_close(r->fd);
	}
}

/* Sets up a ring of `entries` in r (zeroed) with the eventfd evfd
 * registered. Returns 0, or -errno with nothing left open. */
static int ring_open(gmp__ring *r, unsigned entries, int evfd)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	r->fd = uring_setup(entries, &p);
	if (r->fd < 0)
		return r->fd;
	gmp__pd_own(r->fd, true);
	r->sq_len = p.sq_off.array + p.sq_entries * sizeof(uint32_t);
	r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	r->sqe_len = p.sq_entries * sizeof(struct io_uring_sqe);
	bool single = p.features & IORING_FEAT_SINGLE_MMAP;
	if (single && r->cq_len > r->sq_len)
		r->sq_len = r->cq_len;
	int err = map(&r->sq_map, r->sq_len, r->fd, IORING_OFF_SQ_RING);
	if (!err && single)
		r->cq_map = r->sq_map;
	else if (!err)
		err = map(&r->cq_map, r->cq_len, r->fd, IORING_OFF_CQ_RING);
	if (!err)
		err = map(&r->sqe_map, r->sqe_len, r->fd, IORING_OFF_SQES);
	if (!err)
		err = uring_register(r->fd, IORING_REGISTER_EVENTFD, &evfd, 1);
	if (err) {
		ring_close(r);
		return err;
	}
	char *sq = r->sq_map, *cq = r->cq_map;
	r->sq_khead = (volatile uint32_t *)(sq + p.sq_off.head);
	r->sq_ktail = (volatile uint32_t *)(sq + p.sq_off.tail);
	r->sq_kflags = (volatile uint32_t *)(sq + p.sq_off.flags);
	r->sq_mask = *(const uint32_t *)(sq + p.sq_off.ring_mask);
	r->sq_entries = p.sq_entries;
	r->sqes = r->sqe_map;
	/* The array between the tail and the entries, which lets a program
	 * submit entries out of order, maps slot i to entry i for good: we
	 * submit in order. Published by the first tail's release. */
	uint32_t *array = (uint32_t *)(sq + p.sq_off.array);
	for (uint32_t i = 0; i < p.sq_entries; i++)
		array[i] = i;
	r->sq_tail = gmp__load32_rlx(r->sq_ktail); /* 0: nobody has used it */
	r->cq_khead = (volatile uint32_t *)(cq + p.cq_off.head);
	r->cq_ktail = (volatile uint32_t *)(cq + p.cq_off.tail);
	r->cq_mask = *(const uint32_t *)(cq + p.cq_off.ring_mask);
	r->cq_entries = p.cq_entries;
	r->cqes = (const struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

static gmp__ring *ring_of(gmp__p *p)
{
	/* acquire: pairs with ring_get's release */
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
	unsigned entries = ring_entries ? ring_entries : RING_ENTRIES;
	int err = r ? ring_open(r, entries, ur.evfd) : -ENOMEM;
	if (err == 0) {
		gmp__lock(&ur.lock);
		r->next = ur.all;
		ur.all = r;
		gmp__unlock(&ur.lock);
		gmp__storep_rel(&p->ring, r); /* publishes the ring */
		return r;
	}
	gmp__free(r);
	/* ENOMEM, a limit: the system call path from now on. */
	gmp__lock(&ur.lock);
	if (gmp__load32_rlx(&ur.on)) {
		snprintf(ur.why, sizeof ur.why, "a ring could not be made: %s",
			 strerror(-err));
		ur.why_off = ur.why;
		gmp__store32_rel(&ur.on, 0);
		say_off(ur.why_off);
	}
	gmp__unlock(&ur.lock);
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

/* Whether the completion queue may hold something, without the lock: a
 * hint, which reap_locked checks again under it. Both loads are relaxed:
 * no entry is read on their word (a stale tail leaves the completion to
 * the eventfd's wakeup, which follows it; a stale head costs a look
 * under the lock). Or the kernel holds completions that did not fit (it
 * keeps them, IORING_FEAT_NODROP, and says so in the submission queue's
 * flags). */
static bool cq_nonempty(gmp__ring *r)
{
	return gmp__load32_rlx(r->cq_ktail) != gmp__load32_rlx(r->cq_khead) ||
	       (gmp__load32_rlx(r->sq_kflags) & IORING_SQ_CQ_OVERFLOW);
}

/* Under r->lock: every completion to q, including those the kernel kept
 * aside while the queue was full (only a system call moves them in, and
 * it posts nothing else). */
static int reap_locked(gmp__ring *r, gmp__gqueue *q)
{
	int n = 0;
	for (;;) {
		/* relaxed: only reapers write the head, under the lock we
		 * hold (whose acquire ordered the last one before us). */
		uint32_t head = gmp__load32_rlx(r->cq_khead);
		/* acquire: pairs with the kernel's release store of the tail
		 * after it wrote the entries (io_commit_cqring): every entry
		 * below the tail is whole when we read it. */
		uint32_t tail = gmp__load32_acq(r->cq_ktail);
		bool full = tail - head >= r->cq_entries;
		for (; head != tail; head++) {
			const struct io_uring_cqe *cqe =
				&r->cqes[head & r->cq_mask];
			uop *op = (uop *)(uintptr_t)cqe->user_data;
			if ((void *)op == &cancel_cookie)
				continue;
			list_del(r, op);
			op->res = cqe->res;
			gmp_g *g = op->g; /* op is gone once g runs */
			gmp__gq_push(q, g);
			n++;
		}
		/* release: our reads of the entries come before the kernel
		 * may write new ones into their slots. The kernel loads the
		 * head before it fills a slot, and a control dependency
		 * orders its write after that load: the partner. */
		gmp__store32_rel(r->cq_khead, head);
		/* relaxed: the flag only sends us to the system call, which
		 * orders everything after it. A queue found full is the same
		 * sign on a kernel that predates the flag. */
		if (!full &&
		    !(gmp__load32_rlx(r->sq_kflags) & IORING_SQ_CQ_OVERFLOW))
			break;
		int rc = uring_enter(r->fd, 0, IORING_ENTER_GETEVENTS);
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
	while (gmp__sys_read(ur.evfd, &v, sizeof v) == -EINTR)
		;
	return gmp__uring_reap(q);
}

/* ---- submitting ---------------------------------------------------------------- */

/* Under r->lock: the entries from the kernel's head to our tail, handed
 * over once. -EAGAIN and -EBUSY mean "not now" (completions are waiting
 * to be posted, or memory is short): reap, let others run, and leave the
 * retry to the caller. An entry, once queued, is never dropped. */
static void enter_once(gmp__ring *r, gmp__gqueue *q)
{
	uint32_t queued = r->sq_tail - gmp__load32_acq(r->sq_khead);
	int rc = uring_enter(r->fd, queued, 0);
	if (rc >= 0 || rc == -EINTR)
		return;
	if (rc != -EAGAIN && rc != -EBUSY)
		gmp__throw("io_uring_enter failed (errno %d)", -rc);
	reap_locked(r, q);
	gmp__osyield();
}

/* Under r->lock: the next free entry, zeroed, handing the queue to the
 * kernel while it is full. */
static struct io_uring_sqe *sqe_get(gmp__ring *r, gmp__gqueue *q)
{
	/* acquire: pairs with the kernel's release store of the head once
	 * it has read the entries below it (io_commit_sqring): the slot we
	 * fill next is one the kernel is done reading. */
	while (r->sq_tail - gmp__load32_acq(r->sq_khead) >= r->sq_entries)
		enter_once(r, q);
	struct io_uring_sqe *sqe = &r->sqes[r->sq_tail & r->sq_mask];
	memset(sqe, 0, sizeof *sqe);
	return sqe;
}

/* Under r->lock: queues the entry sqe_get gave (not yet submitted). */
static void sqe_push(gmp__ring *r)
{
	r->sq_tail++;
	/* release: the entry's stores come before the tail that hands it
	 * over; the partner is the kernel's acquire load of the tail
	 * (io_sqring_entries) before it reads entries. */
	gmp__store32_rel(r->sq_ktail, r->sq_tail);
}

/* Under r->lock: everything queued, submitted. */
static void submit_all(gmp__ring *r, gmp__gqueue *q)
{
	/* acquire: as in sqe_get */
	while (r->sq_tail != gmp__load32_acq(r->sq_khead))
		enter_once(r, q);
}

static void prep(struct io_uring_sqe *sqe, uint8_t opcode, int fd,
		 uint64_t addr, uint32_t len, uint64_t off, void *data)
{
	sqe->opcode = opcode;
	sqe->fd = fd;
	sqe->addr = addr;
	sqe->len = len;
	sqe->off = off;
	sqe->user_data = (uint64_t)(uintptr_t)data;
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
	prep(sqe, op->opcode, op->fd, (uint64_t)(uintptr_t)op->buf, op->n,
	     op->off, op);
	list_add(r, op);
	sqe_push(r);
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
			/* the target is named by its user_data, in addr */
			prep(sqe, IORING_OP_ASYNC_CANCEL, -1,
			     (uint64_t)(uintptr_t)op, 0, 0, &cancel_cookie);
			sqe_push(r);
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

bool gmp__uring_usable(void)
{
	return gmp__load32_acq(&ur.on) != 0;
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
	while (r) {
		gmp__ring *next = r->next;
		if (r->inflight)
			gmp__throw("io_uring: an operation is still in flight "
				   "at shutdown");
		ring_close(r);
		gmp__free(r);
		r = next;
	}
	if (e >= 0) {
		gmp__pd_own(e, false);
		gmp__sys_close(e);
	}
}

void gmp__uring_forked(void)
{
	for (gmp__ring *r = ur.all; r; r = r->next)
		ring_close(r); /* munmap and close only */
	if (ur.evfd >= 0)
		gmp__sys_close(ur.evfd);
	ur.lock = (gmp__mutex)GMP__MUTEX_INIT;
	ur.all = NULL; /* the structs are the parent's leftovers */
	ur.evfd = -1;
	ur.on = 0;
	ur.inflight = 0;
}

/* ---- for tests only (export_test.h) -------------------------------------------- */

#if GMP__TEST_HOOKS
void gmp__uring_set_entries(unsigned n)
{
	ring_entries = n;
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
#endif
