/* Poll descriptors (pollfd.h): one per descriptor number the I/O calls
 * have used, with the wait slots of Go's pollDesc and the reference count
 * of Go's fdMutex. design.md §30 explains them: the table, the wait slots
 * and the edge count, the list of waiters, foreign threads in poll(2),
 * references and gmp_close, a number closed with plain close() and
 * reused, deadlines, and the cookie.
 *
 * This file holds the table, the edge count, the wait slots and the list,
 * registration with epoll (arm at once, or prepare's park on trust), the
 * poller's side (gmp__pd_ready), waiting (tasks in the poller, threads in
 * poll(2)), accepted sockets, references and closing, and fork. It pairs
 * with pollfd_deadline.c (gmp_set_deadline's deadlines and the timer a
 * waiter arms), pollfd_recheck.c (sysmon's later checks of registrations
 * made on trust) and pollfd_impl.h (the descriptor's layout and the steps
 * all three take); io.c calls it, and netpoll.c is the epoll instance
 * under it.
 *
 * The barriers every waiter and waker here relies on: a waiter registers
 * (in its slot, or on the list) and then reads `edges` with a
 * read-modify-write (add 0); a waker bumps `edges` with one and then looks
 * at the slots and the list. Read-modify-writes of one word are totally
 * ordered, and a _full one both releases and acquires: if the waiter's
 * comes first, the waker sees the registration made before it; if the
 * waker's does, the waiter reads the bumped count and retries. gmp_close
 * sets CLOSING and bumps the count the same way, so a waiter registering
 * just then is woken or sees the bump (and then CLOSING). Deadlines use
 * the same pair of read-modify-writes on `dl[mode]`.
 */
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "netpoll.h"
#include "pollfd.h"
#include "pollfd_impl.h"
#include "scheduler.h"
#include "sys.h"
#include "task.h"
#include "uring.h"
#include "wait.h"

#define PD_CHUNK_SHIFT 10
#define PD_CHUNK (1 << PD_CHUNK_SHIFT)

/* atomic: NULL, or a chunk published with a release CAS */
static gmp__pd *volatile pd_chunks[GMP__PD_MAX_FD >> PD_CHUNK_SHIFT];

/* ---- the table -------------------------------------------------------------- */

static __attribute__((noinline)) gmp__pd *chunk_new(int i)
{
	size_t size = PD_CHUNK * sizeof(gmp__pd);
	int saved = errno;
	void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		errno = saved;
		return NULL;
	}
	gmp__pd *c = mem; /* zero-filled: every field's initial state */
	for (int k = 0; k < PD_CHUNK; k++)
		c[k].fd = i * PD_CHUNK + k;
	/* release: publishes the fds; pairs with the acquire in lookups */
	if (!gmp__casp_rel(&pd_chunks[i], NULL, c)) {
		munmap(mem, size); /* another thread won */
		c = gmp__loadp_acq(&pd_chunks[i]);
	}
	errno = saved;
	return c;
}

static inline gmp__pd *pd_lookup(int fd)
{
	if (fd < 0 || fd >= GMP__PD_MAX_FD)
		return NULL;
	gmp__pd *c = gmp__loadp_acq(&pd_chunks[fd >> PD_CHUNK_SHIFT]);
	return c ? &c[fd & (PD_CHUNK - 1)] : NULL;
}

static inline gmp__pd *pd_get(int fd, int *err)
{
	if (fd < 0) {
		*err = -EBADF;
		return NULL;
	}
	if (fd >= GMP__PD_MAX_FD) {
		*err = -EMFILE;
		return NULL;
	}
	gmp__pd *c = gmp__loadp_acq(&pd_chunks[fd >> PD_CHUNK_SHIFT]);
	if (GMP__UNLIKELY(!c) && !(c = chunk_new(fd >> PD_CHUNK_SHIFT))) {
		*err = -ENOMEM;
		return NULL;
	}
	return &c[fd & (PD_CHUNK - 1)];
}

gmp__pd *gmp__pd_lookup(int fd, int *err)
{
	return pd_get(fd, err);
}

bool gmp__pd_closing(const gmp__pd *pd)
{
	return (gmp__load32_acq(&pd->ref) & PD_CLOSING) != 0;
}

int gmp__pd_kind(const gmp__pd *pd)
{
	return (int)(gmp__load32_rlx(&pd->kind) & PD_KIND_MASK);
}

/* A kind learned anew also drops the non-blocking hint: a kind found wrong
 * means a new file behind the number (a socket where a pipe was), whose
 * flag nobody has seen yet; the next call that finds nothing to do asks
 * again (io.c's probe_nonblock). */
void gmp__pd_set_kind(gmp__pd *pd, int kind)
{
	gmp__store32_rlx(&pd->kind, (uint32_t)kind);
}

bool gmp__pd_nonblock(const gmp__pd *pd)
{
	return (gmp__load32_rlx(&pd->kind) & PD_NONBLOCK) != 0;
}

void gmp__pd_set_nonblock(gmp__pd *pd)
{
	uint32_t v = gmp__load32_rlx(&pd->kind);
	if (!(v & PD_NONBLOCK))
		gmp__store32_rlx(&pd->kind, v | PD_NONBLOCK);
}

static void pd_unlock(void *arg)
{
	gmp__unlock(&((gmp__pd *)arg)->lock);
}

/* ---- the edge count ----------------------------------------------------------- */

void gmp__pd_snapshot(gmp__pd *pd, gmp__pd_op *op)
{
	/* The count only moves forward, and a stale value only makes
	 * edges_moved see a change (a retry). Acquire, for
	 * gmp__pd_drained's rdhup. */
	op->edges = gmp__load32_acq(&pd->edges);
}

