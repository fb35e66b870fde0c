/* Task stacks (SPEC §6).
 *
 * Stacks are carved from large anonymous regions reserved with
 * MAP_NORESERVE, so only the pages a task touches are ever committed. Each
 * slot is a guard page followed by the stack:
 *
 *   region:  [guard|stack........][guard|stack........] ...
 *
 * A guard costs nothing with MADV_GUARD_INSTALL (Linux 6.13+: a marker in
 * the page tables, no VMA). Without it, a guard is an mprotect(PROT_NONE)
 * page that splits the region's VMA in two, and vm.max_map_count (65530 by
 * default) caps the process at about 32,000 such guards; so in "auto" mode
 * only the first max_map_count/4 stacks get one and the rest are carved
 * unguarded (adjacent unguarded stacks share one VMA), leaving half the
 * mappings to the program. "always" guards every stack and fails
 * allocations once the kernel refuses; "never" guards none.
 *
 * Stacks are never unmapped one by one: a dead G keeps its stack for the
 * next task (g.c's free lists), and gmp__stack_trim gives the pages of an
 * unused stack back to the kernel. Regions are unmapped at shutdown.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "fault.h"
#include "internal.h"

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
} region;

enum { GUARD_NONE, GUARD_INSTALL, GUARD_MPROTECT };

static struct {
	gmp__mutex lock;      /* protects everything below */
	region *regions;      /* to unmap at shutdown */
	uintptr_t next, end;  /* unused part of the newest region */
	size_t slot;          /* guard + stack, page multiple */
	size_t region_slots;  /* slots in the next region (grows) */
	int mode;             /* GUARD_* */
	int64_t guard_budget; /* mprotect guards we may still add; -1: none */
	uint64_t nguarded, nunguarded;
} stk;

enum { FIRST_REGION_SLOTS = 16, MAX_REGION_BYTES = 1 << 30 };

/* Called by gmp_init, after the settings are known. */
void gmp__stack_init(void)
{
	size_t ps = gmp__pagesize();
	stk.slot = ps + gmp__cfg.stack_size;
	stk.region_slots = FIRST_REGION_SLOTS;
	stk.regions = NULL;
	stk.next = stk.end = 0;
	stk.nguarded = stk.nunguarded = 0;
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
#if GMP__HAVE_VALGRIND
	/* valgrind refuses single mappings beyond 32 GiB, and tracks each
	 * reserved page; keep regions small under it. */
	if (RUNNING_ON_VALGRIND)
		cap = 64u << 20;
#endif
	return cap;
}

/* Reserves a new region; stk.lock held. */
static int grow(void)
{
	size_t slots = stk.region_slots;
	size_t cap = region_cap();
	if (slots * stk.slot > cap)
		slots = cap / stk.slot ? cap / stk.slot : 1;
	size_t size = slots * stk.slot;
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
				  MAP_STACK,
			  -1, 0);
	if (base == MAP_FAILED)
		return -ENOMEM;
	region *r = gmp__malloc(sizeof *r);
	if (!r) {
		munmap(base, size);
		return -ENOMEM;
	}
	r->base = (uintptr_t)base;
	r->size = size;
	r->next = stk.regions;
	gmp__storep_rel(&stk.regions, r); /* lock-free readers: guard_hit */
	stk.next = r->base;
	stk.end = r->base + size;
	if (stk.region_slots * 2 * stk.slot <= cap)
		stk.region_slots *= 2;
	return 0;
}

int gmp__stack_alloc(gmp__stack *s)
{
	size_t ps = gmp__pagesize();
	int saved = errno, err = 0;

	/* A failure injected here stands for the kernel refusing the
	 * stack's memory (a region mmap or its guard). */
	if (gmp__fault_hit(GMP__FAULT_STACK_ENOMEM))
		return -ENOMEM;
	gmp__lock(&stk.lock);
	if (stk.next == stk.end && (err = grow()) != 0)
		goto out;
	uintptr_t slot = stk.next;
	bool guarded = false;
	if (stk.mode == GUARD_INSTALL) {
		guarded = gmp__guard_install((void *)slot, ps) == 0;
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
out:
	gmp__unlock(&stk.lock);
	errno = saved;
	return err;
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

/* Whether addr lies in the guard page of some stack; *lo and *hi get that
 * stack's bounds. For the SIGSEGV handler: lock-free, and regions are only
 * unmapped at shutdown. */
bool gmp__stack_guard_hit(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	size_t ps = gmp__pagesize();
	for (region *r = gmp__loadp_acq(&stk.regions); r; r = r->next) {
		if (addr < r->base || addr >= r->base + r->size)
			continue;
		uintptr_t slot = r->base + (addr - r->base) / stk.slot * stk.slot;
		if (addr >= slot + ps)
			return false;
		*lo = slot + ps;
		*hi = slot + stk.slot;
		return true;
	}
	return false;
}

void gmp__stack_counts(uint64_t *guarded, uint64_t *unguarded, bool *install)
{
	gmp__lock(&stk.lock);
	*guarded = stk.nguarded;
	*unguarded = stk.nunguarded;
	*install = stk.mode == GUARD_INSTALL;
	gmp__unlock(&stk.lock);
}

/* Shutdown: every G is gone; unmap every region. */
void gmp__stack_release_all(void)
{
	gmp__lock(&stk.lock);
	region *r = stk.regions;
	stk.regions = NULL;
	stk.next = stk.end = 0;
	gmp__unlock(&stk.lock);
	while (r) {
		region *next = r->next;
		munmap((void *)r->base, r->size);
		gmp__free(r);
		r = next;
	}
}
