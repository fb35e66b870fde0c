/* Task stacks, and the Gs carved beside them. The contract is in
 * design.md §2.4 and §6; the design, with the numbers behind its choices,
 * in design.md §33.
 *
 * Stacks come from large regions reserved with MAP_NORESERVE, so only the
 * pages a task touches are committed. A region begins with its slots' Gs:
 *
 *   region:  [G0 G1 G2 ...][guard|stack 0....][guard|stack 1....] ...
 *
 * This file hands out slots (preparing new ones in batches, through
 * process_madvise where the kernel allows it), installs the guards
 * (MADV_GUARD_INSTALL, else mprotect within the budget that
 * GMP_STACK_GUARD sets), trims a dead G's stack down to its top
 * gmp__stack_keep bytes, answers the fault handler's question
 * (gmp__stack_guard_hit), registers stacks with Valgrind, and unmaps the
 * regions at shutdown; nothing else is ever unmapped, since sysmon and the
 * dumps read Gs racily.
 *
 * It pairs with g.c, whose free lists keep each dead G with its stack and
 * whose sweep picks the cached stacks to trim; with task.c's goexit0,
 * which trims at once a stack its task left deep (g->stklow, recorded by
 * gmp__mcall); and with signal.c, the SIGSEGV handler. Only a dead G's
 * stack is trimmed, by whoever holds the G, and only within [lo, hi - keep):
 * the guard and the G, which lies outside [lo, hi), are never touched.
 */
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "export_test.h"
#include "fault.h"
#include "fiber.h"
#include "internal.h"
#include "stack.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define GMP__HAVE_VALGRIND 1
#else
#define GMP__HAVE_VALGRIND 0
#endif

typedef struct region {
	struct region *next;
	uintptr_t base;
	size_t size;
	uintptr_t slots; /* the first slot; the G array is [base, slots) */
} region;

enum { GUARD_NONE, GUARD_INSTALL, GUARD_MPROTECT };

/* The bytes of each slot's G in the array: whole cache lines. */
#define G_BYTES                                                                \
	((sizeof(gmp_g) + GMP__CACHELINE - 1) & ~(size_t)(GMP__CACHELINE - 1))

static struct {
	gmp__mutex lock; /* protects everything below */
	region *regions; /* to unmap at shutdown; the newest first */
	/* The newest region: [next, ready) prepared slots not yet handed
	 * out, [ready, end) slots not yet prepared. */
	uintptr_t next, ready, end;
	uintptr_t batch;       /* first slot of the newest batch */
	uint64_t batch_guards; /* bit i: slot i of that batch is guarded */
	size_t batch_slots;    /* slots in the next batch (grows) */
	bool vec_guard;        /* process_madvise may install guards */
	bool populate;         /* pre-fault top pages and Gs, likewise */
	size_t slot;           /* guard + stack, page multiple */
	size_t region_slots;   /* slots in the next region (grows) */
	int mode;              /* GUARD_* */
	int64_t guard_budget;  /* mprotect guards we may still add; -1: none */
	uint64_t nguarded, nunguarded;
	/* Trims of dead tasks' stacks as they end, and by sweeps; atomic
	 * (Ms and sysmon), relaxed: counts for tests. */
	volatile uint64_t ntrim_exit, ntrim_swept;
} stk;

size_t gmp__stack_keep;

enum {
	FIRST_REGION_SLOTS = 16,
	MAX_REGION_BYTES = 1 << 30,
	FIRST_BATCH_SLOTS = 4,
	MAX_BATCH_SLOTS = 64, /* one bit each in batch_guards */
};

static bool on_valgrind(void)
{
#if GMP__HAVE_VALGRIND
	return RUNNING_ON_VALGRIND;
#else
	return false;
#endif
}

