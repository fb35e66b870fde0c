/* Run queues: where runnable work waits. Each P has its own, lock-free
 * (Go's runq), and there is one global queue under sched.lock (Go's
 * sched.runq) for what a full ring spills and what threads without a P
 * submit; the global queue's layout is gmp__grq in internal.h, its code
 * is at the end of this file and of runq.c. How the scheduler uses them
 * is in design.md §23; the ring's rules are here.
 *
 * A P's queue is a 256-slot ring plus the runnext slot. The ring is
 * single-producer, multi-consumer:
 *
 *   runqtail  written only by the owner P, with a store-release that
 *             publishes the slot written before it; thieves load-acquire it.
 *   runqhead  advanced by the owner (runq_get) and by thieves (runq_grab)
 *             with a CAS-release that retires the slots read before it;
 *             everyone load-acquires it, so a slot is never overwritten by
 *             the owner until every reader that copied it has committed.
 *   runq[i]   written by the owner before the tail release; read
 *             speculatively by thieves (relaxed) and only trusted once
 *             their head CAS succeeds.
 *   runnext   a G readied by the running G, to run next and inherit its
 *             time slice. Only the owner sets it to a G (CAS, because a
 *             thief may concurrently take it); thieves may only CAS it
 *             to NULL.
 *
 * Indices are free-running uint32 counters; t - h is the length even
 * across wrap-around.
 */
#ifndef GMP_RUNQ_H
#define GMP_RUNQ_H

#include "fiber.h"
#include "internal.h"

bool gmp__runq_putslow(gmp__p *p, gmp_g *g, uint32_t h, uint32_t t);
gmp_g *gmp__runq_steal(gmp__p *p, gmp__p *p2, bool steal_runnext);
void gmp__runq_putbatch(gmp__p *p, gmp__gqueue *q);
bool gmp__runq_empty(gmp__p *p);
uint32_t gmp__runq_len(gmp__p *p);
uint32_t gmp__prand(gmp__p *p);

/* Puts g on p's queue; owner only. next: into runnext, kicking the old
 * runnext (if any) to the tail. A full ring moves half of itself plus g to
 * the global queue (runq_putslow). */
static inline void gmp__runq_put(gmp__p *p, gmp_g *g, bool next)
{
	if (GMP__UNLIKELY(gmp__cfg.randomize) && next && (gmp__prand(p) & 1)) {
		next = false;
		/* Callers count on runnext's full CAS as the #StoreLoad
		 * before wakep (sched.c); keep that promise. */
		gmp__add32_full(&gmp__sched.nmspinning, 0);
	}
	if (next) {
		gmp_g *old;
		do {
			old = gmp__loadp_rlx(&p->runnext);
			/* full: publishes g's state to a thief that
			 * takes it with its own CAS. */
		} while (!gmp__casp_full(&p->runnext, old, g));
		if (old == NULL)
			return;
		g = old; /* kick the old runnext out to the ring */
	}
	for (;;) {
		/* acquire: pairs with the head CAS-release of runq_get and
		 * runq_grab, so we never overwrite a slot still being read. */
		uint32_t h = gmp__load32_acq(&p->runqhead);
		uint32_t t = p->runqtail; /* owner-written only */
		if (t - h < GMP__RUNQ_SIZE) {
			gmp__storep_rlx(&p->runq[t % GMP__RUNQ_SIZE], g);
			/* release: publishes the slot to runq_get/grab. */
			gmp__store32_rel(&p->runqtail, t + 1);
			return;
		}
		if (gmp__runq_putslow(p, g, h, t))
			return;
		/* a thief moved head meanwhile: there is room now */
	}
}

/* Warms the caches for the Gs queued next, [h, t) of p's ring (owner
 * only), as a two-step pipeline: the struct of the second G now, and the
 * top of the first one's stack, through the saved sp that the previous
 * call brought in. A G's struct is the first thing execute touches and
 * its stack the first thing it touches after the switch, usually long
 * after it was queued (on another core, or spilled to the global queue
 * and back); the task running meanwhile hides the fetch. The pointers
 * may be stale by then, which a prefetch does not mind. With two or
 * fewer queued they were queued just now and are in cache anyway. */
static inline void gmp__runq_prefetch(gmp__p *p, uint32_t h, uint32_t t)
{
#if GMP__TSAN
	/* These reads race, harmlessly, with a thief that took the G and
	 * an M reusing it; TSan would say so. */
	(void)p;
	(void)h;
	(void)t;
#else
	if (t - h < 3)
		return;
	const gmp_g *g0 = gmp__loadp_rlx(&p->runq[h % GMP__RUNQ_SIZE]);
	uintptr_t sp = (uintptr_t)g0->sched.sp; /* integer: may be stale */
	__builtin_prefetch((const void *)(sp - GMP__CACHELINE), 1);
	__builtin_prefetch((const void *)sp, 1);
	const char *g1 = (const char *)gmp__loadp_rlx(
		&p->runq[(h + 1) % GMP__RUNQ_SIZE]);
	for (size_t off = 0; off < sizeof(gmp_g); off += GMP__CACHELINE)
		__builtin_prefetch(g1 + off, 1);
#endif
}

/* Takes the next G from p's queue; owner only. *inherit is set when the G
 * came from runnext and so continues the current time slice. */
static inline gmp_g *gmp__runq_get(gmp__p *p, bool *inherit)
{
	gmp_g *next = gmp__loadp_rlx(&p->runnext);
	/* A failing CAS can only mean a thief took runnext (only the owner
	 * stores non-NULL), so there is no need to retry it. acquire pairs
	 * with the CAS that stored it. */
	if (next != NULL && gmp__casp_acq(&p->runnext, next, NULL)) {
		*inherit = true;
		return next;
	}
	*inherit = false;
	for (;;) {
		uint32_t h = gmp__load32_acq(&p->runqhead);
		uint32_t t = p->runqtail;
		if (t == h)
			return NULL;
		gmp_g *g = gmp__loadp_rlx(&p->runq[h % GMP__RUNQ_SIZE]);
		/* release: we are done reading the slot (pairs with the
		 * head acquire in runq_put). */
		if (gmp__cas32_rel(&p->runqhead, h, h + 1)) {
			gmp__runq_prefetch(p, h + 1, t);
			return g;
		}
	}
}

/* ---- the global run queue (gmp__grq in internal.h), under sched.lock ----
 *
 * Everything here but gmp__globrunq_has_work and gmp__globrunq_reserve
 * is called with sched.lock held. */

/* Whether the global queue may have work: a lock-free hint (an acquire
 * load of sched.runqsize, which every change publishes with a release);
 * callers repeat the real check under sched.lock. */
static inline bool gmp__globrunq_has_work(void)
{
	return gmp__load64_acq(&gmp__sched.runqsize) != 0;
}

void gmp__globrunq_put(gmp_g *g);
void gmp__globrunq_putbatch(gmp__gqueue *q);
gmp_g *gmp__globrunq_get(gmp__p *p, int64_t max);
int gmp__globrunq_reserve(int64_t ngs);
void gmp__globrunq_free_all(void);

#endif
