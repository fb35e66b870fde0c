/* Preemption: the asymmetric barrier, sysmon's detach, a detached task
 * taking a P back (gmp__enter_slow), and gmp_preempt_point, the switch
 * point a program calls. preempt.h holds the task's inline side of the
 * protocol; design.md §37 explains it, §13 the policy.
 */
#include <stdio.h>
#include <string.h>

#include "export_test.h"
#include "fiber.h"
#include "internal.h"
#include "mcall.h"
#include "preempt.h"
#include "runq.h"
#include "scheduler.h"
#include "syscall.h"
#include "task.h"
#include "trace.h"

enum {
	BARRIER_NONE = 0,
	BARRIER_MEMBARRIER = 1,
	BARRIER_SHOOTDOWN = 2,
};

/* Chosen by gmp_init before sysmon starts, read by sysmon only (and by
 * tests); the next gmp_init chooses again. */
static struct {
	int barrier;     /* BARRIER_* */
	const char *off; /* why detaching is off, or NULL */
	char why[160];   /* room for `off` when it carries an errno */
	int forced;      /* tests: gmp__preempt_force_barrier */
	uint64_t rand;   /* sysmon's random state (randomize) */
} pre = { .forced = -1 };

/* tests: gmp__preempt_set_slice; 0 is the default. A plain variable: it is
 * written only while the runtime is off, and read by sysmon, whose thread
 * gmp_init creates afterwards (pthread_create orders the write before). */
static int64_t slice_forced;

#if GMP__TEST_HOOKS
void gmp__preempt_set_slice(int64_t ns)
{
	slice_forced = ns;
}
#endif

void gmp__preempt_init(void)
{
	pre.barrier = BARRIER_NONE;
	pre.off = NULL;
	if (!gmp__cfg.preempt) {
		pre.off = "GMP_PREEMPT=off";
		return;
	}
	int forced = GMP__TEST_HOOKS ? pre.forced : -1;
	int mb = forced == BARRIER_SHOOTDOWN || forced == BARRIER_NONE
			 ? -ENOSYS
			 : gmp__membarrier_init();
	if (mb == 0) {
		pre.barrier = BARRIER_MEMBARRIER;
		return;
	}
	int sd = forced == BARRIER_NONE ? -ENOTSUP : gmp__flushwrites_init();
	if (sd == 0) {
		pre.barrier = BARRIER_SHOOTDOWN;
		return;
	}
	snprintf(pre.why, sizeof pre.why,
		 "no asymmetric barrier (membarrier: %s; mprotect "
		 "shoot-down: %s)",
		 strerror(-mb),
		 sd == -ENOTSUP ? "not a barrier on this CPU" : strerror(-sd));
	pre.off = pre.why;
	if (gmp__cfg.debug)
		fprintf(stderr,
			"gmp: preemption: tasks that run past their slice "
			"keep their P: %s\n",
			pre.off);
}

bool gmp__preempt_enabled(void)
{
	return pre.barrier != BARRIER_NONE;
}

#if GMP__TEST_HOOKS
const char *gmp__preempt_off_reason(void)
{
	return pre.off;
}

void gmp__preempt_force_barrier(int kind)
{
	pre.forced = kind;
}
#endif

static void barrier(void)
{
	if (pre.barrier == BARRIER_MEMBARRIER)
		gmp__membarrier();
	else
		gmp__flushwrites();
}

/* sysmon's random numbers for the randomized slices (sysmon only). */
static uint32_t sysmon_rand(void)
{
	if (!pre.rand)
		pre.rand = (uint64_t)gmp__nanotime() | 1;
	pre.rand ^= pre.rand << 13;
	pre.rand ^= pre.rand >> 7;
	pre.rand ^= pre.rand << 17;
	return (uint32_t)(pre.rand >> 16);
}

int64_t gmp__preempt_slice(void)
{
	if (GMP__TEST_HOOKS && GMP__UNLIKELY(slice_forced))
		return slice_forced;
	if (GMP__UNLIKELY(gmp__cfg.randomize))
		return 20 * 1000 + (int64_t)(sysmon_rand() % 500) * 1000;
	return 10 * 1000 * 1000;
}

int64_t gmp__preempt_grace(void)
{
	if (GMP__UNLIKELY(gmp__cfg.randomize))
		return sysmon_rand() & 2
			       ? 0
			       : (int64_t)(sysmon_rand() % 500) * 1000;
	return 1000 * 1000;
}

