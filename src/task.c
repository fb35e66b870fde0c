/* The task API (design.md §2, §3): spawning, yielding, parking, readying and
 * ending tasks. Each switch point runs a function on the M's g0 stack
 * through gmp__mcall; those functions end in schedule(). */

#include "fiber.h"
#include "g.h"
#include "internal.h"
#include "key.h"
#include "mcall.h"
#include "preempt.h"
#include "runq.h"
#include "runtime.h"
#include "scheduler.h"
#include "stack.h"
#include "task.h"
#include "trace.h"

/* The last task id handed out; every spawn takes the next one here, from
 * a task or from any thread. Not part of gmp__sched: ids stay unique and
 * increasing across gmp_shutdown/gmp_init cycles for the life of the
 * process. One shared counter rather than Go's per-P batches (goidcache),
 * which made ids unique but not increasing: a task on one P could get a
 * smaller id than a task spawned before it elsewhere. The counter has a
 * cache line to itself, so that only spawns on other Ps contend for it,
 * not whatever the linker would have placed beside it. */
static struct {
	volatile uint64_t last;
	char pad[GMP__CACHELINE - sizeof(uint64_t)];
} goidgen __attribute__((aligned(GMP__CACHELINE)));

/* The calling M if it may use its P's queue, and has a P: on g0 (an
 * unlock function, a timer) or in a RUNNING task inside the runtime (see
 * gmp__getg and preempt.h). */
static inline gmp__m *task_m(void)
{
	gmp__m *m;
	gmp_g *g = gmp__getg(&m);
	if (GMP__DEBUG && !gmp__inrt(g))
		gmp__throw("task %lld uses its P outside the runtime",
			   (long long)g->id);
	return m && m->p ? m : NULL;
}

static inline __attribute__((always_inline)) void dropg(gmp__m *m)
{
	gmp__storep_rlx(&m->curg->m, NULL); /* racy readers: sysmon */
	gmp__storep_rlx(&m->curg, NULL);
}

static _Noreturn void goexit1(void);

/* The first frame of every task (after the trampoline). The task was in
 * the runtime until here (newproc1 marked it, preempt.h): from this call
 * on it runs its own code, and its P may be detached from it. */
static void task_main(void *arg)
{
	gmp_g *g = arg;
	gmp__fiber_on_task(g);
	gmp__leave(g, 0);
	g->fn(g->arg); /* errno starts at 0: newproc1, via execute */
	goexit1();
}

/* A runnable G for fn(arg), or NULL when memory ran out. p: the caller's P
 * (its caches are used), or NULL for a caller without one. */
static gmp_g *newproc1(gmp__p *p, gmp_fn fn, void *arg)
{
	gmp_g *g = gmp__gfget(p);
	if (!g && !(g = gmp__malg()))
		return NULL;
	gmp__fiber_stack_reset(g);
	gmp__fiber_g_create(g);
	gmp__ctx_make(&g->sched, (void *)g->stack.lo, g->stack.hi - g->stack.lo,
		      task_main, g);
	g->fn = fn;
	g->arg = arg;
	g->stklow = g->stack.hi;
	g->stkstate = GMP__STK_USED;
	g->saved_errno = 0;
	g->waitreason = GMP__WAIT_NONE;
	g->param = NULL;
	g->rwrec = 0;
	/* Not running yet, so inside the runtime (preempt.h), as every G
	 * that is not running is: a new one since malg, a dead one since its
	 * goexit1 entered for good. (Its detach word is NONE, but for a
	 * moment of a claim sysmon made on the task it was: sysmon backs off
	 * or, if this task already runs its own code, detaches it, safely
	 * either way.) */
	if (GMP__DEBUG && gmp__load8_rlx(&g->inrt) != GMP__INRT_IN)
		gmp__throw("newproc1: task %lld is not inside the runtime",
			   (long long)g->id);
	/* relaxed: the id orders spawns and publishes nothing. Coherence
	 * is enough for design.md §2.1's "increase": all fetch-adds on goidgen
	 * form one modification order, which agrees with happens-before,
	 * so a spawn that happens before another takes the smaller id. */
	g->id = (int64_t)gmp__add64_rlx(&goidgen.last, 1) + 1;
	if (p)
		gmp__store64_rlx(&p->nspawned, p->nspawned + 1);
	else
		gmp__add64_rlx(&gmp__sched.nspawned_nop, 1);
	gmp__casgstatus(g, GMP__G_DEAD, GMP__G_RUNNABLE);
	gmp__trace_create(p, g);
	return g;
}

