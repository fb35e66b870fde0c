/* Time slices judged on the CPU time a task's thread receives: sysmon's
 * look at the thread behind a P (its CPU clock, and its state in /proc
 * where the clock cannot decide) before it ends a slice, detaches a P or
 * retakes one from a system call; and its check, after a sleep that came
 * back far too late, of whether the process was stopped or throttled.
 * retake in sysmon.c asks (slice.h says what each call answers); the
 * looks are threadstat_linux.c's; design.md §37.7 says why and what the
 * rule is, §13.3 what it promises.
 *
 * Everything here runs on sysmon, which alone reads and writes
 * p->sysmontick. The M's thread is looked at under sched.mexit_lock, so
 * that it cannot exit (and its thread id be reused) meanwhile.
 */
#include <stdio.h>
#include <string.h>

#include "export_test.h"
#include "internal.h"
#include "maxprocs.h"
#include "preempt.h"
#include "slice.h"

enum {
	/* The first reading of a slice's CPU clock comes at sysmon's first
	 * look after the slice has lasted this long: shorter slices, nearly
	 * all of a server's, are never looked at. */
	LOOK_AFTER_NS = 1000 * 1000,
	/* The grace after a request, in CPU time, is this many times the
	 * wall-clock one (gmp__slice_asked says why). */
	CPU_GRACE_FACTOR = 2,
	/* What a slice is taken to have used before that reading, at most. */
	FIRST_MAX_NS = 2 * LOOK_AFTER_NS,
	/* A thread the kernel keeps waiting is looked at again when it could
	 * have run the rest of its CPU time at the share of a CPU it got
	 * since the last look, but at most this much later, so that one
	 * that falls asleep in the kernel meanwhile loses its P at most
	 * that much later than on the wall clock; and at least this much
	 * later (a quarter of a randomized slice), however little CPU time
	 * it has left to run. Each look is a wakeup of sysmon's (15-20 µs
	 * of its CPU on a VM) on a machine whose CPUs are scarce: a thread
	 * that gets a third of a CPU takes 30 ms for its slice, and looks
	 * every millisecond or two would cost the program more than Go's
	 * sysmon does. */
	RELOOK_NS = 5 * 1000 * 1000,
	RELOOK_MIN_NS = 1000 * 1000,
	/* After the request, at most this much later: the grace is short (2
	 * ms of CPU time), and a hog that has not answered is detached at
	 * most this late for it, as before the looks were spaced out. */
	RELOOK_GRACE_NS = 2 * 1000 * 1000,
	/* A slice within this part of its length of its end, in CPU time,
	 * has ended: a look that comes just short of the end asks then,
	 * rather than taking one more look (a wakeup) a moment later. */
	END_SLACK_DIV = 32,
	/* A system call found running is looked at again after as long as
	 * it has lasted, and at least this much later. */
	SYSLOOK_MIN_NS = 20 * 1000,
	/* sysmon's sleeps come back late by a few milliseconds at worst on a
	 * busy machine (a woken thread waits at most a scheduler slice);
	 * later than this, it was stopped or throttled. */
	STALL_NS = 5 * 1000 * 1000,
};

/* Chosen by gmp_init before sysmon starts (pthread_create orders the
 * writes before sysmon's reads); the counters are sysmon's, read by
 * tests (relaxed atomics). */
static struct {
	bool on;         /* sysmon looks at threads */
	const char *off; /* why not, or NULL */
	char why[192];
	volatile uint64_t nstalls, stalled_ns; /* tests: gmp__slice_stalls */
	int ncpu;          /* sysmon's: the CPUs the process may use */
	int64_t ncpu_next; /* sysmon's: when to read them again */
} sl;