/* ---- sysmon's side -------------------------------------------------------- */

bool gmp__preempt_detach(gmp__p *p, uint32_t schedtick)
{
	if (pre.barrier == BARRIER_NONE)
		return false;
	/* Racy reads of type-stable structs (Ms and Gs are never freed while
	 * the runtime runs), checked again after the barrier. */
	gmp__m *m = gmp__loadp_acq(&p->m);
	if (!m)
		return false;
	gmp_g *g = gmp__loadp_acq(&m->curg);
	if (!g || gmp__load32_rlx(&g->status) != GMP__G_RUNNING ||
	    gmp__load8_rlx(&g->inrt) != 0)
		return false; /* g0, a syscall, or inside the runtime now */
	/* full: the claim must be visible to the thread's loads that come
	 * after the barrier's fence on its CPU */
	if (!gmp__cas8_full(&g->detach, GMP__DETACH_NONE, GMP__DETACH_CLAIM))
		return false;
	if (GMP__UNLIKELY(gmp__cfg.randomize))
		gmp__jitter();
	barrier();
	/* acquire: pairs with gmp__leave's store-release, so that everything
	 * the thread did with the P before it left is visible here and to
	 * the M we hand the P to. */
	bool out = gmp__load8_acq(&g->inrt) == 0;
	/* With the claim held and the thread in its own code, none of these
	 * can change under us: only the thread itself changes them, from
	 * inside the runtime, where it would see the claim first. The
	 * schedtick is the slice sysmon judged: a task that answered (or a
	 * new one) since is not the one that ran too long. */
	bool same = gmp__loadp_rlx(&p->m) == m && gmp__loadp_rlx(&m->p) == p &&
		    gmp__loadp_rlx(&m->curg) == g &&
		    gmp__loadp_rlx(&g->m) == m &&
		    gmp__load32_rlx(&g->status) == GMP__G_RUNNING &&
		    gmp__load32_rlx(&p->status) == GMP__P_RUNNING &&
		    gmp__load32_rlx(&p->schedtick) == schedtick;
	/* full: races the thread's refusal (CLAIM -> NONE); one wins */
	if (!out || !same ||
	    !gmp__cas8_full(&g->detach, GMP__DETACH_CLAIM,
			    GMP__DETACH_TAKING)) {
		/* Back off, unless the thread refused first. */
		gmp__cas8_full(&g->detach, GMP__DETACH_CLAIM, GMP__DETACH_NONE);
		return false;
	}
	/* The P is ours. */
	m->detachp = p;
	gmp__syscall_takep(m, p); /* p->m, m->p, the P IDLE on no list */
	/* release: the thread, which may be spinning on TAKING, reads
	 * m->p and m->detachp once it sees DETACHED (acquire). */
	gmp__store8_rel(&g->detach, GMP__DETACH_DETACHED);
	gmp__add64_rlx(&gmp__sched.ndetaches, 1);
	gmp__handoffp(p);
	return true;
}

/* sysmon's count, an estimate: each M's current task is read racily,
 * and may have moved on since (Ms and Gs are never freed while the
 * runtime runs, so the reads are safe). Plain volatile reads, and
 * ThreadSanitizer told not to watch them: the M's store of curg orders
 * nothing for this reader, and TSan would see the read of a task made
 * in a stack region just mapped as racing the mapping. */
GMP__RACY_READER uint32_t gmp__detached_count(void)
{
	uint32_t n = 0;
	for (gmp__m *m = gmp__loadp_acq(&gmp__sched.allm); m; m = m->alllink) {
		gmp_g *g = *(gmp_g *volatile *)&m->curg;
		if (g &&
		    *(volatile uint8_t *)&g->detach == GMP__DETACH_DETACHED)
			n++;
	}
	return n;
}

/* ---- the task's side: taking a P back --------------------------------------- */

/* The task (g, on m) holds a P again: a new slice for it, and no request
 * left over from the old one, which the detach answered. */
static void reattached(gmp__m *m, gmp__p *p, gmp_g *g)
{
	gmp__store32_rlx(&p->schedtick, p->schedtick + 1);
	gmp__store32_rlx(m->preemptp, 0);
	/* release: pairs with sysmon's acquire loads; nobody else moves the
	 * word out of DETACHED */
	gmp__store8_rel(&g->detach, GMP__DETACH_NONE);
}

/* On g0: no P was idle. Queue the task globally, bound to this M for the
 * wait (as a locked task is), and sleep until whoever schedules it hands
 * this M a P; then run it here. */
