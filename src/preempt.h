/* Preemption (design.md §13, §37): sysmon takes the P from a task that
 * runs past its time slice without reaching a switch point, and the task
 * goes on running its own code on its own thread, taking a P back at its
 * next call that needs one. design.md §37 gives the why (no signal), the
 * protocol between the task's thread and sysmon, and its proof
 * (tests/spin/detach.pml).
 *
 * This header holds the task's side of that protocol, the part every
 * runtime entry inlines: the mark g->inrt (per G, since a stay in the
 * runtime spans switches) and the look at g->detach, which cost the
 * thread plain loads and stores only (sysmon pays with an asymmetric
 * barrier); and the brackets built on them (gmp__enter/gmp__leave,
 * gmp__enter_task, gmp__stay, gmp__enter_last). preempt.c holds the
 * barrier, sysmon's detach, the slow path that takes a P back, and
 * gmp_preempt_point; sysmon.c decides when to detach.
 *
 * The rule for runtime code: a task's thread touches its P (m->p and
 * what it holds: run queues, timers, caches, schedtick) and moves its G
 * out of RUNNING only between gmp__enter and gmp__leave. Every public
 * call that may do so brackets itself; code that runs on g0 is inside
 * the runtime by construction (the G it left is marked, and sysmon never
 * detaches an M without a current G).
 */
#ifndef GMP_PREEMPT_H
#define GMP_PREEMPT_H

#include "internal.h"

/* g->inrt */
enum {
	GMP__INRT_OWN = 0,   /* the task runs its own code */
	GMP__INRT_IN = 1,    /* inside the runtime on the task's behalf */
	GMP__INRT_LEAVE = 2, /* inside, and back to its own code as soon as
				it is resumed: a switch point that was the
				task's last act in the runtime (gmp_yield)
				sets it, and execute clears it just before
				the jump, which saves the switch point a
				return of its own after the switch */
};

/* g->detach */
enum {
	GMP__DETACH_NONE = 0,     /* the task's M holds its P as usual */
	GMP__DETACH_CLAIM = 1,    /* sysmon is deciding (its barrier) */
	GMP__DETACH_TAKING = 2,   /* sysmon won: it is taking the P */
	GMP__DETACH_DETACHED = 3, /* the P is gone; the task's thread runs
				     its own code without one */
};

void gmp__enter_slow(gmp_g *g);

/* The thread running task g (the caller) is about to use its P on g's
 * behalf: mark it, and make sure it still has a P (taking one back, and
 * waiting for it if need be, when sysmon detached it). Returns the mark
 * as it was, for gmp__leave. Call it before taking any runtime lock: the
 * slow path may wait. Costs a load, a store and a load: no
 * read-modify-write. */
static inline __attribute__((always_inline)) uint8_t gmp__enter(gmp_g *g)
{
	uint8_t was = gmp__load8_rlx(&g->inrt); /* our own field */
	gmp__store8_rlx(&g->inrt, 1);
	/* The CPU may let the load below pass the store above (sysmon's
	 * barrier makes up for that); the compiler must not. */
	__asm__ __volatile__("" ::: "memory");
	/* acquire: the P's state we read after it is what sysmon left, if
	 * sysmon just backed off or we took the P back */
	if (GMP__UNLIKELY(gmp__load8_acq(&g->detach) != GMP__DETACH_NONE))
		gmp__enter_slow(g);
	return was;
}

/* gmp__enter for a stay that never ends (a task's end, goexit1): no old
 * mark to return. */
static inline __attribute__((always_inline)) void gmp__enter_for_good(gmp_g *g)
{
	gmp__store8_rlx(&g->inrt, GMP__INRT_IN);
	__asm__ __volatile__("" ::: "memory"); /* as in gmp__enter */
	if (GMP__UNLIKELY(gmp__load8_acq(&g->detach) != GMP__DETACH_NONE))
		gmp__enter_slow(g);
}

/* Back to the task's own code (or to an outer runtime call, if `was`
 * says so). g is the task, which may be on another M by now. */
static inline __attribute__((always_inline)) void gmp__leave(gmp_g *g,
							     uint8_t was)
{
	/* release: every use of the P before this is visible to sysmon,
	 * whose acquire load of inrt decides whether it may take the P */
	gmp__store8_rel(&g->inrt, was);
}

/* For a public call that may use the P: the calling task, if it is a
 * running task, entered (*was is the old mark), else NULL (a thread that
 * is not a task, g0, or a task inside a gmp_enter_syscall window, which
 * blocks like a thread and uses no P). Pair with gmp__leave_task. */
