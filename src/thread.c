/* Threads: the life of an M (allocm and the thread cap's checkmcount, newm
 * and newm1, mstart and mstart1, gmp__mexit), thread creation with its
 * EAGAIN retries, gmp_lock_os_thread and gmp_unlock_os_thread, the
 * template thread, and gmp_set_max_threads. design.md §5 is the contract;
 * §25 the M pool and §27 locked tasks and the template thread. The
 * scheduling an M does between its start and its exit (schedule, stopm,
 * startm, stoplockedm, startlockedm) is sched.c's.
 */
#include <string.h>

#include "fiber.h"
#include "internal.h"
#include "preempt.h"
#include "runtime.h"
#include "scheduler.h"
#include "signals.h"
#include "stack.h"
#include "thread.h"
#include "trace.h"

/* ---- M structs --------------------------------------------------------- */

static void mcommoninit(gmp__m *m)
{
	m->id = gmp__sched.mnext++;
	m->rand = (uint64_t)m->id * 0x9E3779B97F4A7C15ULL ^
		  (uint64_t)gmp__nanotime();
}

/* Checks the thread cap (sched.lock held): Go's checkmcount. */
static void checkmcount(void)
{
	int64_t count = gmp__sched.mnext - gmp__sched.nmfreed;
	if (count > gmp__sched.maxmcount)
		gmp__throw("program exceeds %d-thread limit",
			   gmp__sched.maxmcount);
}

/* Returns an M struct for a new thread: a recycled one whose thread has
 * exited, or a new one. M structs are never freed while the runtime runs,
 * so sysmon may read p->m->curg without a lock. */
static gmp__m *allocm(void)
{
	gmp__lock(&gmp__sched.lock);
	gmp__m *m = gmp__sched.freem;
	if (m)
		gmp__sched.freem = m->freelink;
	gmp__unlock(&gmp__sched.lock);
	if (m) {
		/* The thread has left mstart and is about to vanish. */
		if (m->thread_joinable)
			pthread_join(m->thread, NULL);
		gmp__m *alllink = m->alllink;
		memset(m, 0, sizeof *m);
		m->alllink = alllink;
	} else {
		m = gmp__calloc(1, sizeof *m);
		if (!m)
			gmp__throw("out of memory allocating a thread");
		gmp__lock(&gmp__sched.lock);
		m->alllink = gmp__sched.allm;
		gmp__storep_rel(&gmp__sched.allm, m);
		gmp__unlock(&gmp__sched.lock);
	}
	gmp__lock(&gmp__sched.lock);
	mcommoninit(m);
	checkmcount();
	gmp__unlock(&gmp__sched.lock);
	return m;
}

/* gmp__thread_create, retrying EAGAIN (a transient shortage of threads)
 * for about a second before giving up, as Go does. */
int gmp__thread_create_retry(pthread_t *t, size_t stack_size,
			     void *(*fn)(void *), void *arg)
{
	int err = 0;
	for (int tries = 0; tries < 20; tries++) {
		err = gmp__thread_create(t, stack_size, fn, arg);
		if (err != -EAGAIN)
			break;
		gmp__usleep(1000 << (tries < 6 ? tries : 6));
	}
	return err;
}

/* ---- an M's thread ----------------------------------------------------- */

enum { M_STACK_SIZE = 512 * 1024 };

/* Runs once on the M's thread before it schedules; m->g0sp must be set
 * here, in a frame that stays below mstart's exit jmp_buf forever.
 *
 * g0sp is the top of a pad in this very frame, which never returns: each
 * scheduling round on g0 starts there and grows down from it. Being inside
 * a live frame matters to Valgrind, which marks stack memory above the
 * deepest live frame as dead when calls return; a g0sp below this frame
 * would lie in such memory, and every mcall's first push would be
 * reported. Not instrumented by ASan, which would put the pad on its heap
 * fake stack (and redzones around it). */
static __attribute__((noinline, no_sanitize_address)) void mstart1(gmp__m *m)
{
	volatile char pad[256];
	pad[0] = 0;
	m->g0sp = (uintptr_t)&pad[sizeof pad - 16] & ~(uintptr_t)15;
	gmp__fiber_m_enter_g0(m);
	gmp__trace_mstart(m);
	if (m->mstartfn)
		m->mstartfn(m);
	if (m->nextp) {
		gmp__p *p = m->nextp;
		m->nextp = NULL;
		gmp__acquirep(m, p);
	} else if (!m->lockedg) {
		gmp__stopm(m); /* nothing to do yet: park until needed */
	}
	gmp__schedule(m);
}