void gmp__pd_drained_at(gmp__pd *pd, const gmp__pd_op *op)
{
	gmp__store32_rlx(&pd->rdrain, op->edges + 1);
}

bool gmp__pd_drained(gmp__pd *pd, gmp__pd_op *op)
{
	/* An empty queue is not the whole story: the end of the stream (or
	 * an error) makes read return at once without any data, and its
	 * edge may have come before the short read. pd_ready sets rdhup
	 * before its bump; acquire: if we see the count of that bump (or a
	 * later one), we see rdhup. A count older than the latest bump only
	 * costs a retry: gmp__pd_wait re-reads it with an RMW after
	 * registering, and sees any edge since op->edges (the barriers at
	 * the top). */
	uint32_t e = gmp__load32_acq(&pd->edges);
	if (gmp__load32_rlx(&pd->rdhup) ||
	    gmp__load32_rlx(&pd->rdrain) != e + 1)
		return false;
	op->edges = e;
	return true;
}

/* The waiter's half, after registering: has anything happened since the
 * snapshot? */
static bool edges_moved(gmp__pd *pd, const gmp__pd_op *op)
{
	/* full: an RMW, not a load, so that it is ordered with the
	 * waker's bump in the word's modification order (the barriers at
	 * the top) */
	return gmp__add32_full(&pd->edges, 0) != op->edges;
}

/* The call's file is gone: gmp_close'd, or the number names a new file.
 * A call that checked the registration itself (armed) knows that its file
 * is the old one. A call that parked on trust may have parked on the old
 * file or on the new one when a deferred check finds that the number
 * changed (pollfd_recheck.c): it retries on the new
 * file instead. */
static bool broken(gmp__pd *pd, const gmp__pd_op *op)
{
	if (gmp__load32_acq(&pd->ref) & PD_CLOSING)
		return true;
	if (!op->armed && !op->trusted)
		return false;
	/* acquire: a check's vretry is stored before its seq */
	uint32_t seq = gmp__load32_acq(&pd->seq) & PD_SEQ_MASK;
	if (seq == op->seq)
		return false;
	return op->armed || op->seq != gmp__load32_rlx(&pd->vretry);
}

/* ---- wait slots --------------------------------------------------------------- */

/* gmp_park's unlock function (Go's netpollblockcommit): runs on g0 once
 * the task is WAITING. If its registration is still there, the task is
 * now parked in the slot; if a waker cancelled it, the task resumes. */
static bool block_commit(gmp_g *g, void *arg)
{
	volatile uintptr_t *slot = arg;
	/* full: publishes the parked G to slot_wake's acquire */
	if (!gmp__casp_full(slot, (uintptr_t)g | PD_PENDING, (uintptr_t)g))
		return false;
	gmp__netpoll_adjust_waiters(1);
	return true;
}

/* ---- list waiters -------------------------------------------------------------- */

/* Under lock. */
static void list_push(gmp__pd *pd, gmp__waiter *w)
{
	w->prev = NULL;
	w->next = pd->list;
	if (pd->list)
		pd->list->prev = w;
	gmp__storep_rel(&pd->list, w);
	gmp__netpoll_adjust_waiters(1);
}

/* The poll bits a list waiter takes as "ready": what it asked for, and
 * the errors poll(2) always reports. A peer's shutdown is readable EOF. */
static uint32_t want_bits(int events)
{
	uint32_t want = (uint32_t)events | POLLERR | POLLHUP;
	if (events & POLLIN)
		want |= POLLRDHUP;
	return want;
}

static int ready_bits(uint32_t ev, int events)
{
	int r = (int)(ev & ((uint32_t)events | POLLERR | POLLHUP));
	if ((ev & POLLRDHUP) && (events & POLLIN))
		r |= POLLIN;
	return r;
}

int gmp__poll_now(int fd, int events)
{
	struct pollfd p = { .fd = fd, .events = (short)events };
	struct timespec zero = { 0, 0 };
	int r;
	while ((r = gmp__sys_ppoll(&p, 1, &zero)) == -EINTR)
		;
	if (r < 0)
		return r;
	return p.revents & POLLNVAL ? -EBADF : p.revents;
}

/* A task waits on the list for `events` until the deadline (< 0: none)
 * or that of direction mode (< 0: no direction), unless an edge came
 * after op's snapshot. The descriptor must be armed.
 * Returns the ready bits reported by the poller (> 0), 0 when the caller
 * should look again (the deadline passed, or the count moved), or
 * -EBADF. */
static int list_wait(gmp__pd *pd, int events, int64_t deadline,
		     const gmp__pd_op *op, int mode)
{
	gmp__waiter w;
	gmp__waiter_init(&w);
	w.ticket = events;
	w.c = pd;
	gmp__lock(&pd->lock);
	if (broken(pd, op)) {
		gmp__unlock(&pd->lock);
		return -EBADF;
	}
	list_push(pd, &w);
	if (edges_moved(pd, op)) {
		list_remove(pd, &w);
		gmp__unlock(&pd->lock);
		return 0;
	}
	if (mode >= 0) /* after the push: design.md §30.7 */
		deadline = dl_min(deadline, dl_after_register(pd, mode));
	if (op->trusted)
		watch(pd); /* after edges_moved's RMW (see watch) */
	/* Still under the lock: no waker can claim w before it sleeps. */
	gmp__waiter_sleep(&w, pd_unlock, pd,
			  events & POLLIN ? GMP__WAIT_IO_READ
					  : GMP__WAIT_IO_WRITE,
			  deadline);
	if (w.woken) /* the waker took w off the list */
		return w.result < 0 ? w.result
				    : ready_bits((uint32_t)w.result, events);
	gmp__lock(&pd->lock);
	list_remove(pd, &w); /* timed out: still on it (wakers leave it) */
	gmp__unlock(&pd->lock);
	return 0;
}

