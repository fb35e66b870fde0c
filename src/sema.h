/* The runtime semaphore (Go's semacquire/semrelease): the sleep and wakeup
 * under gmp_mutex and gmp_wg.
 *
 * A semaphore is any 32-bit word the caller owns; the runtime keeps no
 * state in it beyond the count. Sleepers wait in a table of waiters keyed
 * by the word's address (semtable), so a semaphore costs four bytes and
 * needs no initialisation or destruction: a zero word is a semaphore with
 * count 0.
 *
 * Think of it less as a counting semaphore than as a sleep/wakeup pair in
 * which every wakeup is matched by exactly one sleep even when the wakeup
 * comes first (Mullender and Cox, "Semaphores in Plan 9"): the count only
 * remembers wakeups that found nobody asleep.
 *
 * Both calls work from a task (the sleeper parks) and from any other thread
 * (the sleeper blocks on a futex), through gmp__waiter.
 */
#ifndef GMP_SEMA_H
#define GMP_SEMA_H

#include "internal.h"

/* Waits until *addr > 0, then decrements it. Sleeps in FIFO order behind
 * the other sleepers on addr; with lifo, at the head of the line instead
 * (a mutex waiter that was woken and lost the race goes back to the
 * front). reason is the wait reason a parked task shows in dumps. A switch
 * point when it sleeps. Not from g0 or an unlock function. */
void gmp__semacquire(volatile uint32_t *addr, bool lifo, uint32_t reason);

/* Increments *addr and wakes the oldest sleeper on addr, if any. With
 * handoff, the count is passed straight to that sleeper (no one arriving
 * meanwhile can take it) and, if both the caller and the sleeper are tasks,
 * the caller yields so the sleeper runs at once on this P, in the caller's
 * time slice (Go's semrelease handoff + goyield: a switch point). Without
 * handoff it never switches. */
void gmp__semrelease(volatile uint32_t *addr, bool handoff);

/* In the child of fork() (fork.c). */
void gmp__sema_forked(void);

/* ---- the words of the primitives built on it ----------------------------
 * gmp_mutex and gmp_wg are opaque byte arrays in gmp.h; these are their
 * real layouts (here so that tests may look inside).
 *
 * gmp_mutex (mutex.c): a state word and a semaphore. The state word:
 *
 *   bit 0      LOCKED    someone holds the mutex
 *   bit 1      WOKEN     a locker is awake and about to try for it (a
 *                        spinner, or a sleeper the last unlock woke), so
 *                        unlock need not wake another
 *   bit 2      STARVING  starvation mode: unlock hands the mutex to the
 *                        oldest sleeper, newcomers queue behind it; LOCKED
 *                        may then be clear while the mutex is still owned
 *   bits 3-31  sleepers on the semaphore, or about to sleep there
 *
 * gmp_wg (wg.c): a 64-bit state word, the counter in its high half and the
 * number of waiters in its low half, and a semaphore the waiters sleep on.
 */
enum {
	GMP__MUTEX_LOCKED = 1u << 0,
	GMP__MUTEX_WOKEN = 1u << 1,
	GMP__MUTEX_STARVING = 1u << 2,
	GMP__MUTEX_WAITER_SHIFT = 3,
};

typedef struct gmp__mutex_words {
	volatile uint32_t state; /* atomic: the bits above */
	volatile uint32_t sema;  /* the semaphore sleepers wait on */
} gmp__mutex_words;

typedef struct gmp__wg_words {
	volatile uint64_t state; /* atomic: counter << 32 | waiters */
	volatile uint32_t sema;  /* the semaphore waiters sleep on */
	uint32_t unused;
} gmp__wg_words;

_Static_assert(sizeof(gmp__mutex_words) == sizeof(gmp_mutex) &&
		       _Alignof(gmp__mutex_words) <= _Alignof(gmp_mutex),
	       "gmp_mutex must hold gmp__mutex_words");
_Static_assert(sizeof(gmp__wg_words) == sizeof(gmp_wg) &&
		       _Alignof(gmp__wg_words) <= _Alignof(gmp_wg),
	       "gmp_wg must hold gmp__wg_words");

static inline gmp__mutex_words *gmp__mutex_words_of(gmp_mutex *mu)
{
	return (gmp__mutex_words *)(void *)mu;
}

static inline gmp__wg_words *gmp__wg_words_of(gmp_wg *wg)
{
	return (gmp__wg_words *)(void *)wg;
}

#endif