/* gmp_go from a thread that holds no P: the global queue, with the
 * runtime held (and started if it is off). Out of line, so that gmp_go's
 * own path stays short. */
static __attribute__((noinline)) int64_t go_nop(gmp_fn fn, void *arg)
{
	int err = gmp__rt_hold(true);
	if (err)
		return err;
	int64_t id = -ENOMEM;
	gmp_g *g = newproc1(NULL, fn, arg);
	if (g) {
		id = g->id; /* g may run, end and be reused once queued */
		gmp__lock(&gmp__sched.lock);
		gmp__globrunq_put(g);
		gmp__unlock(&gmp__sched.lock);
		gmp__wakep();
	}
	gmp__rt_release();
	return id;
}

/* gmp_go on an M that holds a P (m->p, read here: after gmp__enter). */
static inline __attribute__((always_inline)) int64_t go_on(gmp__m *m, gmp_fn fn,
							   void *arg)
{
	gmp__p *p = m->p;
	gmp_g *g = newproc1(p, fn, arg);
	if (!g)
		return -ENOMEM;
	int64_t id = g->id;
	/* runnext: the new task runs next here (Go's newproc). The full CAS
	 * inside is the #StoreLoad that wakep's check relies on. */
	gmp__runq_put(p, g, true);
	gmp__wakep();
	return id;
}

GMP_EXTERN int64_t gmp_go(gmp_fn fn, void *arg)
{
	if (!fn)
		return -EINVAL;
	gmp__m *m;
	gmp_g *self = gmp__getg(&m);
	if (GMP__UNLIKELY(!self)) /* g0 (it holds a P), or no P */
		return m ? go_on(m, fn, arg) : go_nop(fn, arg);
	/* After it, m is still ours (a detached task takes a P back on its
	 * own M), and holds a P. */
	uint8_t was = gmp__enter(self);
	int64_t id = go_on(m, fn, arg);
	gmp__leave(self, was);
	return id;
}

/* ---- yielding ----------------------------------------------------------- */

static void gosched_m(gmp_g *g)
{
	gmp__m *m = g->m;
	gmp__fiber_on_g0(m);
	gmp__casgstatus(g, GMP__G_RUNNING, GMP__G_RUNNABLE);
	dropg(m);
	/* The tail of the local queue: everything queued here runs first,
	 * and other Ps may steal it meanwhile. */
	gmp__runq_put(m->p, g, false);
	gmp__schedule(m);
}

/* A switch point's way in when the task was detached (gmp__enter_last
 * said so): out of line, so that the fast path keeps no frame, and ending
 * in the same tail call. */
static __attribute__((noinline, cold)) void switch_slow(gmp_g *g,
							void (*fn)(gmp_g *))
{
	gmp__enter_last_slow(g);
	gmp__mcall(g->m, g, fn);
}

/* What gmp_yield and a preemption share: the running task (a no-op
 * outside one) switches to g0, which runs fn (gosched_m or gopreempt_m:
 * they differ only in where they queue the task). Nothing follows the
 * switch: the task leaves the runtime when resumed (preempt.h), and the
 * switch stays a tail call (gmp__mcall). Inline in both, which keeps
 * gmp_yield's fast path as it was. */
static inline __attribute__((always_inline)) void
switch_last(void (*fn)(gmp_g *))
{
	gmp__m *m;
	gmp_g *g = gmp__getg(&m);
	if (!g)
		return;
	if (!gmp__enter_last(g)) {
		switch_slow(g, fn);
		return;
	}
	gmp__mcall(m, g, fn);
}

GMP_EXTERN void gmp_yield(void)
{
	switch_last(gosched_m);
}

/* The slice is over (sysmon said so): like a yield, but to the tail of the
 * global queue, as Go's gopreempt_m does, so that everything queued, here
 * and globally, runs before this task continues. A task that keeps
 * spawning (each new task lands in this P's queue, overflowing to the
 * global one) thus lets its children run once per slice. */
static void gopreempt_m(gmp_g *g)
{
	gmp__m *m = g->m;
	gmp__fiber_on_g0(m);
	gmp__trace_preempted(m);
	gmp__casgstatus(g, GMP__G_RUNNING, GMP__G_RUNNABLE);
	dropg(m);
	gmp__lock(&gmp__sched.lock);
	gmp__globrunq_put(g);
	gmp__unlock(&gmp__sched.lock);
	gmp__schedule(m);
}

