/* sysmon: the system monitor thread (Go's sysmon; design.md §26.2).
 *
 * It holds no P and runs no tasks. In rounds of 20 µs, backing off to
 * 10 ms while it finds nothing to do (but while a P runs, 1 ms apart as
 * long as its looks find something new, and while the Ps compute in
 * slices it has seen, until one of them wants a look), it looks at every
 * P: a task whose slice has lasted 10 ms is asked to yield (its thread's
 * preempt flag and the P's), and 1 ms later, if someone could use its P,
 * detached from it
 * (preempt.c, design.md §37); where it can look at the thread, both are
 * CPU time, the millisecond two, and a thread the kernel keeps waiting is
 * not at fault (slice.c, design.md §37.7); a P whose task sits in a
 * syscall is retaken by Go's rules (retake), unless the kernel runs the
 * call or keeps it waiting for a CPU; a sleep of its own that
 * comes back far too late (the process stopped or throttled) counts
 * against nobody; it polls the network if nobody has for 10 ms,
 * starts an idle P for a timer overdue on a busy one, makes the poller's
 * deferred checks (pollfd_recheck.c), runs the free lists' sweep (g.c),
 * and prints schedtrace. When every P is idle it sleeps deeply on
 * sched.sysmonnote, and its long sleeps while the Ps compute are taken
 * there too; sysmon.h holds the calls that end those sleeps and the
 * check gmp_enter_syscall makes before it calls one. design.md §26.2 says
 * how long each sleep lasts and who ends it.
 */
#include <stdio.h>
#include <string.h>

#include "dump.h"
#include "export_test.h"
#include "g.h"
#include "internal.h"
#include "maxprocs.h"
#include "netpoll.h"
#include "pollfd.h"
#include "preempt.h"
#include "runq.h"
#include "scheduler.h"
#include "slice.h"
#include "syscall.h"
#include "sysmon.h"
#include "thread.h"
#include "trace.h"

enum { FORCE_PREEMPT_NS = 10 * 1000 * 1000 };

/* The longest slice of a deep sleep while tasks are live (sysmonwait
 * SHORT, sysmon.h): a task that starts running meanwhile is watched soon
 * enough without waking sysmon for it. */
enum { DEEP_SHORT_NS = 10 * 1000 * 1000 };

/* While any P runs a task, sysmon looks at least this often (µs) as long
 * as its looks find Ps starting slices or in system calls, so that a
 * slice is seen to begin at most this late, and so ends, and is detached,
 * at most this much later than its 10 ms and 1 ms: a task that never
 * yields loses its P at most 12 ms into its slice. */
enum { BUSY_DELAY_US = 1000, BUSY_DELAY_RANDOMIZED_US = 50 };

/* But while every P that runs is in a slice sysmon has seen already (the
 * program computes in long slices), a look every millisecond finds
 * nothing new: sysmon sleeps until a slice it watches wants a look, up to
 * this long (µs), Go's longest round. A wakeup costs it 15-20 µs of CPU
 * on a VM, which on a machine whose CPUs are scarce the program's threads
 * pay for. The long sleep is on sched.sysmonnote, so that what ends the
 * deep sleep ends it too: a system call entered with work waiting, work
 * that finds no P (sysmon.h). A slice that begins unseen meanwhile is
 * counted from one BUSY_DELAY_US after the look before (retake): as if
 * sysmon had looked every millisecond, it is never counted later than
 * that, though it may be counted from before it began. */
enum { BUSY_LONG_US = 10 * 1000 };

/* A look that a slice whose thread waits for a CPU wants (slice.h) is
 * taken at the next multiple of this on the monotonic clock: the slices of
 * several Ps want looks at unrelated moments (when each could have run its
 * CPU time), and one wakeup then serves all those due within the same
 * 4 ms. Such a look comes at most this much later in wall time, which is
 * less in the CPU time the thread got meanwhile; a thread that has a CPU
 * to itself (a hog on an idle machine) is looked at when it wants.
 * Measured beside two spinning processes on two CPUs: 1,281 wakeups a 4 s
 * run, 27 ms of sysmon's CPU (was 2,009 and 39 ms). */
