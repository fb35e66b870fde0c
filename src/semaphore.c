/* gmp_sem: a counting semaphore with FIFO waiters and deadlines; the words
 * are described in sync.h. design.md §9.5 is the contract; §28.8 the
 * design: why it keeps a queue of waiters (wait.h) of its own rather than
 * using the runtime semaphore (sema.c), and the one signed word, state,
 * that the lock-free fast paths read and that every move through a
 * negative value changes together with the queue, under the lock.
 *
 * Memory order. A unit carries what its releaser did before releasing to
 * whoever takes it: the releaser's CAS or add is full (release is what it
 * needs), the fast acquire's CAS is full (acquire is what it needs: atomic.h
 * has no 64-bit acquire CAS), and a handed-over unit travels with the
 * waiter's wake (release store, acquire load; wait.c).
 */
#include "preempt.h"
#include "sync.h"

static inline int64_t load_state(gmp__sem_words *s)
{
	return (int64_t)gmp__load64_rlx(&s->state);
}

/* One CAS at a time while state > 0. */
static inline bool take_fast(gmp__sem_words *s)
{
	for (int64_t v = load_state(s); v > 0; v = load_state(s))
		if (gmp__cas64_full(&s->state, (uint64_t)v, (uint64_t)(v - 1)))
			return true;
	return false;
}

static void sem_unlock(void *lock)
{
	gmp__unlock(lock);
}

static void queue_push(gmp__sem_words *s, gmp__waiter *w)
{
	w->next = NULL;
	w->prev = s->tail;
	if (s->tail)
		s->tail->next = w;
	else
		s->head = w;
	s->tail = w;
}

/* Takes w off the queue and out of state's waiter count (lock held). */
static void queue_remove(gmp__sem_words *s, gmp__waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		s->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		s->tail = w->prev;
	w->next = w->prev = NULL;
	w->c = NULL; /* off the queue */
	gmp__add64_full(&s->state, 1);
}

static _Noreturn void throw_overflow(gmp_sem *sem)
{
	gmp__throw("gmp_sem_release of %p beyond INT64_MAX", (void *)sem);
}

/* deadline: absolute, or -1 for none. 0 or -ETIMEDOUT. */
static __attribute__((noinline)) int acquire_slow(gmp_sem *sem,
						  int64_t deadline)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__sem_words *s = gmp__sem_words_of(sem);
	gmp__lock(&s->lock);
	for (;;) {
		int64_t v = load_state(s);
		if (v > 0) {
			/* A fast release got in meanwhile. */
			if (gmp__cas64_full(&s->state, (uint64_t)v,
					    (uint64_t)(v - 1))) {
				gmp__unlock(&s->lock);
				return 0;
			}
			continue;
		}
		if (deadline >= 0 && deadline <= gmp__nanotime()) {
			gmp__unlock(&s->lock);
			return -ETIMEDOUT;
		}
		/* v <= 0: count ourselves in. Fails only if a fast release
		 * raised 0 to 1 meanwhile. */
		if (gmp__cas64_full(&s->state, (uint64_t)v, (uint64_t)(v - 1)))
			break;
	}
	gmp__waiter w;
	gmp__waiter_init_as(&w, stay.g);
	w.c = s;                          /* queued */
	w.aux = deadline >= 0 ? s : NULL; /* claimable by a deadline */
	queue_push(s, &w);
	gmp__waiter_sleep(&w, sem_unlock, &s->lock, GMP__WAIT_SEM, deadline);
	if (w.woken)
		return 0; /* a release handed us its unit */
	gmp__lock(&s->lock);
	if (w.c)
		queue_remove(s, &w);
	gmp__unlock(&s->lock);
	return -ETIMEDOUT;
}

GMP_EXTERN void gmp_sem_init(gmp_sem *sem, int64_t count)
{
	if (count < 0)
		gmp__throw("gmp_sem_init of %p with a negative count %lld",
			   (void *)sem, (long long)count);
	gmp__sem_words *s = gmp__sem_words_of(sem);
	s->lock = (gmp__mutex)GMP__MUTEX_INIT;
	s->head = s->tail = NULL;
	/* release: a semaphore handed to another thread after init. */
	gmp__store64_rel(&s->state, (uint64_t)count);
}

GMP_EXTERN void gmp_sem_acquire(gmp_sem *sem)
{
	if (GMP__LIKELY(take_fast(gmp__sem_words_of(sem))))
		return;
	acquire_slow(sem, -1);
}

GMP_EXTERN bool gmp_sem_try_acquire(gmp_sem *sem)
{
	return take_fast(gmp__sem_words_of(sem));
}

GMP_EXTERN int gmp_sem_timed_acquire(gmp_sem *sem, int64_t deadline_ns)
{
	if (take_fast(gmp__sem_words_of(sem)))
		return 0;
	return acquire_slow(sem, gmp__deadline_past_ok(deadline_ns));
}

/* Waiters are queued: hand the unit to the oldest one its deadline has
 * not claimed, else count it. Waking readies a task into our P: inside
 * the runtime. */
static __attribute__((noinline)) void release_slow(gmp_sem *sem)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__sem_words *s = gmp__sem_words_of(sem);
	gmp__lock(&s->lock);
	gmp__waiter *w;
	while ((w = s->head) != NULL) {
		queue_remove(s, w);
		/* Without a deadline its only waker is whoever dequeues it:
		 * no claim needed (wait.h). */
		if (!w->aux || gmp__waiter_claim(w)) {
			gmp__unlock(&s->lock);
			gmp__waiter_wake_by(w, stay.g);
			return;
		}
		/* Its deadline won; it has left. The next one, then. */
	}
	/* Nobody (left) to hand it to. */
	int64_t v = load_state(s);
	if (GMP__DEBUG && v < 0)
		gmp__throw("gmp_sem %p: state %lld with an empty queue",
			   (void *)sem, (long long)v);
	for (;; v = load_state(s)) {
		if (v == INT64_MAX)
			throw_overflow(sem);
		if (gmp__cas64_full(&s->state, (uint64_t)v, (uint64_t)(v + 1)))
			break;
	}
	gmp__unlock(&s->lock);
}

GMP_EXTERN void gmp_sem_release(gmp_sem *sem)
{
	gmp__sem_words *s = gmp__sem_words_of(sem);
	for (int64_t v = load_state(s); v >= 0; v = load_state(s)) {
		if (GMP__UNLIKELY(v == INT64_MAX))
			throw_overflow(sem);
		/* full (release is what it needs): see the top comment. */
		if (gmp__cas64_full(&s->state, (uint64_t)v, (uint64_t)(v + 1)))
			return;
	}
	release_slow(sem);
}
