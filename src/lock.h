/* The runtime's own low-level synchronisation, used by scheduler code on
 * any thread (including g0 and threads that are not the runtime's):
 *
 *   gmp__mutex  a futex lock (Go's lock_futex) for sched.lock and friends.
 *               Held only for short, non-blocking critical sections; never
 *               across a switch point.
 *   gmp__note   a one-shot event (Go's note): one sleeper, one waker.
 *
 * The lock word of gmp__mutex:
 *
 *   0  unlocked
 *   1  locked, nobody sleeping
 *   2  locked, and someone may be sleeping in futex_wait on it
 *
 * The key of gmp__note: 0 not signalled, 1 signalled. notewakeup on a
 * signalled note is a bug and throws; noteclear re-arms it, and must only
 * run when nobody can be sleeping or waking.
 */
#ifndef GMP_LOCK_H
#define GMP_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"

typedef struct gmp__mutex {
	volatile uint32_t key;
} gmp__mutex;

/* The word: UNLOCKED, LOCKED, or SLEEPING (locked, with a waiter that
 * may sleep on the futex). */
enum { GMP__UNLOCKED = 0, GMP__LOCKED = 1, GMP__SLEEPING = 2 };

/* clang-format off */
#define GMP__MUTEX_INIT { GMP__UNLOCKED }
/* clang-format on */

void gmp__lock_slow(gmp__mutex *l);
void gmp__unlock_slow(gmp__mutex *l);

/* The uncontended paths, inline: one acquire CAS to lock, one release CAS
 * to unlock (paired with each other). The word's states and the slow
 * paths are in lock.c. */
static inline void gmp__lock(gmp__mutex *l)
{
	if (__builtin_expect(
		    gmp__cas32_acq(&l->key, GMP__UNLOCKED, GMP__LOCKED), 1))
		return;
	gmp__lock_slow(l);
}

static inline void gmp__unlock(gmp__mutex *l)
{
	if (__builtin_expect(
		    gmp__cas32_rel(&l->key, GMP__LOCKED, GMP__UNLOCKED), 1))
		return;
	gmp__unlock_slow(l);
}

typedef struct gmp__note {
	volatile uint32_t key;
} gmp__note;

void gmp__noteclear(gmp__note *n);
void gmp__notewakeup(gmp__note *n);
void gmp__notesleep(gmp__note *n);
/* Sleeps at most ns nanoseconds (ns < 0: forever); true if woken. */
bool gmp__notetsleep(gmp__note *n, int64_t ns);

#endif