enum { BUSY_GRID_NS = 4 * 1000 * 1000 };

static struct {
	pthread_t thread;
	bool running;
	volatile uint32_t stop; /* atomic */
	gmp__note stopnote;     /* sysmon's own short sleeps */
	/* tests (gmp__sysmon_long_sleeps): sysmon's, read racily */
	volatile uint64_t nlong, nunseen, nlongwoken;
} sm;

#if GMP__TEST_HOOKS
void gmp__sysmon_long_sleeps(uint64_t *sleeps, uint64_t *unseen,
			     uint64_t *woken)
{
	*sleeps = gmp__load64_rlx(&sm.nlong);
	*unseen = gmp__load64_rlx(&sm.nunseen);
	*woken = gmp__load64_rlx(&sm.nlongwoken);
}
#endif

/* Called with sched.lock held. */
void gmp__sysmon_wake_locked(void)
{
	if (gmp__load32_rlx(&gmp__sched.sysmonwait)) {
		gmp__store32_rlx(&gmp__sched.sysmonwait, 0);
		gmp__notewakeup(&gmp__sched.sysmonnote);
	}
}

void gmp__sysmon_wake_work_locked(void)
{
	if (gmp__sysmon_work_wakes(gmp__load32_rlx(&gmp__sched.sysmonwait)))
		gmp__sysmon_wake_locked();
}

void gmp__sysmon_wake(void)
{
	if (GMP__UNLIKELY(gmp__load32_rlx(&gmp__sched.sysmonwait))) {
		gmp__lock(&gmp__sched.lock);
		gmp__sysmon_wake_locked();
		gmp__unlock(&gmp__sched.lock);
	}
}

void gmp__sysmon_wake_long_locked(void)
{
	if (gmp__load32_rlx(&gmp__sched.sysmonwait) == GMP__SYSMON_WAIT_LONG) {
		gmp__store32_rlx(&gmp__sched.sysmonwait, 0);
		gmp__notewakeup(&gmp__sched.sysmonnote);
	}
}

/* Asks the task running on p to yield at its next switch point. */
static void preemptone(gmp__p *p)
{
	gmp__lock(&gmp__sched.mexit_lock); /* keeps the M's thread alive */
	gmp__m *m = gmp__loadp_acq(&p->m);
	if (m && m->preemptp && gmp__loadp_acq(&m->curg))
		gmp__store32_rlx(m->preemptp, 1);
	gmp__unlock(&gmp__sched.mexit_lock);
	gmp__storeb_rlx(&p->preempt, true);
}

/* Whether someone could use p if its task gave it up: work queued here or
 * globally, or nobody else to look for new work (every P held, nobody
 * spinning). If another P idles, its M can find whatever turns up, and
 * sysmon starts one for a timer overdue on a busy P. */
static bool p_wanted(gmp__p *p)
{
	return !gmp__runq_empty(p) ||
	       gmp__load64_rlx(&gmp__sched.runqsize) != 0 ||
	       gmp__load32_rlx(&gmp__sched.npidle) +
			       gmp__load32_rlx(&gmp__sched.nmspinning) ==
		       0;
}

/* Retakes Ps blocked in syscalls and preempts long-running tasks: asks
 * them to yield, then detaches their Ps. `prev` is when the look before
 * was, if sysmon slept long since (0: it did not; a slice first seen
 * then is counted from its sight, and a P is not taken as settled, see
 * slice.h). Returns how many Ps it took; lowers *next to the
 * earliest time a slice it watches wants another look (a reading, a
 * request or a detach due), sets *busy if any P runs, and *fresh if a P
 * runs a slice this look is the first to see (but for one that follows
 * a slice asked to end, read at once: slice.h), a task in a system
 * call, or retires: then the next look must come soon (BUSY_DELAY_US).
 *
 * A P beyond gomaxprocs that is still held (retiring: the count shrank
 * while its task ran or sat in a syscall) is not left to its holder's
 * good time: its task is asked to yield at once, and its syscall loses
 * the P at first sight, so that the P retires (its queue and timers go to
 * live Ps) without waiting for the task. */
