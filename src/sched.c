/* The scheduler: schedule -> findrunnable -> execute, the idle Ms and the
 * spinning protocol, the Ps (acquire, release, the idle list, procresize
 * and retiring), P handoff and locked Ms, and the scheduler's start and
 * stop. A C rendition of Go's runtime/proc.go, which this file shares with
 * task.c (spawn, yield, park, ready, exit), thread.c (an M's life), runq.c
 * (the run queues) and sysmon.c (retaking Ps, ending long slices).
 * design.md's Part II describes all of it, from §21 on; this comment is
 * the short version of the core, and the book does not repeat it.
 *
 * G, M and P
 * ----------
 * G  a task: a function, its stack and its saved registers (g.c).
 * M  an OS thread the runtime created. Its own stack is its "g0" stack,
 *    where all scheduling code runs; task code never runs there.
 * P  a logical processor: a run queue, a cache of dead Gs and the right to
 *    run tasks. There are gomaxprocs Ps; an M must hold one to run a task,
 *    so at most gomaxprocs tasks run at once, while any number of Ms may
 *    exist (blocked in syscalls, idle, spinning).
 *
 * Parking and unparking Ms (the spinning protocol)
 * ------------------------------------------------
 * Idle Ms sleep on a futex note; waking one on the other CPU costs 30-40 µs
 * here, so we must neither wake Ms needlessly nor leave a P idle while
 * work waits. Go's answer, followed exactly (design.md §24 says where in
 * the code each rule and each barrier is):
 *
 *  - An M that has run out of local work becomes "spinning" (counted in
 *    sched.nmspinning) while it looks for work to steal. At most half the
 *    busy Ps' worth of Ms spin: with many Ps and little parallelism,
 *    spinning is wasted CPU.
 *  - Whoever submits work (runq_put + wakep, on gmp_go and gmp_ready)
 *    wakes an M only if there is an idle P and no M is spinning; a
 *    spinning M will find the work by itself.
 *  - The M that wakep starts begins spinning. A spinning M that finds work
 *    stops spinning (resetspinning), and if it was the last spinner it
 *    calls wakep: there may be more work, so parallelism ramps up one M at
 *    a time while work keeps appearing.
 *  - The hard part is the moment a spinner gives up, which races with
 *    submissions: a submitter that saw a spinner wakes nobody, so the
 *    spinner must see its work before it parks. Each side does "write my
 *    side, #StoreLoad barrier, read the other side": the submitter writes
 *    the queue, then reads nmspinning; the spinner gives up its P,
 *    decrements nmspinning (a full-barrier RMW), then re-checks every
 *    queue. At least one of the two sees the other, so work is never
 *    stranded. The global queue needs no such care: submitters write it
 *    under sched.lock, and Ms re-check it under sched.lock before they give
 *    up their P.
 *  - sched.needspinning closes the last gap: a spinner that finds work but
 *    no idle P sets it, and an M about to drop its P sees it under
 *    sched.lock and starts spinning instead.
 *
 * Rejected designs (Go's list, still right): a central queue (does not
 * scale); handing the readied G directly to a freshly woken M (thrashes
 * threads and destroys locality); waking an M for every readied G whenever
 * a P is idle (most wake only to find nothing and park again).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "g.h"
#include "internal.h"
#include "mcall.h"
#include "netpoll.h"
#include "preempt.h"
#include "runq.h"
#include "runtime.h"
#include "scheduler.h"
#include "sysmon.h"
#include "thread.h"
#include "trace.h"
#include "uring.h"

gmp__sched_t gmp__sched;

/* ---- Ps ----------------------------------------------------------------- */

/* Retires p, beyond gomaxprocs and held by no M (sched.lock held): DEAD,
 * its cached Gs to the global list, its timers to P0, which is always
 * live. No timer can be added to it after (that takes holding it); and
 * whoever sleeps until the earliest timer must hear of the moved ones: the
 * M blocked in the poller, if it would oversleep, and sysmon, if it
 * sleeps deeply (its rounds start an M for a timer overdue on an idle P).
 * Not gmp__wake_netpoller: its wakep takes sched.lock. Lock order:
 * sched.lock before any P's timers lock (nothing takes sched.lock holding
 * one). */
static void p_die(gmp__p *p)
{
	gmp__store32_rel(&p->status, GMP__P_DEAD);
	gmp__gfpurge(p);
	int64_t when = gmp__timers_next(&p->timers);
	if (when == 0)
		return;
	gmp__timers_move(p, gmp__sched.allp[0]);
	if (gmp__load64_acq(&gmp__sched.lastpoll) == 0) {
		int64_t until = (int64_t)gmp__load64_acq(&gmp__sched.pollUntil);
		if (until == 0 || until > when)
			gmp__netpoll_break();
	}
	gmp__sysmon_wake_locked();
}

/* Puts p on the idle list (sched.lock held). A P beyond gomaxprocs is
 * retired instead: DEAD, off every list, its timers moved to P0. */
void gmp__pidleput(gmp__p *p)
{
	if (!gmp__runq_empty(p))
		gmp__throw("pidleput: P %d has runnable tasks", p->id);
	gmp__storep_rlx(&p->m, NULL);
	if ((uint32_t)p->id >= gmp__load32_rlx(&gmp__sched.gomaxprocs)) {
		p_die(p);
		/* full: the #StoreLoad of gmp__drain_poke (rare path) */
		gmp__add32_full(&gmp__sched.drain_seq, 0);
		gmp__drain_poke();
		return;
	}
	gmp__store32_rel(&p->status, GMP__P_IDLE);
	p->link = gmp__sched.pidle;
	gmp__sched.pidle = p;
	/* full: idle P counts feed the spinning heuristics (wakep); also
	 * the #StoreLoad between this M's last nexited store and the
	 * drain_waiters load in gmp__drain_poke. */
	gmp__add32_full(&gmp__sched.npidle, 1);
	gmp__drain_poke();
}

/* Live tasks: spawns minus exits. Exits are summed first (acquire): a
 * task whose exit is counted had its spawn counted before that (the
 * spawn store precedes the run queue's release, the exit store is a
 * release), so the spawns summed after include it and the result is
 * never below the true count at the moment the spawns are read; it is
 * zero only when no task was live then. */
int64_t gmp__tasks_live(void)
{
	uint64_t exited = 0, spawned = 0;
	int i;
	for (i = 0; i < GMP__MAXPROCS_LIMIT; i++) {
		gmp__p *pp = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!pp)
			break;
		exited += gmp__load64_acq(&pp->nexited);
	}
	spawned = gmp__load64_acq(&gmp__sched.nspawned_nop);
	for (int j = 0; j < i; j++)
		spawned += gmp__load64_acq(&gmp__sched.allp[j]->nspawned);
	return (int64_t)(spawned - exited);
}

