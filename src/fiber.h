/* Telling the checkers about stack switches (design.md §22.4).
 *
 * AddressSanitizer, ThreadSanitizer and Valgrind all assume one stack per
 * thread unless told otherwise. Every switch in the runtime goes through
 * exactly four hooks, in this order:
 *
 *   task -> g0   fiber_to_g0 (on the task)   ... fiber_on_g0 (on g0)
 *   g0 -> task   fiber_to_task (on g0)       ... fiber_on_task (on the task)
 *
 * ASan: __sanitizer_start_switch_fiber before the switch names the stack
 * we go to and saves the current fake stack (the frames ASan keeps for
 * detect_stack_use_after_return) into the fiber we leave; NULL when the
 * fiber we leave is dying, so ASan frees its fake stack.
 * __sanitizer_finish_switch_fiber after the switch restores the arriving
 * fiber's fake stack. Frames abandoned on purpose (g0 restarts from the top
 * of its stack at every mcall; a dead task's last frames) leave ASan's
 * poison behind, so the code that reuses those bytes unpoisons them first.
 *
 * TSan: each G owns a fiber (created with the G, kept across reuse,
 * destroyed at shutdown); each M's g0 has one of its own, replaced every
 * GMP__TSAN_G0_ROUNDS switches (see gmp__fiber_m_init). Switching with
 * flags 0 makes the switch a synchronisation point, which it is.
 *
 * Valgrind: task stacks are registered when allocated (stack.c).
 *
 * In builds without a sanitizer every hook is empty and inlines away.
 */
#ifndef GMP_FIBER_H
#define GMP_FIBER_H

#include "internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define GMP__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GMP__ASAN 1
#endif
#endif
#ifndef GMP__ASAN
#define GMP__ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define GMP__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GMP__TSAN 1
#endif
#endif
#ifndef GMP__TSAN
#define GMP__TSAN 0
#endif

#if GMP__ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if GMP__TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* A task starts on G g: with TSan, its own fiber (TSan counts fibers as
 * threads, at most about 8,000 at once, so fibers live with tasks, not
 * with G structs, which are many more once freed ones pile up). */
static inline void gmp__fiber_g_create(gmp_g *g)
{
#if GMP__TSAN
	g->tsan_fiber = __tsan_create_fiber(0);
#else
	(void)g;
#endif
}

/* The task on g ended (we are on g0's fiber now). */
static inline void gmp__fiber_g_destroy(gmp_g *g)
{
#if GMP__TSAN
	if (g->tsan_fiber)
		__tsan_destroy_fiber(g->tsan_fiber);
	g->tsan_fiber = NULL;
#else
	(void)g;
#endif
}

/* The lowest address of the frames live at this point, with a margin for
 * the frames of the hooks themselves. The frame address, not a local's:
 * with detect_stack_use_after_return, locals live on ASan's fake stack. */
#define GMP__FIBER_HERE() ((uintptr_t)__builtin_frame_address(0) - 1024)

/* A G's stack is about to host a new task: forget the old task's frames.
 * Only the frames live when it died are still poisoned (frames that
 * returned were unpoisoned on return): [asan_low, hi), or all of it for a
 * stack never used. */
static inline void gmp__fiber_stack_reset(gmp_g *g)
{
#if GMP__ASAN
	uintptr_t lo = g->asan_low;
	if (lo < g->stack.lo || lo >= g->stack.hi)
		lo = g->stack.lo;
	__asan_unpoison_memory_region((void *)lo, g->stack.hi - lo);
	g->asan_fake_stack = NULL;
	g->asan_low = 0;
#else
	(void)g;
#endif
}

/* On a new M's thread, before its first switch. With TSan, g0 gets a
 * fiber of its own, not the thread's: g0 frames are abandoned at every
 * switch (schedule never returns), so TSan's shadow stack for g0 only
 * grows, and we replace g0's fiber every GMP__TSAN_G0_ROUNDS switches
 * (fiber_to_task) before it overflows. */
#define GMP__TSAN_G0_ROUNDS 128

static inline void gmp__fiber_m_init(gmp__m *m)
{
#if GMP__TSAN
	m->tsan_fiber_thread = __tsan_get_current_fiber();
	m->tsan_fiber_g0 = __tsan_create_fiber(0);
#else
	(void)m;
#endif
}

/* mstart has set its exit jmp_buf (on the thread's fiber, where the
 * longjmp in mexit must find it); from here on we are g0. */
static inline void gmp__fiber_m_enter_g0(gmp__m *m)
{
#if GMP__TSAN
	__tsan_switch_to_fiber(m->tsan_fiber_g0, 0);
#else
	(void)m;
#endif
}

/* The M leaves through a longjmp to mstart: TSan looks the jmp_buf up
 * in the current fiber, so return to the thread's own first. */
static inline void gmp__fiber_m_exit(gmp__m *m)
{
#if GMP__TSAN
	__tsan_switch_to_fiber(m->tsan_fiber_thread, 0);
#else
	(void)m;
#endif
}

/* Back in mstart, on the thread's fiber: g0's can go. */
static inline void gmp__fiber_m_done(gmp__m *m)
{
#if GMP__TSAN
	__tsan_destroy_fiber(m->tsan_fiber_g0);
	m->tsan_fiber_g0 = NULL;
#else
	(void)m;
#endif
}

static inline void gmp__fiber_to_g0(gmp__m *m, gmp_g *g, bool dying)
{
#if GMP__ASAN
	if (dying)
		g->asan_low = GMP__FIBER_HERE();
	__sanitizer_start_switch_fiber(dying ? NULL : &g->asan_fake_stack,
				       (const void *)m->g0_lo,
				       m->g0_hi - m->g0_lo);
#endif
#if GMP__TSAN
	__tsan_switch_to_fiber(m->tsan_fiber_g0, 0);
#endif
	(void)m;
	(void)g;
	(void)dying;
}

static inline void gmp__fiber_on_g0(gmp__m *m)
{
#if GMP__ASAN
	__sanitizer_finish_switch_fiber(m->asan_fake_stack_g0, NULL, NULL);
	/* The g0 frames of the last round were abandoned, not returned
	 * from; their redzones are still poisoned, from where that round
	 * left g0 (fiber_to_task) up to g0sp. */
	uintptr_t lo = m->asan_g0_low;
	if (lo < m->g0_lo || lo >= m->g0sp)
		lo = m->g0_lo;
	if (lo < m->g0sp)
		__asan_unpoison_memory_region((void *)lo, m->g0sp - lo);
#else
	(void)m;
#endif
}

static inline void gmp__fiber_to_task(gmp__m *m, gmp_g *g)
{
#if GMP__ASAN
	m->asan_g0_low = GMP__FIBER_HERE();
	__sanitizer_start_switch_fiber(&m->asan_fake_stack_g0,
				       (const void *)g->stack.lo,
				       g->stack.hi - g->stack.lo);
#endif
#if GMP__TSAN
	__tsan_switch_to_fiber(g->tsan_fiber, 0);
	if (++m->tsan_g0_rounds >= GMP__TSAN_G0_ROUNDS) {
		/* g0's fiber is not current now: replace it (see m_init). */
		__tsan_destroy_fiber(m->tsan_fiber_g0);
		m->tsan_fiber_g0 = __tsan_create_fiber(0);
		m->tsan_g0_rounds = 0;
	}
#endif
	(void)m;
	(void)g;
}

static inline void gmp__fiber_on_task(gmp_g *g)
{
#if GMP__ASAN
	__sanitizer_finish_switch_fiber(g->asan_fake_stack, NULL, NULL);
#else
	(void)g;
#endif
}

#endif
