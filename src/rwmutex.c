/* gmp_rwmutex: Go's sync.RWMutex on the runtime semaphore (the words are
 * described in sync.h).
 *
 * reader_count carries both sides. A reader adds 1: if the result is
 * non-negative no writer is pending and it is in, with that one atomic. A
 * writer first takes the writers' mutex w (so writers line up among
 * themselves there), then subtracts MAX_READERS: from that moment every
 * new reader finds the count negative and sleeps on reader_sem, and the
 * value the writer's add returns tells it how many readers were already
 * in. It adds that number to reader_wait and, unless it is zero, sleeps on
 * writer_sem. Each of those readers, leaving, finds reader_count negative
 * (a writer is pending) and decrements reader_wait; the one that takes it
 * to zero releases the writer. The writer's unlock adds MAX_READERS back,
 * which lets new readers in at once, and then releases reader_sem once per
 * reader that queued behind it (the add's result says how many) before
 * dropping w, so the readers that waited go in before the next writer.
 *
 * reader_wait may go below zero for a moment: a reader the writer counted
 * may leave between the writer's two adds, and decrement it before the
 * writer adds the count. The sum comes out right either way, and the
 * writer sleeps only if its own add leaves it non-zero.
 *
 * Memory order. The read lock is the reader's full add (acquire is what it
 * needs): it reads the value of the writer's unlock add (full, release is
 * what that needs), or a later one in the same modification order. A
 * reader's runlock add (full: release) is read by the writer's lock add,
 * or, when the writer sleeps, the release of writer_sem carries the edge
 * (the semaphore's full increment and acquire CAS). Readers that slept on
 * reader_sem get the writer's critical section through that semaphore.
 */
#include "preempt.h"
#include "sema.h"
#include "sync.h"

/* A bias larger than any number of readers, so that count - MAX_READERS
 * is negative however many readers are in. */
#define MAX_READERS (1 << 30)

static _Noreturn void throw_runlock(gmp_rwmutex *rw, const char *what)
{
	gmp__throw("runlock of %s rwmutex %p", what, (void *)rw);
}

/* Out of line: a writer is pending, we sleep until its unlock lets us in. */
static __attribute__((noinline)) void rlock_slow(gmp_rwmutex *rw)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__semacquire(&gmp__rwmutex_words_of(rw)->reader_sem, false,
			GMP__WAIT_RWMUTEX_RLOCK);
}

GMP_EXTERN void gmp_rwmutex_rlock(gmp_rwmutex *rw)
{
	/* full (acquire is what it needs): pairs with the writer's unlock
	 * add. */
	int32_t r = (int32_t)gmp__add32_full(
			    &gmp__rwmutex_words_of(rw)->reader_count, 1) +
		    1;
	if (GMP__UNLIKELY(r < 0))
		rlock_slow(rw);
}

GMP_EXTERN bool gmp_rwmutex_tryrlock(gmp_rwmutex *rw)
{
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	for (;;) {
		uint32_t c = gmp__load32_rlx(&w->reader_count);
		if ((int32_t)c < 0)
			return false; /* a writer is pending or holds it */
		/* acquire: as rlock's add. Retried only when another reader
		 * changed the count, which is progress. */
		if (gmp__cas32_acq(&w->reader_count, c, c + 1))
			return true;
	}
}

/* r: reader_count as our decrement left it (negative). */
static __attribute__((noinline)) void runlock_slow(gmp_rwmutex *rw, int32_t r)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	/* Before our add the count was r + 1: 0 means nobody was in; exactly
	 * -MAX_READERS, a writer holding it with no reader in or queued. */
	if (r + 1 == 0)
		throw_runlock(rw, "unlocked");
	if (r + 1 == -MAX_READERS)
		throw_runlock(rw, "write-locked");
	/* A writer is pending: are we the last reader it waits for? full:
	 * publishes our read section to the writer (with the semaphore). */
	if ((int32_t)gmp__add32_full(&w->reader_wait, -1) - 1 == 0)
		gmp__semrelease(&w->writer_sem, false);
}

GMP_EXTERN void gmp_rwmutex_runlock(gmp_rwmutex *rw)
{
	/* full (release is what it needs): publishes the read section to
	 * the writer's lock add. */
	int32_t r = (int32_t)gmp__add32_full(
			    &gmp__rwmutex_words_of(rw)->reader_count, -1) -
		    1;
	if (GMP__UNLIKELY(r < 0))
		runlock_slow(rw, r);
}

GMP_EXTERN void gmp_rwmutex_lock(gmp_rwmutex *rw)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	gmp_mutex_lock(&w->w); /* first among writers */
	/* Announce ourselves to readers; learn how many are in. full: the
	 * acquire of what the departed readers published. */
	int32_t r = (int32_t)gmp__add32_full(&w->reader_count, -MAX_READERS);
	if (r < 0)
		gmp__throw("rwmutex %p: reader count %d with the writers' "
			   "mutex just taken",
			   (void *)rw, r);
	if (r == 0)
		return;
	int32_t left = (int32_t)gmp__add32_full(&w->reader_wait, r) + r;
	if (left < 0)
		throw_runlock(rw, "write-locked");
	if (left != 0)
		gmp__semacquire(&w->writer_sem, false, GMP__WAIT_RWMUTEX_LOCK);
}

GMP_EXTERN bool gmp_rwmutex_trylock(gmp_rwmutex *rw)
{
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	if (!gmp_mutex_trylock(&w->w))
		return false;
	/* acquire: as lock's add; only with no reader in at all. */
	if (!gmp__cas32_acq(&w->reader_count, 0, (uint32_t)-MAX_READERS)) {
		gmp_mutex_unlock(&w->w);
		return false;
	}
	return true;
}

GMP_EXTERN void gmp_rwmutex_unlock(gmp_rwmutex *rw)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	/* full (release is what it needs): publishes the write section to
	 * every reader's add; the result is the readers queued behind us. */
	int32_t r = (int32_t)gmp__add32_full(&w->reader_count, MAX_READERS) +
		    MAX_READERS;
	if (r >= MAX_READERS)
		gmp__throw("unlock of %s rwmutex %p",
			   r == MAX_READERS ? "unlocked" : "read-locked",
			   (void *)rw);
	/* A held write lock leaves reader_wait at zero: below, a runlock
	 * came while we held it; above, the writer has not got in yet. */
	int32_t waiting = (int32_t)gmp__load32_rlx(&w->reader_wait);
	if (waiting < 0)
		throw_runlock(rw, "write-locked");
	if (waiting > 0)
		gmp__throw("unlock of rwmutex %p whose writer still waits for "
			   "readers",
			   (void *)rw);
	for (int32_t i = 0; i < r; i++)
		gmp__semrelease(&w->reader_sem, false);
	gmp_mutex_unlock(&w->w);
}