/* Takes an idle P (sched.lock held), or NULL. */
gmp__p *gmp__pidleget(void)
{
	return gmp__pidleget_prefer(NULL);
}

/* gmp__pidleget, taking `want` if it is idle (a detached task taking its
 * old P back, whose caches and timers it knows). The walk is over idle
 * Ps, at most gomaxprocs of them, on a path that is rare. */
gmp__p *gmp__pidleget_prefer(gmp__p *want)
{
	gmp__p **pp = &gmp__sched.pidle;
	if (want)
		while (*pp && *pp != want)
			pp = &(*pp)->link;
	if (!*pp)
		pp = &gmp__sched.pidle;
	gmp__p *p = *pp;
	if (p) {
		*pp = p->link;
		p->link = NULL;
		gmp__add32_full(&gmp__sched.npidle, -1);
		gmp__store32_rlx(&gmp__sched.pidlegets,
				 gmp__sched.pidlegets + 1);
		/* A P goes to work: sysmon must watch it again, soon; if its
		 * deep sleep is a short one it is soon enough. */
		gmp__sysmon_wake_long_locked();
	}
	return p;
}

/* pidleget for a caller that found work but may find no P to run it: it
 * then records that some M must keep spinning (see the header comment). */
static gmp__p *pidleget_spinning(void)
{
	gmp__p *p = gmp__pidleget();
	if (!p)
		gmp__store32_rel(&gmp__sched.needspinning, 1);
	return p;
}

void gmp__acquirep(gmp__m *m, gmp__p *p)
{
	if (m->p || p->m || gmp__load32_rlx(&p->status) != GMP__P_IDLE)
		gmp__throw("acquirep: M %lld cannot take P %d (status %u, "
			   "held by M %lld)",
			   (long long)m->id, p->id, p->status,
			   p->m ? (long long)p->m->id : -1LL);
	gmp__storep_rlx(&m->p, p); /* racy readers: sysmon */
	gmp__storep_rel(&p->m, m); /* sysmon: p->m (acquire) then m->curg */
	/* A P taken from idle or handed over starts a new slice, even for a
	 * task that inherits one from runnext: the slice before ended when
	 * the P stopped. (A sleeper woken by a timer on an idle P ran on in
	 * its last slice, and sysmon, which had asked that slice to end,
	 * detached it while it ran a few microseconds between sleeps.) This
	 * M owns the P from here: a plain store, which sysmon reads racily
	 * (internal.h), as execute's. */
	gmp__store32_rlx(&p->schedtick, p->schedtick + 1);
	/* release: sysmon and stealers read status racily */
	gmp__store32_rel(&p->status, GMP__P_RUNNING);
	gmp__trace_pstart(m, p);
}

gmp__p *gmp__releasep(gmp__m *m)
{
	gmp__p *p = m->p;
	if (!p || p->m != m || gmp__load32_rlx(&p->status) != GMP__P_RUNNING)
		gmp__throw("releasep: M %lld does not hold a running P",
			   (long long)m->id);
	gmp__trace_pstop(m, p, GMP__TRP_RELEASE);
	gmp__storep_rlx(&m->p, NULL);
	gmp__storep_rlx(&p->m, NULL);
	gmp__store32_rel(&p->status, GMP__P_IDLE);
	return p;
}

/* ---- Ms ----------------------------------------------------------------- */

/* The idle-M list (sched.lock). nmidle is also read racily by stats. */
static void mput(gmp__m *m)
{
	m->schedlink = gmp__sched.midle;
	gmp__sched.midle = m;
	gmp__storeb_rlx(&m->idle, true); /* racy readers: dumps */
	gmp__store32_rlx(&gmp__sched.nmidle, gmp__sched.nmidle + 1);
}

static gmp__m *mget(void)
{
	gmp__m *m = gmp__sched.midle;
	if (m) {
		gmp__sched.midle = m->schedlink;
		m->schedlink = NULL;
		gmp__storeb_rlx(&m->idle, false);
		gmp__store32_rlx(&gmp__sched.nmidle, gmp__sched.nmidle - 1);
	}
	return m;
}

uint32_t gmp__cheaprand(gmp__m *m)
{
	/* wyrand: fast, good enough for steal order */
	m->rand += 0xa0761d6478bd642fULL;
	__uint128_t t =
		(__uint128_t)m->rand * (m->rand ^ 0xe7037ed1a0b428dbULL);
	return (uint32_t)((t >> 64) ^ t);
}

/* An idle M whose sleep timed out: exit if it is still idle (nobody took
 * it off midle) and more than gomaxprocs Ms are idle (design.md §5.3, beyond Go's
 * golang/go#14592). Returns true if the M must go on sleeping instead. */
static bool idle_expire(gmp__m *m)
{
	gmp__lock(&gmp__sched.lock);
	if (!m->idle) {
		/* startm took us and is about to (or did) notewakeup. */
		gmp__unlock(&gmp__sched.lock);
		return false;
	}
	if (gmp__sched.nmidle <= gmp__load32_rlx(&gmp__sched.gomaxprocs)) {
		gmp__unlock(&gmp__sched.lock);
		return true;
	}
	/* Unlink ourselves from midle. */
	for (gmp__m **mp = &gmp__sched.midle; *mp; mp = &(*mp)->schedlink)
		if (*mp == m) {
			*mp = m->schedlink;
			break;
		}
	gmp__storeb_rlx(&m->idle, false);
	gmp__store32_rlx(&gmp__sched.nmidle, gmp__sched.nmidle - 1);
	gmp__unlock(&gmp__sched.lock);
	gmp__mexit(m);
}

/* Parks the M until startm hands it a P (in nextp), or until shutdown. */
void gmp__stopm(gmp__m *m)
{
	if (m->p)
		gmp__throw("stopm: M %lld holds a P", (long long)m->id);
	if (m->spinning)
		gmp__throw("stopm: M %lld is spinning", (long long)m->id);
	gmp__lock(&gmp__sched.lock);
	if (gmp__load32_rlx(&gmp__sched.stopping)) {
		gmp__unlock(&gmp__sched.lock);
		gmp__mexit(m);
	}
	mput(m);
	gmp__unlock(&gmp__sched.lock);
	gmp__trace_mpark(m, false);
	if (GMP__UNLIKELY(gmp__cfg.randomize))
		gmp__jitter();
	int64_t timeout = gmp__cfg.idle_thread_timeout_ns;
	if (timeout > 0) {
		while (!gmp__notetsleep(&m->park, timeout) && idle_expire(m))
			;
	}
	gmp__notesleep(&m->park);
	gmp__noteclear(&m->park);
	gmp__trace_mpark(m, true);
	if (m->exiting)
		gmp__mexit(m);
	gmp__p *p = m->nextp;
	m->nextp = NULL;
	gmp__acquirep(m, p);
}