static void *mstart(void *arg)
{
	gmp__m *m = arg;
	gmp__setm(m);
	gmp__store32_rlx((volatile uint32_t *)&m->tid, (uint32_t)gmp__gettid());
	pthread_attr_t attr;
	void *lo = NULL;
	size_t size = 0;
	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		pthread_attr_getstack(&attr, &lo, &size);
		pthread_attr_destroy(&attr);
	}
	m->g0_lo = (uintptr_t)lo;
	m->g0_hi = (uintptr_t)lo + size;
	m->valgrind_g0_id = gmp__stack_valgrind_register(m->g0_lo, m->g0_hi);
	/* Under mexit_lock: sysmon's preemptone reads it there. */
	gmp__lock(&gmp__sched.mexit_lock);
	m->preemptp = gmp__tls_preempt_flag();
	gmp__unlock(&gmp__sched.mexit_lock);
	m->errnop = &errno; /* on this thread: its own errno, for good */
	gmp__fiber_m_init(m);
	gmp__signal_m_init(); /* alternate signal stack (signal.c) */
	/* Set up: now take the process's signal mask (minit). */
	gmp__sigmask_restore();
	jmp_buf exitjmp;
	m->exitjmp = &exitjmp;
	if (setjmp(exitjmp) == 0)
		mstart1(m);
	/* mexit jumped here: this thread is done. */
	gmp__fiber_m_done(m);
	gmp__stack_valgrind_deregister(m->valgrind_g0_id);
	m->valgrind_g0_id = 0;
	gmp__setm(NULL);
	return NULL;
}

/* The M leaves: its thread ends and its struct goes to sched.freem for
 * allocm to recycle (after joining the thread). Never returns. */
_Noreturn void gmp__mexit(gmp__m *m)
{
	if (m->p)
		gmp__throw("mexit: M %lld still holds a P", (long long)m->id);
	gmp__trace_mexit(m);
	/* sysmon writes through preemptp into this thread's TLS; stop it
	 * before the TLS goes away (see preemptone). */
	gmp__lock(&gmp__sched.mexit_lock);
	m->preemptp = NULL;
	gmp__unlock(&gmp__sched.mexit_lock);
	gmp__lock(&gmp__sched.lock);
	gmp__sched.nmfreed++;
	m->freelink = gmp__sched.freem;
	gmp__sched.freem = m;
	gmp__add32_rlx(&gmp__sched.nthreads, -1);
	gmp__unlock(&gmp__sched.lock);
	gmp__fiber_m_exit(m);
	longjmp(*m->exitjmp, 1);
}

/* Starts a thread for m; a failure after the retries is fatal. */
static void newm1(gmp__m *m)
{
	int err = gmp__thread_create_retry(&m->thread, M_STACK_SIZE, mstart, m);
	if (err)
		gmp__throw("failed to create new OS thread (%s; %lld threads "
			   "exist); may need to increase max user processes "
			   "(ulimit -u)",
			   strerror(-err),
			   (long long)gmp__load32_rlx(&gmp__sched.nthreads));
	m->thread_joinable = true;
}

/* ---- the template thread, and newm ------------------------------------- */

static struct {
	gmp__mutex lock; /* protects the fields below */
	gmp__m *queue;   /* Ms waiting for a thread, linked by schedlink */
	volatile bool running; /* the template thread exists; racy reads */
	bool waiting;          /* it sleeps on wake */
	bool stop;
	gmp__note wake;
	pthread_t thread;
} tmpl;

static void *template_main(void *arg)
{
	(void)arg;
	gmp__sigmask_restore();
	gmp__lock(&tmpl.lock);
	for (;;) {
		while (tmpl.queue) {
			gmp__m *m = tmpl.queue;
			tmpl.queue = m->schedlink;
			m->schedlink = NULL;
			gmp__unlock(&tmpl.lock);
			newm1(m);
			gmp__lock(&tmpl.lock);
		}
		if (tmpl.stop)
			break;
		gmp__noteclear(&tmpl.wake);
		tmpl.waiting = true;
		gmp__unlock(&tmpl.lock);
		gmp__notesleep(&tmpl.wake);
		gmp__lock(&tmpl.lock);
	}
	gmp__unlock(&tmpl.lock);
	return NULL;
}

