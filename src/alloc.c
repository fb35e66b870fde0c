/* The runtime's one allocator pair. Everything the runtime allocates goes
 * through here, so tests can assert that shutdown freed all of it, and
 * fault.h can make an allocation fail (docs/hacking.md, "Allocation and
 * fault injection"). */
#include <stdlib.h>

#include "export_test.h"
#include "fault.h"
#include "internal.h"

/* Outstanding allocations, counted in 64 shards, each alone on its cache
 * line, so that allocating on two CPUs at once does not move one line to
 * and fro (one shared counter cost bench/timer_churn's make-and-free
 * about a fifth of its time). A runtime thread counts in the shard of its
 * M's id, any other thread in the last one; a block freed on another
 * thread than the one that allocated it takes its shard below zero, which
 * the sum does not mind. Relaxed adds: nothing rides on them, and the sum
 * (gmp__alloc_live) is read by tests once the runtime is quiet. */
#define LIVE_SHARDS 64

static struct {
	volatile uint64_t n; /* atomic */
} __attribute__((aligned(64))) live[LIVE_SHARDS];

static inline volatile uint64_t *live_shard(void)
{
	gmp__m *m = gmp__getm_inline();
	return &live[m ? (uint64_t)m->id % (LIVE_SHARDS - 1) : LIVE_SHARDS - 1]
			.n;
}

void *gmp__malloc(size_t n)
{
	if (gmp__fault_hit(GMP__FAULT_ALLOC))
		return NULL;
	void *p = malloc(n ? n : 1);
	if (p)
		gmp__add64_rlx(live_shard(), 1);
	return p;
}

void *gmp__calloc(size_t n, size_t size)
{
	if (gmp__fault_hit(GMP__FAULT_ALLOC))
		return NULL;
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p)
		gmp__add64_rlx(live_shard(), 1);
	return p;
}

void *gmp__realloc(void *p, size_t n)
{
	if (!p)
		return gmp__malloc(n);
	if (gmp__fault_hit(GMP__FAULT_ALLOC))
		return NULL;
	return realloc(p, n ? n : 1);
}

void gmp__free(void *p)
{
	if (p) {
		gmp__add64_rlx(live_shard(), -1);
		free(p);
	}
}

#if GMP__TEST_HOOKS
int64_t gmp__alloc_live(void)
{
	uint64_t sum = 0;
	for (int i = 0; i < LIVE_SHARDS; i++)
		sum += gmp__load64_rlx(&live[i].n);
	return (int64_t)sum;
}
#endif