static inline __attribute__((always_inline)) gmp_g *
gmp__enter_task(uint8_t *was)
{
	gmp_g *g = gmp__getg(NULL);
	*was = g ? gmp__enter(g) : 0;
	return g;
}

static inline __attribute__((always_inline)) void gmp__leave_task(gmp_g *g,
								  uint8_t was)
{
	if (g)
		gmp__leave(g, was);
}

/* A stay inside the runtime for a public call's body, ended by the scope
 * it is declared in (the cleanup attribute), so that every return path
 * leaves, and so that the public call can tail-call the body with no frame
 * of its own (after a switch, each extra return costs a mispredicted
 * return):
 *
 *     gmp__stay stay __attribute__((cleanup(gmp__stay_end))) =
 *             gmp__stay_begin();
 */
typedef struct gmp__stay {
	gmp_g *g;
	uint8_t was;
} gmp__stay;

static inline __attribute__((always_inline)) gmp__stay gmp__stay_begin(void)
{
	gmp__stay s;
	s.g = gmp__enter_task(&s.was);
	return s;
}

static inline __attribute__((always_inline)) void gmp__stay_end(gmp__stay *s)
{
	gmp__leave_task(s->g, s->was);
}

/* For a switch point that is the last thing its public call does: leave
 * the runtime when g is resumed (execute does it), instead of after the
 * switch returns. Only when the call came from the task's own code. */
static inline __attribute__((always_inline)) void
gmp__leave_on_resume(gmp_g *g, uint8_t was)
{
	if (was == GMP__INRT_OWN)
		gmp__store8_rlx(&g->inrt, GMP__INRT_LEAVE);
}

/* gmp__enter and gmp__leave_on_resume in one, for a switch point that is
 * the last act of its public call (gmp_yield, gmp_park): a load and one
 * store of the mark, LEAVE from the task's own code (LEAVE is inside, as
 * IN is) or IN, unchanged, from an outer runtime call; then the load of
 * the detach word. Returns false if that word asks for the slow path: the
 * caller then calls gmp__enter_last_slow (out of line, so that the fast
 * path keeps no frame) before it switches. */
static inline __attribute__((always_inline)) bool gmp__enter_last(gmp_g *g)
{
	_Static_assert(GMP__INRT_LEAVE - GMP__INRT_OWN == GMP__INRT_LEAVE &&
			       GMP__INRT_LEAVE - GMP__INRT_IN == GMP__INRT_IN,
		       "gmp__enter_last's arithmetic");
	uint8_t was = gmp__load8_rlx(&g->inrt); /* OWN or IN */
	gmp__store8_rlx(&g->inrt, (uint8_t)(GMP__INRT_LEAVE - was));
	__asm__ __volatile__("" ::: "memory"); /* as in gmp__enter */
	return GMP__LIKELY(gmp__load8_acq(&g->detach) == GMP__DETACH_NONE);
}

/* gmp__enter_last's slow path: takes a P back as gmp__enter does, marked
 * IN while it may switch (execute would take a LEAVE mark for the task's
 * return to its own code), and puts the mark back after. */
void gmp__enter_last_slow(gmp_g *g);

/* Whether the task running on this thread (if any) is inside the runtime
 * by the rule above; for debug checks at the places that use the P. */
static inline bool gmp__inrt(const gmp_g *g)
{
	return g == NULL || gmp__load8_rlx(&g->inrt) != 0;
}

/* gmp_init: chooses the barrier (membarrier, else the shoot-down where it
 * is one, else none: detaching is then off) and reads GMP_PREEMPT's
 * setting. Logs why detaching is off when GMP_DEBUG is set. */
void gmp__preempt_init(void);

/* sysmon: tries to take p from the task that runs on it (design.md §37.2
 * says when sysmon asks), if the slice running there is still the one
 * sysmon judged (p->schedtick == schedtick; §37.3). Returns true if it did
 * and handed p off. */
bool gmp__preempt_detach(gmp__p *p, uint32_t schedtick);

/* sysmon: how long the slice just seen on a P may last before its task
 * is asked to yield, and how long after that sysmon waits before it
 * detaches: 10 ms and 1 ms, or short random ones with
 * GMP_DEBUG=randomize=1 (20-520 µs, and 0-500 µs or none), so that tests
 * see detaches race with entries into the runtime. */
int64_t gmp__preempt_slice(void);
int64_t gmp__preempt_grace(void);

/* Whether sysmon detaches at all (a barrier was found and GMP_PREEMPT is
 * not off). */
bool gmp__preempt_enabled(void);

/* The number of Ms running a detached task right now (schedtrace). */
uint32_t gmp__detached_count(void);

#endif
