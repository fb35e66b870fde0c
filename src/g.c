/* Gs as objects (g.h): the status names and the cold paths of the status
 * helper (internal.h), allocation (gmp__malg, which carves a G and its
 * stack from stack.c's regions), the all-G list, the free lists that
 * recycle dead Gs with their stacks, and the sweep that trims the stacks
 * left in those lists. design.md §33.2 explains the lists and the sweep.
 *
 * Dead Gs are cached as Go caches them: up to 64 on each P (owner only),
 * the rest on the global list in batches of 32 (gfree.lock). The global
 * list is kept in three generations, young, old and clean, which sysmon
 * rotates about once a second; gmp__gfree_sweep trims what sat a whole
 * period in old, a batch at a time, and moves it to clean. Running Ps move
 * their own caches to young when sched.gfsweepgen moves. The sweep's
 * budget is SWEEP_SLICE_NS of work every SWEEP_EVERY_NS.
 */
#include <string.h>

#include "export_test.h"
#include "fiber.h"
#include "g.h"
#include "internal.h"
#include "preempt.h"
#include "runq.h"
#include "stack.h"

gmp__mutex gmp__allg_lock = GMP__MUTEX_INIT;
gmp_g *gmp__allg; /* every G ever allocated; under allg_lock */
int64_t gmp__allg_n;

static const char *const gstatus_names[GMP__G_NSTATES] = {
	[GMP__G_IDLE] = "idle",       [GMP__G_RUNNABLE] = "runnable",
	[GMP__G_RUNNING] = "running", [GMP__G_SYSCALL] = "syscall",
	[GMP__G_WAITING] = "waiting", [GMP__G_DEAD] = "dead",
};

const char *gmp__gstatus_name(uint32_t s)
{
	s &= ~(uint32_t)GMP__G_FLAGS;
	return s < GMP__G_NSTATES ? gstatus_names[s] : "?";
}

static const char *const waitreason_names[GMP__WAIT_NREASONS] = {
	[GMP__WAIT_NONE] = "",
	[GMP__WAIT_PARK] = "park",
	[GMP__WAIT_YIELD] = "yield",
	[GMP__WAIT_SEMACQUIRE] = "semacquire",
	[GMP__WAIT_MUTEX] = "mutex",
	[GMP__WAIT_WG] = "wait group",
	[GMP__WAIT_CHAN_SEND] = "chan send",
	[GMP__WAIT_CHAN_RECV] = "chan receive",
	[GMP__WAIT_SELECT] = "select",
	[GMP__WAIT_SELECT_NOCASES] = "select (no cases)",
	[GMP__WAIT_SLEEP] = "sleep",
	[GMP__WAIT_IO_READ] = "IO wait (read)",
	[GMP__WAIT_IO_WRITE] = "IO wait (write)",
	[GMP__WAIT_RWMUTEX_RLOCK] = "rwmutex read lock",
	[GMP__WAIT_RWMUTEX_LOCK] = "rwmutex lock",
	[GMP__WAIT_COND] = "cond wait",
	[GMP__WAIT_SEM] = "semaphore acquire",
};

const char *gmp__waitreason_name(uint32_t r)
{
	return r < GMP__WAIT_NREASONS ? waitreason_names[r] : "?";
}

/* Slow and cold parts of gmp__casgstatus (internal.h). */
void gmp__gstatus_bad(gmp_g *g, uint32_t cur, uint32_t from, uint32_t to)
{
	if (!gmp__gstatus_legal(from, to))
		gmp__throw("casgstatus: illegal transition of task %lld "
			   "from %s to %s",
			   (long long)g->id, gmp__gstatus_name(from),
			   gmp__gstatus_name(to));
	gmp__throw("casgstatus: task %lld is %s, not %s (moving it to %s)",
		   (long long)g->id, gmp__gstatus_name(cur),
		   gmp__gstatus_name(from), gmp__gstatus_name(to));
}