/* ---- registration --------------------------------------------------------------- */

/* Makes sure epoll watches the file now behind pd->fd under our cookie,
 * and records its generation in op (design.md §30.6, "A number closed with
 * plain close() and reused"). Returns 0, -EBADF if closing, or the
 * epoll error (-EPERM: a file epoll cannot watch). */
static __attribute__((noinline)) int arm(gmp__pd *pd, gmp__pd_op *op)
{
	int err = gmp__netpoll_init();
	if (err)
		return err;
	uint32_t gen = gmp__netpoll_generation();
	gmp_g *rg = NULL, *wg = NULL;
	gmp__waiter *stale = NULL;
	gmp__lock(&pd->lock);
	if (gmp__load32_rlx(&pd->ref) & PD_CLOSING) {
		gmp__unlock(&pd->lock);
		return -EBADF;
	}
	uint32_t seq = gmp__load32_rlx(&pd->seq) & PD_SEQ_MASK;
	bool had = gmp__load32_rlx(&pd->epgen) == gen;
	uint32_t nseq = had ? (seq + 1) & PD_SEQ_MASK : seq;
	err = gmp__netpoll_open(pd->fd, cookie(pd, nseq));
	if (err == 0 && had) {
		/* A new file behind the number. */
		gmp__store32_rel(&pd->seq, nseq);
		/* An edge of the new registration delivered between the ADD
		 * and the store above carried nseq while seq still said
		 * otherwise, and pd_ready dropped it: re-arm, which reports
		 * the current readiness afresh. */
		gmp__netpoll_modify(pd->fd, cookie(pd, nseq));
		/* Whoever waits here waits on the old file, and what we knew
		 * of its kind is no longer true. */
		forget_file(pd, GMP__PD_KIND_UNKNOWN);
		edges_bump(pd);
		rg = slot_wake(&pd->rg);
		wg = slot_wake(&pd->wg);
		stale = list_take_all(pd, -EBADF);
	} else if (err == -EEXIST) {
		/* Registered already: by us, with our current cookie, unless
		 * we had forgotten it (then make the cookie current). */
		if (!had)
			gmp__netpoll_modify(pd->fd, cookie(pd, seq));
		err = 0;
	}
	if (err == 0) {
		gmp__store32_rlx(&pd->epgen, gen);
		op->seq = gmp__load32_rlx(&pd->seq) & PD_SEQ_MASK;
		op->armed = true;
	}
	gmp__unlock(&pd->lock);
	if (rg)
		gmp__ready(rg, true);
	if (wg)
		gmp__ready(wg, true);
	list_wake(stale);
	return err;
}

int gmp__pd_arm(gmp__pd *pd, gmp__pd_op *op)
{
	return op->armed ? 0 : arm(pd, op);
}

/* Before a task parks: a descriptor registered with the live epoll
 * instance is trusted to still name the file it was registered for (a
 * deferred check makes sure, see "checking registrations later"); any
 * other is armed, which checks at once. */
static inline int prepare(gmp__pd *pd, gmp__pd_op *op)
{
	if (op->armed)
		return 0;
	uint32_t gen = gmp__netpoll_generation();
	if (gen == 0 || gmp__load32_rlx(&pd->epgen) != gen)
		return arm(pd, op);
	if (!op->trusted) {
		op->trusted = true;
		/* A new call waits: what the deferred check tells apart from
		 * one call that has waited all along. */
		gmp__store32_rlx(&pd->vcall, gmp__load32_rlx(&pd->vcall) + 1);
	}
	op->seq = gmp__load32_acq(&pd->seq) & PD_SEQ_MASK;
	return 0;
}

/* ---- the poller's side -------------------------------------------------------- */

/* The poll(2) bits of what the poller saw, as gmp_poll_fd reports them
 * to the waiters on the list. */
static uint32_t poll_bits(uint32_t modes)
{
	uint32_t ev = 0;
	if (modes & GMP__POLL_READ)
		ev |= POLLIN;
	if (modes & GMP__POLL_WRITE)
		ev |= POLLOUT;
	if (modes & GMP__POLL_RDHUP)
		ev |= POLLRDHUP;
	if (modes & GMP__POLL_HUP)
		ev |= POLLHUP;
	if (modes & GMP__POLL_ERR)
		ev |= POLLERR;
	return ev;
}

