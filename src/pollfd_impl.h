/* What the files of the poll descriptor (pollfd.c, pollfd_deadline.c,
 * pollfd_recheck.c) share: the descriptor's layout, with what protects
 * each field, and the small steps each of them takes on it (waking a
 * slot, the list of waiters, the deadline and deferred-check steps a wait
 * takes inline). Nothing outside these files includes it; io.c and the
 * rest see pollfd.h. design.md §30 explains the descriptor. */
#ifndef GMP_POLLFD_IMPL_H
#define GMP_POLLFD_IMPL_H

#include <poll.h>

#include "internal.h"
#include "lock.h"
#include "netpoll.h"
#include "pollfd.h"
#include "timer.h"
#include "wait.h"

#define PD_NIL ((uintptr_t)0)
#define PD_PENDING ((uintptr_t)1) /* or'ed into a G pointer (aligned) */

#define PD_CLOSING 0x80000000u
#define PD_CLOSED 0x40000000u /* with CLOSING: close(2) under way */
#define PD_COUNT(v) ((v) & ~(PD_CLOSING | PD_CLOSED))
#define PD_SEQ_MASK 0x7fffffffu
#define PD_COOKIE_TAG (1ull << 63)

struct gmp__pd {
	/* What every call and the poller touch, in the first cache line. */
	gmp__mutex lock;            /* protects the fields marked "lock" */
	volatile uint32_t ref;      /* atomic: calls in flight, CLOSING and
				       CLOSED (see final_close) */
	volatile uint32_t seq;      /* atomic: the file's generation; changed
				       under lock, read lock-free by the
				       poller */
	volatile uint32_t edges;    /* atomic: bumped and checked with RMWs,
				       snapshot with a load (pollfd.c: the
				       barriers) */
	volatile uintptr_t rg, wg;  /* atomic: NIL, g|PENDING or g */
	gmp__waiter *volatile list; /* lock; the poller peeks at it, so it
				       is stored and loaded atomically */
	volatile uint32_t kind;     /* racy hints: GMP__PD_KIND_* and
				       PD_NONBLOCK (gmp__pd_kind) */
	volatile uint32_t rdrain;   /* racy: 1 + the edge count before the
				       last short read of a stream, 0 none
				       (gmp__pd_drained) */
	int fd;                     /* immutable: the descriptor number */
	volatile uint32_t epgen;    /* atomic, written under lock: the
				       netpoll generation we are registered
				       with; 0: not registered */
	int evfd1;                  /* lock: eventfd for threads, plus one;
				       0: none yet */
	volatile uint32_t rdhup;    /* atomic: the poller saw the file's end
				       or an error (gmp__pd_drained) */
	/* Closing. */
	gmp__waiter *closer; /* lock: gmp_close waiting for callers */
	/* Deadlines (pollfd_deadline.c). */
	volatile uint64_t dl[2]; /* atomic: per direction, an int64
				     gmp__nanotime deadline, 0 none; set
				     with an exchange, read by waiters with
				     an RMW after they registered */
	volatile uint32_t twait; /* atomic, changed under lock: threads in
				     gmp__pd_wait_thread */
	uint32_t dlgen;          /* lock: deadline changes made while
				     threads waited */
	uint32_t dlack;          /* lock: threads still to notice the
				     latest of them */
	bool dlsig;              /* lock: the eventfd was written for it */
	volatile uint32_t seen;  /* racy: gmp__pd_set_deadline checked that
				     the number is open */
	volatile uint32_t owned; /* atomic: the runtime's own descriptor
				    (gmp__pd_own), which the hook library's
				    close and dup2 refuse to touch */
	/* The deferred check (pollfd_recheck.c). */
	gmp__pd *vnext;            /* vw.lock: next on its wheel slot */
	int64_t vdue;              /* vw.lock: the tick of its next look */
	volatile uint32_t vqueued; /* atomic: on the wheel (or being looked
				      at); set and cleared under vw.lock */
	volatile uint32_t vcall;   /* racy: bumped by each call's first
				      trusted park */
	volatile uint32_t vshift;  /* racy: log2 of the ticks between looks */
	volatile uint32_t vretry;  /* atomic: the generation a deferred check
				      replaced (see broken) */
	uint32_t vlast_call;       /* sysmon: vcall at its last look */
	uint32_t vlast_wait;       /* sysmon: whether a task waited then */
	/* The deadline timer (pollfd_deadline.c), in a line of its
	 * own: only a wait with a deadline looks at it. */
	gmp__timer dlt __attribute__((aligned(64))); /* lock: armed by dl_arm;
							fires dl_fire */
	volatile uint64_t dlt_when; /* atomic, stored under lock: the int64
				       time dlt is armed for; 0: fired or
				       never armed */
} __attribute__((aligned(64)));

_Static_assert(offsetof(gmp__pd, rdhup) < 64,
	       "a call's and the poller's fields share one cache line");
_Static_assert(offsetof(gmp__pd, dlt) >= 192 && sizeof(gmp__pd) <= 256,
	       "three cache lines per descriptor, and one for its timer");

/* pd->kind holds the kind in its low byte and PD_NONBLOCK above it: both
 * racy hints about the file now behind the number, forgotten with it
 * (forget_file). A racy update may lose the other half's concurrent
 * update; each half is only ever a hint that the calls correct. */
#define PD_KIND_MASK 0xffu
#define PD_NONBLOCK 0x100u

static inline void *cookie(const gmp__pd *pd, uint32_t seq)
{
	uint64_t c = PD_COOKIE_TAG | (uint64_t)(seq & PD_SEQ_MASK) << 32 |
		     (uint32_t)pd->fd;
	return (void *)(uintptr_t)c;
}