void gmp__slice_init(void)
{
	sl.on = false;
	sl.off = NULL;
	sl.ncpu_next = 0;
	gmp__store64_rlx(&sl.nstalls, 0);
	gmp__store64_rlx(&sl.stalled_ns, 0);
	pid_t tid = gmp__gettid();
	int64_t cpu;
	int err = gmp__thread_cputime(tid, &cpu);
	int st = err ? 0 : gmp__thread_state(tid);
	if (err)
		snprintf(sl.why, sizeof sl.why,
			 "no CPU clock of another thread (clock_gettime: %s)",
			 strerror(-err));
	else if (st < 0)
		snprintf(sl.why, sizeof sl.why,
			 "no thread states in /proc (stat of thread %d: %s)",
			 (int)tid, strerror(-st));
	else if (st != 'R')
		snprintf(sl.why, sizeof sl.why,
			 "/proc says '%c' of a running thread", st);
	else
		sl.on = true;
	if (sl.on)
		return;
	sl.off = sl.why;
	if (gmp__cfg.debug)
		fprintf(stderr,
			"gmp: preemption: time slices are measured on the "
			"wall clock, so a thread the kernel keeps waiting may "
			"lose its P: %s\n",
			sl.off);
}

bool gmp__slice_cpu(void)
{
	return sl.on;
}

#if GMP__TEST_HOOKS
const char *gmp__slice_off_reason(void)
{
	return sl.off;
}

void gmp__slice_stalls(uint64_t *n, uint64_t *ns)
{
	*n = gmp__load64_rlx(&sl.nstalls);
	*ns = gmp__load64_rlx(&sl.stalled_ns);
}
#endif

/* ---- looking at the thread --------------------------------------------------- */

/* The thread holding p now: its M, and its CPU clock. False if there is
 * none, or it cannot be read (the caller then judges as on the wall
 * clock). An M's thread is alive while its preempt flag is set: mexit
 * clears it under mexit_lock before the thread goes. */
static bool read_cpu(gmp__p *p, gmp__m **mp, int64_t *cpu)
{
	bool ok = false;
	gmp__lock(&gmp__sched.mexit_lock);
	gmp__m *m = gmp__loadp_acq(&p->m);
	if (m && m->preemptp)
		ok = gmp__thread_cputime((pid_t)gmp__load32_rlx(
						 (volatile uint32_t *)&m->tid),
					 cpu) == 0;
	gmp__unlock(&gmp__sched.mexit_lock);
	*mp = m;
	return ok;
}

/* Whether the thread holding p is awake: running or waiting for a CPU
 * ('R'), or stopped ('T' by a signal, 't' by a tracer: it runs again when
 * continued, and the stop is nobody's fault). False if it sleeps in the
 * kernel, or /proc cannot say: then it is judged as on the wall clock. */
static bool is_awake(gmp__p *p)
{
	int st = -ESRCH;
	gmp__lock(&gmp__sched.mexit_lock);
	gmp__m *m = gmp__loadp_acq(&p->m);
	if (m && m->preemptp)
		st = gmp__thread_state(
			(pid_t)gmp__load32_rlx((volatile uint32_t *)&m->tid));
	gmp__unlock(&gmp__sched.mexit_lock);
	return st == 'R' || st == 'T' || st == 't';
}

/* Adds what p's thread (m, its CPU clock at cpu) ran since the last
 * reading to the slice's count. Returns whether it ran at least a
 * sixteenth of the time since then (so it was not asleep in the kernel
 * all along). Not half: a thread that shares its CPU with as many others
 * gets about half, often less in a millisecond's window, and then only
 * the state letter spoke for it; under qemu-user the emulator's own
 * waits show a thread that runs guest code as asleep. A thread blocked
 * in a call runs next to nothing. */
static bool account(gmp__p *p, gmp__m *m, int64_t cpu, int64_t now)
{
	__typeof__(p->sysmontick) *pd = &p->sysmontick;
	bool ran = false;
	if (!pd->lookm) {
		/* The first reading: what came before is not known; take
		 * the wall time since the slice is counted from (when sysmon
		 * saw it begin, or earlier: sysmon.c), as if the thread had
		 * run all along. sysmon wakes for this reading, 1 ms after
		 * that, so that is 1-2 ms, plus how much earlier than its
		 * sight the slice is counted from; a first look later than
		 * that means sysmon was kept from a CPU, and most likely the
		 * thread was too: no more than 2 ms is taken (firstmax). */
		int64_t age = now - pd->schedwhen;
		pd->used = age < 0              ? 0
			   : age < pd->firstmax ? age
						: pd->firstmax;
		pd->ran = pd->ranover = 0;
	} else if (pd->lookm != m) {
		/* The slice moved to another thread (a task that left its
		 * system call took its P back): as if it had run since. */
		pd->used += now > pd->cpuwhen ? now - pd->cpuwhen : 0;
		pd->ran = pd->ranover = 0;
	} else {
		int64_t ran_ns = cpu > pd->cpu ? cpu - pd->cpu : 0;
		pd->used += ran_ns;
		ran = 16 * ran_ns >= now - pd->cpuwhen;
		pd->ran = ran_ns;
		pd->ranover = now - pd->cpuwhen;
	}
	pd->lookm = m;
	pd->cpu = cpu;
	pd->cpuwhen = now;
	return ran;
}

