/* gmp_cond: Go's notifyList (runtime/sema.go) on waiters (wait.h), with a
 * deadline; the words are described in sync.h. design.md §9.4 is the
 * contract; §28.7 the design: why a waiter counts itself in and goes on
 * the list in one step while it still holds the user's mutex (Go's
 * ticket window cannot live with a waiter that gives up), how a signal
 * and a deadline race through the waiter's claim, and two tasks taking
 * turns: cond_park_unlock hands the mutex to the woken waiter it runs
 * next, and notify_slow's quiet wake wakes no idle P for a waiter that
 * could only sleep on the mutex its signaller holds.
 *
 * The user's mutex is unlocked in the waiter's unlock function: for a
 * task, on g0, where gmp_mutex_unlock may ready a task sleeping on the
 * mutex and never switches (a handoff's yield does nothing off a task).
 */
#include "preempt.h"
#include "scheduler.h"
#include "sema.h"
#include "sync.h"
#include "task.h"

/* What the unlock function releases: copied before the first release, for
 * once the list lock drops, a signal may let the waiter run on and reuse
 * the frame this lives in. */
struct cond_park {
	gmp__mutex *lock;
	gmp_mutex *mu;
};

static void cond_unlock(void *arg)
{
	struct cond_park a = *(struct cond_park *)arg;
	gmp__unlock(a.lock);
	gmp_mutex_unlock(a.mu);
}

/* w->result of a signalled waiter whose mutex the parker that ran it
 * next handed over (cond_park_unlock): it returns without relocking. */
enum { COND_MU_HANDED = 1 };

/* Whether nw, the waiter of a task we have just taken off our runnext,
 * was woken by a signal and relocks mu first thing: then the mutex may go
 * to it as it is. Only a mutex held and nothing else (no sleepers, no
 * locker awake, not starving) is handed over; every other state takes the
 * usual unlock, which wakes whoever must be woken. The task is ours (off
 * the queue, not running): its waiter, on its stack, holds still. */
static bool may_hand_mutex(const gmp__waiter *nw, gmp_mutex *mu)
{
	return nw && nw->elem == (void *)mu &&
	       gmp__load32_rlx(&nw->state) == GMP__WAIT_WOKEN &&
	       gmp__load32_rlx(&gmp__mutex_words_of(mu)->state) ==
		       GMP__MUTEX_LOCKED;
}

/* park_m's unlock function for a task that waits without a deadline, on
 * g0 once the task is WAITING. It drops the list lock and the user's
 * mutex, as cond_unlock does, and then, when the task that runs next here
 * is a waiter a signal woke on the same mutex (a pair taking turns: the
 * signaller readied it into our runnext and now waits in its turn), runs
 * that task itself instead of going through schedule, and hands it the
 * mutex without unlocking it: the woken waiter's next act would be to lock
 * it, on this M, with nothing in between, so the unlock and its relock (two
 * atomic read-modify-writes) would only make a window that nobody can use
 * to any purpose but to make the waiter sleep again. The list lock goes
 * first: a signal may find us, and ready us, from here on. */
static bool cond_park_unlock(gmp_g *g, void *arg)
{
	(void)g;
	struct cond_park a = *(struct cond_park *)arg;
	gmp__unlock(a.lock);
	gmp__m *m = gmp__getm_inline();
	gmp_g *next = gmp__runnext_take(m);
	if (!next) {
		gmp_mutex_unlock(a.mu);
		return true;
	}
	gmp__waiter *nw = next->param;
	if (may_hand_mutex(nw, a.mu))
		nw->result = COND_MU_HANDED; /* read by next, on this M */
	else
		gmp_mutex_unlock(a.mu); /* may ready a sleeper: it runs after */
	gmp__execute(m, next, true);
}

/* Appends w (list lock held). */
static void list_push(gmp__cond_words *c, gmp__waiter *w)
{
	w->next = NULL;
	w->prev = c->tail;
	if (c->tail)
		c->tail->next = w;
	else
		c->head = w;
	c->tail = w;
}

/* Takes w off the list and counts it out (list lock held). */
static void list_remove(gmp__cond_words *c, gmp__waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		c->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		c->tail = w->prev;
	w->next = w->prev = NULL;
	w->c = NULL; /* off the list: the waiter need not look for itself */
	/* Written only under the lock: a plain increment, no
	 * read-modify-write. The lock's release publishes it to the next
	 * holder; the lock-free readers only decide whether to take it. */
	gmp__store32_rlx(&c->notify, gmp__load32_rlx(&c->notify) + 1);
}

