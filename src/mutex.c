/* gmp_mutex: Go's sync.Mutex on the runtime semaphore (see sema.h for the
 * state word's bits).
 *
 * Two modes.
 *
 * Normal mode favours throughput. Sleepers queue FIFO on the semaphore,
 * but a sleeper that unlock wakes does not own the mutex: it competes with
 * lockers that are running right now, which usually win (they are on a
 * CPU, and there may be many of them). A sleeper that loses goes back to
 * the front of the line. Lockers that find the mutex held by someone
 * likely to release it soon spin a little first (can_spin).
 *
 * Starvation mode bounds the wait. A sleeper that has waited over 1 ms
 * sets STARVING. From then on unlock hands the mutex straight to the
 * sleeper at the front (a semaphore handoff: the sleeper is readied into
 * the unlocker's runnext and the unlocker yields, so it runs at once, in
 * the unlocker's time slice), and newcomers neither spin nor take the
 * mutex even if LOCKED is clear: they queue at the back. The sleeper that
 * receives the mutex switches back to normal mode if it is the last one
 * waiting or it waited under 1 ms: starvation mode costs a switch per
 * unlock, so it lasts only as long as someone really starves.
 *
 * Ownership in starvation mode. unlock drops LOCKED but leaves STARVING and
 * the sleeper's count in place; the receiving sleeper then sets LOCKED and
 * removes itself from the count in one atomic add. In between, STARVING
 * keeps everyone else out.
 *
 * Memory order. Taking the mutex is an acquire (the CAS that sets LOCKED,
 * or the semaphore handoff, whose count is taken with an acquire CAS);
 * releasing it is the full atomic add that drops LOCKED (release is all it
 * needs; atomic.h offers no release add, and on x86 it is the same
 * instruction). The partners are each other: every acquire of the mutex
 * reads the value written by the previous release, or a later value in
 * the same word's modification order. Plain loads of the state word are
 * relaxed: they only feed a CAS, which checks them again.
 */
#include "preempt.h"
#include "runq.h"
#include "sema.h"
#include "sync.h"

#define LOCKED GMP__MUTEX_LOCKED
#define WOKEN GMP__MUTEX_WOKEN
#define STARVING GMP__MUTEX_STARVING
#define WAITER_SHIFT GMP__MUTEX_WAITER_SHIFT
#define ONE_WAITER (1u << WAITER_SHIFT)

/* A sleeper that waited this long switches the mutex to starvation mode. */
#define STARVATION_NS 1000000

/* Spinning: at most ACTIVE_SPIN rounds of ACTIVE_SPIN_CNT pauses each. */
enum { ACTIVE_SPIN = 4, ACTIVE_SPIN_CNT = 30 };

static uint32_t ncpu(void)
{
	static volatile uint32_t n; /* 0 until first asked; racy, idempotent */
	uint32_t v = gmp__load32_rlx(&n);
	if (v == 0) {
		v = (uint32_t)gmp__ncpu();
		gmp__store32_rlx(&n, v);
	}
	return v;
}

/* May a locker spin, in its iter'th round? Go's sync_runtime_canSpin. A
 * mutex is cooperative: the holder may be a task that is not running, and
 * spinning then only burns a P that other tasks could use. So spin only a
 * few rounds, only from a task (a foreign thread has no P to be polite
 * with, and goes straight to the semaphore), only on a multicore machine,
 * only while some other P is running (the holder may be there) and nobody
 * is idle or spinning to look for work, and only while this P has nothing
 * else queued to run. */
static bool can_spin(int iter)
{
	if (iter >= ACTIVE_SPIN || ncpu() <= 1)
		return false;
	/* A running task first: only then is m->p ours to read (in a
	 * syscall window sysmon may take it away). */
	gmp__m *m;
	if (!gmp__getg(&m) || !m->p)
		return false;
	/* Racy reads, as in Go: a wrong guess costs a few pauses. */
	uint32_t procs = gmp__load32_rlx(&gmp__sched.gomaxprocs);
	uint32_t busy = gmp__load32_rlx(&gmp__sched.npidle) +
			gmp__load32_rlx(&gmp__sched.nmspinning) + 1;
	if (procs <= busy)
		return false;
	return gmp__runq_empty(m->p);
}

static void do_spin(void)
{
	for (int i = 0; i < ACTIVE_SPIN_CNT; i++)
		gmp__cpu_relax();
}

static _Noreturn void throw_inconsistent(gmp_mutex *mu, uint32_t state)
{
	gmp__throw("mutex %p: inconsistent state %#x", (void *)mu, state);
}

/* Out of line, off the uncontended path. Spinning reads the P's queue,
 * sleeping parks and an unlock's handoff readies: inside the runtime
 * (preempt.h). */
