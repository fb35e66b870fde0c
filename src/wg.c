/* gmp_wg: Go's sync.WaitGroup on the runtime semaphore.
 *
 * One 64-bit word holds both halves of the story (sema.h): the counter in
 * the high 32 bits, the number of waiters in the low 32. Keeping them in
 * one word lets a single atomic add both change the counter and learn
 * whether anyone waits, and lets wait register itself only while the
 * counter is still non-zero (a CAS on the whole word).
 *
 * The rules, as Go's: an add with a positive delta that starts from a
 * zero counter must happen before the wait it is meant for; adds that
 * start from a positive counter and negative ones may happen at any time;
 * a group may be reused once every wait of the previous round has
 * returned. Breaking them is detected where it is cheap to and aborts.
 *
 * Memory order. Every add is a full read-modify-write of the state word,
 * so the word's modification order is a release sequence: the add that
 * takes the counter to zero has seen (acquired) everything done before
 * every earlier add. A waiter that finds the counter zero acquires it
 * with its load; a waiter that sleeps is woken through the semaphore,
 * whose full increment (by the last add) and acquire CAS (by the waiter)
 * carry the same edge.
 */
#include "sema.h"
#include "sync.h"

#define WAITERS_MASK 0xffffffffu

static inline int32_t counter_of(uint64_t state)
{
	return (int32_t)(uint32_t)(state >> 32);
}

GMP_EXTERN void gmp_wg_add(gmp_wg *wg, int64_t delta)
{
	gmp__wg_words *w = gmp__wg_words_of(wg);
	if (delta < INT32_MIN || delta > INT32_MAX)
		gmp__throw("wait group %p: delta %lld out of range", (void *)wg,
			   (long long)delta);
	uint64_t d = (uint64_t)delta << 32;
	/* full: publishes what the caller did (a task's work, before its
	 * done) to the waiters, and acquires what earlier adds published
	 * (partners: the other adds, and wait's acquire load). */
	uint64_t state = gmp__add64_full(&w->state, (int64_t)d) + d;
	int32_t v = counter_of(state);
	uint32_t waiters = (uint32_t)(state & WAITERS_MASK);
	if (v < 0)
		gmp__throw("negative wait group counter (wait group %p)",
			   (void *)wg);
	if (waiters != 0 && delta > 0 && v == (int32_t)delta)
		gmp__throw("wait group %p misuse: add called concurrently "
			   "with wait",
			   (void *)wg);
	if (v > 0 || waiters == 0)
		return;

	/* We took the counter to zero with waiters asleep. Nothing else may
	 * change the word now: adds may not race with a wait at zero, and
	 * wait does not register when it sees zero. Check what is cheap to
	 * check, then reset the word and wake every waiter. */
	if (gmp__load64_rlx(&w->state) != state)
		gmp__throw("wait group %p misuse: add called concurrently "
			   "with wait",
			   (void *)wg);
	/* release: the waiters read it after their semaphore wakes them
	 * (the semaphore orders it; release costs nothing extra). */
	gmp__store64_rel(&w->state, 0);
	for (; waiters != 0; waiters--)
		gmp__semrelease(&w->sema, false);
}

GMP_EXTERN void gmp_wg_done(gmp_wg *wg)
{
	gmp_wg_add(wg, -1);
}

GMP_EXTERN void gmp_wg_wait(gmp_wg *wg)
{
	gmp__wg_words *w = gmp__wg_words_of(wg);
	for (;;) {
		/* acquire: pairs with the full add that took the counter to
		 * zero. */
		uint64_t state = gmp__load64_acq(&w->state);
		if (counter_of(state) == 0)
			return;
		if ((uint32_t)(state & WAITERS_MASK) == WAITERS_MASK)
			gmp__throw("wait group %p: too many waiters",
				   (void *)wg);
		/* full: registers us only if the counter is still what we
		 * saw, so the add that zeroes it will see us. */
		if (gmp__cas64_full(&w->state, state, state + 1)) {
			gmp__semacquire(&w->sema, false, GMP__WAIT_WG);
			/* acquire: ordered after the reset by the
			 * semaphore; a new round begun before every waiter
			 * of the last one woke is a misuse. */
			if (gmp__load64_acq(&w->state) != 0)
				gmp__throw("wait group %p is reused before "
					   "previous wait has returned",
					   (void *)wg);
			return;
		}
	}
}