void gmp__pd_ready(void *ck, uint32_t modes, gmp__gqueue *q)
{
	uint64_t c = (uint64_t)(uintptr_t)ck;
	if (!(c & PD_COOKIE_TAG))
		return;
	gmp__pd *pd = pd_lookup((int)(uint32_t)c);
	if (!pd || (gmp__load32_rlx(&pd->seq) & PD_SEQ_MASK) !=
			   ((uint32_t)(c >> 32) & PD_SEQ_MASK))
		return; /* an event for a file we no longer watch */
	const uint32_t ended = GMP__POLL_RDHUP | GMP__POLL_HUP | GMP__POLL_ERR;
	if (modes & ended)
		gmp__store32_rlx(&pd->rdhup, 1); /* released by the bump */
	edges_bump(pd);
	/* Go's choice: errors and hang-ups wake both directions, so that the
	 * retried call reports them (a peer's shutdown, readers only). */
	if (modes & (GMP__POLL_READ | ended)) {
		gmp_g *g = slot_wake(&pd->rg);
		if (g)
			gmp__gq_push(q, g);
	}
	if (modes & (GMP__POLL_WRITE | GMP__POLL_HUP | GMP__POLL_ERR)) {
		gmp_g *g = slot_wake(&pd->wg);
		if (g)
			gmp__gq_push(q, g);
	}
	/* acquire: after the bump (the barriers at the top) */
	if (!gmp__loadp_acq(&pd->list))
		return;
	uint32_t events = poll_bits(modes);
	gmp__lock(&pd->lock);
	gmp__waiter *next;
	for (gmp__waiter *w = pd->list; w; w = next) {
		next = w->next;
		if (!(events & want_bits((int)w->ticket)) ||
		    !gmp__waiter_claim(w))
			continue;
		list_remove(pd, w);
		w->result = (int)events;
		/* gmp__waiter_wake, except that the task goes to q: the
		 * poller's caller readies everything it found at once. The
		 * task is parked (it left the lock in its unlock function),
		 * so w stays valid until then. */
		gmp_g *g = w->g;
		gmp__store32_rel(&w->state, GMP__WAIT_WOKEN);
		gmp__gq_push(q, g);
	}
	gmp__unlock(&pd->lock);
}

/* ---- waiting ------------------------------------------------------------------ */

/* A task whose descriptor epoll cannot watch blocks its thread instead
 * (such files are always ready, so this is brief). */
static int wait_unpollable(gmp__pd *pd, int events, int64_t deadline, int mode)
{
	gmp_enter_syscall();
	int r = gmp__pd_wait_thread(pd, events, deadline, mode);
	gmp_exit_syscall();
	return r;
}

/* gmp__pd_wait, and the hook library's gmp__pd_wait_until: `deadline` is
 * the call's own (< 0 none), `hook` says to report a descriptor epoll
 * cannot watch rather than wait on it in poll(2). */
static int pd_wait(gmp__pd *pd, int mode, gmp__pd_op *op, int64_t deadline,
		   bool hook)
{
	volatile uintptr_t *slot = mode == GMP__PD_READ ? &pd->rg : &pd->wg;
	int events = mode == GMP__PD_READ ? POLLIN : POLLOUT;
	int err = prepare(pd, op);
	if (err == -EPERM && !hook) {
		int r = wait_unpollable(pd, events, -1, mode);
		return r < 0 ? r : 0;
	}
	if (err)
		return err;
	if (broken(pd, op))
		return -EBADF;
	/* The call would wait: this is where a deadline that has passed
	 * fails it (the call found no data). */
	if (dl_passed(pd, mode))
		return -ETIMEDOUT;
	if (deadline >= 0) {
		/* A deadline of the call's own needs a timer of the call's
		 * own: the list's waiter has one (the slot's timer is the
		 * descriptor's, for gmp_set_deadline). */
		int r = list_wait(pd, events, deadline, op, mode);
		return r < 0 ? r : 0;
	}
	gmp_g *g = gmp_current();
	uintptr_t mine = (uintptr_t)g | PD_PENDING;
	/* full: registration, then edges_moved's RMW (the barriers at the
	 * top) */
	if (!gmp__casp_full(slot, PD_NIL, mine)) {
		/* Another task waits in this direction. */
		int r = list_wait(pd, events, -1, op, mode);
		return r < 0 ? r : 0;
	}
	if (!edges_moved(pd, op) && !broken(pd, op)) {
		/* After the registration: design.md §30.7. A
		 * deadline already past fires at once: the commit fails or
		 * the task is readied, and it retries. */
		int64_t dl = dl_after_register(pd, mode);
		if (dl != 0)
			dl_arm(pd, dl < 1 ? 1 : dl);
		if (op->trusted)
			watch(pd); /* after edges_moved's RMW (see watch) */
		gmp__park(block_commit, (void *)slot,
			  mode == GMP__PD_READ ? GMP__WAIT_IO_READ
					       : GMP__WAIT_IO_WRITE);
		/* Woken (a waker emptied the slot), or the commit failed (a
		 * waker cancelled our registration): either way the slot is
		 * no longer ours. The deadline timer stays armed. */
	} else {
		/* Not parking: withdraw, unless a waker already did. */
		gmp__casp_full(slot, mine, PD_NIL);
	}
	return broken(pd, op) ? -EBADF : 0;
}

int gmp__pd_wait(gmp__pd *pd, int mode, gmp__pd_op *op)
{
	return pd_wait(pd, mode, op, -1, false);
}

int gmp__pd_wait_until(gmp__pd *pd, int mode, gmp__pd_op *op, int64_t deadline)
{
	return pd_wait(pd, mode, op, deadline, true);
}

int gmp__pd_poll_until(gmp__pd *pd, int events, gmp__pd_op *op,
		       int64_t deadline)
{
	int err = prepare(pd, op);
	if (err)
		return err;
	return list_wait(pd, events, deadline, op, -1);
}

int gmp__pd_poll_task(gmp__pd *pd, int events, int64_t deadline)
{
	gmp__pd_op op = { 0, 0, false, false };
	int err = prepare(pd, &op);
	if (err == -EPERM)
		return wait_unpollable(pd, events, deadline, -1);
	if (err)
		return err;
	for (;;) {
		gmp__pd_snapshot(pd, &op);
		int r = gmp__poll_now(pd->fd, events);
		if (r != 0)
			return r;
		if (deadline >= 0 && gmp__nanotime() >= deadline)
			return 0;
		r = list_wait(pd, events, deadline, &op, -1);
		if (r != 0)
			return r;
	}
}