static uint32_t retake(int64_t now, int64_t prev, int64_t *next, bool *busy,
		       bool *fresh)
{
	uint32_t n = 0;
	uint32_t procs = gmp__load32_acq(&gmp__sched.gomaxprocs);
	uint32_t nallp = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < nallp; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!p || gmp__load32_rlx(&p->status) != GMP__P_RUNNING)
			continue;
		__typeof__(p->sysmontick) *pd = &p->sysmontick;
		bool sysretake = false, retiring = i >= procs;
		*busy = true;

		/* Retiring: yield now, and lose the P now. Else the same
		 * schedtick for 10 ms: one slice (a task, plus any runnext
		 * heirs) has run too long. */
		uint32_t t = gmp__load32_rlx(&p->schedtick);
		bool over = retiring;
		if (retiring)
			*fresh = true;
		if (pd->schedtick != t || pd->schedwhen == 0) {
			/* a new slice (or a P never looked at: its zeroed
			 * record must not read as a slice begun long ago).
			 * Seen after a long sleep, it is counted from one
			 * short period after the look before (BUSY_LONG_US). */
			int64_t since = now;
			if (prev && now - prev > BUSY_DELAY_US * 1000) {
				since = prev + BUSY_DELAY_US * 1000;
				if (GMP__TEST_HOOKS)
					gmp__store64_rlx(&sm.nunseen,
							 sm.nunseen + 1);
			}
			bool asked = pd->detachwhen != 0 && pd->schedwhen != 0;
			/* the slice before had lasted a period by the look
			 * before: the P computes in long slices */
			bool settled = pd->schedwhen != 0 && prev &&
				       prev - pd->schedwhen >=
					       BUSY_DELAY_US * 1000;
			pd->schedtick = t;
			pd->schedwhen = since;
			pd->slice = gmp__preempt_slice();
			pd->detachwhen = 0;
			/* New, unless it follows a slice that was asked to end
			 * (its task answered) and was read at once: that is
			 * no churn, and it needs no look soon. */
			if (!gmp__slice_begin(p, since, now, asked, settled))
				*fresh = true;
		} else if (pd->detachwhen != 0 || gmp__slice_ended(p, now)) {
			/* asked already, or its slice (of CPU time, where
			 * sysmon can tell: slice.h) has ended now */
			over = true;
		}
		if (over) {
			/* Randomized, the request is sometimes not made, so
			 * that detaches (not answers) end many slices. */
			if (GMP__LIKELY(!gmp__cfg.randomize) ||
			    gmp__preempt_grace() & 1)
				preemptone(p);
			/* A task in a syscall cannot answer: take its P. The
			 * task honours the request when it leaves the call
			 * (gmp_exit_syscall), which ends the slice. */
			sysretake = true;
			/* A running task that has not answered once the
			 * grace period has passed loses its P, unless the
			 * kernel kept it from answering (slice.h). */
			if (pd->detachwhen == 0) {
				int64_t grace = gmp__preempt_grace();
				pd->detachwhen = now + grace;
				gmp__slice_asked(p, now, grace);
			}
			if (pd->detachwhen <= now &&
			    (retiring || p_wanted(p)) &&
			    (retiring || gmp__slice_detachable(p, now)) &&
			    gmp__preempt_detach(p, t)) {
				pd->schedwhen = 0; /* a new slice for the P */
				n++;
				continue;
			}
		}
		int64_t want = over ? pd->detachwhen : gmp__slice_next(p);
		if (GMP__LIKELY(!gmp__cfg.randomize) && gmp__slice_waits(p))
			want = (want + BUSY_GRID_NS - 1) / BUSY_GRID_NS *
			       BUSY_GRID_NS;
		if (want > now && (*next == 0 || want < *next))
			*next = want;

		gmp_g *g;
		gmp__m *m;
		if (!gmp__block_on_exit_syscall(p, &g, &m))
			continue;
		*fresh = true;
		/* First sight of this syscall: note it and wait one period
		 * (at least 20 µs). */
		uint32_t st = gmp__load32_rlx(&p->syscalltick);
		if (!sysretake &&
		    (pd->syscalltick != st || pd->syscallwhen == 0)) {
			pd->syscalltick = st;
			pd->syscallwhen = now;
			pd->syslook = 0;
			gmp__syscall_resume(g);
			continue;
		}
		/* Nothing else to run and others could run it anyway: leave
		 * the P, but not for more than 10 ms (it would keep sysmon
		 * from its deep sleep). */
		if (!retiring && gmp__runq_empty(p) &&
		    gmp__load32_rlx(&gmp__sched.nmspinning) +
				    gmp__load32_rlx(&gmp__sched.npidle) >
			    0 &&
		    pd->syscallwhen + FORCE_PREEMPT_NS > now) {
			gmp__syscall_resume(g);
			continue;
		}
		/* A call the kernel runs, or keeps waiting for a CPU, is not
		 * blocked (a send preempted inside the kernel): leave the P
		 * to it (slice.h). The look reads /proc, so the call is let
		 * go meanwhile, and must be the same call after. */
		if (!sysretake && !retiring && gmp__slice_cpu()) {
			gmp__syscall_resume(g);
			if (!gmp__slice_syscall_blocks(p, now) ||
			    !gmp__block_on_exit_syscall(p, &g, &m))
				continue;
			if (gmp__load32_rlx(&p->syscalltick) != st) {
				gmp__syscall_resume(g);
				continue;
			}
		}
		gmp__syscall_takep(m, p);
		gmp__syscall_resume(g);
		n++;
		gmp__add64_rlx(&gmp__sched.nretakes, 1);
		gmp__handoffp(p);
	}
	return n;
}