/* Whether the runtime's own threads that want a CPU, the Ps running tasks
 * and the threads of detached tasks, outnumber the CPUs the process may
 * use (its affinity mask and cgroup quota, re-read at most once a
 * second). Then a thread behind a P waits for the runtime's own others
 * too: the detached hogs, which §10 lets run on beside the Ps. */
static bool self_crowded(int64_t now)
{
	if (now >= sl.ncpu_next) {
		sl.ncpu = gmp__maxprocs_default();
		sl.ncpu_next = now + 1000 * 1000 * 1000;
	}
	uint32_t busy = gmp__detached_count();
	uint32_t nallp = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < nallp; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (p && gmp__load32_rlx(&p->status) == GMP__P_RUNNING)
			busy++;
	}
	return busy > (uint32_t)sl.ncpu;
}

/* The shortest wait before a look again: a quarter of the slice, at most
 * RELOOK_MIN_NS. */
static int64_t relook_least(const gmp__p *p)
{
	int64_t least = p->sysmontick.slice / 4;
	return least < RELOOK_MIN_NS ? least : RELOOK_MIN_NS;
}

/* Whether the thread holding p sleeps in the kernel, seen at two looks in
 * a row (ran: whether it ran a sixteenth of the time since the last).
 * One sighting is an instant: a thread that waits a moment in the kernel
 * (a page fault's I/O, a lock inside a library's call, or under
 * qemu-user the emulator's own locks, which it takes while the guest
 * runs plain code) may be caught asleep while it computes. So the first
 * sighting asks for a look again soon (false, *soon set); the second,
 * with little run between, says it is blocked: a thread blocked in an
 * unwrapped read loses its P a millisecond later than on one look. */
static bool asleep_twice(gmp__p *p, bool ran, int64_t now, int64_t *soon)
{
	__typeof__(p->sysmontick) *pd = &p->sysmontick;
	bool asleep = !ran && !is_awake(p);
	bool twice = asleep && pd->asleep;
	pd->asleep = asleep;
	*soon = asleep ? now + relook_least(p) : 0;
	return twice;
}

/* When to look again at a thread that has `left` ns of CPU time to run
 * before it is at fault: when it could have run them at the share of a
 * CPU it got between the last two readings (all of one if not known),
 * within RELOOK_MIN_NS and `most`. */
static int64_t relook(const gmp__p *p, int64_t now, int64_t left, int64_t most)
{
	const __typeof__(p->sysmontick) *pd = &p->sysmontick;
	int64_t least = relook_least(p);
	int64_t wait = left;
	/* left is at most a slice plus its grace, tens of ms; ranover a
	 * few seconds at most between two readings: no overflow */
	if (pd->ran > 0 && pd->ranover > pd->ran)
		wait = left * pd->ranover / pd->ran;
	else if (pd->ran <= 0 && pd->ranover > 0)
		wait = most; /* it did not run at all */
	if (wait > most)
		wait = most;
	if (wait < least)
		wait = least;
	return now + wait;
}

/* Whether the slice on p has used its CPU time (within END_SLACK_DIV). */
static bool used_up(const gmp__p *p)
{
	const __typeof__(p->sysmontick) *pd = &p->sysmontick;
	return pd->used >= pd->slice - pd->slice / END_SLACK_DIV;
}

/* ---- sysmon's questions (slice.h) --------------------------------------------- */