/* The transitions that can race use a CAS (see gmp__casgstatus). */
void gmp__casgstatus_cas(gmp_g *g, uint32_t from, uint32_t to)
{
	for (int spins = 0;; spins++) {
		uint32_t seen = gmp__fcas32_full(&g->status, from, to);
		if (GMP__LIKELY(seen == from))
			return;
		if (seen != (from | GMP__G_SCAN))
			gmp__gstatus_bad(g, seen, from, to);
		/* sysmon holds the SCAN bit for a few instructions */
		if (spins < 64)
			gmp__cpu_relax();
		else
			gmp__osyield();
	}
}

/* ---- allocation and free lists ----------------------------------------- */

/* A new G with a stack, in state DEAD, on the all-G list. NULL if memory
 * or address space ran out. The G's memory comes with its stack, from the
 * stack's region (stack.c), and stays mapped, as Gs must, until
 * shutdown. */
gmp_g *gmp__malg(void)
{
	/* Room in the global run queue for one more G, first: queueing a G
	 * must never fail. A G whose stack then fails leaves its room
	 * reserved, which is harmless. */
	gmp__lock(&gmp__allg_lock);
	int err = gmp__globrunq_reserve(gmp__allg_n + 1);
	if (!err)
		gmp__allg_n++;
	gmp__unlock(&gmp__allg_lock);
	if (err)
		return NULL;
	gmp__stack st;
	void *mem;
	if (gmp__stack_alloc(&st, &mem) != 0)
		return NULL;
	gmp_g *g = memset(mem, 0, sizeof *g); /* as calloc would */
	g->stack = st;
	gmp__store32_rlx(&g->status, GMP__G_IDLE); /* racy readers: sysmon */
	/* Not running, so inside the runtime (preempt.h), for good: each
	 * task's first frame leaves, and its end enters again. */
	gmp__store8_rlx(&g->inrt, GMP__INRT_IN);
	gmp__casgstatus(g, GMP__G_IDLE, GMP__G_DEAD);
	gmp__lock(&gmp__allg_lock);
	g->allglink = gmp__allg;
	gmp__storep_rel(&gmp__allg, g); /* lock-free readers: dumps, gdb */
	gmp__unlock(&gmp__allg_lock);
	return g;
}

/* Go keeps up to 64 dead Gs per P and moves them to the global list in
 * batches of 32, so spawn-heavy Ps recycle locally and idle ones share. */
enum { GFREE_MAX = 64, GFREE_BATCH = 32 };

/* The global list holds whole batches, so that a P takes or gives 32 Gs
 * in one step under the lock rather than walking 32 Gs (each a likely
 * cache miss: the G was last touched on another core) while holding it. */
static void push_batch_locked(gmp__gfbatches *l, gmp_g *head, int64_t n)
{
	head->gfreen = (int32_t)n;
	head->gfreebatch = l->head;
	gmp__storep_rlx(&l->head, head); /* racy peek: gfget */
	l->n += n;
}

static void gfree_push_batch(gmp__gfbatches *l, gmp_g *head, int64_t n)
{
	gmp__lock(&gmp__sched.gfree.lock);
	push_batch_locked(l, head, n);
	gmp__unlock(&gmp__sched.gfree.lock);
}

/* The list gfget takes from (gfree.lock held, or a racy peek): young,
 * then old, then clean (see the file comment); NULL if all are empty. */
static gmp__gfbatches *gfree_first(void)
{
	if (gmp__loadp_rlx(&gmp__sched.gfree.young.head))
		return &gmp__sched.gfree.young;
	if (gmp__loadp_rlx(&gmp__sched.gfree.old.head))
		return &gmp__sched.gfree.old;
	if (gmp__loadp_rlx(&gmp__sched.gfree.clean.head))
		return &gmp__sched.gfree.clean;
	return NULL;
}

/* Takes the first batch of l (gfree.lock held); NULL if l is empty. */
static gmp_g *pop_batch_locked(gmp__gfbatches *l)
{
	gmp_g *b = l->head;
	if (b) {
		gmp__storep_rlx(&l->head, b->gfreebatch);
		l->n -= b->gfreen;
		b->gfreebatch = NULL;
	}
	return b;
}

