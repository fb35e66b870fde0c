/* System calls: gmp_enter_syscall and gmp_exit_syscall, which keep the P
 * attached across a short call and lose it to sysmon across a long one,
 * and the SCAN handshake (gmp__block_on_exit_syscall, gmp__syscall_takep)
 * by which sysmon, or an M leaving its own call, takes the P of a task in
 * a call. design.md §4 is the contract; §26.1 the design: Go 1.26's scheme,
 * which synchronises on the G's status (SYSCALL, SYSCALL|SCAN) instead of
 * a P state, why, and the slow path of an exit whose P was taken.
 */
#include "fiber.h"
#include "internal.h"
#include "preempt.h"
#include "mcall.h"
#include "runq.h"
#include "scheduler.h"
#include "syscall.h"
#include "sysmon.h"
#include "task.h"
#include "timer.h"
#include "trace.h"

/* gmp_enter_syscall and gmp_enter_syscall_block found no RUNNING task
 * with its P: outside a task (or on g0) they do nothing; a task that is
 * not RUNNING is already in a system call. */
static __attribute__((cold)) void enter_refused(const char *what)
{
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (g)
		gmp__throw("%s: task %lld is already in a system call", what,
			   (long long)g->id);
}

/* The task entering a system call, inside the runtime (preempt.h) and
 * holding a P: a detached task takes one back first, so that the call
 * starts as any other does. NULL outside a task, or if already in one. */
static inline gmp_g *enter_task(uint8_t *was, const char *what)
{
	gmp_g *g = gmp__getg(NULL);
	if (GMP__UNLIKELY(!g)) {
		enter_refused(what);
		return NULL;
	}
	*was = gmp__enter(g);
	return g;
}

GMP_EXTERN void gmp_enter_syscall(void)
{
	uint8_t was;
	gmp_g *g = enter_task(&was, "gmp_enter_syscall");
	if (!g)
		return;
	gmp__m *m = g->m;
	gmp__p *p = m->p;
	gmp__trace_sysenter(m, p, g, false);
	m->syscalltick = p->syscalltick;
	m->oldp = p;
	bool wake = gmp__sysmon_wanted(p);
	/* release: from here sysmon may take the P; it must see oldp. */
	gmp__casgstatus(g, GMP__G_RUNNING, GMP__G_SYSCALL);
	if (GMP__UNLIKELY(wake))
		gmp__sysmon_wake();
	gmp__leave(g, was);
}

GMP_EXTERN void gmp_enter_syscall_block(void)
{
	uint8_t was;
	gmp_g *g = enter_task(&was, "gmp_enter_syscall_block");
	if (!g)
		return;
	gmp__m *m = g->m;
	gmp__p *p = m->p;
	gmp__trace_sysenter(m, p, g, true);
	int e = gmp__errno_get();
	m->syscalltick = p->syscalltick;
	gmp__store32_rlx(&p->syscalltick, p->syscalltick + 1);
	m->oldp = NULL;
	/* The P goes first: once the G is SYSCALL, the P is not ours to
	 * touch. (A short window of RUNNING without a P; exit copes.) */
	gmp__handoffp(gmp__releasep(m));
	gmp__casgstatus(g, GMP__G_RUNNING, GMP__G_SYSCALL);
	gmp__errno_set(e);
	gmp__leave(g, was);
}

/* Tries to detach p from an M whose G is in a syscall: on success the G is
 * SYSCALL|SCAN (it cannot leave the syscall), its M holds p, and *gp and
 * *mp name them; the caller must gmp__syscall_resume(*gp) when done. */
bool gmp__block_on_exit_syscall(gmp__p *p, gmp_g **gp, gmp__m **mp)
{
	if (gmp__load32_acq(&p->status) != GMP__P_RUNNING)
		return false;
	/* Racy reads of type-stable structs (Ms and Gs are never freed while
	 * the runtime runs), validated under the SCAN bit below. */
	gmp__m *m = gmp__loadp_acq(&p->m);
	if (!m)
		return false;
	gmp_g *g = gmp__loadp_acq(&m->curg);
	if (!g || gmp__load32_rlx(&g->status) != GMP__G_SYSCALL)
		return false;
	if (!gmp__cas32_acq(&g->status, GMP__G_SYSCALL,
			    GMP__G_SYSCALL | GMP__G_SCAN))
		return false;
	if (gmp__loadp_rlx(&g->m) != m || gmp__loadp_rlx(&m->p) != p) {
		gmp__store32_rel(&g->status, GMP__G_SYSCALL);
		return false;
	}
	*gp = g;
	*mp = m;
	return true;
}

void gmp__syscall_resume(gmp_g *g)
{
	/* release: the P's new owner-less state is visible to the G's exit
	 * CAS (acquire), which then finds m->p == NULL. */
	gmp__store32_rel(&g->status, GMP__G_SYSCALL);
}