bool gmp__slice_begin(gmp__p *p, int64_t since, int64_t now, bool asked,
		      bool settled)
{
	__typeof__(p->sysmontick) *pd = &p->sysmontick;
	/* The reading before, of the slice that was asked to end */
	gmp__m *prevm = asked && !pd->wall ? pd->lookm : NULL;
	int64_t prevcpu = pd->cpu;
	pd->lookm = NULL;
	pd->used = 0;
	pd->graceused = 0;
	pd->asleep = false;
	pd->ran = pd->ranover = 0;
	/* Counted from `since`, the slice may have run since then: the
	 * first reading may take that much more, beyond what the cap
	 * allows for sysmon's own lateness. */
	pd->firstmax = FIRST_MAX_NS + (now > since ? now - since : 0);
	/* Randomized, half the slices are judged on the wall clock: their
	 * requests and detaches come at the random moments the slice and
	 * grace lengths make, racing the task's entries as often as before,
	 * while the other half exercise the looks. */
	pd->wall = !sl.on || (GMP__UNLIKELY(gmp__cfg.randomize) &&
			      gmp__preempt_grace() & 1);
	/* Randomized slices (20-520 µs) are looked at halfway. */
	pd->lookwhen = since + (pd->slice / 2 < LOOK_AFTER_NS ? pd->slice / 2
							      : LOOK_AFTER_NS);
	/* A slice that follows one asked to end, on the same thread, began
	 * after the reading taken at the request, and it is read now rather
	 * than a millisecond later (a wakeup of sysmon's saved per slice of
	 * a program that computes in long slices). What it has used is the
	 * thread's CPU time since the request, but no more than the wall
	 * time it is counted from (as a first reading takes): the time
	 * between the request and the slice's start was the slice before's
	 * grace, not this slice's. */
	/* So is the first reading of a slice on a P that computes in long
	 * slices (the one before had outlasted a look): the wall time it is
	 * counted from, as account() takes a first reading, rather than at
	 * a look of its own 1 ms in. A P whose slices churn is read then,
	 * as most of them end before. */
	if (pd->wall || !(prevm || settled))
		return false;
	gmp__m *m;
	int64_t cpu;
	if (!read_cpu(p, &m, &cpu) || (prevm && m != prevm))
		return false;
	int64_t age = now > since ? now - since : 0;
	int64_t ran = cpu > prevcpu ? cpu - prevcpu : 0;
	pd->used = prevm && ran < age ? ran : age;
	pd->lookm = m;
	pd->cpu = cpu;
	pd->cpuwhen = now;
	/* It cannot have run the rest sooner (gmp__slice_ended). */
	pd->lookwhen = now + (pd->slice - pd->used);
	return true;
}

bool gmp__slice_waits(const gmp__p *p)
{
	const __typeof__(p->sysmontick) *pd = &p->sysmontick;
	return !pd->wall && pd->ranover > 0 && 4 * pd->ran < 3 * pd->ranover;
}

int64_t gmp__slice_next(const gmp__p *p)
{
	const __typeof__(p->sysmontick) *pd = &p->sysmontick;
	/* The first reading, 1 ms in, is a look of its own: sysmon may
	 * sleep longer than that while every slice it watches is known
	 * (sysmon.c). After it, lookwhen is never before the wall-clock
	 * end: the slice cannot have run its CPU time sooner. */
	return pd->wall ? pd->schedwhen + pd->slice : pd->lookwhen;
}

bool gmp__slice_ended(gmp__p *p, int64_t now)
{
	__typeof__(p->sysmontick) *pd = &p->sysmontick;
	bool wall = pd->schedwhen + pd->slice <= now;
	if (pd->wall)
		return wall;
	if (now < pd->lookwhen)
		return false;
	gmp__m *m;
	int64_t cpu;
	if (!read_cpu(p, &m, &cpu))
		return wall;
	bool ran = account(p, m, cpu, now);
	if (used_up(p))
		return true; /* its slice of CPU time */
	int64_t left = pd->slice - pd->used;
	if (!wall) {
		/* It cannot run the rest sooner than this. */
		pd->lookwhen = now + left;
		return false;
	}
	/* The wall-clock slice is over, the CPU slice is not: the kernel
	 * kept the thread waiting, or it sleeps in a call libgmp does not
	 * know of. One that just ran is not asleep. While the runtime's own
	 * threads outnumber the CPUs, the wait is (in part) its own doing,
	 * and the wall clock decides, as it always did. */
	int64_t soon;
	if (asleep_twice(p, ran, now, &soon) || self_crowded(now))
		return true;
	pd->lookwhen = soon ? soon : relook(p, now, left, RELOOK_NS);
	return false;
}