/* Runs p on some M: an idle one, else a new one. p NULL: take an idle P
 * (if none, do nothing). spinning: the caller incremented nmspinning and
 * the M starts out spinning. lockheld: the caller holds sched.lock. */
void gmp__startm(gmp__p *p, bool spinning, bool lockheld)
{
	if (!lockheld)
		gmp__lock(&gmp__sched.lock);
	if (!p) {
		if (spinning)
			gmp__throw("startm: spinning needs a P");
		p = gmp__pidleget();
		if (!p) {
			if (!lockheld)
				gmp__unlock(&gmp__sched.lock);
			return;
		}
	}
	gmp__m *nm = mget();
	if (!nm) {
		if (GMP__UNLIKELY(gmp__load32_rlx(&gmp__sched.stopping))) {
			/* gmp_shutdown is ending every M, and no task is
			 * left for a new one: the P just goes idle. */
			if (spinning)
				gmp__add32_full(&gmp__sched.nmspinning, -1);
			gmp__pidleput(p);
			if (!lockheld)
				gmp__unlock(&gmp__sched.lock);
			return;
		}
		/* Counted until the thread exists and the M is in allm
		 * (see gmp__sched_stop). */
		gmp__store32_rlx(&gmp__sched.mcreating,
				 gmp__sched.mcreating + 1);
		gmp__unlock(&gmp__sched.lock);
		gmp__newm(NULL, p, spinning);
		gmp__lock(&gmp__sched.lock);
		/* release: thread_joinable and allm, to gmp__sched_stop */
		gmp__store32_rel(&gmp__sched.mcreating,
				 gmp__sched.mcreating - 1);
		if (!lockheld)
			gmp__unlock(&gmp__sched.lock);
		return;
	}
	if (!lockheld)
		gmp__unlock(&gmp__sched.lock);
	if (nm->spinning || nm->nextp)
		gmp__throw("startm: idle M %lld is spinning or has a P",
			   (long long)nm->id);
	if (spinning && !gmp__runq_empty(p))
		gmp__throw("startm: P %d has runnable tasks", p->id);
	gmp__storeb_rlx(&nm->spinning, spinning);
	nm->nextp = p;
	gmp__trace_mwake(nm);
	gmp__notewakeup(&nm->park); /* full barrier publishes nextp */
}

/* Tries to put one more P to work; called when work was submitted. The
 * caller must have made the work visible and then passed a full barrier
 * (runnext's CAS, sched.lock, ...): that is the #StoreLoad of the protocol
 * in the header comment. */
void gmp__wakep(void)
{
	/* Nothing to wake if every P is busy (their Ms will get to the work)
	 * or an M already spins (it will find it). Every P busy and none
	 * spinning: if sysmon still sleeps the deep sleep it took when every
	 * P was idle, or a long one while the Ps compute into which a task
	 * has entered a system call since, a P held by a task in a system
	 * call may be the work's only way out (gmp_enter_syscall wakes
	 * sysmon only for a call that held work up then), so wake it; once
	 * per sleep, as the first waker clears sysmonwait. */
	if (gmp__load32_rlx(&gmp__sched.npidle) == 0) {
		if (GMP__UNLIKELY(gmp__sysmon_work_wakes(
			    gmp__load32_rlx(&gmp__sched.sysmonwait))) &&
		    gmp__load32_rlx(&gmp__sched.nmspinning) == 0)
			gmp__sysmon_wake();
		return;
	}
	if (gmp__load32_rlx(&gmp__sched.nmspinning) != 0 ||
	    !gmp__cas32_full(&gmp__sched.nmspinning, 0, 1))
		return;
	if (GMP__UNLIKELY(gmp__cfg.randomize))
		gmp__jitter();
	gmp__lock(&gmp__sched.lock);
	gmp__p *p = pidleget_spinning();
	if (!p) {
		if ((int32_t)gmp__add32_full(&gmp__sched.nmspinning, -1) <= 0)
			gmp__throw("wakep: negative nmspinning");
		gmp__unlock(&gmp__sched.lock);
		return;
	}
	gmp__unlock(&gmp__sched.lock);
	gmp__startm(p, true, false);
}

/* Whether p's schedtick gives the global queue its turn: schedtick % 61
 * == 0, written as the multiply a compiler would make of it (61 is odd:
 * the multiples of 61 times its inverse mod 2^32 are exactly the numbers
 * up to UINT32_MAX / 61). Written out because GCC takes the scheduler's
 * paths, which all end in calls that never return, for cold, and there
 * compiles a remainder as a division. */
static inline bool globrunq_turn(const gmp__p *p)
{
	return p->schedtick * 0xc10c9715u <= UINT32_MAX / 61;
}

static void becomespinning(gmp__m *m)
{
	gmp__storeb_rlx(&m->spinning, true);
	gmp__add32_full(&gmp__sched.nmspinning, 1);
	gmp__store32_rel(&gmp__sched.needspinning, 0);
}

static void resetspinning(gmp__m *m)
{
	if (!m->spinning)
		gmp__throw("resetspinning: M %lld is not spinning",
			   (long long)m->id);
	gmp__storeb_rlx(&m->spinning, false);
	if ((int32_t)gmp__add32_full(&gmp__sched.nmspinning, -1) <= 0)
		gmp__throw("resetspinning: negative nmspinning");
	if (GMP__UNLIKELY(gmp__cfg.randomize))
		gmp__jitter();
	/* We were (perhaps) the last spinner and found work: there may be
	 * more, so hand the search on. */
	gmp__wakep();
}

/* Hands off a P whose M cannot use it (syscall, locked M, retake):
 * whatever findrunnable would do with it, start an M to do. */
void gmp__handoffp(gmp__p *p)
{
	if (!gmp__runq_empty(p) || gmp__globrunq_has_work()) {
		gmp__add64_rlx(&gmp__sched.nhandoffs, 1);
		gmp__trace_handoff(p);
		gmp__startm(p, false, false);
		return;
	}
	/* No local work: start a spinning M only if none spins and no P is
	 * idle, i.e. nobody else would look for work. */
	if (gmp__load32_rlx(&gmp__sched.nmspinning) +
			    gmp__load32_rlx(&gmp__sched.npidle) ==
		    0 &&
	    gmp__cas32_full(&gmp__sched.nmspinning, 0, 1)) {
		gmp__store32_rel(&gmp__sched.needspinning, 0);
		gmp__add64_rlx(&gmp__sched.nhandoffs, 1);
		gmp__trace_handoff(p);
		gmp__startm(p, true, false);
		return;
	}
	gmp__lock(&gmp__sched.lock);
	if (gmp__sched.runq.n) {
		gmp__unlock(&gmp__sched.lock);
		gmp__add64_rlx(&gmp__sched.nhandoffs, 1);
		gmp__trace_handoff(p);
		gmp__startm(p, false, false);
		return;
	}
	/* The last running P, and nobody blocked in the poller: someone
	 * must poll for the tasks waiting on I/O. */
	if (gmp__load32_rlx(&gmp__sched.npidle) + 1 ==
		    gmp__load32_rlx(&gmp__sched.gomaxprocs) &&
	    gmp__load64_rlx(&gmp__sched.lastpoll) != 0 &&
	    gmp__netpoll_any_waiters()) {
		gmp__unlock(&gmp__sched.lock);
		gmp__add64_rlx(&gmp__sched.nhandoffs, 1);
		gmp__trace_handoff(p);
		gmp__startm(p, false, false);
		return;
	}
	int64_t when = gmp__timers_next(&p->timers);
	gmp__pidleput(p);
	gmp__unlock(&gmp__sched.lock);
	/* Its timers must still fire: make sure an M waits for them. */
	if (when != 0)
		gmp__wake_netpoller(when);
}

