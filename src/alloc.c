/* The runtime's one allocator pair. Everything the runtime allocates goes
 * through here, so tests can assert that shutdown freed all of it. */
#include <stdlib.h>

#include "export_test.h"
#include "fault.h"
#include "internal.h"

static volatile uint64_t live; /* atomic: outstanding allocations */

void *gmp__malloc(size_t n)
{
	if (gmp__fault_hit(GMP__FAULT_ALLOC))
		return NULL;
	void *p = malloc(n ? n : 1);
	if (p)
		gmp__add64_rlx(&live, 1);
	return p;
}

void *gmp__calloc(size_t n, size_t size)
{
	if (gmp__fault_hit(GMP__FAULT_ALLOC))
		return NULL;
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p)
		gmp__add64_rlx(&live, 1);
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
		gmp__add64_rlx(&live, -1);
		free(p);
	}
}

int64_t gmp__alloc_live(void)
{
	return (int64_t)gmp__load64_rlx(&live);
}