int gmp__pd_wait_thread(gmp__pd *pd, int events, int64_t deadline, int mode)
{
	gmp__lock(&pd->lock);
	if (gmp__load32_rlx(&pd->ref) & PD_CLOSING) {
		gmp__unlock(&pd->lock);
		return -EBADF;
	}
	if (!pd->evfd1) {
		int e = gmp__sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (e >= 0) {
			pd->evfd1 = e + 1;
			gmp__pd_own(e, true);
		}
	}
	/* Valid until we drop our reference: only the final close (which
	 * needs every reference gone) closes it. */
	int efd = pd->evfd1 - 1;
	/* Registered: deadline changes from now on tell us (dl_wake).
	 * full: before dl_after_register's RMW below, as for tasks. */
	gmp__add32_full(&pd->twait, 1);
	uint32_t gen = pd->dlgen;
	gmp__unlock(&pd->lock);

	int r;
	for (;;) {
		int64_t dl = mode >= 0 ? dl_after_register(pd, mode) : 0;
		if (dl != 0 && gmp__nanotime() >= dl) {
			r = -ETIMEDOUT;
			break;
		}
		int64_t until = dl_min(deadline, dl);
		struct pollfd p[2] = {
			{ .fd = pd->fd, .events = (short)events },
			{ .fd = efd, .events = POLLIN },
		};
		int64_t left = -1;
		if (until >= 0) {
			left = until - gmp__nanotime();
			if (left < 0)
				left = 0;
		}
		if (efd < 0 && (left < 0 || left > 10 * 1000 * 1000))
			left = 10 * 1000 * 1000; /* no eventfd: watch CLOSING
						    and the deadlines */
		struct timespec ts = { (time_t)(left / 1000000000),
				       (long)(left % 1000000000) };
		int n = gmp__sys_ppoll(p, efd >= 0 ? 2 : 1,
				       left >= 0 ? &ts : NULL);
		if (gmp__load32_acq(&pd->ref) & PD_CLOSING) {
			r = -EBADF;
			break;
		}
		if (n < 0) {
			if (n == -EINTR)
				continue;
			r = n;
			break;
		}
		if (p[0].revents & POLLNVAL) {
			r = -EBADF;
			break;
		}
		if (p[0].revents) {
			r = p[0].revents;
			break;
		}
		if (efd >= 0 && p[1].revents) {
			/* A deadline changed: note it, then look at it at the
			 * top. The eventfd stays readable until every thread
			 * that waited then has noted it; one that came later
			 * waits for the others. */
			gmp__lock(&pd->lock);
			bool mine = gen != pd->dlgen;
			if (mine) {
				gen = pd->dlgen;
				gmp__pd_dl_ack(pd);
			}
			gmp__unlock(&pd->lock);
			if (!mine)
				gmp__osyield();
			continue;
		}
		if (deadline >= 0 && gmp__nanotime() >= deadline) {
			r = 0;
			break;
		}
	}
	gmp__lock(&pd->lock);
	gmp__add32_full(&pd->twait, -1);
	if (gen != pd->dlgen)
		gmp__pd_dl_ack(pd);
	gmp__unlock(&pd->lock);
	return r;
}

/* ---- accepted sockets ---------------------------------------------------------- */

void gmp__pd_accepted(int fd, bool nonblock, int kind)
{
	int err = 0;
	gmp__pd *pd = pd_get(fd, &err);
	if (!pd)
		return; /* beyond the table: its calls will say so */
	if (nonblock && gmp__netpoll_init() != 0)
		nonblock = false; /* its first park will report it */
	uint32_t gen = gmp__netpoll_generation();
	gmp__lock(&pd->lock);
	if (gmp__load32_rlx(&pd->ref) & PD_CLOSING) {
		/* The old file's gmp_close is finishing (its close(2) has
		 * returned, or accept could not have given us the number):
		 * it resets the descriptor, and the first park arms. */
		gmp__unlock(&pd->lock);
		return;
	}
	uint32_t nseq = (gmp__load32_rlx(&pd->seq) + 1) & PD_SEQ_MASK;
	/* Events still coming for the old file are stale from here on, and
	 * whoever waits here waits on that file: -EBADF (broken). */
	gmp__store32_rel(&pd->seq, nseq);
	forget_file(pd, (uint32_t)kind | (nonblock ? PD_NONBLOCK : 0));
	gmp__store32_rlx(&pd->epgen, 0);
	if (nonblock) {
		err = gmp__netpoll_open(fd, cookie(pd, nseq));
		if (err == -EEXIST) /* cannot be: a new file */
			err = gmp__netpoll_modify(fd, cookie(pd, nseq));
		if (err == 0)
			gmp__store32_rlx(&pd->epgen, gen);
	}
	edges_bump(pd);
	gmp_g *rg = slot_wake(&pd->rg);
	gmp_g *wg = slot_wake(&pd->wg);
	gmp__waiter *stale = list_take_all(pd, -EBADF);
	gmp__unlock(&pd->lock);
	if (rg)
		gmp__ready(rg, true);
	if (wg)
		gmp__ready(wg, true);
	list_wake(stale);
}

/* ---- references and closing -------------------------------------------------- */

/* The number's last close(2) is under way (CLOSED): the caller is not
 * late for the old file but early for whatever the number names next, so
 * it waits for the descriptor to reopen, which takes only as long as that
 * close(2). A task yields meanwhile, a thread gives up its CPU. */