/* Someone must be waiting for a timer due at `when`: break the poller's
 * sleep if it would oversleep, or wake an M if nobody is in the poller. */
void gmp__wake_netpoller(int64_t when)
{
	if (gmp__load64_acq(&gmp__sched.lastpoll) == 0) {
		int64_t until = (int64_t)gmp__load64_acq(&gmp__sched.pollUntil);
		if (until == 0 || until > when)
			gmp__netpoll_break();
	} else {
		gmp__wakep();
	}
}

/* The earliest timer on any P (retiring ones included), 0 if none;
 * lock-free. */
int64_t gmp__timers_earliest(void)
{
	int64_t best = 0;
	uint32_t n = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < n; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		int64_t w = p ? gmp__timers_next(&p->timers) : 0;
		if (w && (!best || w < best))
			best = w;
	}
	return best;
}

/* Starts up to n Ms on idle Ps (for work just put on the global queue). */
static void start_idle(int64_t n)
{
	for (; n > 0; n--) {
		gmp__lock(&gmp__sched.lock);
		gmp__p *p = pidleget_spinning();
		if (!p) {
			gmp__sysmon_wake_work_locked(); /* gmp__wakep's */
			gmp__unlock(&gmp__sched.lock);
			break;
		}
		gmp__startm(p, false, true);
		gmp__unlock(&gmp__sched.lock);
	}
}

/* Makes every G in q (all WAITING, e.g. from the poller) runnable and
 * queues them: with no P, all on the global queue with an M started per
 * idle P; with a P, up to GMP__INJECT_LOCAL of them locally, waking
 * nobody, and more one per idle P globally and the rest locally. */
enum { GMP__INJECT_LOCAL = 4 };

void gmp__injectglist(gmp__gqueue *q)
{
	if (!q->head)
		return;
	gmp__m *m;
	gmp__getg(&m); /* g0 here, or sysmon (no M) */
	gmp__p *p = m ? m->p : NULL;
	for (gmp_g *g = q->head; g; g = g->schedlink) {
		gmp__casgstatus(g, GMP__G_WAITING, GMP__G_RUNNABLE);
		if (p)
			gmp__trace_ready(p, g, NULL, GMP__TRBY_POLL);
		else
			gmp__trace_ready_nop(g, GMP__TRBY_POLL);
	}
	if (p && q->n <= GMP__INJECT_LOCAL) {
		/* A few Gs: this M runs them sooner than an idle P's M could
		 * be woken (a futex wake and a context switch on the other
		 * CPU, each more than a request handler's few microseconds).
		 * Nobody is woken; should the first of them run long, sysmon
		 * ends its slice and the rest run, or are stolen. */
		gmp__runq_putbatch(p, q);
		return;
	}
	if (!p) {
		int64_t n = q->n;
		gmp__lock(&gmp__sched.lock);
		gmp__globrunq_putbatch(q);
		gmp__unlock(&gmp__sched.lock);
		start_idle(n);
		return;
	}
	gmp__gqueue globq = { 0 };
	for (uint32_t idle = gmp__load32_rlx(&gmp__sched.npidle);
	     idle > 0 && q->head; idle--)
		gmp__gq_push(&globq, gmp__gq_pop(q));
	if (globq.head) {
		int64_t n = globq.n;
		gmp__lock(&gmp__sched.lock);
		gmp__globrunq_putbatch(&globq);
		gmp__unlock(&gmp__sched.lock);
		start_idle(n);
	}
	gmp__runq_putbatch(p, q);
	/* Ps may have gone idle since we counted them (Go does the same). */
	gmp__add32_full(&gmp__sched.nmspinning, 0); /* #StoreLoad for wakep */
	gmp__wakep();
}

/* ---- finding work -------------------------------------------------------- */

/* A random permutation walk over [0, n): start anywhere, step by a number
 * coprime with n (Go's stealOrder). */
static uint32_t gcd(uint32_t a, uint32_t b)
{
	while (b) {
		uint32_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* Steals a G from another P (four randomised passes; on the last, runs
 * their due timers and may take runnext). *poll_until is lowered to the
 * earliest timer seen. */
static gmp_g *stealwork(gmp__m *m, bool *inherit, int64_t *poll_until)
{
	gmp__p *p = m->p;
	int64_t now = 0;
	*inherit = false;
	for (int i = 0; i < 4; i++) {
		bool last = i == 3;
		/* Retiring Ps too: their queues must not wait for their
		 * holders to notice (see nallp). */
		uint32_t n = gmp__load32_acq(&gmp__sched.nallp);
		uint32_t pos = gmp__cheaprand(m) % n;
		uint32_t step = gmp__cheaprand(m) % n + 1;
		while (gcd(step, n) != 1)
			step++;
		for (uint32_t k = 0; k < n; k++, pos = (pos + step) % n) {
			gmp__p *p2 = gmp__loadp_acq(&gmp__sched.allp[pos]);
			if (p2 == p || !p2)
				continue;
			/* Timers of other Ps, idle ones included, are run here
			 * once per round (before taking anyone's runnext), so
			 * none waits for its own P to come back. */
			int64_t w = last ? gmp__timers_next(&p2->timers) : 0;
			if (w) {
				if (!now)
					now = gmp__nanotime();
				if (w <= now) {
					w = gmp__timers_run(p2, now);
					/* fns may have readied Gs onto our P */
					gmp_g *g = gmp__runq_get(p, inherit);
					if (g)
						return g;
				}
				if (w && (!*poll_until || w < *poll_until))
					*poll_until = w;
			}
			if (gmp__load32_rlx(&p2->status) != GMP__P_RUNNING)
				continue; /* idle and dead Ps have no Gs */
			gmp_g *g = gmp__runq_steal(p, p2, last);
			if (g) {
				gmp__store64_rlx(&p->nsteals, p->nsteals + 1);
				gmp__trace_steal(p, p2, gmp__runq_len(p) + 1);
				return g;
			}
		}
	}
	return NULL;
}

/* With no P: is there a P with work in its queue? If so, and an idle P is
 * available, return the idle P (for the caller to acquire and steal). */
static gmp__p *check_runqs_nop(void)
{
	uint32_t n = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < n; i++) {
		gmp__p *p2 = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!p2 || gmp__load32_rlx(&p2->status) != GMP__P_RUNNING)
			continue;
		if (!gmp__runq_empty(p2)) {
			gmp__lock(&gmp__sched.lock);
			gmp__p *p = pidleget_spinning();
			gmp__unlock(&gmp__sched.lock);
			return p;
		}
	}
	return NULL;
}

