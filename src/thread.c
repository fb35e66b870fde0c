/* Threads (SPEC §5): LockOSThread, the template thread, the thread cap.
 *
 * A locked task runs only on its M and its M runs only it (sched.c:
 * stoplockedm/startlockedm); a locked task that ends takes its thread with
 * it. Because a locked task may have changed its thread's state (CPU
 * affinity, name, namespaces, signal mask), threads must not be cloned
 * from a locked thread: new Ms are then created by the template thread, a
 * thread started at the first lock while the process is in a known-good
 * state, which does nothing but create threads on request (Go 1.10).
 */
#include <string.h>

#include "internal.h"

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
			gmp__newm1(m);
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

/* Shutdown (runtime.c): ends the template thread, if any. */
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

/* Starts m's thread: directly, or through the template thread when the
 * calling thread is locked by its task (its state may be tainted). */
void gmp__newm_start(gmp__m *m)
{
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
	gmp__newm1(m);
}

GMP_EXTERN void gmp_lock_os_thread(void)
{
	gmp__m *m = gmp__getm();
	gmp_g *g = m ? m->curg : NULL;
	if (!g)
		return;
	/* Start the template thread now, while this thread is still in a
	 * known-good state. */
	if (!gmp__loadb_rlx(&tmpl.running))
		start_template_thread();
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
	if (--m->locked_ext == 0 && m->locked_int == 0) {
		gmp__storep_rlx(&m->lockedg, NULL);
		g->lockedm = NULL;
	}
}

static int64_t set_max_threads(void *arg)
{
	int n = *(int *)arg;
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
	return old;
}

GMP_EXTERN int gmp_set_max_threads(int n)
{
	return (int)gmp__with_runtime(set_max_threads, &n);
}

/* fork.c: in the child, the template thread is not there (nor the Ms
 * queued for it). */
void gmp__thread_forked(void)
{
	memset(&tmpl, 0, sizeof tmpl);
}