static __attribute__((noinline)) void wait_reopen(gmp__pd *pd)
{
	bool task = gmp__getg(NULL) != NULL;
	while (gmp__load32_acq(&pd->ref) & PD_CLOSED) {
		if (task)
			gmp_yield();
		else
			gmp__osyield();
	}
}

gmp__pd *gmp__pd_acquire(int fd, int *err)
{
	gmp__pd *pd = pd_get(fd, err);
	if (!pd)
		return NULL;
	uint32_t v = gmp__load32_rlx(&pd->ref);
	for (;;) {
		if (GMP__UNLIKELY(v & PD_CLOSED)) {
			wait_reopen(pd);
			v = gmp__load32_rlx(&pd->ref);
			continue;
		}
		if (v & PD_CLOSING) {
			*err = -EBADF;
			return NULL;
		}
		/* full: acquire for the descriptor's state; see release */
		uint32_t seen = gmp__fcas32_full(&pd->ref, v, v + 1);
		if (seen == v)
			return pd;
		v = seen;
	}
}

/* The last reference is gone after a gmp_close: reset the descriptor for
 * the number's next file, close the number, and reopen the descriptor.
 * Calls that come meanwhile fail with -EBADF (CLOSING: they are late for
 * this file) until the close(2) begins, then wait for it (CLOSED: they
 * are early for the next), so none can slip in and park on a file that
 * is about to go. Returns close's result. For the hook library's dup2
 * and dup3 (gmp__pd_replace), `from` >= 0: the number is not closed but
 * made a copy of `from` with dup3(2) (`flags`), which closes the old file
 * in the same breath; the result is then dup3's, 0 or -errno. */
static int final_close_as(gmp__pd *pd, int from, int flags)
{
	gmp__lock(&pd->lock);
	if (gmp__loadp_rlx(&pd->rg) != PD_NIL ||
	    gmp__loadp_rlx(&pd->wg) != PD_NIL || pd->list)
		gmp__throw("gmp_close: descriptor %d still has waiters after "
			   "its last user left",
			   pd->fd);
	int efd = pd->evfd1 - 1;
	pd->evfd1 = 0;
	pd->closer = NULL;
	gmp__store32_rlx(&pd->epgen, 0);
	forget_file(pd, GMP__PD_KIND_UNKNOWN);
	gmp__store64_rlx(&pd->dl[GMP__PD_READ], 0);
	gmp__store64_rlx(&pd->dl[GMP__PD_WRITE], 0);
	gmp__store32_rlx(&pd->seen, 0);
	pd->dlsig = false;
	pd->dlack = 0;
	gmp__store32_rel(&pd->ref, PD_CLOSING | PD_CLOSED);
	gmp__unlock(&pd->lock);
	if (efd >= 0) {
		gmp__pd_own(efd, false);
		gmp__sys_close(efd);
	}
	int res = from < 0 ? gmp__sys_close(pd->fd)
			   : gmp__sys_dup3(from, pd->fd, flags);
	/* release: the reset happens before anyone takes a new reference */
	gmp__store32_rel(&pd->ref, 0);
	return res < 0 ? res : 0;
}

static int final_close(gmp__pd *pd)
{
	return final_close_as(pd, -1, 0);
}

static void wake_closer(gmp__pd *pd)
{
	gmp__lock(&pd->lock);
	gmp__waiter *w = pd->closer;
	if (w && gmp__waiter_claim(w)) {
		pd->closer = NULL;
		gmp__unlock(&pd->lock);
		gmp__waiter_wake(w);
		return;
	}
	gmp__unlock(&pd->lock);
}

void gmp__pd_release(gmp__pd *pd)
{
	/* full: our use of the file happens before the count drops
	 * (release), and the final close sees all of it (acquire) */
	uint32_t v = gmp__add32_full(&pd->ref, -1) - 1;
	if (GMP__LIKELY(!(v & PD_CLOSING)))
		return;
	if (PD_COUNT(v) == 0)
		final_close(pd); /* the closer did not wait for us */
	else if (PD_COUNT(v) == 1)
		wake_closer(pd); /* only the closer's reference is left */
}

/* The closer waits until its reference is the only one. */
static void wait_for_callers(gmp__pd *pd)
{
	for (;;) {
		gmp__lock(&pd->lock);
		if (PD_COUNT(gmp__load32_acq(&pd->ref)) <= 1) {
			gmp__unlock(&pd->lock);
			return;
		}
		gmp__waiter w;
		gmp__waiter_init(&w);
		pd->closer = &w;
		gmp__waiter_sleep(&w, pd_unlock, pd, GMP__WAIT_IO_WRITE, -1);
	}
}

/* gmp_close's first half, and the hook library's: takes the closer's
 * reference with CLOSING set (waiting out a close(2) under way, CLOSED),
 * under pd->lock, which it leaves held. Returns false, with the lock
 * released, if another close has begun. */
static bool close_begin(gmp__pd *pd)
{
	gmp__lock(&pd->lock);
	uint32_t v = gmp__load32_rlx(&pd->ref);
	for (;;) {
		if (GMP__UNLIKELY(v & PD_CLOSED)) {
			gmp__unlock(&pd->lock);
			wait_reopen(pd);
			gmp__lock(&pd->lock);
			v = gmp__load32_rlx(&pd->ref);
			continue;
		}
		if (v & PD_CLOSING) {
			gmp__unlock(&pd->lock);
			return false;
		}
		uint32_t seen =
			gmp__fcas32_full(&pd->ref, v, (v + 1) | PD_CLOSING);
		if (seen == v)
			return true;
		v = seen;
	}
}