/* Reached from gmp_preempt_point (and other switch points) when sysmon
 * flagged the slice. */
void gmp__preempt_slow(void)
{
	switch_last(gopreempt_m);
}

/* ---- parking and readying ------------------------------------------------- */

static void park_m(gmp_g *g)
{
	gmp__m *m = g->m;
	gmp__fiber_on_g0(m);
	gmp_unlock_fn unlockf = m->waitunlockf;
	void *lock = m->waitlock;
	m->waitunlockf = NULL;
	m->waitlock = NULL;
	/* release: from here a waker may take g; it must see g->sched. */
	gmp__casgstatus(g, GMP__G_RUNNING, GMP__G_WAITING);
	dropg(m);
	if (GMP__UNLIKELY(gmp__cfg.randomize))
		gmp__jitter();
	if (unlockf && !unlockf(g, lock)) {
		/* Not parking after all; nobody else can have readied g. */
		gmp__casgstatus(g, GMP__G_WAITING, GMP__G_RUNNABLE);
		gmp__execute(m, g, true);
	}
	gmp__schedule(m);
}

/* gmp__park for a caller that knows g is the task running here (a waiter
 * recorded it): its M is g->m, which saves the thread-local lookup. */
void gmp__park_g(gmp_g *g, gmp_unlock_fn unlockf, void *lock, uint32_t reason)
{
	gmp__m *m = g->m;
	if (GMP__UNLIKELY(gmp__load32_rlx(&g->status) != GMP__G_RUNNING))
		gmp__throw("gmp_park: task %lld is %s", (long long)g->id,
			   gmp__gstatus_name(gmp__load32_rlx(&g->status)));
	m->waitunlockf = unlockf;
	m->waitlock = lock;
	gmp__store32_rlx(&g->waitreason, reason); /* racy readers: dumps */
	gmp__mcall(m, g, park_m);
}

void gmp__park(gmp_unlock_fn unlockf, void *lock, uint32_t reason)
{
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (!g)
		gmp__throw("gmp_park called outside a task");
	gmp__park_g(g, unlockf, lock, reason);
}

GMP_EXTERN void gmp_park(gmp_unlock_fn unlockf, void *lock)
{
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (!g)
		gmp__throw("gmp_park called outside a task");
	if (!gmp__enter_last(g))
		gmp__enter_last_slow(g);
	gmp__park_g(g, unlockf, lock, GMP__WAIT_PARK);
}

/* ready_queue from a thread without a P. Once g is queued it may run and
 * end, and a draining gmp_shutdown must not tear sched down under the
 * wakep after: so, as every thread without a P that uses the scheduler,
 * this one holds the runtime (gmp__rt_hold; the teardown waits for it).
 * No readier can arrive after the drain ended: g was live until queued.
 * Out of line, off the readying path of tasks. */
static __attribute__((noinline)) void ready_global(gmp_g *g)
{
	if (gmp__rt_hold(false) != 0)
		gmp__throw("ready of task %p while the runtime is not running",
			   (void *)g);
	gmp__trace_ready_nop(g, GMP__TRBY_THREAD);
	gmp__lock(&gmp__sched.lock);
	gmp__globrunq_put(g);
	gmp__unlock(&gmp__sched.lock);
	gmp__wakep();
	gmp__rt_release();
}

/* Puts g, readied on the thread holding p (by self, or g0 code if NULL),
 * into p's run queue, the tracer's hook around the put. */
static inline __attribute__((always_inline)) void
ready_put(gmp__p *p, gmp_g *g, gmp_g *self, bool next)
{
	if (gmp__trace_ready_due(p))
		gmp__trace_ready_put(p, g, self, GMP__TRBY_SCHED, next);
	else
		gmp__runq_put(p, g, next);
}

/* Queues a G that just became runnable: into the caller's P (runnext when
 * `next`), or the global queue from a thread without one; then wakes a P
 * if one idles. self: the caller, if it is the running task inside the
 * runtime (its M holds the P then), else NULL to find out. */