/* Whether a P beyond gomaxprocs is still held (see retake): then not
 * every P is idle, whatever npidle says. */
static bool retiring_held(void)
{
	uint32_t procs = gmp__load32_acq(&gmp__sched.gomaxprocs);
	uint32_t nallp = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = procs; i < nallp; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (p && gmp__load32_rlx(&p->status) == GMP__P_RUNNING)
			return true;
	}
	return false;
}

static void schedtrace(int64_t now, int64_t start)
{
	char buf[4096];
	int len = 0;
	uint32_t procs = gmp__load32_acq(&gmp__sched.gomaxprocs);
	len += snprintf(
		buf + len, sizeof buf - (size_t)len,
		"SCHED %lldms: gomaxprocs=%u idleprocs=%u threads=%u "
		"spinningthreads=%u needspinning=%u idlethreads=%u "
		"detachedthreads=%u runqueue=%llu [",
		(long long)((now - start) / 1000000), procs,
		gmp__load32_rlx(&gmp__sched.npidle),
		gmp__load32_rlx(&gmp__sched.nthreads),
		gmp__load32_rlx(&gmp__sched.nmspinning),
		gmp__load32_rlx(&gmp__sched.needspinning),
		gmp__load32_rlx(&gmp__sched.nmidle), gmp__detached_count(),
		(unsigned long long)gmp__load64_rlx(&gmp__sched.runqsize));
	for (uint32_t i = 0; i < procs && len < (int)sizeof buf - 16; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%u",
				i ? " " : "", p ? gmp__runq_len(p) : 0);
	}
	if (len < (int)sizeof buf - 2)
		len += snprintf(buf + len, sizeof buf - (size_t)len, "]");
	if (len < (int)sizeof buf - 2)
		len += gmp__metrics_schedtrace(buf + len,
					       sizeof buf - 1 - (size_t)len);
	if (len > (int)sizeof buf - 1)
		len = (int)sizeof buf - 1;
	buf[len++] = '\n';
	fwrite(buf, 1, (size_t)len, stderr);
	if (gmp__cfg.scheddetail)
		gmp__sched_detail(stderr);
}