/* m holds a P beyond gomaxprocs (gmp_set_maxprocs shrank the count): move
 * its work to the global queue and retire it; then find another P or
 * park. Returns with m holding a live P. */
static void retire_p(gmp__m *m)
{
	gmp__p *p = m->p;
	gmp__gqueue q = { 0 };
	bool inherit;
	gmp_g *g;
	while ((g = gmp__runq_get(p, &inherit)) != NULL)
		gmp__gq_push(&q, g);
	if (m->spinning) {
		gmp__storeb_rlx(&m->spinning, false);
		gmp__add32_full(&gmp__sched.nmspinning, -1);
	}
	gmp__releasep(m);
	gmp__lock(&gmp__sched.lock);
	bool work = q.n != 0;
	if (work)
		gmp__globrunq_putbatch(&q);
	/* DEAD now, its cached Gs and timers moved (p_die), unless the count
	 * grew again */
	gmp__pidleput(p);
	gmp__p *np = gmp__pidleget();
	gmp__unlock(&gmp__sched.lock);
	if (np) {
		gmp__acquirep(m, np);
		if (work)
			gmp__wakep();
		return;
	}
	gmp__stopm(m);
}

/* With our P: a batch of readied I/O waiters (all WAITING): the first is
 * ours to run, made RUNNABLE; the rest are queued (injectglist). NULL if
 * the batch is empty. */
static gmp_g *run_first_queue_rest(gmp__gqueue *q)
{
	gmp_g *g = gmp__gq_pop(q);
	if (g) {
		gmp__injectglist(q);
		gmp__casgstatus(g, GMP__G_WAITING, GMP__G_RUNNABLE);
		gmp__m *m = gmp__getm(); /* g0, holding our P */
		gmp__trace_ready(m->p, g, NULL, GMP__TRBY_POLL);
	}
	return g;
}

/* With our P: is an I/O wait over? Only one M polls at a time, and only
 * when someone waits and no M is blocked in the poller already (it would
 * see the same events). */
static gmp_g *poll_nonblocking(void)
{
	if (!gmp__netpoll_inited() || !gmp__netpoll_any_waiters() ||
	    gmp__load64_rlx(&gmp__sched.lastpoll) == 0 ||
	    gmp__xchg32_full(&gmp__sched.pollingnet, 1) != 0)
		return NULL;
	gmp__gqueue q = { 0 };
	gmp__netpoll(0, &q);
	gmp__store32_rel(&gmp__sched.pollingnet, 0);
	return run_first_queue_rest(&q);
}

/* With our P: completed file operations (uring.c), any P's ring. */
static gmp_g *reap_rings(void)
{
	gmp__gqueue q = { 0 };
	if (gmp__uring_reap(&q) == 0)
		return NULL;
	return run_first_queue_rest(&q);
}

/* Finds a runnable G for m, blocking (parking m) until there is one.
 * Returns with m holding a P. */
static gmp_g *findrunnable(gmp__m *m, bool *inherit)
{
	gmp_g *g;
top:;
	gmp__p *p = m->p;
	if (GMP__UNLIKELY((uint32_t)p->id >=
			  gmp__load32_rlx(&gmp__sched.gomaxprocs))) {
		retire_p(m);
		goto top;
	}
	*inherit = false;

	/* Our P's due timers first: they ready tasks, often onto our queue.
	 * The clock is read only when the P has timers. */
	int64_t poll_until = gmp__timers_next(&p->timers);
	if (poll_until) {
		int64_t now = gmp__nanotime();
		if (poll_until <= now)
			poll_until = gmp__timers_run(p, now);
	}

	/* Fairness: look at the global queue first now and then, or two
	 * tasks respawning each other could keep it waiting forever. */
	if (globrunq_turn(p) && gmp__globrunq_has_work()) {
		gmp__lock(&gmp__sched.lock);
		g = gmp__globrunq_get(p, 1);
		gmp__unlock(&gmp__sched.lock);
		if (g)
			return g;
	}

	g = gmp__runq_get(p, inherit);
	if (g)
		return g;

	if (gmp__globrunq_has_work()) {
		gmp__lock(&gmp__sched.lock);
		g = gmp__globrunq_get(p, GMP__RUNQ_SIZE / 2);
		gmp__unlock(&gmp__sched.lock);
		if (g)
			return g;
	}

	/* Finished I/O waits, before taking other Ps' work: the rings'
	 * completions first (uring.c), then the network poller. */
	if ((g = reap_rings()) != NULL)
		return g;
	if ((g = poll_nonblocking()) != NULL)
		return g;

	/* Steal, but keep the number of spinning Ms under half the busy Ps:
	 * with many Ps and little parallelism, spinning is wasted CPU. */
	uint32_t procs = gmp__load32_rlx(&gmp__sched.gomaxprocs);
	if (m->spinning ||
	    2 * gmp__load32_rlx(&gmp__sched.nmspinning) <
		    procs - gmp__load32_rlx(&gmp__sched.npidle)) {
		if (!m->spinning)
			becomespinning(m);
		g = stealwork(m, inherit, &poll_until);
		if (g)
			return g;
	}

	/* Nothing anywhere: give up the P. Re-check the global queue under
	 * the lock that submitters to it take. */
	gmp__lock(&gmp__sched.lock);
	if (gmp__sched.runq.n) {
		g = gmp__globrunq_get(p, GMP__RUNQ_SIZE / 2);
		gmp__unlock(&gmp__sched.lock);
		return g;
	}
	if (!m->spinning && gmp__load32_acq(&gmp__sched.needspinning) == 1) {
		/* A spinner found work it had no P for: take over. */
		becomespinning(m);
		gmp__unlock(&gmp__sched.lock);
		goto top;
	}
	gmp__releasep(m);
	gmp__pidleput(p);
	gmp__unlock(&gmp__sched.lock);
	if (GMP__UNLIKELY(gmp__cfg.randomize))
		gmp__jitter();

	/* The delicate dance: drop nmspinning first (a full barrier), then
	 * look at every queue again. A submitter that saw nmspinning > 0
	 * before our decrement did not wake anyone, so its work must be
	 * visible to the re-check below. */
	bool was_spinning = m->spinning;
	if (m->spinning) {
		gmp__storeb_rlx(&m->spinning, false);
		if ((int32_t)gmp__add32_full(&gmp__sched.nmspinning, -1) <= 0)
			gmp__throw("findrunnable: negative nmspinning");
		if (GMP__UNLIKELY(gmp__cfg.randomize))
			gmp__jitter();

		gmp__lock(&gmp__sched.lock);
		if (gmp__sched.runq.n) {
			gmp__p *np = pidleget_spinning();
			if (np) {
				g = gmp__globrunq_get(np, GMP__RUNQ_SIZE / 2);
				gmp__unlock(&gmp__sched.lock);
				gmp__acquirep(m, np);
				becomespinning(m);
				return g;
			}
		}
		gmp__unlock(&gmp__sched.lock);

		gmp__p *np = check_runqs_nop();
		if (np) {
			gmp__acquirep(m, np);
			becomespinning(m);
			goto top;
		}
	}

	/* Sleep in the poller until I/O or the earliest timer of any P (at
	 * most one M does this; the others park). Every P's timers count:
	 * their own Ms may be busy or parked. */
	int64_t earliest = gmp__timers_earliest();
	if (earliest && (!poll_until || earliest < poll_until))
		poll_until = earliest;
	if (gmp__netpoll_inited() &&
	    (gmp__netpoll_any_waiters() || poll_until != 0) &&
	    gmp__xchg64_full(&gmp__sched.lastpoll, 0) != 0) {
		gmp__store64_rel(&gmp__sched.pollUntil, (uint64_t)poll_until);
		int64_t delay = -1;
		if (poll_until) {
			/* A timer due already: sleep the slack (timer.h), so
			 * that it runs with those that come due meanwhile
			 * rather than alone, without a sleep. */
			delay = poll_until - gmp__nanotime();
			if (delay <= 0)
				delay = GMP__TIMER_SLACK_NS;
		}
		gmp__gqueue q = { 0 };
		gmp__netpoll(delay, &q);
		gmp__store64_rel(&gmp__sched.pollUntil, 0);
		gmp__store64_rel(&gmp__sched.lastpoll,
				 (uint64_t)gmp__nanotime());
		gmp__lock(&gmp__sched.lock);
		gmp__p *np = gmp__pidleget();
		gmp__unlock(&gmp__sched.lock);
		if (!np) {
			gmp__injectglist(&q);
		} else {
			gmp__acquirep(m, np);
			if ((g = run_first_queue_rest(&q)) != NULL)
				return g;
			if (was_spinning)
				becomespinning(m);
			goto top;
		}
	} else if (poll_until != 0 && gmp__netpoll_inited()) {
		/* The M in the poller may sleep past our deadline. */
		int64_t until = (int64_t)gmp__load64_acq(&gmp__sched.pollUntil);
		if (until == 0 || until > poll_until)
			gmp__netpoll_break();
	}
	gmp__stopm(m);
	goto top;
}