static inline void ready_queue(gmp_g *g, bool next, gmp_g *self)
{
	gmp__m *m = self ? self->m : task_m();
	if (!m) {
		ready_global(g);
		return;
	}
	gmp__p *p = m->p;
	/* g0 running a batch of timers: queued with the batch's others,
	 * after it (gmp__ready_flush). */
	if (GMP__UNLIKELY(m->readyq != NULL)) {
		gmp__trace_ready(p, g, self, GMP__TRBY_TIMER);
		gmp__gq_push(m->readyq, g);
		return;
	}
	ready_put(p, g, self, next);
	/* wakep needs a #StoreLoad after the put: the full CAS on runnext
	 * is one; a put at the tail needs its own. */
	if (!next)
		gmp__add32_full(&gmp__sched.nmspinning, 0);
	gmp__wakep();
}

void gmp__ready_flush(gmp__p *p, gmp__gqueue *q)
{
	gmp_g *last = q->tail;
	if (!last)
		return;
	if (q->n == 1) {
		gmp__gq_pop(q);
		gmp__runq_put(p, last, true); /* its full CAS: the #StoreLoad */
		gmp__wakep();
		return;
	}
	/* What one gmp__runq_put(p, g, true) per G in order would leave:
	 * the last in runnext, the runnext before them and the others at
	 * the tail of the ring, in that order. One CAS on runnext, one
	 * release of the tail and one wakep for the lot. */
	gmp__gqueue rest = { 0 };
	for (gmp_g *g = gmp__gq_pop(q); g != last; g = gmp__gq_pop(q))
		gmp__gq_push(&rest, g);
	gmp__gq_pop(q);
	gmp_g *old = NULL;
	if (GMP__UNLIKELY(gmp__cfg.randomize) && (gmp__prand(p) & 1)) {
		gmp__gq_push(&rest,
			     last); /* runnext skipped, as runq_put may */
	} else {
		do {
			old = gmp__loadp_rlx(&p->runnext);
			/* full: publishes last to a thief that takes it
			 * with its own CAS, as in gmp__runq_put */
		} while (!gmp__casp_full(&p->runnext, old, last));
	}
	if (old)
		gmp__runq_put(p, old, false);
	gmp__runq_putbatch(p, &rest);
	/* wakep's #StoreLoad, after the ring's puts too */
	gmp__add32_full(&gmp__sched.nmspinning, 0);
	gmp__wakep();
}

void gmp__ready(gmp_g *g, bool next)
{
	if (!g)
		gmp__throw("gmp_ready of a NULL task");
	/* The CAS also catches two wakers racing for the same task. */
	uint32_t seen =
		gmp__fcas32_full(&g->status, GMP__G_WAITING, GMP__G_RUNNABLE);
	if (seen != GMP__G_WAITING)
		gmp__throw("gmp_ready: task %lld is %s, not waiting",
			   (long long)g->id, gmp__gstatus_name(seen));
	ready_queue(g, next, NULL);
}

/* gmp__ready for a waker that owns the wakeup exclusively (it claimed a
 * waiter, so no second waker can exist): the status needs no CAS, one
 * atomic fewer per hand-off. */
void gmp__ready_claimed_by(gmp_g *g, bool next, gmp_g *self)
{
	uint32_t cur = gmp__load32_rlx(&g->status);
	if (GMP__UNLIKELY(cur != GMP__G_WAITING))
		gmp__gstatus_bad(g, cur, GMP__G_WAITING, GMP__G_RUNNABLE);
	gmp__store32_rel(&g->status, GMP__G_RUNNABLE); /* publishes to the
							  M that runs g */
	if (GMP__DEBUG && !gmp__inrt(self))
		gmp__throw("task %lld uses its P outside the runtime",
			   (long long)self->id);
	ready_queue(g, next, self);
}

void gmp__ready_claimed_quiet(gmp_g *g, gmp_g *self)
{
	uint32_t cur = gmp__load32_rlx(&g->status);
	if (GMP__UNLIKELY(cur != GMP__G_WAITING))
		gmp__gstatus_bad(g, cur, GMP__G_WAITING, GMP__G_RUNNABLE);
	gmp__store32_rel(&g->status, GMP__G_RUNNABLE); /* publishes to the
							  M that runs g */
	if (GMP__DEBUG && !gmp__inrt(self))
		gmp__throw("task %lld uses its P outside the runtime",
			   (long long)self->id);
	gmp__p *p = self->m->p;
	/* Owner's view: thieves only take from the ring and runnext, so
	 * "nothing queued" seen here can only become truer. acquire on the
	 * head as everywhere the owner reads it (runq_put). */
	bool alone = gmp__loadp_rlx(&p->runnext) == NULL &&
		     p->runqtail == gmp__load32_acq(&p->runqhead);
	ready_put(p, g, self, true);
	if (!alone)
		gmp__wakep(); /* runnext's full CAS: the #StoreLoad */
}