/* sysmon's deep sleep, with sched.lock held and every P idle: until the
 * next timer, the poller's next deferred check of a registration
 * (pollfd_recheck.c), the free lists' next sweep (10 ms apart while it
 * has work) or a second, whichever comes first, unless woken. While tasks
 * are live it sleeps (still at most that second in all) in slices of at
 * most DEEP_SHORT_NS (SHORT, which a P leaving the idle list does not
 * end): after each it looks whether a P has gone to work meanwhile, and
 * if none has it sleeps on, still counted as deeply asleep. Returns
 * whether it was woken; sched.lock is held again. */
static bool deep_sleep(int64_t now, int64_t sweepnext)
{
	bool woken = false;
	const int64_t entered = now;
	for (;;) {
		int64_t sleep = 1000000000;
		int64_t next = gmp__timers_earliest();
		if (next && next - now < sleep)
			sleep = next > now ? next - now : 0;
		next = gmp__pd_watch_next();
		if (next && next - now < sleep)
			sleep = next > now ? next - now : 0;
		if (sweepnext && sweepnext - now < sleep)
			sleep = sweepnext > now ? sweepnext - now : 0;
		uint32_t kind = GMP__SYSMON_WAIT_LONG;
		if (gmp__tasks_live() > 0 && sleep > DEEP_SHORT_NS) {
			sleep = DEEP_SHORT_NS;
			kind = GMP__SYSMON_WAIT_SHORT;
		}
		gmp__store64_rlx(&gmp__sched.sysmonuntil,
				 (uint64_t)(now + sleep));
		gmp__store32_rlx(&gmp__sched.sysmonwait, kind);
		gmp__unlock(&gmp__sched.lock);
		woken = gmp__notetsleep(&gmp__sched.sysmonnote, sleep);
		gmp__lock(&gmp__sched.lock);
		/* A slice of a longer sleep ended, nobody woke us (a waker
		 * clears sysmonwait under this lock) and still every P is
		 * idle: sleep on. */
		if (woken || kind != GMP__SYSMON_WAIT_SHORT ||
		    gmp__load32_rlx(&gmp__sched.sysmonwait) != kind ||
		    gmp__load32_rlx(&gmp__sched.npidle) !=
			    gmp__load32_rlx(&gmp__sched.gomaxprocs) ||
		    retiring_held() || gmp__load32_rlx(&sm.stop))
			break;
		now = gmp__nanotime();
		/* At most a second in all, as an unsliced deep sleep: the
		 * round after it runs what has no deadline of its own here
		 * (the free lists' sweep when it had nothing left, dead Gs
		 * having come since, and the CPU-count check). */
		if (now - entered >= 1000000000)
			break;
	}
	gmp__store32_rlx(&gmp__sched.sysmonwait, 0);
	gmp__noteclear(&gmp__sched.sysmonnote);
	return woken;
}

/* The earliest moment a round has work of its own that a short round
 * would have done in time, for a long sleep (BUSY_LONG_US): a timer due
 * on a busy P while another P idles, the network poll that nobody has
 * made for 10 ms, the free lists' next sweep. 0: none. */
static int64_t busy_due(int64_t sweepnext)
{
	int64_t due = sweepnext;
	if (gmp__load32_rlx(&gmp__sched.npidle)) {
		int64_t t = gmp__timers_earliest();
		if (t && (!due || t < due))
			due = t;
	}
	uint64_t lastpoll = gmp__load64_acq(&gmp__sched.lastpoll);
	if (gmp__netpoll_inited() && lastpoll != 0) {
		int64_t t = (int64_t)lastpoll + 10 * 1000000;
		if (!due || t < due)
			due = t;
	}
	return due;
}

/* Whether a P has started a slice, or its task sits in a system call,
 * since retake's look: then the long sleep is not taken. */