/* Runs g on m, which holds a P. inherit: g continues the current time
 * slice (it came from runnext), so schedtick does not advance. */
_Noreturn void gmp__execute(gmp__m *m, gmp_g *g, bool inherit)
{
	gmp__p *p = m->p;
	/* A G that is not running is inside the runtime (preempt.h): sysmon
	 * must not take it, once it is curg, for one running its own code
	 * while this M still uses the P below. */
	if (GMP__DEBUG && !gmp__load8_rlx(&g->inrt))
		gmp__throw("execute: task %lld is marked as running its own "
			   "code",
			   (long long)g->id);
	/* release: sysmon reaches g through m->curg (acquire) and reads its
	 * status; this orders g's initialisation before that. */
	gmp__storep_rel(&m->curg, g);
	gmp__storep_rlx(&g->m, m);
	gmp__storep_rlx(&g->lastm, m);
	gmp__casgstatus_execute(m, g, inherit);
	gmp__store32_rlx(m->preemptp, 0);
	if (!inherit)
		gmp__store32_rlx(&p->schedtick, p->schedtick + 1);
	/* A switch point that was the task's last act in the runtime: it is
	 * back in its own code from here (preempt.h). Last of all, after the
	 * P's last use on this M for it; release: pairs with sysmon's
	 * acquire of the mark. Without a branch: LEAVE becomes OWN, IN stays
	 * IN. */
	_Static_assert((GMP__INRT_LEAVE & GMP__INRT_IN) == GMP__INRT_OWN,
		       "LEAVE & IN is OWN");
	gmp__store8_rel(&g->inrt, gmp__load8_rlx(&g->inrt) & GMP__INRT_IN);
	gmp__gogo(m, g);
}

/* execute found g not plain RUNNABLE (gmp__casgstatus_execute): a ready
 * sampled for the latency histogram is measured, and g executed again
 * without its TRACK bit; anything else is the broken invariant that
 * casgstatus reports. */
_Noreturn void gmp__execute_odd(gmp__m *m, gmp_g *g, bool inherit, uint32_t cur)
{
	if (cur != (GMP__G_RUNNABLE | GMP__G_TRACK))
		gmp__gstatus_bad(g, cur, GMP__G_RUNNABLE, GMP__G_RUNNING);
	gmp__metrics_tracked(m->p, g);
	gmp__store32_rlx(&g->status, GMP__G_RUNNABLE); /* ours: see above */
	gmp__execute(m, g, inherit);
}

static void startlockedm(gmp__m *m, gmp_g *g);

/* One round of scheduling, the general case (see gmp__schedule). */
static _Noreturn __attribute__((noinline)) void schedule_slow(gmp__m *m)
{
	/* Sent here by the tracer (trace.h): the run that just ended is
	 * recorded. A round the P takes on its own starts a measured slice
	 * (gmp__trace_run below), unless its task inherits the slice: a P
	 * whose schedtick stops on a global-queue turn while runnext tasks
	 * take turns comes here at every round. */
	bool traced = gmp__trace_sched(m, m->p);
top:;
	gmp__p *p = m->p;
	if (GMP__UNLIKELY(gmp__loadb_rlx(&p->preempt))) {
		/* The time slice expired (sysmon): the G readied last does
		 * not get to continue it; it queues like everyone else. */
		gmp__storeb_rlx(&p->preempt, false);
		gmp_g *next = gmp__loadp_rlx(&p->runnext);
		if (next && gmp__casp_acq(&p->runnext, next, NULL))
			gmp__runq_put(p, next, false);
	}
	if (m->spinning && !gmp__runq_empty(p))
		gmp__throw("schedule: spinning with local work");
	uint32_t gen = gmp__load32_rlx(&gmp__sched.gfsweepgen);
	if (GMP__UNLIKELY(p->gfsweepgen != gen)) {
		/* sysmon rotated the free lists: our dead Gs go to the
		 * global one, to age with the rest (g.c). */
		p->gfsweepgen = gen;
		gmp__gfpurge(p);
	}

	bool inherit;
	gmp_g *g = findrunnable(m, &inherit);

	/* We are about to run a G, so stop spinning; if we were the last
	 * spinner, someone else should look for more work. */
	if (m->spinning)
		resetspinning(m);

	if (GMP__UNLIKELY(g->lockedm != NULL)) {
		/* g must run on its own M: hand it our P and wait. */
		startlockedm(m, g);
		goto top;
	}
	gmp__trace_run(m, m->p, g, !traced && !inherit);
	gmp__execute(m, g, inherit);
}