void gmp__gfput(gmp__p *p, gmp_g *g)
{
	if (gmp__readgstatus(g) != GMP__G_DEAD)
		gmp__throw("gfput: task %lld is %s, not dead", (long long)g->id,
			   gmp__gstatus_name(gmp__readgstatus(g)));
	g->schedlink = p->gfree;
	p->gfree = g;
	if (++p->ngfree < GFREE_MAX)
		return;
	gmp_g *head = NULL, *tail = NULL;
	int64_t n = 0;
	while (p->ngfree > GFREE_BATCH) {
		gmp_g *x = p->gfree;
		p->gfree = x->schedlink;
		p->ngfree--;
		x->schedlink = head;
		head = x;
		if (!tail)
			tail = x;
		n++;
	}
	tail->schedlink = NULL;
	gfree_push_batch(&gmp__sched.gfree.young, head, n);
}

/* A dead G from p's list (refilled from the global one), or from the
 * global list directly when p is NULL (callers that hold no P). */
gmp_g *gmp__gfget(gmp__p *p)
{
	if (!p) {
		/* One G: the first of the first batch. */
		gmp__lock(&gmp__sched.gfree.lock);
		gmp__gfbatches *l = gfree_first();
		gmp_g *g = l ? pop_batch_locked(l) : NULL;
		if (g && g->schedlink)
			push_batch_locked(l, g->schedlink, g->gfreen - 1);
		gmp__unlock(&gmp__sched.gfree.lock);
		if (g)
			g->schedlink = NULL;
		return g;
	}
	if (!p->gfree && gfree_first()) {
		/* A whole batch (p's list is empty). */
		gmp__lock(&gmp__sched.gfree.lock);
		gmp__gfbatches *l = gfree_first();
		gmp_g *b = l ? pop_batch_locked(l) : NULL;
		gmp__unlock(&gmp__sched.gfree.lock);
		if (b) {
			p->gfree = b;
			p->ngfree = (int32_t)b->gfreen;
		}
	}
	gmp_g *g = p->gfree;
	if (g) {
		p->gfree = g->schedlink;
		p->ngfree--;
		g->schedlink = NULL;
		/* The next spawn's G, most likely last touched on another
		 * core: start bringing it (status, id, entry, context) in. */
		if (p->gfree)
			__builtin_prefetch(p->gfree, 1);
	}
	return g;
}

/* Moves all of p's dead Gs to the global list (p is going away, or the
 * sweep asked for them): to young, where they start to age. */
void gmp__gfpurge(gmp__p *p)
{
	if (p->gfree)
		gfree_push_batch(&gmp__sched.gfree.young, p->gfree, p->ngfree);
	p->gfree = NULL;
	p->ngfree = 0;
}

/* Shutdown: lets go of every G; gmp__stack_release_all then unmaps them
 * with their stacks. Only when no runtime thread is left. */
void gmp__gfree_all(void)
{
	gmp_g *g = gmp__allg;
	while (g) {
		gmp_g *next = g->allglink;
		gmp__fiber_g_destroy(g);
		gmp__stack_forget(&g->stack);
		gmp__free(g->keys);
		/* The G itself goes with its stack's region. */
		g = next;
	}
	gmp__allg = NULL;
	gmp__allg_n = 0;
	memset(&gmp__sched.gfree.young, 0, sizeof gmp__sched.gfree.young);
	memset(&gmp__sched.gfree.old, 0, sizeof gmp__sched.gfree.old);
	memset(&gmp__sched.gfree.clean, 0, sizeof gmp__sched.gfree.clean);
	gmp__sched.gfree.rotwhen = gmp__sched.gfree.slicewhen = 0;
	gmp__store32_rlx(&gmp__sched.gfree.aging, 0);
	gmp__store64_rlx(&gmp__sched.gfree.naged, 0);
}

/* ---- the sweep: aging the free list (see the file comment) --------------- */

enum {
	SWEEP_PERIOD_NS = 1000 * 1000 * 1000, /* between rotations */
	SWEEP_SLICE_NS = 500 * 1000,          /* of aging per slice, at most */
	SWEEP_EVERY_NS = 10 * 1000 * 1000,    /* between slices, at least */
};

/* old is empty: young becomes old, after the idle Ps' caches have joined
 * it, and running Ps are asked to add theirs to the new young. */
