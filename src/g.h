/* Gs as objects (g.c): the all-G list, allocation, and the free lists that
 * recycle dead Gs with their stacks, with the sweep that ages them. The G
 * itself, its states and its status transitions are in internal.h.
 */
#ifndef GMP_G_H
#define GMP_G_H

#include "internal.h"

/* Every G ever allocated, newest first (linked by allglink; prepended
 * under allg_lock, published with a release, walked lock-free by stats,
 * dumps, the signal handler and the gdb extension), and how many are made
 * or being made (allg_lock). */
extern gmp__mutex gmp__allg_lock;
extern gmp_g *gmp__allg;
extern int64_t gmp__allg_n;

/* A new G with a stack, DEAD, on the all-G list; NULL when memory or
 * address space ran out. */
gmp_g *gmp__malg(void);

/* A dead G from p's free list, or from the global one when p is NULL;
 * NULL if none is cached. */
gmp_g *gmp__gfget(gmp__p *p);
/* Caches dead g on p (owner), spilling batches to the global list. */
void gmp__gfput(gmp__p *p, gmp_g *g);
/* Moves all of p's dead Gs to the global list. */
void gmp__gfpurge(gmp__p *p);

/* sysmon's sweep of the free lists: returns when it wants to be called
 * again (gmp__nanotime), 0 for never. */
int64_t gmp__gfree_sweep(int64_t now);

/* Shutdown: lets go of every G (gmp__stack_release_all unmaps them). */
void gmp__gfree_all(void);

#endif