/* A measured slice's end where the clock needs calls (schedule_other). */
static _Noreturn __attribute__((noinline, cold)) void
schedule_slice_done(gmp__m *m)
{
	gmp__trace_slice_done(m->p);
	gmp__schedule(m);
}

/* While a trace is being recorded, every round: the short path, with the
 * end of the run and the start of the next recorded at one tick. A
 * global-queue turn with nothing there is no reason to go the slow way
 * (findrunnable would find the same G). */
static _Noreturn __attribute__((noinline)) void schedule_traced(gmp__m *m)
{
	gmp__p *p = m->p;
	if (!m->spinning &&
	    (uint32_t)p->id < gmp__load32_rlx(&gmp__sched.gomaxprocs) &&
	    gmp__timers_next(&p->timers) == 0 &&
	    (!globrunq_turn(p) || !gmp__globrunq_has_work())) {
		/* The clock first: read just before the queue's CAS, its
		 * latency hides behind the drain of the stores before (the
		 * parked task's); read after it, with the event's stores
		 * waiting on it and the CAS of execute waiting on those, it
		 * cost some 10 ns more a switch here. */
		uint64_t now = gmp__ticks();
		bool inherit;
		gmp_g *g = gmp__runq_get(p, &inherit);
		if (g && !g->lockedm) {
			gmp__trace_switch(m, p, g, now);
			gmp__execute(m, g, inherit);
		}
		if (g) {
			gmp__trace_sched(m, p);
			startlockedm(m, g);
		}
	}
	schedule_slow(m);
}

/* gmp__schedule's rounds off the short path. The attention word first,
 * unless sysmon's request is in it (schedule_slow answers that): a trace
 * being recorded takes schedule_traced; a measured slice's end alone is
 * recorded (gmp__trace_slice_done) and the round starts over, on the
 * short path. The rest goes to schedule_slow. Out of line, with only
 * calls that never return, so that neither it nor the short path keeps a
 * frame. */
static _Noreturn __attribute__((noinline)) void schedule_other(gmp__m *m)
{
	gmp__p *p = m->p;
	if (gmp__load16_rlx(&p->attn) && !gmp__loadb_rlx(&p->preempt)) {
		if (gmp__tracing())
			schedule_traced(m);
		if (GMP__LIKELY(gmp__trace_slice_done_fast(p)))
			gmp__schedule(m);
		schedule_slice_done(m);
	}
	schedule_slow(m);
}

/* One round of scheduling: find a G and run it. Never returns.
 *
 * The common round, where the next G is in this P's own queue and nothing
 * else asks for attention, takes a short path: no slice ended (preempt)
 * and the tracer does not want to see this round (tattn: trace.h), the M
 * is not spinning, the P is not being retired, it has no timers,
 * and this is not one of the rounds that look at the global queue first.
 * Everything else, and an empty queue, goes to findrunnable by way of
 * schedule_slow. */
__attribute__((hot)) _Noreturn void gmp__schedule(gmp__m *m)
{
	if (m->lockedg)
		gmp__schedule_locked(m); /* never returns; see below */
	gmp__p *p = m->p;
	/* attn: sysmon's preempt and the tracer's byte, one test. (Written
	 * out, with the function marked hot: GCC otherwise predicts the
	 * queue's part cold, leaves gmp__runq_get out of line or, forced,
	 * lays its loop out with an extra jump, and holds m in a
	 * callee-saved register; each costs a yield 1-3 instructions.) */
	if (GMP__LIKELY(
		    !gmp__load16_rlx(&p->attn) && !m->spinning &&
		    (uint32_t)p->id < gmp__load32_rlx(&gmp__sched.gomaxprocs) &&
		    gmp__timers_next(&p->timers) == 0 && !globrunq_turn(p))) {
		bool inherit;
		gmp_g *g = gmp__runq_get(p, &inherit);
		if (GMP__LIKELY(g != NULL)) {
			if (GMP__LIKELY(g->lockedm == NULL))
				gmp__execute(m, g, inherit);
			startlockedm(m, g);
		}
	}
	schedule_other(m);
}

/* For a park's unlock function that ends the switch itself: the G in m's
 * runnext, taken off it, when it is the one gmp__schedule's short path
 * would run next, under the same conditions; NULL when the round must go
 * the usual way (schedule decides, or runnext is empty, or a thief took
 * it first). The caller runs the G it gets with gmp__execute(m, g, true),
 * on this M, with nothing in between that could switch. */
gmp_g *gmp__runnext_take(gmp__m *m)
{
	gmp__p *p = m->p;
	if (m->lockedg || gmp__load16_rlx(&p->attn) || m->spinning ||
	    (uint32_t)p->id >= gmp__load32_rlx(&gmp__sched.gomaxprocs) ||
	    gmp__timers_next(&p->timers) != 0 || globrunq_turn(p))
		return NULL;
	gmp_g *g = gmp__loadp_rlx(&p->runnext);
	/* acquire: pairs with the full CAS of gmp__runq_put that stored g,
	 * as in gmp__runq_get; a failed CAS means a thief took it. */
	if (!g || g->lockedm || !gmp__casp_acq(&p->runnext, g, NULL))
		return NULL;
	return g;
}

/* ---- locked Ms (LockOSThread) ------------------------------------------- */

/* m's locked G is not runnable: give the P away and sleep until someone
 * schedules that G (startlockedm hands us a P). */
static void stoplockedm(gmp__m *m)
{
	gmp_g *g = m->lockedg;
	if (!g || g->lockedm != m)
		gmp__throw("stoplockedm: inconsistent locking of M %lld",
			   (long long)m->id);
	if (m->p)
		gmp__handoffp(gmp__releasep(m));
	gmp__lock(&gmp__sched.lock);
	gmp__sched.nmidlelocked++;
	gmp__unlock(&gmp__sched.lock);
	gmp__notesleep(&m->park);
	gmp__noteclear(&m->park);
	uint32_t st = gmp__readgstatus(g) & ~(uint32_t)GMP__G_FLAGS;
	if (st != GMP__G_RUNNABLE)
		gmp__throw("stoplockedm: locked task %lld is %s, not runnable",
			   (long long)g->id, gmp__gstatus_name(st));
	gmp__p *p = m->nextp;
	m->nextp = NULL;
	gmp__acquirep(m, p);
}