/* gmp_close's middle, under pd->lock with CLOSING set: the file's events
 * are stale from here on, its deadlines gone, every waiter woken with
 * -EBADF (the tasks are readied once the lock is released: close_wake),
 * and the number leaves the poller. */
static void close_waiters(gmp__pd *pd, gmp_g **rg, gmp_g **wg,
			  gmp__waiter **chain)
{
	gmp__store32_rel(&pd->seq, (pd->seq + 1) & PD_SEQ_MASK);
	gmp__store64_rlx(&pd->dl[GMP__PD_READ], 0);
	gmp__store64_rlx(&pd->dl[GMP__PD_WRITE], 0);
	edges_bump(pd); /* after CLOSING: the barriers at the top */
	*rg = slot_wake(&pd->rg);
	*wg = slot_wake(&pd->wg);
	*chain = list_take_all(pd, -EBADF);
	if (pd->evfd1) {
		uint64_t one = 1;
		while (gmp__sys_write(pd->evfd1 - 1, &one, sizeof one) ==
		       -EINTR)
			;
	}
	/* Unregister while the number still names the file (epoll cannot
	 * forget a file by any other handle); it would also go by itself
	 * when the file's last reference does, but not if it was dup()ed. */
	uint32_t epgen = gmp__load32_rlx(&pd->epgen);
	if (epgen && epgen == gmp__netpoll_generation())
		gmp__netpoll_close(pd->fd);
	gmp__store32_rlx(&pd->epgen, 0);
}

static void close_wake(gmp_g *rg, gmp_g *wg, gmp__waiter *chain, int fd)
{
	if (rg)
		gmp__ready(rg, true);
	if (wg)
		gmp__ready(wg, true);
	list_wake(chain);
	gmp__uring_cancel_fd(fd); /* operations in flight in the rings */
}

int gmp__pd_close(int fd)
{
	int err = 0;
	gmp__pd *pd = pd_get(fd, &err);
	if (!pd) {
		if (err == -EBADF)
			return err;
		/* Beyond the table, or no memory for it: nobody can wait on
		 * this number in the runtime, so a plain close will do. */
		return gmp__sys_close(fd);
	}
	if (!close_begin(pd))
		return -EBADF; /* another gmp_close got there first */
	gmp_g *rg, *wg;
	gmp__waiter *chain;
	close_waiters(pd, &rg, &wg, &chain);
	int fl = gmp__sys_fcntl(fd, F_GETFL, 0);
	gmp__unlock(&pd->lock);
	close_wake(rg, wg, chain, fd);
	/* The woken leave at once from a non-blocking descriptor; from a
	 * blocking one a caller may sit in read(2) for good (design.md §30.5). */
	if (fl >= 0 && (fl & O_NONBLOCK))
		wait_for_callers(pd);
	uint32_t v = gmp__add32_full(&pd->ref, -1) - 1;
	if (PD_COUNT(v) == 0)
		return final_close(pd);
	return 0; /* the last caller out closes it */
}

/* ---- the hook library's close, dup2 and dup3 ------------------------------ */

/* Whether the runtime has nothing on pd: no call in flight (so no waiter
 * and no ring operation either), no epoll registration of the live
 * instance, no eventfd for threads. Then a close or dup needs only to
 * forget what io.c cached of the file. pristine_hint looks without the
 * lock, at the atomic words only; pristine, under pd->lock, is the
 * answer. */
static bool pristine_hint(gmp__pd *pd)
{
	/* acquire: what the last caller did is visible (release's RMW) */
	if (gmp__load32_acq(&pd->ref) != 0)
		return false;
	uint32_t epgen = gmp__load32_rlx(&pd->epgen);
	return epgen == 0 || epgen != gmp__netpoll_generation();
}

static bool pristine(gmp__pd *pd)
{
	return pristine_hint(pd) && pd->evfd1 == 0; /* evfd1: under lock */
}

int gmp__pd_replace(int fd, int from, int flags)
{
	if (fd < 0 || fd >= GMP__PD_MAX_FD)
		return fd < 0 ? -EBADF : GMP__PD_PLAIN;
	gmp__pd *pd = pd_lookup(fd);
	for (;;) {
		if (!pd)
			return GMP__PD_PLAIN;
		if (gmp__load32_acq(&pd->owned))
			return -EBADF;
		if (pristine_hint(pd)) {
			gmp__lock(&pd->lock);
			bool still = pristine(pd);
			if (still) {
				forget_file(pd, GMP__PD_KIND_UNKNOWN);
				gmp__store32_rlx(&pd->epgen, 0);
				gmp__store64_rlx(&pd->dl[GMP__PD_READ], 0);
				gmp__store64_rlx(&pd->dl[GMP__PD_WRITE], 0);
				gmp__store32_rlx(&pd->seen, 0);
			}
			gmp__unlock(&pd->lock);
			if (still)
				return GMP__PD_PLAIN;
		}
		if (close_begin(pd))
			break;
		/* Another close is under way. A close of ours is then the
		 * second close of the file: EBADF, as close(2) says. A dup
		 * must wait for that close to end, and then finds the number
		 * free. */
		if (from < 0)
			return -EBADF;
		while (gmp__load32_acq(&pd->ref) & PD_CLOSING) {
			if (gmp__getg(NULL))
				gmp_yield();
			else
				gmp__osyield();
		}
	}
	gmp_g *rg, *wg;
	gmp__waiter *chain;
	close_waiters(pd, &rg, &wg, &chain);
	gmp__unlock(&pd->lock);
	close_wake(rg, wg, chain, fd);
	/* The woken leave at once: the hooks hold no reference across a
	 * call that may block in the kernel. (A task inside gmp_read on a
	 * blocking descriptor, which does, keeps us waiting until its read
	 * returns: gmp_close is the call for such descriptors.) */
	wait_for_callers(pd);
	uint32_t v = gmp__add32_full(&pd->ref, -1) - 1;
	if (PD_COUNT(v) != 0)
		gmp__throw("libgmp-hook: descriptor %d gained a caller while "
			   "it was being closed",
			   fd);
	return final_close_as(pd, from, flags);
}

