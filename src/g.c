/* Tasks as objects: the status helper, allocation, the free lists that
 * recycle dead Gs with their stacks, the sweeps that trim the stacks left
 * in those lists, and task-local keys.
 *
 * Dead Gs are cached as Go caches them: up to 64 on each P (owner only),
 * the rest on the global list in batches (gfree.lock). A task that went
 * deep gives its stack's pages back as it ends (goexit0, stack.c); the
 * sweeps catch what that check missed. Every second sysmon begins a pass:
 * it bumps sched.gfsweepgen, so that each running P moves its cached Gs to
 * the global list at its next schedule_slow (at most 61 rounds away); it
 * moves those of idle Ps itself, under sched.lock, which owns idle Ps;
 * then it takes the global list and gives it back batch by batch, looking
 * at each G once (sweep_g). A G that no task used since the previous pass
 * gets its stack trimmed. While the pass holds a batch, nobody else can
 * take that G, so no task can be running on the stack it trims.
 *
 * Why not trim when a P moves a batch of 32 to the global list? That
 * happens every 32 exits under a spawn-heavy load, whose Gs are reused at
 * once: a system call per G there would triple the cost of spawn_join, for
 * stacks that are mostly shallow and about to be reused anyway. */
#include <string.h>

#include "fiber.h"
#include "internal.h"

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
	s &= ~(uint32_t)GMP__G_SCAN;
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
	gmp__stack_new_g(g);
	gmp__store32_rlx(&g->status, GMP__G_IDLE); /* racy readers: sysmon */
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
static void gfree_push_batch(gmp_g *head, int64_t n)
{
	head->gfreen = n;
	gmp__lock(&gmp__sched.gfree.lock);
	head->gfreebatch = gmp__sched.gfree.list;
	gmp__storep_rlx(&gmp__sched.gfree.list, head); /* racy peek: gfget */
	gmp__sched.gfree.n += n;
	gmp__unlock(&gmp__sched.gfree.lock);
}

void gmp__gfput(gmp_p *p, gmp_g *g)
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
	gfree_push_batch(head, n);
}

/* A dead G from p's list (refilled from the global one), or from the
 * global list directly when p is NULL (callers that hold no P). */
