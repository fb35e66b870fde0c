/* Task stacks (stack.c): carving them from large regions with their guard
 * pages and their Gs, trimming the pages of idle ones, and telling
 * Valgrind and the signal handler about them. The gmp__stack type is in
 * internal.h, inside the G.
 */
#ifndef GMP_STACK_H
#define GMP_STACK_H

#include "internal.h"

/* The top of every stack that trimming leaves committed (see stack.c):
 * GMP__STACK_KEEP rounded up to whole pages, at most the whole stack. Set
 * by gmp_init. */
#define GMP__STACK_KEEP ((size_t)16 * 1024)
extern size_t gmp__stack_keep;

/* What trimming knows of a G's stack (g->stkstate; stack.c, g.c). */
enum {
	GMP__STK_USED = 0,    /* a task ran on it since it was last trimmed */
	GMP__STK_TRIMMED = 1, /* nothing below the kept top is committed */
};

/* Whether the task that just ended on g committed stack pages below the
 * kept top, as far as its switch points show (stack.c: what they miss is
 * left to the sweep). On g0, with g dead. */
static inline bool gmp__stack_went_deep(const gmp_g *g)
{
	return g->stklow < g->stack.hi - gmp__stack_keep;
}

/* gmp_init, once the settings are known: the slot size, the kept top,
 * the guard mode. */
void gmp__stack_init(void);

/* A new stack in *s and, in *gmem, the zeroed memory of the G that will
 * own it. Returns 0 or -ENOMEM. */
int gmp__stack_alloc(gmp__stack *s, void **gmem);

/* Gives back the pages of dead g's stack below the kept top: at_exit as
 * its task ends, else from the free lists' sweep. */
void gmp__stack_trim_g(gmp_g *g, bool at_exit);

/* Registers [lo, hi) as a stack with Valgrind (g0 stacks too); returns
 * the handle, 0 when not built for Valgrind. */
uint32_t gmp__stack_valgrind_register(uintptr_t lo, uintptr_t hi);
void gmp__stack_valgrind_deregister(uint32_t id);

/* Whether addr lies in some stack's guard page (*lo, *hi: that stack's
 * bounds). Lock-free, for the SIGSEGV handler. */
bool gmp__stack_guard_hit(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);

/* Shutdown: forget one stack, then unmap every region, Gs and all. */
void gmp__stack_forget(gmp__stack *s);
void gmp__stack_release_all(void);

/* In the child of fork() (fork.c). */
void gmp__stack_forked(void);

#endif