/* The highest descriptor number the table has a chunk for, plus one. */
static int table_end(void)
{
	for (int i = (GMP__PD_MAX_FD >> PD_CHUNK_SHIFT) - 1; i >= 0; i--)
		if (gmp__loadp_acq(&pd_chunks[i]))
			return (i + 1) << PD_CHUNK_SHIFT;
	return 0;
}

int gmp__pd_close_range(unsigned lo, unsigned hi, int flags)
{
	if (lo > hi)
		return -EINVAL;
	/* Marking close-on-exec closes nothing; the runtime's own are so
	 * marked already. */
	if (flags & CLOSE_RANGE_CLOEXEC)
		return gmp__sys_close_range(lo, hi, flags);
	unsigned end = (unsigned)table_end();
	unsigned run = lo; /* the first number of the run not yet closed */
	int err = 0;
	for (unsigned fd = lo; fd < end && fd <= hi; fd++) {
		gmp__pd *pd = pd_lookup((int)fd);
		if (!pd)
			continue;
		bool own = gmp__load32_acq(&pd->owned) != 0;
		if (!own && pristine_hint(pd)) {
			gmp__lock(&pd->lock);
			bool still = pristine(pd);
			gmp__unlock(&pd->lock);
			if (still)
				continue;
		}
		/* Close the run before it in one call, then this one with its
		 * books kept, or not at all. */
		if (run < fd) {
			int r = gmp__sys_close_range(run, fd - 1, flags);
			if (r < 0)
				return r;
		}
		run = fd + 1;
		if (!own) {
			int r = gmp__pd_replace((int)fd, -1, 0);
			if (r == GMP__PD_PLAIN)
				r = gmp__sys_close((int)fd);
			if (r < 0 && r != -EBADF && !err)
				err = r;
		}
		if (fd == hi)
			return err;
	}
	if (run <= hi) {
		int r = gmp__sys_close_range(run, hi, flags);
		if (r < 0)
			return r;
	}
	return err;
}

void gmp__pd_newfile(int fd)
{
	gmp__pd *pd = pd_lookup(fd);
	if (!pd)
		return;
	if (pristine_hint(pd)) {
		gmp__lock(&pd->lock);
		bool still = pristine(pd);
		if (still) {
			forget_file(pd, GMP__PD_KIND_UNKNOWN);
			gmp__store32_rlx(&pd->epgen, 0);
		}
		gmp__unlock(&pd->lock);
		if (still)
			return;
	}
	gmp__pd_accepted(fd, false, GMP__PD_KIND_UNKNOWN);
}

void gmp__pd_own(int fd, bool own)
{
	int err = 0;
	gmp__pd *pd = own ? pd_get(fd, &err) : pd_lookup(fd);
	if (pd)
		/* release: pairs with the hooks' acquire (a store is all the
		 * flag needs; the order is the habit) */
		gmp__store32_rel(&pd->owned, own ? 1 : 0);
}

bool gmp__pd_owned(int fd)
{
	gmp__pd *pd = pd_lookup(fd);
	return pd && gmp__load32_acq(&pd->owned) != 0;
}

/* ---- fork ------------------------------------------------------------------- */

/* In the child of fork() (fork.c), on its only thread: the parent's tasks
 * and threads are gone, so no call is in flight and nobody waits. Every
 * descriptor forgets its references (a gmp_close in progress in the
 * parent included: the child's copy of the number is still open), its
 * waiters and its epoll registration (the child's runtime will have a new
 * instance, of a new generation); the eventfds for threads are copies
 * shared with the parent, so the child closes its copies and makes its
 * own when needed. The file generations, edge counts and kinds stay: they
 * are still true of the same files. Only stores and close(2), as befits
 * an atfork child handler. */
void gmp__pd_forked(void)
{
	for (int i = 0; i < (GMP__PD_MAX_FD >> PD_CHUNK_SHIFT); i++) {
		gmp__pd *c = gmp__loadp_rlx(&pd_chunks[i]);
		if (!c)
			continue;
		for (int k = 0; k < PD_CHUNK; k++) {
			gmp__pd *pd = &c[k];
			pd->lock = (gmp__mutex)GMP__MUTEX_INIT;
			gmp__store32_rlx(&pd->ref, 0);
			gmp__storep_rlx(&pd->rg, PD_NIL);
			gmp__storep_rlx(&pd->wg, PD_NIL);
			gmp__storep_rlx(&pd->list, NULL);
			pd->closer = NULL;
			gmp__store32_rlx(&pd->epgen, 0);
			pd->vnext = NULL;
			gmp__store32_rlx(&pd->vqueued, 0);
			gmp__store32_rlx(&pd->twait, 0);
			gmp__store32_rlx(&pd->owned, 0);
			pd->dlsig = false;
			pd->dlack = 0;
			if (pd->evfd1)
				gmp__sys_close(pd->evfd1 - 1);
			pd->evfd1 = 0;
			/* Armed on a P of the parent's, which is gone. */
			memset(&pd->dlt, 0, sizeof pd->dlt);
			gmp__store64_rlx(&pd->dlt_when, 0);
		}
	}
	gmp__pd_watch_forked();
}