/* Detaches p from m (the G is held at SYSCALL|SCAN); p becomes IDLE but is
 * on no list: the caller hands it off or runs it. */
void gmp__syscall_takep(gmp__m *m, gmp__p *p)
{
	gmp__trace_pstop(m, p, GMP__TRP_TAKEN);
	gmp__storep_rlx(&p->m, NULL);
	gmp__storep_rlx(&m->p, NULL);
	gmp__store32_rlx(&p->syscalltick, p->syscalltick + 1);
	gmp__store32_rel(&p->status, GMP__P_IDLE);
}

/* Slow path: our P was taken. Take back our old P (from whichever M now
 * sits on it in a syscall), else an idle P. */
static gmp__p *exitsyscall_tryget(gmp__p *oldp)
{
	gmp_g *og;
	gmp__m *om;
	if (oldp && gmp__block_on_exit_syscall(oldp, &og, &om)) {
		gmp__syscall_takep(om, oldp);
		gmp__syscall_resume(og);
		return oldp;
	}
	if (gmp__load32_rlx(&gmp__sched.npidle) == 0)
		return NULL;
	gmp__lock(&gmp__sched.lock);
	gmp__p *p = gmp__pidleget();
	gmp__unlock(&gmp__sched.lock);
	return p;
}

/* On g0: no P anywhere. Queue the task globally and park this M; or run
 * it if a P turned up meanwhile. */
static void exitsyscall0(gmp_g *g)
{
	gmp__m *m = g->m;
	gmp__fiber_on_g0(m);
	gmp__casgstatus(g, GMP__G_RUNNING, GMP__G_RUNNABLE);
	gmp__storep_rlx(&m->curg, NULL);
	gmp__storep_rlx(&g->m, NULL);
	gmp__lock(&gmp__sched.lock);
	gmp__p *p = gmp__pidleget();
	bool locked = false;
	if (!p) {
		gmp__globrunq_put(g);
		/* Read before unlocking: once queued, another M may take g
		 * and change its locking. */
		locked = g->lockedm != NULL;
	}
	gmp__unlock(&gmp__sched.lock);
	if (p) {
		gmp__acquirep(m, p);
		gmp__trace_run(m, p, g, true);
		gmp__execute(m, g, false);
	}
	if (locked)
		gmp__schedule_locked(m); /* waits until g is scheduled */
	gmp__stopm(m);
	gmp__schedule(m);
}

GMP_EXTERN void gmp_exit_syscall(void)
{
	/* Not gmp__getg: the task is in SYSCALL, and its P (if it still has
	 * one) is not its own until the CAS below. */
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (!g)
		return;
	uint32_t st = gmp__load32_rlx(&g->status) & ~(uint32_t)GMP__G_SCAN;
	if (st != GMP__G_SYSCALL)
		gmp__throw("gmp_exit_syscall without gmp_enter_syscall (task "
			   "%lld is %s)",
			   (long long)g->id, gmp__gstatus_name(st));
	if (GMP__UNLIKELY(gmp__cfg.randomize))
		gmp__jitter(); /* keeps errno */
	/* In the runtime before we are RUNNING again: from the CAS on, the
	 * P (if we still have one) is ours, and sysmon could otherwise take
	 * it as a running task's. A task in a syscall is never detached, so
	 * this cannot wait. */
	uint8_t was = gmp__enter(g);
	gmp__casgstatus(g, GMP__G_SYSCALL, GMP__G_RUNNING);
	gmp__trace_sysexit(m, g);
	gmp__p *oldp = m->oldp;
	m->oldp = NULL;
	gmp__p *p = m->p;
	if (GMP__LIKELY(p != NULL)) {
		/* Fast path: nobody took the P. */
		gmp__store32_rlx(&p->syscalltick, p->syscalltick + 1);
		gmp__leave(g, was);
		return;
	}
	/* The syscall's errno, which the slow paths must keep (their locks
	 * and switches may change it); the fast path above touches nothing
	 * that could. Still the errno of this thread: we have not moved. */
	int e = gmp__errno_get();
	p = exitsyscall_tryget(oldp);
	if (p) {
		gmp__acquirep(m, p);
		gmp__store32_rlx(&p->syscalltick, p->syscalltick + 1);
		gmp__errno_set(e);
		/* Retaken because the slice had expired? Then this switch
		 * point ends it (Go keeps its preemption request armed
		 * across exitsyscall); else sysmon would take the P again at
		 * every look while the task's slice never ends. */
		if (GMP__UNLIKELY(gmp__load32_rlx(m->preemptp) != 0))
			gmp__preempt_slow(); /* carries errno across */
		gmp__leave(g, was);
		return;
	}
	gmp__errno_set(e); /* gmp__mcall carries it to wherever we resume */
	gmp__mcall(m, g, exitsyscall0);
	gmp__leave(g, was);
}