static bool moved_since_look(void)
{
	uint32_t nallp = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < nallp; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!p || gmp__load32_rlx(&p->status) != GMP__P_RUNNING)
			continue;
		if (gmp__load32_rlx(&p->schedtick) != p->sysmontick.schedtick)
			return true;
		gmp_g *g;
		gmp__m *m;
		if (gmp__block_on_exit_syscall(p, &g, &m)) {
			gmp__syscall_resume(g);
			return true;
		}
	}
	return false;
}

/* sysmon's long sleep while Ps compute (BUSY_LONG_US), of ns from now:
 * on sched.sysmonnote, with sysmonwait BUSY and sysmonuntil its end, so
 * that a system call entered with work waiting (gmp__sysmon_wanted) ends
 * it, as it ends a deep sleep; a P leaving the idle list does not. Nor
 * does work that finds no idle P (gmp__wakep), until a task has entered
 * a system call since the sleep began (BUSY_CALL): until then every P
 * runs a task that will get to the work, at the latest when its slice
 * ends, which this sleep does not outlast; and a program whose readies
 * outnumber its idle Ps (a chain of tasks handing work along on one P)
 * would otherwise end every such sleep at once, a futex wake on its own
 * thread and a wakeup of sysmon each time. Such a
 * call reads sysmonwait before its task's status says it is in the
 * call, so sysmon, once sysmonwait is set (an exchange: a full barrier
 * before the loads that follow), looks at every P again and stays awake
 * if one has moved meanwhile; a call whose task read sysmonwait in the
 * instant before it was set and entered after that second look waits
 * for the end of the sleep, as it would have waited for the next round.
 * Returns with sysmonwait clear. */
static void busy_sleep(int64_t now, int64_t ns)
{
	gmp__lock(&gmp__sched.lock);
	gmp__store64_rlx(&gmp__sched.sysmonuntil, (uint64_t)(now + ns));
	/* full: a #StoreLoad barrier between this store and
	 * moved_since_look's loads of the Ps' schedticks and their tasks'
	 * statuses, whose partners are the stores of a task entering its
	 * call (its status CAS) or of an M starting a slice */
	gmp__xchg32_full(&gmp__sched.sysmonwait, GMP__SYSMON_WAIT_BUSY);
	gmp__unlock(&gmp__sched.lock);
	/* gmp__sysmon_stop sets sm.stop before it takes sched.lock to wake
	 * this sleep: either it saw sysmonwait set, or this sees stop. */
	if (!gmp__load32_acq(&sm.stop) && !moved_since_look()) {
		bool woken = gmp__notetsleep(&gmp__sched.sysmonnote, ns);
		if (GMP__TEST_HOOKS) {
			gmp__store64_rlx(&sm.nlong, sm.nlong + 1);
			if (woken)
				gmp__store64_rlx(&sm.nlongwoken,
						 sm.nlongwoken + 1);
		}
	}
	gmp__lock(&gmp__sched.lock);
	gmp__store32_rlx(&gmp__sched.sysmonwait, 0);
	gmp__noteclear(&gmp__sched.sysmonnote);
	gmp__unlock(&gmp__sched.lock);
}