/* The waker's half: bump the count, then look at the slots and list. */
static inline void edges_bump(gmp__pd *pd)
{
	/* full: the RMW pair of pollfd.c's barriers */
	gmp__add32_full(&pd->edges, 1);
}

/* A waker empties the slot. Returns the parked task it held, which the
 * caller must ready; NULL if there was none (a pending registration is
 * cancelled: its commit will fail). */
static inline gmp_g *slot_wake(volatile uintptr_t *slot)
{
	for (;;) {
		uintptr_t old = gmp__loadp_acq(slot);
		if (old == PD_NIL)
			return NULL;
		/* full: orders our reads of the task after its commit */
		if (gmp__casp_full(slot, old, PD_NIL)) {
			if (old & PD_PENDING)
				return NULL;
			gmp__netpoll_adjust_waiters(-1);
			return (gmp_g *)old;
		}
	}
}

/* Under lock. */
static inline void list_remove(gmp__pd *pd, gmp__waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		gmp__storep_rel(&pd->list, w->next);
	if (w->next)
		w->next->prev = w->prev;
	w->next = w->prev = NULL;
	gmp__netpoll_adjust_waiters(-1);
}

/* Under lock: claims every list waiter (but those whose deadline claimed
 * them first), takes it off the list and chains it through `next` for
 * list_wake, with `result` set. */
static inline gmp__waiter *list_take_all(gmp__pd *pd, int result)
{
	gmp__waiter *chain = NULL, *next;
	for (gmp__waiter *w = pd->list; w; w = next) {
		next = w->next;
		if (!gmp__waiter_claim(w))
			continue; /* its deadline won; it removes itself */
		list_remove(pd, w);
		w->result = result;
		w->next = chain;
		chain = w;
	}
	return chain;
}

static inline void list_wake(gmp__waiter *chain)
{
	while (chain) {
		gmp__waiter *next = chain->next; /* w is gone after the wake */
		gmp__waiter_wake(chain);
		chain = next;
	}
}

/* Under pd->lock: what we knew of the file behind the number no longer
 * holds (a new file behind it, or none): its kind (now `kind`), the
 * drained-read hint, the end seen, and the deferred check's interval,
 * which starts at a millisecond again. */
static inline void forget_file(gmp__pd *pd, uint32_t kind)
{
	gmp__store32_rlx(&pd->kind, kind);
	gmp__store32_rlx(&pd->rdrain, 0);
	gmp__store32_rlx(&pd->rdhup, 0);
	gmp__store32_rlx(&pd->vshift, 0);
}

/* ---- deadlines (pollfd_deadline.c) ---- */

/* The deadline of direction mode, for a waiter that has registered: an
 * RMW, so that it is ordered with gmp__pd_set_deadline's exchange (see
 * design.md §30.7). 0: none. */
static inline int64_t dl_after_register(gmp__pd *pd, int mode)
{
	/* full: pairs with the exchange in gmp__pd_set_deadline */
	return (int64_t)gmp__add64_full(&pd->dl[mode], 0);
}

/* Whether the deadline of mode has passed (a plain look, before
 * registering). */
static inline bool dl_passed(gmp__pd *pd, int mode)
{
	int64_t dl = (int64_t)gmp__load64_acq(&pd->dl[mode]);
	return dl != 0 && gmp__nanotime() >= dl;
}

/* The earlier of two deadlines: a (< 0: none) and dl (0: none). */
static inline int64_t dl_min(int64_t a, int64_t dl)
{
	if (dl == 0)
		return a;
	if (dl < 0)
		dl = 0; /* long past */
	return a < 0 || dl < a ? dl : a;
}

/* Whether the descriptor's timer will fire by dl (> 0): armed for no
 * later, and still pending. */
static inline bool dl_armed_by(gmp__pd *pd, int64_t dl)
{
	/* acquire: pairs with the release of the arming (the timer's state
	 * is published after dlt_when is stored) */
	int64_t when = (int64_t)gmp__load64_acq(&pd->dlt_when);
	return when != 0 && when <= dl && gmp__timer_pending(&pd->dlt);
}

void gmp__pd_dl_arm(gmp__pd *pd, int64_t dl);

/* A task registered in a slot, about to park with deadline dl (> 0): makes
 * sure the descriptor's timer fires by dl (design.md §30.7).
 * Most of the time it does already, and this is two loads. */
static inline void dl_arm(gmp__pd *pd, int64_t dl)
{
	if (!dl_armed_by(pd, dl))
		gmp__pd_dl_arm(pd, dl);
}

/* Under lock: a thread waiter has noticed the latest deadline change (see
 * pollfd_deadline.c). */
void gmp__pd_dl_ack(gmp__pd *pd);

/* ---- checking registrations later (pollfd_recheck.c) ---- */

/* watch's slow half: puts pd on the wheel (and wakes sysmon if its next
 * look is now sooner). */
void gmp__pd_watch_slow(gmp__pd *pd);

/* A task is about to park on trust: make sure sysmon will look at the
 * descriptor. The caller has registered as a waiter and then made
 * edges_moved's RMW on `edges`; sysmon, before it takes a descriptor off
 * the wheel, clears vqueued and makes its own RMW on `edges` before it
 * looks for waiters (vw_drop). The two RMWs on one word are ordered:
 * either sysmon sees our registration, or we see vqueued cleared and put
 * the descriptor back. One load on the common path. */
static inline void watch(gmp__pd *pd)
{
	if (GMP__UNLIKELY(!gmp__load32_acq(&pd->vqueued)))
		gmp__pd_watch_slow(pd);
}

/* In the child of fork(): empties the wheel (gmp__pd_forked). */
void gmp__pd_watch_forked(void);

#endif
