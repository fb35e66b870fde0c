/* The switch points between a task and its M's g0 stack (Go's mcall and
 * gogo). Every switch in the runtime is one of these two, except the last
 * one of a task, which goexit1 (task.c) makes by hand because it never
 * comes back. The registers are saved and loaded by src/ctx; around each
 * jump go the sanitizer and Valgrind annotations of fiber.h, and the
 * task's errno, which travels with the task from thread to thread
 * (design.md §22.2).
 */
#ifndef GMP_MCALL_H
#define GMP_MCALL_H

#include "fiber.h"
#include "internal.h"

/* On a task: save it and run fn(g) on the M's g0 stack. Returns when the
 * task is resumed, possibly on another thread: `m` is stale afterwards.
 *
 * Without sanitizers nothing follows the switch, so callers that end with
 * gmp__mcall compile it as a tail call: the saved resume address is then
 * the caller's own return address, and the resumed task continues in its
 * caller directly, without a return whose prediction the other stacks
 * spoiled.
 *
 * errno travels with the task (design.md §4): saved here from this thread's
 * errno, and put into the errno of the thread that resumes the task by
 * gmp__gogo (on that thread, just before the jump). Both go through the
 * Ms' errnop, not `errno`, so no compiler can reuse the old thread's errno
 * address after the switch.
 *
 * The task's sp here goes into g->stklow, how deep its stack has been at a
 * switch point (stack.c): a task that parks with a deep stack is trimmed
 * when it ends. */
static inline __attribute__((always_inline)) void
gmp__mcall(gmp__m *m, gmp_g *g, void (*fn)(gmp_g *))
{
	uintptr_t sp = gmp__ctx_sp();
	if (sp < g->stklow)
		g->stklow = sp;
	g->saved_errno = *m->errnop;
	gmp__fiber_to_g0(m, g, false);
	gmp__ctx_mcall(&g->sched, m->g0sp, (void (*)(void *))(void *)fn, g);
#if GMP__ASAN
	gmp__fiber_on_task(g);
#endif
}

/* On g0: continue task g (RUNNING, now m->curg) where it last switched
 * out. Its errno becomes this thread's (see gmp__mcall). Never returns. */
static inline __attribute__((always_inline, noreturn)) void gmp__gogo(gmp__m *m,
								      gmp_g *g)
{
	*m->errnop = g->saved_errno; /* this thread's errno is now g's */
	gmp__fiber_to_task(m, g);
	gmp__ctx_gogo(&g->sched);
}

#endif