static void reattach_wait(gmp_g *g)
{
	gmp__m *m = g->m;
	gmp__fiber_on_g0(m);
	if (!g->lockedm) {
		g->lockedm = m;
		gmp__storep_rlx(&m->lockedg, g); /* racy readers: dumps */
		m->locked_int = true;
	}
	/* NONE before it is queued: from then on it is a queued G like any
	 * other, which sysmon never claims (it has no M). */
	gmp__store8_rel(&g->detach, GMP__DETACH_NONE);
	gmp__casgstatus(g, GMP__G_RUNNING, GMP__G_RUNNABLE);
	gmp__storep_rlx(&g->m, NULL); /* racy readers: sysmon */
	gmp__storep_rlx(&m->curg, NULL);
	gmp__lock(&gmp__sched.lock);
	gmp__p *p = gmp__pidleget(); /* one may have gone idle meanwhile */
	if (!p)
		gmp__globrunq_put(g);
	gmp__unlock(&gmp__sched.lock);
	if (p) {
		gmp__acquirep(m, p);
		gmp__trace_run(m, p, g, true);
		gmp__execute(m, g, false);
	}
	gmp__schedule_locked(m);
}

/* The task on this thread was detached: take a P back (design.md §37.5:
 * its old P if idle, any idle P, else the global queue, this M waiting). */
static void reattach(gmp_g *g)
{
	gmp__m *m = g->m;
	gmp__p *oldp = m->detachp;
	m->detachp = NULL;
	gmp__lock(&gmp__sched.lock);
	gmp__p *p = gmp__pidleget_prefer(oldp);
	gmp__unlock(&gmp__sched.lock);
	if (p) {
		gmp__acquirep(m, p);
		reattached(m, p, g);
		return;
	}
	gmp__mcall(m, g, reattach_wait);
	/* Back on this M (the wait kept it ours), holding a P, with a new
	 * slice (execute). */
	if (m->locked_int) {
		m->locked_int = false;
		g->lockedm = NULL;
		gmp__storep_rlx(&m->lockedg, NULL);
	}
}

void gmp__enter_slow(gmp_g *g)
{
	for (int spins = 0;; spins++) {
		switch (gmp__load8_acq(&g->detach)) {
		case GMP__DETACH_NONE:
			return;
		case GMP__DETACH_CLAIM:
			/* We are in the runtime, and sysmon's barrier may
			 * not have seen it: refuse. full: races sysmon's
			 * CLAIM -> TAKING, and orders our P accesses after. */
			if (gmp__cas8_full(&g->detach, GMP__DETACH_CLAIM,
					   GMP__DETACH_NONE))
				return;
			break;
		case GMP__DETACH_TAKING:
			/* sysmon is a few stores from DETACHED */
			if (spins < 64)
				gmp__cpu_relax();
			else
				gmp__osyield();
			break;
		case GMP__DETACH_DETACHED:
			reattach(g);
			return;
		default:
			gmp__throw("task %lld: bad detach state %u",
				   (long long)g->id,
				   gmp__load8_rlx(&g->detach));
		}
	}
}

void gmp__enter_last_slow(gmp_g *g)
{
	uint8_t mark = gmp__load8_rlx(&g->inrt);
	gmp__store8_rlx(&g->inrt, GMP__INRT_IN);
	gmp__enter_slow(g);
	gmp__store8_rlx(&g->inrt, mark);
}

/* ---- the switch point the program calls ---------------------------------- */

/* One thread-local load when nothing is pending (design.md §2.2); the
 * same check as the inline one in gmp.h, for callers through a function
 * pointer. gmp_preempt_pending_ is defined in tls.c and declared
 * initial-exec in gmp.h; read here before any switch in this function,
 * its address cannot be stale (§22.3). */
GMP_EXTERN void(gmp_preempt_point)(void)
{
	if (GMP__UNLIKELY(gmp__load32_rlx(&gmp_preempt_pending_) != 0))
		gmp__preempt_slow();
}

GMP_EXTERN void gmp_preempt_point_slow_(void)
{
	gmp__preempt_slow();
}

/* ---- tests --------------------------------------------------------------------- */

#if GMP__TEST_HOOKS
bool gmp__detached(void)
{
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? gmp__loadp_rlx(&m->curg) : NULL;
	return g && gmp__load8_acq(&g->detach) == GMP__DETACH_DETACHED;
}
#endif