/* Called by gmp_init, after the settings are known. */
void gmp__stack_init(void)
{
	size_t ps = gmp__pagesize();
	stk.slot = ps + gmp__cfg.stack_size; /* a page multiple */
	stk.region_slots = FIRST_REGION_SLOTS;
	stk.regions = NULL;
	stk.next = stk.ready = stk.end = stk.batch = 0;
	stk.batch_guards = 0;
	stk.batch_slots = FIRST_BATCH_SLOTS;
	/* Valgrind knows no process_madvise and would warn of it. */
	stk.vec_guard = stk.populate = !on_valgrind();
	stk.nguarded = stk.nunguarded = 0;
	gmp__store64_rlx(&stk.ntrim_exit, 0);
	gmp__store64_rlx(&stk.ntrim_swept, 0);
	size_t keep = (GMP__STACK_KEEP + ps - 1) & ~(ps - 1);
	gmp__stack_keep = keep < gmp__cfg.stack_size ? keep
						     : gmp__cfg.stack_size;
	if (gmp__cfg.stack_guard == GMP__GUARD_NEVER)
		stk.mode = GUARD_NONE;
	else if (gmp__guard_install_works())
		stk.mode = GUARD_INSTALL;
	else
		stk.mode = GUARD_MPROTECT;
	stk.guard_budget = gmp__cfg.stack_guard == GMP__GUARD_ALWAYS
				   ? INT64_MAX
				   : gmp__max_map_count() / 4;
}

static size_t region_cap(void)
{
	size_t cap = MAX_REGION_BYTES;
	/* valgrind refuses single mappings beyond 32 GiB, and tracks each
	 * reserved page; keep regions small under it. */
	if (on_valgrind())
		cap = 64u << 20;
	return cap;
}

/* Reserves a new region; stk.lock held. */
static int grow(void)
{
	size_t ps = gmp__pagesize();
	size_t slots = stk.region_slots;
	size_t cap = region_cap();
	if (slots * (stk.slot + G_BYTES) > cap)
		slots = cap / (stk.slot + G_BYTES) ? cap / (stk.slot + G_BYTES)
						   : 1;
	size_t gsize = (slots * G_BYTES + ps - 1) & ~(ps - 1);
	size_t size = gsize + slots * stk.slot;
	void *base = mmap(
		NULL, size, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (base == MAP_FAILED)
		return -ENOMEM;
	region *r = gmp__malloc(sizeof *r);
	if (!r) {
		munmap(base, size);
		return -ENOMEM;
	}
	r->base = (uintptr_t)base;
	r->size = size;
	r->slots = r->base + gsize;
	r->next = stk.regions;
	gmp__storep_rel(&stk.regions, r); /* lock-free readers: guard_hit */
	stk.next = stk.ready = r->slots;
	stk.end = r->base + size;
	if (stk.region_slots * 2 * (stk.slot + G_BYTES) <= cap)
		stk.region_slots *= 2;
	return 0;
}

/* The G of the slot at address slot in region r. */
static uintptr_t g_of(const region *r, uintptr_t slot)
{
	return r->base + (slot - r->slots) / stk.slot * G_BYTES;
}

/* Errors that say process_madvise cannot do this here at all (an old
 * kernel, an emulator, no pidfd), as opposed to failing this once. */
static bool vec_unsupported(ssize_t err)
{
	return err == -EINVAL || err == -EPERM || err == -ENOSYS ||
	       err == -EBADF;
}

/* Installs the guards iov[0..n) (one page each); bit i of the result
 * says whether guard i is in place. */
static uint64_t install_guards(const struct iovec *iov, size_t n)
{
	size_t done = 0;
	if (stk.vec_guard) {
		ssize_t r = gmp__madvise_self(iov, n, GMP__MADV_GUARD_INSTALL);
		if (r > 0)
			done = (size_t)r / gmp__pagesize();
		else if (vec_unsupported(r))
			stk.vec_guard = false;
	}
	/* The rest (all of them if the kernel stopped early or refused)
	 * one by one, as without batches. */
	uint64_t mask = done >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << done) - 1;
	for (size_t i = done; i < n; i++)
		if (gmp__guard_install(iov[i].iov_base, iov[i].iov_len) == 0)
			mask |= (uint64_t)1 << i;
	return mask;
}

/* Prepares the next batch of slots at stk.ready; stk.lock held, and
 * stk.ready < stk.end. */