static __attribute__((noinline)) void lock_slow(gmp_mutex *mu)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__mutex_words *m = gmp__mutex_words_of(mu);
	int64_t wait_start = 0; /* when we first slept; 0: never */
	bool starving = false;  /* we have waited over STARVATION_NS */
	bool awoke = false;     /* we set WOKEN, or an unlock set it for us */
	int iter = 0;

	/* A contended lock is a switch point (gmp.h): honour a pending
	 * preemption request (sysmon's, after a 10 ms slice) here. Besides
	 * fairness in general, this is what lets a sleeper that an unlock
	 * readied into this P's runnext run at all while this task keeps
	 * re-locking without ever sleeping: while that sleeper's WOKEN bit
	 * is set, every lock comes through here. */
	gmp_preempt_point();

	uint32_t old = gmp__load32_rlx(&m->state);
	for (;;) {
		/* Spin while the mutex is held in normal mode (in starvation
		 * mode it goes to a sleeper however fast we are). */
		if ((old & (LOCKED | STARVING)) == LOCKED && can_spin(iter)) {
			/* Tell unlock someone is awake and about to try, so
			 * it does not wake a sleeper for nothing. relaxed
			 * would do (no data rides on the bit); acquire is the
			 * weakest CAS atomic.h has. */
			if (!awoke && !(old & WOKEN) &&
			    (old >> WAITER_SHIFT) != 0 &&
			    gmp__cas32_acq(&m->state, old, old | WOKEN))
				awoke = true;
			do_spin();
			iter++;
			old = gmp__load32_rlx(&m->state);
			continue;
		}

		uint32_t want = old;
		/* Take it unless it is starving: then it belongs to the
		 * sleepers, and newcomers queue. */
		if (!(old & STARVING))
			want |= LOCKED;
		if (old & (LOCKED | STARVING))
			want += ONE_WAITER;
		/* Switch to starvation mode, but only while it is held:
		 * unlock of a starving mutex expects a sleeper to hand it to,
		 * and if it is free we are about to take it anyway. */
		if (starving && (old & LOCKED))
			want |= STARVING;
		if (awoke) {
			/* We are the awake one; clear the flag whether we
			 * take the mutex or go back to sleep. */
			if (!(want & WOKEN))
				throw_inconsistent(mu, old);
			want &= ~WOKEN;
		}
		/* acquire: when this takes the mutex, it pairs with the
		 * full add in gmp_mutex_unlock that released it. */
		if (!gmp__cas32_acq(&m->state, old, want)) {
			old = gmp__load32_rlx(&m->state);
			continue;
		}
		if (!(old & (LOCKED | STARVING)))
			return; /* taken with the CAS */

		/* A sleeper that was woken and lost goes back to the front. */
		bool lifo = wait_start != 0;
		if (!wait_start)
			wait_start = gmp__nanotime();
		gmp__semacquire(&m->sema, lifo, GMP__WAIT_MUTEX);
		starving = starving ||
			   gmp__nanotime() - wait_start > STARVATION_NS;
		old = gmp__load32_rlx(&m->state);
		if (old & STARVING) {
			/* Handed to us: LOCKED is clear and we are still
			 * counted as a sleeper. Set one, drop the other, and
			 * leave starvation mode if we are the last sleeper
			 * or did not really starve (two tasks can otherwise
			 * go lock-step in starvation mode for ever). */
			if ((old & (LOCKED | WOKEN)) ||
			    (old >> WAITER_SHIFT) == 0)
				throw_inconsistent(mu, old);
			uint32_t delta = LOCKED - ONE_WAITER;
			if (!starving || (old >> WAITER_SHIFT) == 1)
				delta -= STARVING;
			/* Ordered after the handoff by the semaphore's
			 * acquire; full only because it is the add we have. */
			gmp__add32_full(&m->state, (int32_t)delta);
			return;
		}
		awoke = true;
		iter = 0;
	}
}

GMP_EXTERN void gmp_mutex_lock(gmp_mutex *mu)
{
	/* acquire: pairs with the full add that last unlocked it. */
	if (GMP__LIKELY(
		    gmp__cas32_acq(&gmp__mutex_words_of(mu)->state, 0, LOCKED)))
		return;
	lock_slow(mu);
}

GMP_EXTERN bool gmp_mutex_trylock(gmp_mutex *mu)
{
	gmp__mutex_words *m = gmp__mutex_words_of(mu);
	uint32_t old = gmp__load32_rlx(&m->state);
	/* A starving mutex belongs to its oldest sleeper even while LOCKED
	 * is clear. */
	if (old & (LOCKED | STARVING))
		return false;
	/* acquire: as in gmp_mutex_lock. One try only: a lost race means
	 * someone else took it, which is an honest "busy". */
	return gmp__cas32_acq(&m->state, old, old | LOCKED);
}

/* state: the word as our add left it. */
static __attribute__((noinline)) void unlock_slow(gmp_mutex *mu, uint32_t state)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__mutex_words *m = gmp__mutex_words_of(mu);
	if (!((state + LOCKED) & LOCKED))
		gmp__throw("unlock of unlocked mutex %p", (void *)mu);
	if (state & STARVING) {
		/* Hand it to the oldest sleeper, who runs next. LOCKED stays
		 * clear until it sets it; STARVING keeps newcomers out. */
		gmp__semrelease(&m->sema, true);
		return;
	}
	uint32_t old = state;
	for (;;) {
		/* Nobody to wake, or no need: the mutex was taken again, or
		 * someone awake is about to take it, or it went into
		 * starvation mode after our add (the handoff is then the
		 * business of whoever unlocks next, not ours). */
		if ((old >> WAITER_SHIFT) == 0 ||
		    (old & (LOCKED | WOKEN | STARVING)))
			return;
		/* Claim the right to wake one sleeper. No data rides on
		 * this CAS (the add released the mutex); acquire is the
		 * weakest CAS atomic.h has. */
		uint32_t want = (old - ONE_WAITER) | WOKEN;
		if (gmp__cas32_acq(&m->state, old, want)) {
			gmp__semrelease(&m->sema, false);
			return;
		}
		old = gmp__load32_rlx(&m->state);
	}
}

GMP_EXTERN void gmp_mutex_unlock(gmp_mutex *mu)
{
	/* full (release is what it needs): publishes the critical section
	 * to the next locker's acquire CAS, in gmp_mutex_lock, trylock or
	 * lock_slow. */
	uint32_t state = gmp__add32_full(&gmp__mutex_words_of(mu)->state,
					 -(int32_t)LOCKED) -
			 LOCKED;
	if (GMP__UNLIKELY(state != 0))
		unlock_slow(mu, state);
}