gmp_g *gmp__gfget(gmp_p *p)
{
	if (!p) {
		/* One G: the first of the first batch. */
		gmp__lock(&gmp__sched.gfree.lock);
		gmp_g *g = gmp__sched.gfree.list;
		if (g) {
			gmp_g *rest = g->schedlink, *next = g->gfreebatch;
			if (rest) {
				rest->gfreebatch = next;
				rest->gfreen = g->gfreen - 1;
				next = rest;
			}
			gmp__storep_rlx(&gmp__sched.gfree.list, next);
			gmp__sched.gfree.n--;
		}
		gmp__unlock(&gmp__sched.gfree.lock);
		if (g)
			g->schedlink = g->gfreebatch = NULL;
		return g;
	}
	if (!p->gfree && gmp__loadp_rlx(&gmp__sched.gfree.list)) {
		/* A whole batch (p's list is empty). */
		gmp__lock(&gmp__sched.gfree.lock);
		gmp_g *b = gmp__sched.gfree.list;
		if (b) {
			gmp__storep_rlx(&gmp__sched.gfree.list, b->gfreebatch);
			gmp__sched.gfree.n -= b->gfreen;
		}
		gmp__unlock(&gmp__sched.gfree.lock);
		if (b) {
			p->gfree = b;
			p->ngfree = (int32_t)b->gfreen;
			b->gfreebatch = NULL;
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

/* Moves all of p's dead Gs to the global list (p is going away, or a sweep
 * asked for them). */
void gmp__gfpurge(gmp_p *p)
{
	if (p->gfree)
		gfree_push_batch(p->gfree, p->ngfree);
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
	gmp__sched.gfree.list = NULL;
	gmp__sched.gfree.n = 0;
	gmp__sched.gfree.sweep = NULL;
	gmp__sched.gfree.sweepwhen = 0;
}

/* ---- sweeps: trimming the stacks that sat in the caches ------------------ */

enum {
	SWEEP_PERIOD_NS = 1000 * 1000 * 1000,
	SWEEP_SLICE_NS = 200 * 1000, /* of sysmon's time per call */
};

/* One G of a sweep's pass, held by the sweep. */
static void sweep_g(gmp_g *g)
{
	if (g->stkstate == GMP__STK_USED)
		g->stkstate = GMP__STK_IDLE; /* may be reused soon */
	else if (g->stkstate == GMP__STK_IDLE)
		gmp__stack_trim_g(g, false); /* unused for a whole period */
}

/* A new pass: every cached G goes through the global list. */
static void sweep_begin(void)
{
	/* Running Ps move theirs at their next schedule_slow; idle Ps are
	 * sched.lock's, so we move theirs. */
	uint32_t gen = gmp__add32_rlx(&gmp__sched.gfsweepgen, 1) + 1;
	gmp__lock(&gmp__sched.lock);
	for (gmp_p *p = gmp__sched.pidle; p; p = p->link) {
		gmp__gfpurge(p);
		p->gfsweepgen = gen;
	}
	gmp__unlock(&gmp__sched.lock);
	gmp__lock(&gmp__sched.gfree.lock);
	gmp__sched.gfree.sweep = gmp__sched.gfree.list;
	gmp__storep_rlx(&gmp__sched.gfree.list, NULL);
	gmp__sched.gfree.n = 0;
	gmp__unlock(&gmp__sched.gfree.lock);
}

/* sysmon, at every round: about once a second, a pass over the dead Gs
 * in the caches (the file comment of stack.c says why). A pass takes the
 * global list and gives it back a batch at a time, in slices of at most
 * SWEEP_SLICE_NS per call, so that a long list neither stops sysmon nor
 * keeps the batches from spawners for long. Returns whether the pass has
 * more to do (sysmon must not sleep deeply then). */
bool gmp__gfree_sweep(int64_t now)
{
	if (!gmp__sched.gfree.sweep) {
		if (gmp__sched.gfree.sweepwhen == 0)
			gmp__sched.gfree.sweepwhen = now;
		if (now - gmp__sched.gfree.sweepwhen < SWEEP_PERIOD_NS)
			return false;
		gmp__sched.gfree.sweepwhen = now;
		sweep_begin();
	}
	while (gmp__sched.gfree.sweep) {
		gmp_g *b = gmp__sched.gfree.sweep;
		gmp__sched.gfree.sweep = b->gfreebatch;
		for (gmp_g *g = b; g; g = g->schedlink)
			sweep_g(g);
		gfree_push_batch(b, b->gfreen);
		if (gmp__nanotime() - now >= SWEEP_SLICE_NS)
			break;
	}
	return gmp__sched.gfree.sweep != NULL;
}

/* sysmon is stopping: give back what its pass still holds. */
void gmp__gfree_sweep_flush(void)
{
	while (gmp__sched.gfree.sweep) {
		gmp_g *b = gmp__sched.gfree.sweep;
		gmp__sched.gfree.sweep = b->gfreebatch;
		gfree_push_batch(b, b->gfreen);
	}
	gmp__sched.gfree.sweepwhen = 0;
}

/* ---- task-local keys ---------------------------------------------------- */

static struct {
	volatile uint32_t n;                         /* keys created; atomic */
	void (*volatile dtor[GMP_KEYS_MAX])(void *); /* set before n grows */
} keys;

GMP_EXTERN int gmp_key_create(gmp_key *key, void (*dtor)(void *))
{
	if (!key)
		return -EINVAL;
	for (;;) {
		uint32_t n = gmp__load32_acq(&keys.n);
		if (n >= GMP_KEYS_MAX)
			return -EAGAIN;
		/* Reserve slot n, then publish its destructor. A reader
		 * that sees the new count (acquire) but races the dtor store
		 * can only be a task ending with a value for this key, which
		 * it cannot have set before we returned the key. */
		if (gmp__cas32_full(&keys.n, n, n + 1)) {
			gmp__storep_rel(&keys.dtor[n], dtor);
			key->id = n + 1; /* 0 is never a valid key */
			return 0;
		}
	}
}

GMP_EXTERN int gmp_setspecific(gmp_key key, const void *value)
{
	if (key.id == 0 || key.id > gmp__load32_acq(&keys.n))
		return -EINVAL;
	gmp_m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (!g)
		return -EPERM;
	uint32_t i = key.id - 1;
	if (i >= g->nkeys) {
		if (!value)
			return 0; /* absent already reads as NULL */
		uint32_t cap = g->nkeys ? g->nkeys : 8;
		while (cap <= i)
			cap *= 2;
		void **nk = gmp__realloc(g->keys, cap * sizeof *nk);
		if (!nk)
			return -ENOMEM;
		memset(nk + g->nkeys, 0, (cap - g->nkeys) * sizeof *nk);
		g->keys = nk;
		g->nkeys = cap;
	}
	g->keys[i] = (void *)value;
	return 0;
}

GMP_EXTERN void *gmp_getspecific(gmp_key key)
{
	gmp_m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (!g || key.id == 0 || key.id > g->nkeys)
		return NULL;
	return g->keys[key.id - 1];
}

/* Runs on the ending task: each non-NULL value's destructor, once. A
 * destructor may set values again (pthread would loop); we clear each slot
 * before calling its destructor and do not revisit it, so a value stored
 * during destruction is dropped without its destructor, as SPEC §2 asks
 * for exactly one run per value. */
void gmp__keys_destroy(gmp_g *g)
{
	for (uint32_t i = 0; i < g->nkeys; i++) {
		void *v = g->keys[i];
		if (!v)
			continue;
		g->keys[i] = NULL;
		void (*d)(void *) = gmp__loadp_acq(&keys.dtor[i]);
		if (d)
			d(v);
	}
	/* A destructor may have grown the array; leave no value behind. */
	if (g->keys)
		memset(g->keys, 0, g->nkeys * sizeof *g->keys);
}
