/* Task-local keys (design.md §2.3): gmp_key_create, gmp_setspecific,
 * gmp_getspecific, and the destructors that run as a task ends.
 *
 * Keys are process-wide and never deleted: a key is an index into every
 * task's own array of values (g->keys, grown on demand by the task
 * itself, so owner-only), and keys.dtor[] holds each key's destructor.
 */
#include <string.h>

#include "internal.h"
#include "key.h"

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
	gmp__m *m = gmp__getm();
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
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (!g || key.id == 0 || key.id > g->nkeys)
		return NULL;
	return g->keys[key.id - 1];
}

/* Runs on the ending task: each non-NULL value's destructor, once. A
 * destructor may set values again (pthread would loop); we clear each slot
 * before calling its destructor and do not revisit it, so a value stored
 * during destruction is dropped without its destructor, as design.md §2.3 asks
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
