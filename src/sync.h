/* The real layouts of the synchronisation types (design.md §28): gmp_mutex
 * (mutex.c), gmp_wg (wg.c), gmp_rwmutex (rwmutex.c), gmp_once (once.c),
 * gmp_cond (cond.c) and gmp_sem (semaphore.c). gmp.h gives each only an
 * opaque array of the right size; these are their words, with what each
 * means beside it, here so that the .c files and the tests share one
 * description. A zero-filled value of each is the ready state: an
 * unlocked mutex or rwmutex, a wait group at zero, a once not yet done, a
 * cond with nobody waiting, a semaphore with count 0. The runtime
 * semaphore several of them sleep on is sema.h's.
 */
#ifndef GMP_SYNC_H
#define GMP_SYNC_H

#include "internal.h"
#include "lock.h"
#include "wait.h"

/* gmp_mutex (mutex.c): a state word and a semaphore. The state word:
 *
 *   bit 0      LOCKED    someone holds the mutex
 *   bit 1      WOKEN     a locker is awake and about to try for it (a
 *                        spinner, or a sleeper the last unlock woke), so
 *                        unlock need not wake another
 *   bit 2      STARVING  starvation mode: unlock hands the mutex to the
 *                        oldest sleeper, newcomers queue behind it; LOCKED
 *                        may then be clear while the mutex is still owned
 *   bits 3-31  sleepers on the semaphore, or about to sleep there */
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

/* gmp_wg (wg.c): a 64-bit state word, the counter in its high half and the
 * number of waiters in its low half, and a semaphore the waiters sleep on. */
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

/* gmp_rwmutex (rwmutex.c), Go's sync.RWMutex, with reader slots:
 *   w             a gmp_mutex that writers hold from lock to unlock, so
 *                 that only one writer at a time deals with the readers
 *   writer_sem    the runtime semaphore the writer sleeps on while the
 *                 readers it found finish
 *   reader_sem    the runtime semaphore readers sleep on while a writer
 *                 is pending or holds the lock
 *   reader_count  atomic, read as int32, four fields (GMP__RW_*):
 *                 bits 0-23   the readers counted here (in, or queued
 *                             behind a writer), as opposed to those on
 *                             reader slots
 *                 bits 24-27  read locks that found another reader
 *                             counted here, while slots are off: the
 *                             sixteenth carries into
 *                 bit 28      slots on: readers take reader slots
 *                 and minus GMP__RW_WRITER (2^30) while a writer is
 *                 pending or holds the lock, which makes the whole
 *                 negative
 *   reader_wait   atomic, read as int32: the readers a pending writer
 *                 still waits for (it may dip below zero for a moment);
 *                 GMP__RW_HELD plus a few bits for its unlock while a
 *                 writer holds the lock; GMP__RW_ABANDONED plus that
 *                 count after a trylock that gave way (rwmutex.c) */
typedef struct gmp__rwmutex_words {
	gmp_mutex w;
	volatile uint32_t writer_sem;
	volatile uint32_t reader_sem;
	volatile uint32_t reader_count;
	volatile uint32_t reader_wait;
} gmp__rwmutex_words;

/* gmp_once (once.c):
 *   done   atomic: 1 once fn has returned
 *   mu     a gmp_mutex, held by the caller that runs fn, for as long as fn
 *          runs: concurrent callers sleep on it
 *   owner  atomic: who runs fn now (a task id, or minus a thread id), 0
 *          when nobody does; only to catch a recursive call */
typedef struct gmp__once_words {
	volatile uint32_t done;
	uint32_t unused;
	gmp_mutex mu;
	volatile uint64_t owner;
} gmp__once_words;

/* gmp_cond (cond.c), after Go's notifyList:
 *   lock    a gmp__mutex (lock.h) protecting the list
 *   wait    atomic: waiters ever added to the list (the next wait ticket)
 *   notify  atomic: waiters ever taken off it, by a signal, a broadcast
 *           or their own deadline; wait == notify means nobody waits,
 *           which signal and broadcast read without the lock
 *   head, tail  the waiters in arrival order (gmp__waiter.next/prev);
 *               lock */
typedef struct gmp__cond_words {
	gmp__mutex lock;
	volatile uint32_t wait;
	volatile uint32_t notify;
	uint32_t unused;
	gmp__waiter *head, *tail;
} gmp__cond_words;

/* gmp_sem (semaphore.c):
 *   state  atomic, as int64: the count when >= 0, or minus the number of
 *          queued waiters when < 0 (one of the two is always zero: a
 *          release with waiters queued hands its unit to the oldest
 *          rather than counting it). Fast paths CAS it without the lock
 *          only between values >= 0 (acquire: > 0 to one less; release:
 *          >= 0 to one more); every move through or below zero is made
 *          under lock, by the acquirer that queues or the releaser or
 *          leaver that dequeues.
 *   lock   a gmp__mutex protecting the queue
 *   head, tail  the queued waiters, oldest first; lock */
typedef struct gmp__sem_words {
	volatile uint64_t state;
	gmp__mutex lock;
	uint32_t unused;
	gmp__waiter *head, *tail;
} gmp__sem_words;

#define GMP__SYNC_FITS(words, pub)                                             \
	_Static_assert(sizeof(words) == sizeof(pub) &&                         \
			       _Alignof(words) <= _Alignof(pub),               \
		       #pub " must hold " #words)
GMP__SYNC_FITS(gmp__rwmutex_words, gmp_rwmutex);
GMP__SYNC_FITS(gmp__once_words, gmp_once);
GMP__SYNC_FITS(gmp__cond_words, gmp_cond);
GMP__SYNC_FITS(gmp__sem_words, gmp_sem);
#undef GMP__SYNC_FITS

#define GMP__RW_NMASK ((1 << 24) - 1)
#define GMP__RW_HOT (1 << 24)
#define GMP__RW_HMASK (15 << 24)
#define GMP__RW_SLOTS (1 << 28)
#define GMP__RW_WRITER (1 << 30)
#define GMP__RW_HELD (-(1 << 30))
#define GMP__RW_ABANDONED (1 << 29)

static inline gmp__rwmutex_words *gmp__rwmutex_words_of(gmp_rwmutex *rw)
{
	return (gmp__rwmutex_words *)(void *)rw;
}

static inline gmp__once_words *gmp__once_words_of(gmp_once *o)
{
	return (gmp__once_words *)(void *)o;
}

static inline gmp__cond_words *gmp__cond_words_of(gmp_cond *c)
{
	return (gmp__cond_words *)(void *)c;
}

static inline gmp__sem_words *gmp__sem_words_of(gmp_sem *s)
{
	return (gmp__sem_words *)(void *)s;
}

/* A deadline for gmp__waiter_sleep, which reads a negative one as "none":
 * a negative absolute deadline of the public calls is long past. */
static inline int64_t gmp__deadline_past_ok(int64_t deadline_ns)
{
	return deadline_ns < 0 ? 0 : deadline_ns;
}

#endif
