/* gmp__mutex and gmp__note on futexes (see lock.h for the word states;
 * design.md §39 for where the runtime's locks nest). */
#include "internal.h"

/* How long a contended acquisition spins before it yields, and how often
 * it looks at the lock meanwhile. A time, not a count of PAUSEs: a PAUSE
 * takes 10-140 cycles depending on the CPU (16 ns on the VM this was
 * measured on, where 4 x 30 of them spun 2 us), and the runtime's critical
 * sections are far shorter than that. */
enum { SPIN_NS = 500, SPIN_RELAX = 4, PASSIVE_SPIN = 1 };

static bool may_spin(void)
{
	static volatile uint32_t ncpu; /* 0 until first asked */
	uint32_t n = gmp__load32_rlx(&ncpu);
	if (n == 0) {
		n = (uint32_t)gmp__ncpu();
		gmp__store32_rlx(&ncpu, n);
	}
	return n > 1;
}

/* Tries to take an unlocked lock, leaving `wait` in the word: LOCKED when
 * we never slept, SLEEPING once we did (we cannot know whether others
 * still sleep, so the next unlock must wake one). */
static bool try_take(gmp__mutex *l, uint32_t wait)
{
	while (gmp__load32_rlx(&l->key) == GMP__UNLOCKED)
		if (gmp__cas32_acq(&l->key, GMP__UNLOCKED, wait))
			return true;
	return false;
}

/* The fast path (gmp__lock in lock.h) found the lock taken. */
void gmp__lock_slow(gmp__mutex *l)
{
	uint32_t wait = GMP__LOCKED;
	bool spin = may_spin();
	for (;;) {
		/* Spin a little while the holder (on another CPU) finishes. */
		for (int64_t end = 0; spin;) {
			if (try_take(l, wait))
				return;
			for (int j = 0; j < SPIN_RELAX; j++)
				gmp__cpu_relax();
			int64_t now = gmp__nanotime();
			if (end == 0)
				end = now + SPIN_NS;
			else if (now >= end)
				break;
		}
		for (int i = 0; i < PASSIVE_SPIN; i++) {
			if (try_take(l, wait))
				return;
			gmp__osyield();
		}
		/* Announce a sleeper; if the lock was free meanwhile, we own
		 * it (in SLEEPING state, which costs one spurious wake). */
		if (gmp__xchg32_full(&l->key, GMP__SLEEPING) == GMP__UNLOCKED)
			return;
		wait = GMP__SLEEPING;
		gmp__futex_wait(&l->key, GMP__SLEEPING, -1);
	}
}

/* The release CAS of gmp__unlock (lock.h) failed. Only the holder moves
 * the word away from LOCKED/SLEEPING to UNLOCKED; others only move LOCKED
 * to SLEEPING. So the word is SLEEPING (or the lock was not held). */
void gmp__unlock_slow(gmp__mutex *l)
{
	uint32_t v = gmp__xchg32_full(&l->key, GMP__UNLOCKED);
	if (v == GMP__UNLOCKED)
		gmp__throw("unlock of unlocked runtime lock %p", (void *)l);
	if (v == GMP__SLEEPING)
		gmp__futex_wake(&l->key, 1);
}

/* ---- notes -------------------------------------------------------------- */

void gmp__noteclear(gmp__note *n)
{
	gmp__store32_rlx(&n->key, 0);
}

void gmp__notewakeup(gmp__note *n)
{
	/* Full CAS: publishes everything the waker wrote before (the P in
	 * nextp, for example) to the sleeper's acquire load of the key. */
	uint32_t old = gmp__fcas32_full(&n->key, 0, 1);
	if (old != 0)
		gmp__throw("notewakeup: double wakeup (key %u)", old);
	gmp__futex_wake(&n->key, 1);
}

void gmp__notesleep(gmp__note *n)
{
	while (gmp__load32_acq(&n->key) == 0)
		gmp__futex_wait(&n->key, 0, -1);
}

bool gmp__notetsleep(gmp__note *n, int64_t ns)
{
	if (ns < 0) {
		gmp__notesleep(n);
		return true;
	}
	int64_t deadline = gmp__nanotime() + ns;
	for (;;) {
		if (gmp__load32_acq(&n->key) != 0)
			return true;
		int64_t left = deadline - gmp__nanotime();
		if (left <= 0)
			return false;
		gmp__futex_wait(&n->key, 0, left);
	}
}
