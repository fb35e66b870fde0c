/* The runtime semaphore (Go's semacquire/semrelease; design.md §28.2): the
 * sleep and wakeup under gmp_mutex, gmp_wg and gmp_rwmutex, whose
 * layouts are in sync.h.
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

#endif