static void rotate(int64_t now)
{
	gmp__sched.gfree.rotwhen = now;
	/* relaxed: a P that sees the bump late moves its cache late, and
	 * what it moves is guarded by gfree.lock, not by this counter. */
	uint32_t gen = gmp__add32_rlx(&gmp__sched.gfsweepgen, 1) + 1;
	gmp__lock(&gmp__sched.lock);
	for (gmp__p *p = gmp__sched.pidle; p; p = p->link) {
		gmp__gfpurge(p);
		p->gfsweepgen = gen; /* moved already */
	}
	gmp__unlock(&gmp__sched.lock);
	gmp__lock(&gmp__sched.gfree.lock);
	gmp__gfbatches *y = &gmp__sched.gfree.young, *o = &gmp__sched.gfree.old;
	if (!o->head) { /* only sysmon adds to old, so it stays empty */
		gmp__storep_rlx(&o->head, y->head);
		o->n = y->n;
		gmp__storep_rlx(&y->head, NULL);
		y->n = 0;
	}
	gmp__unlock(&gmp__sched.gfree.lock);
}

/* Ages out batches of old, one at a time, for up to SWEEP_SLICE_NS.
 * Returns whether old is empty. */
static bool age_slice(int64_t now)
{
	uint64_t n = 0;
	bool empty = false;
	for (;;) {
		gmp__lock(&gmp__sched.gfree.lock);
		gmp_g *b = pop_batch_locked(&gmp__sched.gfree.old);
		gmp__unlock(&gmp__sched.gfree.lock);
		if (!b) {
			empty = true;
			break;
		}
		/* We hold b: no task can start on these stacks meanwhile. */
		for (gmp_g *g = b; g; g = g->schedlink) {
			if (g->stkstate != GMP__STK_TRIMMED)
				gmp__stack_trim_g(g, false);
			n++;
		}
		gfree_push_batch(&gmp__sched.gfree.clean, b, b->gfreen);
		if (gmp__nanotime() - now >= SWEEP_SLICE_NS)
			break;
	}
	gmp__add64_rlx(&gmp__sched.gfree.naged, n);
	return empty;
}

/* sysmon, at every round. About once a second: rotates the lists, or
 * starts aging out what sat in old for a whole period; while aging, a
 * slice of it every SWEEP_EVERY_NS. Returns the time (gmp__nanotime) by
 * which it wants to be called again, so that sysmon's deep sleep ends
 * then; 0 when the lists hold nothing to age (what idle Ps cache then is
 * moved at the next rotation, which sysmon's 1 s cap on its deep sleep
 * brings soon enough). */
int64_t gmp__gfree_sweep(int64_t now)
{
	__typeof__(gmp__sched.gfree) *f = &gmp__sched.gfree;
	if (f->rotwhen == 0)
		f->rotwhen = now;
	bool aging = gmp__load32_rlx(&f->aging);
	if (!aging && now - f->rotwhen >= SWEEP_PERIOD_NS) {
		/* A racy peek: only sysmon adds to old, and if spawners
		 * empty it meanwhile, the slice finds nothing and rotates. */
		if (gmp__loadp_rlx(&f->old.head))
			aging = true;
		else
			rotate(now);
	}
	if (aging && now - f->slicewhen >= SWEEP_EVERY_NS) {
		f->slicewhen = now;
		if (age_slice(now)) {
			aging = false;
			rotate(gmp__nanotime());
		}
	}
	gmp__store32_rlx(&f->aging, aging);
	if (aging)
		return f->slicewhen + SWEEP_EVERY_NS;
	if (gmp__loadp_rlx(&f->old.head) || gmp__loadp_rlx(&f->young.head))
		return f->rotwhen + SWEEP_PERIOD_NS;
	return 0;
}

#if GMP__TEST_HOOKS
/* For tests: the lists' lengths and the sweep's progress. */
void gmp__gfree_stats_get(gmp__gfree_stats *s)
{
	gmp__lock(&gmp__sched.gfree.lock);
	s->young = gmp__sched.gfree.young.n;
	s->old = gmp__sched.gfree.old.n;
	s->clean = gmp__sched.gfree.clean.n;
	gmp__unlock(&gmp__sched.gfree.lock);
	s->aged = gmp__load64_rlx(&gmp__sched.gfree.naged);
	s->aging = gmp__load32_rlx(&gmp__sched.gfree.aging);
}
#endif