_Noreturn void gmp__schedule_locked(gmp__m *m)
{
	stoplockedm(m);
	gmp__trace_run(m, m->p, m->lockedg, true);
	gmp__execute(m, m->lockedg, false);
}

/* g (runnable) is locked to another M: hand it our P and park. */
static void startlockedm(gmp__m *m, gmp_g *g)
{
	gmp__m *mp = g->lockedm;
	if (mp == m)
		gmp__throw("startlockedm: task %lld is locked to this M",
			   (long long)g->id);
	if (mp->nextp)
		gmp__throw("startlockedm: M %lld already has a P",
			   (long long)mp->id);
	gmp__lock(&gmp__sched.lock);
	gmp__sched.nmidlelocked--;
	gmp__unlock(&gmp__sched.lock);
	/* Put g back where its M will find it: it runs g directly. */
	gmp__p *p = gmp__releasep(m);
	mp->nextp = p;
	gmp__add64_rlx(&gmp__sched.nhandoffs, 1);
	gmp__trace_handoff(p);
	gmp__notewakeup(&mp->park);
	gmp__stopm(m);
}

/* A task ended while locked to m: the thread may be in a state nobody else
 * should inherit, so it exits with the task (Go 1.10). */
_Noreturn void gmp__goexit_locked(gmp__m *m)
{
	gmp__handoffp(gmp__releasep(m));
	gmp__mexit(m);
}

/* ---- gomaxprocs ----------------------------------------------------------- */

static gmp__p *newp(int32_t id)
{
	gmp__p *p = gmp__calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->id = id;
	p->status = GMP__P_DEAD;
	gmp__trace_p_init(p);
	return p;
}

/* Sets the number of Ps (sched.lock held). Returns 0 or -ENOMEM. */
int gmp__procresize(int n)
{
	uint32_t old = gmp__load32_rlx(&gmp__sched.gomaxprocs);
	if (n < 1)
		n = 1;
	if (n > GMP__MAXPROCS_LIMIT)
		n = GMP__MAXPROCS_LIMIT;
	for (int i = 0; i < n; i++)
		if (!gmp__sched.allp[i]) {
			gmp__p *p = newp(i);
			if (!p)
				return -ENOMEM;
			/* release: stealers load allp[i] with acquire */
			gmp__storep_rel(&gmp__sched.allp[i], p);
			/* release, after the entry: walkers load nallp
			 * (acquire) before the entries below it */
			gmp__store32_rel(&gmp__sched.nallp, (uint32_t)i + 1);
		}
	/* release: publishes the new Ps to lock-free walkers of allp */
	gmp__store32_rel(&gmp__sched.gomaxprocs, (uint32_t)n);
	if ((uint32_t)n > old) {
		for (int i = (int)old; i < n; i++) {
			gmp__p *p = gmp__sched.allp[i];
			if (gmp__load32_rlx(&p->status) == GMP__P_DEAD)
				gmp__pidleput(p);
		}
	} else if ((uint32_t)n < old) {
		/* Idle Ps beyond n leave the idle list now, their timers
		 * going to P0; held ones retire at their holder's next
		 * schedule(). Until then their queues are stolen and their
		 * timers run like any P's (walkers go up to nallp), and
		 * sysmon asks their tasks to yield and takes them from
		 * syscalls at once; wake it in case it sleeps deeply. */
		gmp__p **pp = &gmp__sched.pidle;
		while (*pp) {
			gmp__p *p = *pp;
			if ((uint32_t)p->id >= (uint32_t)n) {
				*pp = p->link;
				p->link = NULL;
				gmp__add32_full(&gmp__sched.npidle, -1);
				p_die(p);
			} else {
				pp = &p->link;
			}
		}
		gmp__sysmon_wake_locked();
	}
	return 0;
}

/* ---- start and stop -------------------------------------------------------- */

int gmp__sched_start(int maxprocs, int max_threads)
{
	memset(&gmp__sched, 0, sizeof gmp__sched);
	gmp__sched.maxmcount = max_threads;
	gmp__sched.lastpoll = (uint64_t)gmp__nanotime(); /* nobody polls yet */
	gmp__lock(&gmp__sched.lock);
	int err = gmp__procresize(maxprocs);
	gmp__unlock(&gmp__sched.lock);
	if (err) {
		for (int i = 0; i < GMP__MAXPROCS_LIMIT; i++)
			gmp__free(gmp__sched.allp[i]);
		memset(&gmp__sched, 0, sizeof gmp__sched);
	}
	return err;
}

/* Every task has ended: stop every M, then free Ms and Ps. Called by
 * gmp_shutdown on a thread that is not the runtime's. */
void gmp__sched_stop(void)
{
	gmp__lock(&gmp__sched.lock);
	gmp__store32_rel(&gmp__sched.stopping, 1);
	gmp__m *m;
	while ((m = mget()) != NULL) {
		m->exiting = true;
		gmp__notewakeup(&m->park);
	}
	gmp__unlock(&gmp__sched.lock);
	/* An M asleep in the poller until a far timer (a select's timeout
	 * that no longer matters) would keep us waiting as long. */
	gmp__netpoll_break();
	/* The last tasks' Ms may still be handing their Ps on (a locked
	 * task's M does, after the task is counted out), and startm may be
	 * making a new M for one: from `stopping` on it makes none, and we
	 * wait for those under way, so that each is in allm with its thread
	 * started before we walk it (found by TSan: allocm recycling an M
	 * that this loop was joining). */
	while (gmp__load32_acq(&gmp__sched.mcreating) != 0)
		gmp__osyield();
	/* Ms still between schedule() and stopm() see `stopping` in stopm
	 * and exit; join them all. allm is stable now. */
	for (m = gmp__loadp_acq(&gmp__sched.allm); m; m = m->alllink)
		if (m->thread_joinable) {
			pthread_join(m->thread, NULL);
			m->thread_joinable = false;
		}
	m = gmp__sched.allm;
	while (m) {
		gmp__m *next = m->alllink;
		gmp__free(m);
		m = next;
	}
	gmp__uring_stop(); /* the rings, before their Ps */
	gmp__netpoll_shutdown();
	for (int i = 0; i < GMP__MAXPROCS_LIMIT; i++) {
		gmp__p *p = gmp__sched.allp[i];
		if (p)
			gmp__timers_destroy(&p->timers);
		gmp__free(p);
	}
	gmp__globrunq_free_all();
	memset(&gmp__sched, 0, sizeof gmp__sched);
}