void gmp__ready_claimed(gmp_g *g, bool next)
{
	gmp__ready_claimed_by(g, next, NULL);
}

GMP_EXTERN void gmp_ready(gmp_g *g)
{
	/* With the runtime off (gomaxprocs is 0 only then) no task exists:
	 * g can only be a stale pointer from before gmp_shutdown, whose
	 * memory is gone. Say so instead of faulting on it. */
	if (GMP__UNLIKELY(gmp__load32_rlx(&gmp__sched.gomaxprocs) == 0))
		gmp__throw("gmp_ready of task %p while the runtime is not "
			   "running (a task from before gmp_shutdown?)",
			   (void *)g);
	gmp_g *self = gmp__getg(NULL);
	uint8_t was = self ? gmp__enter(self) : 0;
	gmp__ready(g, true);
	if (self)
		gmp__leave(self, was);
}

/* ---- ending --------------------------------------------------------------- */

static void goexit0(gmp_g *g)
{
	gmp__m *m = g->m;
	gmp__fiber_on_g0(m);
	gmp__fiber_g_destroy(g);
	gmp__casgstatus(g, GMP__G_RUNNING, GMP__G_DEAD);
	gmp__trace_exit(m, m->p, g);
	bool locked = g->lockedm != NULL;
	g->lockedm = NULL;
	gmp__storep_rlx(&m->lockedg, NULL);
	m->locked_ext = 0;
	g->fn = NULL;
	g->arg = NULL;
	g->param = NULL;
	g->waitreason = GMP__WAIT_NONE;
	dropg(m);
	/* A stack that went deep gives its pages back now, before it is
	 * cached (stack.c); the usual shallow one costs these few loads. */
	if (GMP__UNLIKELY(gmp__stack_went_deep(g)))
		gmp__stack_trim_g(g, true);
	gmp__p *p = m->p;
	gmp__gfput(p, g);
	/* release: a reader of the count that sees this exit also sees the
	 * spawn of g (gmp__tasks_live). A thread waiting for no task to be
	 * left (gmp_shutdown draining, or gmp_main after its task called
	 * gmp_exit) learns of the last exit when this P goes idle
	 * (gmp__pidleput). */
	gmp__store64_rel(&p->nexited, p->nexited + 1);
	if (locked)
		gmp__goexit_locked(m); /* the thread goes with it */
	gmp__schedule(m);
}

static void goexit1(void)
{
	gmp__m *m = gmp__getm_inline();
	if (GMP__UNLIKELY(!m)) /* see fork.c */
		gmp__throw("a task that called fork() ended in the child; "
			   "there it is a plain thread, which must exec or "
			   "_exit");
	gmp_g *g = m->curg;
	/* The destructors are the task's own code, run as such (the task
	 * came here from its own code: its function returned, or it called
	 * gmp_exit). */
	if (g->nkeys)
		gmp__keys_destroy(g);
	/* For good: goexit0 gives the P what the task leaves. */
	gmp__enter_for_good(g);
	m = g->m; /* destructors may have switched threads; a detached
		     task takes a P back on its own M */
	gmp__fiber_to_g0(m, g, true);
	gmp__ctx_mcall(&g->sched, m->g0sp, (void (*)(void *))(void *)goexit0,
		       g);
	gmp__throw("goexit1: a dead task was resumed");
}

GMP_EXTERN void gmp_exit(void)
{
	gmp__m *m = gmp__getm();
	if (!m || !m->curg)
		gmp__throw("gmp_exit called outside a task");
	if (GMP__UNLIKELY(m->curg->mainwait != NULL))
		gmp__main_goexit(m->curg); /* gmp_main's fn will not return */
	goexit1();
}

/* ---- reading -------------------------------------------------------------- */

GMP_EXTERN int64_t gmp_self(void)
{
	gmp__m *m = gmp__getm();
	return m && m->curg ? m->curg->id : 0;
}

GMP_EXTERN gmp_g *gmp_current(void)
{
	gmp__m *m = gmp__getm();
	return m ? m->curg : NULL;
}