static void start_template_thread(void)
{
	gmp__lock(&tmpl.lock);
	if (tmpl.running) {
		gmp__unlock(&tmpl.lock);
		return;
	}
	tmpl.stop = false;
	tmpl.waiting = false;
	gmp__noteclear(&tmpl.wake);
	int err = gmp__thread_create_retry(&tmpl.thread, 64 * 1024,
					   template_main, NULL);
	if (err)
		gmp__throw("cannot create the template thread (%s); may need "
			   "to increase max user processes (ulimit -u)",
			   strerror(-err));
	gmp__storeb_rlx(&tmpl.running, true);
	gmp__add32_rlx(&gmp__sched.nthreads, 1);
	gmp__unlock(&tmpl.lock);
}

/* Shutdown (gmp__sysmon_stop): ends the template thread, if any. */
void gmp__template_stop(void)
{
	gmp__lock(&tmpl.lock);
	if (!tmpl.running) {
		gmp__unlock(&tmpl.lock);
		return;
	}
	tmpl.stop = true;
	if (tmpl.waiting) {
		tmpl.waiting = false;
		gmp__notewakeup(&tmpl.wake);
	}
	gmp__unlock(&tmpl.lock);
	pthread_join(tmpl.thread, NULL);
	gmp__storeb_rlx(&tmpl.running, false);
	gmp__add32_rlx(&gmp__sched.nthreads, -1);
}

/* Creates a new M that will run fn (if any), then take p (if any) and
 * schedule. spinning: the caller counted it in nmspinning already. The
 * thread is started directly, or through the template thread when the
 * calling thread is locked by its task (its state may be tainted). */
void gmp__newm(void (*fn)(gmp__m *), gmp__p *p, bool spinning)
{
	gmp__m *m = allocm();
	m->mstartfn = fn;
	m->nextp = p;
	gmp__storeb_rlx(&m->spinning, spinning);
	gmp__add32_rlx(&gmp__sched.nthreads, 1);
	gmp__m *cur = gmp__getm();
	if (cur && cur->locked_ext) {
		gmp__lock(&tmpl.lock);
		if (tmpl.running) {
			m->schedlink = tmpl.queue;
			tmpl.queue = m;
			if (tmpl.waiting) {
				tmpl.waiting = false;
				gmp__notewakeup(&tmpl.wake);
			}
			gmp__unlock(&tmpl.lock);
			return;
		}
		gmp__unlock(&tmpl.lock);
	}
	newm1(m);
}

/* ---- LockOSThread and the thread cap ----------------------------------- */

GMP_EXTERN void gmp_lock_os_thread(void)
{
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (!g)
		return;
	/* Start the template thread now, while this thread is still in a
	 * known-good state. Runtime work, which may wait out EAGAIN for a
	 * while: inside the runtime (preempt.h), so that sysmon does not take
	 * it for the task's own code running past its slice. */
	if (!gmp__loadb_rlx(&tmpl.running)) {
		uint8_t was;
		gmp_g *self = gmp__enter_task(&was);
		start_template_thread();
		gmp__leave_task(self, was);
	}
	m = gmp__getm(); /* starting it cannot switch, but stay exact */
	if (++m->locked_ext == 0)
		gmp__throw("gmp_lock_os_thread: nesting overflow");
	gmp__storep_rlx(&m->lockedg, g); /* racy readers: dumps */
	g->lockedm = m;
}

GMP_EXTERN void gmp_unlock_os_thread(void)
{
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (!g || m->locked_ext == 0)
		return; /* as Go's UnlockOSThread: nothing to undo */
	if (--m->locked_ext == 0) {
		gmp__storep_rlx(&m->lockedg, NULL);
		g->lockedm = NULL;
	}
}

GMP_EXTERN int gmp_set_max_threads(int n)
{
	int err = gmp__rt_hold(true);
	if (err)
		return err;
	gmp__lock(&gmp__sched.lock);
	int old = gmp__sched.maxmcount;
	if (n > 0) {
		gmp__sched.maxmcount = n;
		/* As Go's SetMaxThreads: a limit below the current count is
		 * already exceeded. */
		if (gmp__sched.mnext - gmp__sched.nmfreed > n)
			gmp__throw("program exceeds %d-thread limit", n);
	}
	gmp__unlock(&gmp__sched.lock);
	gmp__rt_release();
	return old;
}

/* fork.c: in the child, the template thread is not there (nor the Ms
 * queued for it). */
void gmp__thread_forked(void)
{
	memset(&tmpl, 0, sizeof tmpl);
}