void gmp__slice_asked(gmp__p *p, int64_t now, int64_t grace)
{
	__typeof__(p->sysmontick) *pd = &p->sysmontick;
	if (pd->wall)
		return;
	/* Read after the request was made: the grace period counts from a
	 * figure no lower than the thread's CPU time at the request, so a
	 * task that answers in time is never taken for one that did not.
	 * And it is twice the wall-clock one: a thread's CPU clock also
	 * runs while the kernel serves interrupts on its CPU, and on a busy
	 * host a stretch of 30 µs of work was seen to take up to 1.3 ms of
	 * its thread's CPU time, once in 150,000 (plain threads, no
	 * runtime). */
	gmp__m *m;
	int64_t cpu;
	if (read_cpu(p, &m, &cpu))
		account(p, m, cpu, now);
	pd->graceused = pd->used + CPU_GRACE_FACTOR * grace;
}

bool gmp__slice_detachable(gmp__p *p, int64_t now)
{
	__typeof__(p->sysmontick) *pd = &p->sysmontick;
	if (pd->wall)
		return true;
	gmp__m *m;
	int64_t cpu;
	if (!read_cpu(p, &m, &cpu))
		return true;
	bool ran = account(p, m, cpu, now);
	if (pd->used >= pd->graceused)
		return true; /* its grace in CPU time, and no switch point */
	int64_t soon;
	if (asleep_twice(p, ran, now, &soon))
		return true; /* asleep in the kernel */
	pd->detachwhen = soon ? soon
			      : relook(p, now, pd->graceused - pd->used,
				       RELOOK_GRACE_NS);
	return false;
}

bool gmp__slice_syscall_blocks(gmp__p *p, int64_t now)
{
	__typeof__(p->sysmontick) *pd = &p->sysmontick;
	if (!sl.on)
		return true;
	if (now < pd->syslook)
		return false;
	if (!is_awake(p))
		return true;
	int64_t lasted = now - pd->syscallwhen;
	pd->syslook = now + (lasted > SYSLOOK_MIN_NS ? lasted : SYSLOOK_MIN_NS);
	return false;
}

void gmp__slice_stalled(int64_t slept, int64_t late, int64_t now)
{
	if (late < STALL_NS)
		return;
	/* Was the process stopped (or throttled), or was sysmon alone kept
	 * from a CPU? A thread behind a P that was read before the sleep and
	 * ran a good part of the stall since says the latter: the wall time
	 * was real, and judging goes on as it is. Otherwise nothing of the
	 * runtime ran meanwhile, and nobody is judged for that time. */
	uint32_t nallp = gmp__load32_acq(&gmp__sched.nallp);
	if (sl.on) {
		for (uint32_t i = 0; i < nallp; i++) {
			gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
			if (!p || gmp__load32_rlx(&p->status) != GMP__P_RUNNING)
				continue;
			__typeof__(p->sysmontick) *pd = &p->sysmontick;
			gmp__m *m;
			int64_t cpu;
			if (!pd->lookm || pd->cpuwhen > now - slept - late ||
			    !read_cpu(p, &m, &cpu) || m != pd->lookm)
				continue;
			/* At most this much of it ran before the sleep. */
			int64_t before = now - slept - late - pd->cpuwhen;
			if (cpu - pd->cpu - before >= late / 4)
				return;
		}
	}
	if (GMP__TEST_HOOKS) {
		gmp__store64_rlx(&sl.nstalls, gmp__load64_rlx(&sl.nstalls) + 1);
		gmp__store64_rlx(&sl.stalled_ns,
				 gmp__load64_rlx(&sl.stalled_ns) +
					 (uint64_t)late);
	}
	for (uint32_t i = 0; i < nallp; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!p)
			continue;
		__typeof__(p->sysmontick) *pd = &p->sysmontick;
		/* The wall-clock marks (0 means "not yet" and stays so). The
		 * CPU time read, and when to read it next, need no change. */
		if (pd->schedwhen)
			pd->schedwhen += late;
		if (pd->syscallwhen)
			pd->syscallwhen += late;
		if (pd->detachwhen && pd->wall)
			pd->detachwhen += late;
	}
}