static void prepare(void)
{
	size_t ps = gmp__pagesize();
	size_t n = (stk.end - stk.ready) / stk.slot;
	if (n > stk.batch_slots)
		n = stk.batch_slots;
	uintptr_t base = stk.ready;
	struct iovec iov[MAX_BATCH_SLOTS + 1];

	stk.batch = base;
	stk.batch_guards = 0;
	if (stk.mode == GUARD_INSTALL) {
		for (size_t i = 0; i < n; i++)
			iov[i] = (struct iovec){ (void *)(base + i * stk.slot),
						 ps };
		stk.batch_guards = install_guards(iov, n);
	}
	if (stk.populate) {
		/* Nothing to fall back to: a page left out is faulted in
		 * by the first task on it. */
		for (size_t i = 0; i < n; i++)
			iov[i] = (struct iovec){
				(void *)(base + (i + 1) * stk.slot - ps), ps
			};
		uintptr_t g = g_of(stk.regions, base) & ~(uintptr_t)(ps - 1);
		uintptr_t gend =
			(g_of(stk.regions, base) + n * G_BYTES + ps - 1) &
			~(uintptr_t)(ps - 1);
		iov[n] = (struct iovec){ (void *)g, gend - g };
		ssize_t r =
			gmp__madvise_self(iov, n + 1, GMP__MADV_POPULATE_WRITE);
		if (r < 0 && vec_unsupported(r))
			stk.populate = false;
	}
	stk.ready = base + n * stk.slot;
	if (stk.batch_slots < MAX_BATCH_SLOTS)
		stk.batch_slots *= 2;
}

/* A new stack in *s and, in *gmem, the memory of the G that will own it:
 * G_BYTES, cache-line aligned, zero until written, mapped until shutdown.
 * Returns 0 or -ENOMEM. */
int gmp__stack_alloc(gmp__stack *s, void **gmem)
{
	size_t ps = gmp__pagesize();
	int saved = errno, err = 0;

	/* A failure injected here stands for the kernel refusing the
	 * stack's memory (a region mmap or its guard), or, since the G
	 * comes with the stack, for the G's allocation failing. */
	if (gmp__fault_hit(GMP__FAULT_STACK_ENOMEM) ||
	    gmp__fault_hit(GMP__FAULT_ALLOC))
		return -ENOMEM;
	gmp__lock(&stk.lock);
	if (stk.next == stk.ready) {
		if (stk.ready == stk.end && (err = grow()) != 0)
			goto out;
		prepare();
	}
	uintptr_t slot = stk.next;
	bool guarded = false;
	if (stk.mode == GUARD_INSTALL) {
		size_t i = (slot - stk.batch) / stk.slot;
		guarded = (stk.batch_guards >> i) & 1;
	} else if (stk.mode == GUARD_MPROTECT && stk.guard_budget > 0) {
		if (mprotect((void *)slot, ps, PROT_NONE) == 0) {
			guarded = true;
			stk.guard_budget--;
		} else if (gmp__cfg.stack_guard == GMP__GUARD_ALWAYS) {
			err = -ENOMEM; /* the kernel's mapping limit */
			goto out;
		} else {
			stk.guard_budget = 0; /* out of mappings: stop */
		}
	}
	stk.next += stk.slot;
	guarded ? stk.nguarded++ : stk.nunguarded++;
	s->lo = slot + ps;
	s->hi = slot + stk.slot;
	s->guarded = guarded;
#if GMP__HAVE_VALGRIND
	s->valgrind_id = VALGRIND_STACK_REGISTER(s->lo, s->hi);
#else
	s->valgrind_id = 0;
#endif
	*gmem = (void *)g_of(stk.regions, slot);
out:
	gmp__unlock(&stk.lock);
	errno = saved;
#if GMP__ASAN
	/* A region may reuse the addresses of one unmapped at an earlier
	 * shutdown, whose task frames left poison behind; the stack itself
	 * is unpoisoned before each task (gmp__fiber_stack_reset). */
	if (!err)
		__asan_unpoison_memory_region(*gmem, G_BYTES);
#endif
	return err;
}

/* An M's g0 stack (its thread's own) for Valgrind. Valgrind takes a move
 * of the stack pointer between two registered stacks for a switch; a move
 * from a task's (registered) stack to an unregistered one that lies within
 * --max-stackframe (2 MB) of it, as a thread stack mapped next to a stack
 * region can, it takes for the stack shrinking, marks everything between
 * inaccessible, and then flags every push on g0. So g0 stacks are
 * registered too. Returns the handle (0 when not built with Valgrind). */