static void *sysmon_main(void *arg)
{
	(void)arg;
	gmp__sigmask_restore();
	/* sysmon's 20 µs sleeps must last 20 µs: the kernel's default 50 µs
	 * timer slack would stretch them fourfold, and with them how long a
	 * blocked syscall holds its P. */
	gmp__os_timerslack_min();
	int64_t start = gmp__nanotime(), lasttrace = 0;
	int64_t trace_ns = (int64_t)gmp__cfg.schedtrace_ms * 1000000;
	uint32_t idle = 0;
	int64_t delay = 0; /* µs */
	/* How much longer than asked a short sleep lasts (a moving
	 * average, ns): the wakeup's own latency, 5-10 µs on a VM even
	 * with minimal slack. Asking that much less keeps the 20 µs period
	 * at 20 µs rather than 27, and a blocked syscall's P is retaken on
	 * the second look, so the period is most of a handoff's latency. */
	int64_t overshoot = 0;
	/* When the free lists' sweep wants its next round (g.c); 0: it has
	 * nothing to do. */
	int64_t sweepnext = 0;
	/* What the last retake saw, and when: whether any P ran, whether it
	 * saw something new (retake's *fresh), and when a slice it watches
	 * wants another look (0: none). */
	int64_t look = 0, lastlook = 0;
	bool busy = false, fresh = false;
	/* The last look found every P idle, and how many Ps had left the
	 * idle list by then: the deep sleep waits for a second such look
	 * with none gone to work in between. */
	bool idle_seen = false;
	uint32_t idle_gets = 0;

	while (!gmp__load32_acq(&sm.stop)) {
		if (idle == 0)
			delay = 20; /* start with 20 µs sleeps */
		else if (idle > 50)
			delay *= 2; /* double after 1 ms of nothing */
		if (delay > 10 * 1000)
			delay = 10 * 1000; /* up to 10 ms */
		/* Every P was idle at the last look: the next one, which may
		 * take the deep sleep, comes soon, as while a P runs. */
		if (idle_seen && delay > BUSY_DELAY_US)
			delay = BUSY_DELAY_US;
		int64_t before = gmp__nanotime();
		/* The sleep: the backoff's delay, but while a P runs (and
		 * detaching is on) no later than a slice it watches wants a
		 * look (a reading, a request, a detach), and no later than
		 * BUSY_DELAY_US after a look that found something new; after
		 * one that found every running P in a slice it had seen, up
		 * to BUSY_LONG_US. Without detaching (GMP_PREEMPT=off, or no
		 * barrier) a request may come late, as it always could, and
		 * sysmon backs off as before. */
		int64_t sleep = delay; /* µs */
		bool longsleep = false;
		if (busy && gmp__preempt_enabled()) {
			int64_t cap = BUSY_DELAY_US;
			if (GMP__UNLIKELY(gmp__cfg.randomize))
				cap = BUSY_DELAY_RANDOMIZED_US;
			else if (!fresh && look && !gmp__cfg.stall_ms)
				cap = BUSY_LONG_US;
			if (look && (look - before) / 1000 < cap)
				cap = (look - before) / 1000 + 1;
			if (sleep > cap)
				sleep = cap < 20 ? 20 : cap;
			longsleep = sleep > BUSY_DELAY_US;
		}
		int64_t ask = sleep * 1000;
		if (sleep <= 160)
			ask -= overshoot;
		/* A deferred check of the poller's registrations is due
		 * sooner (pollfd_recheck.c; at most one a tick, about 1 ms);
		 * in a long sleep, also what a round does when due, which a
		 * 1 ms round would have done in time (busy_due). */
		int64_t due = gmp__pd_watch_next();
		if (longsleep) {
			int64_t d = busy_due(sweepnext);
			if (d && (!due || d < due))
				due = d;
		}
		if (due && due - before < ask)
			ask = due - before > 20000 ? due - before : 20000;
		if (longsleep) {
			busy_sleep(before, ask);
		} else if (gmp__notetsleep(&sm.stopnote, ask)) {
			break;
		}
		int64_t now = gmp__nanotime();
		/* Far later than asked: stopped or throttled (slice.h)? A
		 * long sleep woken early is not late. */
		gmp__slice_stalled(ask, now - before - ask, now);
		if (sleep <= 160) {
			/* Clamped to 10 µs, half the shortest period: a
			 * stall (sysmon descheduled) must not make every
			 * later sleep short. */
			int64_t over = now - before - ask;
			if (over < 0)
				over = 0;
			if (over > 10 * 1000)
				over = 10 * 1000;
			overshoot = (3 * overshoot + over) / 4;
		}

		/* Deeply only on the second look in a row to find every P
		 * idle, with no P gone to work in between: a server whose
		 * tasks park and wake thousands of times a second has all
		 * its Ps idle at many a look, and a deep sleep each time
		 * would be a wake (a futex call and a context switch) soon
		 * after, and a new run of 20 µs rounds. */
		bool all_idle =
			trace_ns <= 0 &&
			gmp__load32_rlx(&gmp__sched.npidle) ==
				gmp__load32_rlx(&gmp__sched.gomaxprocs) &&
			!retiring_held() && !gmp__stall_watching();
		uint32_t gets = gmp__load32_rlx(&gmp__sched.pidlegets);
		bool deep = all_idle && idle_seen && gets == idle_gets;
		idle_seen = all_idle && !deep;
		idle_gets = gets;
		if (deep) {
			gmp__lock(&gmp__sched.lock);
			if (gmp__load32_rlx(&gmp__sched.npidle) ==
				    gmp__load32_rlx(&gmp__sched.gomaxprocs) &&
			    !retiring_held() && !gmp__load32_rlx(&sm.stop)) {
				bool woken = deep_sleep(now, sweepnext);
				if (woken) {
					idle = 0;
					delay = 20;
				}
			}
			gmp__unlock(&gmp__sched.lock);
			now = gmp__nanotime();
		}

		/* Every P busy for 10 ms and nobody polled: I/O waiters
		 * would starve, so poll here. */
		uint64_t lastpoll = gmp__load64_acq(&gmp__sched.lastpoll);
		if (gmp__netpoll_inited() && lastpoll != 0 &&
		    (int64_t)lastpoll + 10 * 1000000 < now) {
			gmp__cas64_full(&gmp__sched.lastpoll, lastpoll,
					(uint64_t)now);
			gmp__gqueue q = { 0 };
			gmp__netpoll(0, &q);
			gmp__injectglist(&q);
		}
		gmp__pd_watch_run(now);
		/* A timer is due and nobody ran it (its P is busy): start an
		 * M on an idle P; its steal pass runs other Ps' timers. */
		int64_t next = gmp__timers_earliest();
		if (next && next < now && gmp__load32_rlx(&gmp__sched.npidle))
			gmp__startm(NULL, false, false);

		look = 0;
		busy = false;
		fresh = false;
		if (retake(now, longsleep ? lastlook : 0, &look, &busy,
			   &fresh) != 0)
			idle = 0;
		else
			idle++;
		lastlook = now;
		if (gmp__cfg.stall_ms)
			gmp__stall_check(now);

		gmp__maxprocs_update(now); /* about once a second */
		sweepnext = gmp__gfree_sweep(now);

		if (trace_ns > 0 && lasttrace + trace_ns <= now) {
			lasttrace = now;
			schedtrace(now, start);
		}
	}
	/* The sweep holds no G between rounds: nothing to give back. */
	return NULL;
}

int gmp__sysmon_start(void)
{
	memset(&sm, 0, sizeof sm);
	/* EAGAIN is retried for about a second, as for every thread
	 * (design.md §5.2); a lasting shortage fails gmp_init with -EAGAIN
	 * rather than aborting, since gmp_init has a caller to tell. */
	int err = gmp__thread_create_retry(&sm.thread, 256 * 1024, sysmon_main,
					   NULL);
	if (err)
		return err;
	sm.running = true;
	gmp__lock(&gmp__sched.lock);
	gmp__sched.nmsys++;
	gmp__unlock(&gmp__sched.lock);
	gmp__add32_rlx(&gmp__sched.nthreads, 1);
	return 0;
}

void gmp__sysmon_stop(void)
{
	if (!sm.running)
		return;
	gmp__store32_rel(&sm.stop, 1);
	gmp__notewakeup(&sm.stopnote);
	gmp__lock(&gmp__sched.lock);
	gmp__sysmon_wake_locked();
	gmp__unlock(&gmp__sched.lock);
	pthread_join(sm.thread, NULL);
	sm.running = false;
	gmp__add32_rlx(&gmp__sched.nthreads, -1);
	gmp__template_stop();
}