static int cond_wait(gmp_cond *cv, gmp_mutex *mu, int64_t deadline)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__cond_words *c = gmp__cond_words_of(cv);
	/* Held means LOCKED (a starving mutex's new owner sets it before
	 * its lock returns). A cheap check; the unlock would abort too, but
	 * on g0 and after we had queued. */
	if (!(gmp__load32_rlx(&gmp__mutex_words_of(mu)->state) &
	      GMP__MUTEX_LOCKED))
		gmp__throw("gmp_cond_wait on cond %p with mutex %p unlocked",
			   (void *)cv, (void *)mu);
	gmp__waiter w;
	gmp__waiter_init_as(&w, stay.g);
	w.c = c;                          /* on the list */
	w.aux = deadline >= 0 ? c : NULL; /* claimable by a deadline */
	w.elem = mu;                      /* what it relocks (may_hand_mutex) */
	gmp__lock(&c->lock);
	/* Written only under the list lock (as notify); published to
	 * signallers that hold mu by mu's unlock, which follows it. */
	w.ticket = gmp__load32_rlx(&c->wait);
	gmp__store32_rlx(&c->wait, (uint32_t)w.ticket + 1);
	list_push(c, &w);
	struct cond_park a = { &c->lock, mu };
	/* A parker that runs us next may hand us mu (cond_park_unlock):
	 * it finds our waiter through our G while we are queued. */
	if (stay.g)
		stay.g->param = &w;
	if (GMP__LIKELY(stay.g && deadline < 0)) {
		gmp__park_g(stay.g, cond_park_unlock, &a, GMP__WAIT_COND);
		/* Only a signal readies a waiter without a deadline.
		 * acquire: pairs with its release of the state. */
		w.woken = gmp__load32_acq(&w.state) == GMP__WAIT_WOKEN;
	} else {
		gmp__waiter_sleep(&w, cond_unlock, &a, GMP__WAIT_COND,
				  deadline);
	}
	if (stay.g)
		stay.g->param = NULL;
	if (w.woken) {
		if (w.result != COND_MU_HANDED)
			gmp_mutex_lock(mu);
		return 0;
	}
	/* The deadline claimed us. Still listed unless a signal took us off,
	 * found us claimed, and went on to the next waiter. */
	gmp__lock(&c->lock);
	if (w.c)
		list_remove(c, &w);
	gmp__unlock(&c->lock);
	gmp_mutex_lock(mu);
	return -ETIMEDOUT;
}

GMP_EXTERN void gmp_cond_wait(gmp_cond *c, gmp_mutex *mu)
{
	cond_wait(c, mu, -1);
}

GMP_EXTERN int gmp_cond_timedwait(gmp_cond *c, gmp_mutex *mu,
				  int64_t deadline_ns)
{
	return cond_wait(c, mu, gmp__deadline_past_ok(deadline_ns));
}

/* Whether someone may wait: two loads, no lock. acquire on wait: pairs
 * with the release of mu (or of the list lock) after the increment. */
static inline bool has_waiters(gmp__cond_words *c)
{
	return gmp__load32_acq(&c->wait) != gmp__load32_rlx(&c->notify);
}

/* Takes off the list, claims and wakes the oldest waiter whose deadline
 * has not claimed it; with all, every such waiter. Waking readies tasks
 * into our P: inside the runtime. */
static __attribute__((noinline)) void notify_slow(gmp__cond_words *c, bool all)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__waiter *wake = NULL, **tail = &wake;
	gmp__lock(&c->lock);
	gmp__waiter *w;
	while ((w = c->head) != NULL) {
		list_remove(c, w);
		/* A waiter with no deadline has no other waker than the one
		 * that takes it off the list: it needs no claim (wait.h). */
		if (w->aux && !gmp__waiter_claim(w))
			continue; /* its deadline won: it only leaves */
		/* Claimed: it cannot return until we wake it, so it may wait
		 * for that on our local chain, after the lock drops. */
		*tail = w;
		tail = &w->next;
		if (!all)
			break;
	}
	gmp__unlock(&c->lock);
	while (wake) {
		gmp__waiter *next = wake->next; /* before: w is gone after */
		/* A task whose mutex is held now (by us, most often: the
		 * usual signal is made under it) can do nothing until it is
		 * unlocked; waking an idle P to run it would only make it
		 * sleep again on the mutex, at the price of a futex wake and
		 * another M spinning. So it goes into our runnext quietly
		 * when our P has nothing else queued, and runs as soon as we
		 * switch (wait, block, yield, or the end of the slice). A
		 * second signal before that finds it queued and wakes a P as
		 * usual, so a signaller that goes on signalling still gets
		 * its waiters run elsewhere. */
		gmp_mutex *wmu = wake->elem;
		if (stay.g && wake->g &&
		    (gmp__load32_rlx(&gmp__mutex_words_of(wmu)->state) &
		     GMP__MUTEX_LOCKED))
			gmp__waiter_wake_quiet_by(wake, stay.g);
		else
			gmp__waiter_wake_by(wake, stay.g);
		wake = next;
	}
}

GMP_EXTERN void gmp_cond_signal(gmp_cond *cv)
{
	gmp__cond_words *c = gmp__cond_words_of(cv);
	if (has_waiters(c))
		notify_slow(c, false);
}

GMP_EXTERN void gmp_cond_broadcast(gmp_cond *cv)
{
	gmp__cond_words *c = gmp__cond_words_of(cv);
	if (has_waiters(c))
		notify_slow(c, true);
}