uint32_t gmp__stack_valgrind_register(uintptr_t lo, uintptr_t hi)
{
#if GMP__HAVE_VALGRIND
	if (lo < hi)
		return VALGRIND_STACK_REGISTER(lo, hi);
#endif
	(void)lo;
	(void)hi;
	return 0;
}

void gmp__stack_valgrind_deregister(uint32_t id)
{
#if GMP__HAVE_VALGRIND
	if (id)
		VALGRIND_STACK_DEREGISTER(id);
#endif
	(void)id;
}

/* Shutdown: the stack's memory goes with its region. */
void gmp__stack_forget(gmp__stack *s)
{
#if GMP__HAVE_VALGRIND
	if (s->valgrind_id)
		VALGRIND_STACK_DEREGISTER(s->valgrind_id);
#endif
	s->valgrind_id = 0;
}

/* Gives the pages of an unused stack back to the kernel, keeping the top
 * `keep` bytes (the part every task touches). */
void gmp__stack_trim(gmp__stack *s, size_t keep)
{
	size_t ps = gmp__pagesize();
	keep = (keep + ps - 1) & ~(ps - 1);
	if (s->hi - s->lo <= keep)
		return;
	int saved = errno;
	madvise((void *)s->lo, s->hi - s->lo - keep, MADV_DONTNEED);
	errno = saved;
}

/* Gives back the pages of dead g's stack below the kept top: at_exit, as
 * its task ends because gmp__stack_went_deep said so, or from a sweep of
 * the free lists (g.c). The caller holds g (it is dead, so no task runs
 * on the stack). */
void gmp__stack_trim_g(gmp_g *g, bool at_exit)
{
	gmp__stack_trim(&g->stack, gmp__stack_keep);
	g->stkstate = GMP__STK_TRIMMED;
	gmp__add64_rlx(at_exit ? &stk.ntrim_exit : &stk.ntrim_swept, 1);
}

#if GMP__TEST_HOOKS
/* For tests: the trims so far, as tasks ended and by sweeps. */
void gmp__stack_trims(uint64_t *at_exit, uint64_t *swept)
{
	*at_exit = gmp__load64_rlx(&stk.ntrim_exit);
	*swept = gmp__load64_rlx(&stk.ntrim_swept);
}
#endif

/* Whether addr lies in the guard page of some stack; *lo and *hi get that
 * stack's bounds. For the SIGSEGV handler: lock-free, and regions are only
 * unmapped at shutdown. */
bool gmp__stack_guard_hit(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	size_t ps = gmp__pagesize();
	for (region *r = gmp__loadp_acq(&stk.regions); r; r = r->next) {
		if (addr < r->base || addr >= r->base + r->size)
			continue;
		if (addr < r->slots)
			return false; /* the G array */
		uintptr_t slot =
			r->slots + (addr - r->slots) / stk.slot * stk.slot;
		if (addr >= slot + ps)
			return false;
		*lo = slot + ps;
		*hi = slot + stk.slot;
		return true;
	}
	return false;
}

#if GMP__TEST_HOOKS
void gmp__stack_counts(uint64_t *guarded, uint64_t *unguarded, bool *install)
{
	gmp__lock(&stk.lock);
	*guarded = stk.nguarded;
	*unguarded = stk.nunguarded;
	*install = stk.mode == GUARD_INSTALL;
	gmp__unlock(&stk.lock);
}
#endif

/* Shutdown: every G is let go of; unmap every region, Gs and all. */
void gmp__stack_release_all(void)
{
	gmp__lock(&stk.lock);
	region *r = stk.regions;
	stk.regions = NULL;
	stk.next = stk.ready = stk.end = 0;
	gmp__unlock(&stk.lock);
	while (r) {
		region *next = r->next;
		munmap((void *)r->base, r->size);
		gmp__free(r);
		r = next;
	}
}

/* In the child of fork() (fork.c), on its only thread: a thread that is
 * gone may have held the lock. The parent's regions stay in the child's
 * copy of memory, leaked as fork.c says; gmp_init starts afresh. */
void gmp__stack_forked(void)
{
	stk.lock = (gmp__mutex)GMP__MUTEX_INIT;
}
