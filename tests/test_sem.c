/* gmp_sem: never more holders than the count under 100 tasks (and
 * threads); FIFO service, tasks and foreign threads queued together; a
 * release goes to the waiter, not to a newcomer; try and init; a timed
 * waiter gives up and leaves the queue, and a unit released meanwhile
 * goes on to the next waiter; a past deadline with a unit available
 * acquires; threads with no runtime; a stress run with timed acquires
 * under GMP_DEBUG=randomize that checks no unit is lost or made up.
 * Misuse (a negative initial count) is in test_misuse.c.
 *
 * The state word is read inside (sync.h): < 0 is minus the waiters. */
#include <pthread.h>

#include "gmp_test.h"
#include "export_test.h"

static int64_t sem_state(gmp_sem *s)
{
	return (int64_t)gmp__load64_acq(&gmp__sem_words_of(s)->state);
}

/* ---- never more than the count ---------------------------------------------------- */

enum { CAP = 3 };

static gmp_sem cap_sem;
static atomic_int cap_inside, cap_max;
static gmp_wg cap_wg = GMP_WG_INIT;
static int cap_iters;

static void cap_work(uintptr_t k)
{
	for (int i = 0; i < cap_iters; i++) {
		bool timed = (k + (uintptr_t)i) % 4 == 0;
		if (timed) {
			if (gmp_sem_timed_acquire(
				    &cap_sem, gmp_nanotime() + 20 * US) != 0)
				continue;
		} else if ((k + (uintptr_t)i) % 4 == 1) {
			if (!gmp_sem_try_acquire(&cap_sem))
				continue;
		} else {
			gmp_sem_acquire(&cap_sem);
		}
		int n = atomic_fetch_add(&cap_inside, 1) + 1;
		T_ASSERT(n <= CAP);
		int m = atomic_load(&cap_max);
		while (n > m && !atomic_compare_exchange_weak(&cap_max, &m, n))
			;
		if (i % 8 == 0)
			gmp_yield();
		atomic_fetch_sub(&cap_inside, 1);
		gmp_sem_release(&cap_sem);
	}
	gmp_wg_done(&cap_wg);
}

static void cap_task(void *arg)
{
	cap_work((uintptr_t)arg);
}

static void *cap_thread(void *arg)
{
	cap_work((uintptr_t)arg);
	return NULL;
}

static void cap_run(bool randomize)
{
	enum { NTASKS = 100, NTHREADS = 2 };
	cap_iters = TU_SCALE(2000);
	gmp_sem_init(&cap_sem, CAP);
	atomic_store(&cap_max, 0);
	if (randomize)
		setenv("GMP_DEBUG", "randomize=1", 1);
	tu_init(2);
	unsetenv("GMP_DEBUG");
	gmp_wg_add(&cap_wg, NTASKS + NTHREADS);
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, cap_thread,
						(void *)(uintptr_t)(1000 + i)),
				 0);
	for (int i = 0; i < NTASKS; i++)
		assert_true(gmp_go(cap_task, (void *)(uintptr_t)i) > 0);
	gmp_wg_wait(&cap_wg);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
	/* Every unit came back, and no waiter is left behind. */
	assert_int_equal(sem_state(&cap_sem), CAP);
	assert_true(atomic_load(&cap_max) >= 1 && atomic_load(&cap_max) <= CAP);
}

static void test_sem_never_exceeds_count_100_tasks(void **s)
{
	(void)s;
	cap_run(false);
	assert_int_equal(atomic_load(&cap_max), CAP); /* and reached it */
}

static void test_sem_stress_randomized(void **s)
{
	(void)s;
	cap_run(true);
}

/* ---- FIFO, tasks and threads ------------------------------------------------------- */

enum { NFIFO = 9 };

static gmp_sem fifo_sem = GMP_SEM_INIT;
static atomic_int fifo_order[NFIFO], fifo_n;

static void fifo_acquire(int id)
{
	if (id % 2)
		T_ASSERT(gmp_sem_timed_acquire(
				 &fifo_sem, gmp_nanotime() + 100 * SEC) == 0);
	else
		gmp_sem_acquire(&fifo_sem);
	/* The slot first, then the count the test waits for; one waiter at
	 * a time gets here (the test releases one unit, then waits for the
	 * count). */
	int n = atomic_load(&fifo_n);
	atomic_store(&fifo_order[n], id);
	atomic_store(&fifo_n, n + 1);
}

static void fifo_task(void *arg)
{
	fifo_acquire((int)(uintptr_t)arg);
}

static void *fifo_thread(void *arg)
{
	fifo_acquire((int)(uintptr_t)arg);
	return NULL;
}

static void test_sem_fifo_tasks_and_threads(void **s)
{
	(void)s;
	tu_init(2);
	pthread_t th[NFIFO];
	int nth = 0;
	for (int i = 0; i < NFIFO; i++) {
		if (i % 3 == 2)
			assert_int_equal(pthread_create(&th[nth++], NULL,
							fifo_thread,
							(void *)(uintptr_t)i),
					 0);
		else
			assert_true(gmp_go(fifo_task, (void *)(uintptr_t)i) >
				    0);
		TU_WAIT_FOR(sem_state(&fifo_sem) == -(int64_t)i - 1);
	}
	for (int i = 0; i < NFIFO; i++) {
		gmp_sem_release(&fifo_sem);
		/* The unit went to the oldest waiter, not to the count: a
		 * newcomer cannot take it. */
		assert_false(gmp_sem_try_acquire(&fifo_sem));
		TU_WAIT_FOR(atomic_load(&fifo_n) == i + 1);
		assert_int_equal(atomic_load(&fifo_order[i]), i);
		assert_int_equal(sem_state(&fifo_sem), -(NFIFO - i - 1));
	}
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(sem_state(&fifo_sem), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- init and try ------------------------------------------------------------------- */

static void test_sem_init_and_try(void **s)
{
	(void)s;
	gmp_sem zero = GMP_SEM_INIT;
	assert_false(gmp_sem_try_acquire(&zero)); /* count 0 */
	gmp_sem_release(&zero);
	assert_true(gmp_sem_try_acquire(&zero));
	assert_false(gmp_sem_try_acquire(&zero));

	gmp_sem sem;
	memset(&sem, 0xa5, sizeof sem); /* init overwrites whatever is there */
	gmp_sem_init(&sem, 2);
	assert_true(gmp_sem_try_acquire(&sem));
	assert_true(gmp_sem_try_acquire(&sem));
	assert_false(gmp_sem_try_acquire(&sem));
	gmp_sem_release(&sem);
	assert_true(gmp_sem_try_acquire(&sem));
	gmp_sem_release(&sem);
	gmp_sem_release(&sem);
	assert_int_equal(sem_state(&sem), 2);

	gmp_sem big;
	gmp_sem_init(&big, INT64_MAX - 1);
	gmp_sem_release(&big); /* to INT64_MAX: fine */
	assert_int_equal(sem_state(&big), INT64_MAX);
}

/* ---- deadlines ------------------------------------------------------------------------ */

static gmp_sem dl_sem = GMP_SEM_INIT;
static atomic_int dl_a = 1, dl_b = 1;

/* A's timeout: long enough for B to queue behind it, doubled by dl_round
 * when a slow host (a sanitizer, qemu, a loaded machine) needed longer. */
static int64_t dl_delay = 30 * MS;

static void dl_a_task(void *arg)
{
	(void)arg;
	int64_t t0 = gmp_nanotime();
	int r = gmp_sem_timed_acquire(&dl_sem, t0 + dl_delay);
	T_ASSERT(gmp_nanotime() - t0 >= dl_delay);
	atomic_store(&dl_a, r);
}

static void *dl_a_thread(void *arg)
{
	dl_a_task(arg);
	return NULL;
}

static void dl_b_task(void *arg)
{
	(void)arg;
	gmp_sem_acquire(&dl_sem);
	atomic_store(&dl_b, 0);
}

static void dl_round(bool a_is_thread)
{
	for (dl_delay = 30 * MS;; dl_delay *= 2) {
		assert_true(dl_delay <= 60 * SEC);
		atomic_store(&dl_a, 1);
		atomic_store(&dl_b, 1);
		pthread_t th;
		if (a_is_thread)
			assert_int_equal(pthread_create(&th, NULL, dl_a_thread,
							NULL),
					 0);
		else
			assert_true(gmp_go(dl_a_task, NULL) > 0);
		TU_WAIT_FOR(sem_state(&dl_sem) == -1 ||
			    atomic_load(&dl_a) != 1);
		assert_true(gmp_go(dl_b_task, NULL) > 0);
		TU_WAIT_FOR(sem_state(&dl_sem) == -2 ||
			    atomic_load(&dl_a) != 1);
		/* A still inside now means both were queued at once. */
		bool staged = atomic_load(&dl_a) == 1;
		if (staged) {
			/* A, first in line, gives up and leaves; B is still
			 * queued. */
			TU_WAIT_FOR(atomic_load(&dl_a) != 1);
			assert_int_equal(atomic_load(&dl_a), -ETIMEDOUT);
			assert_int_equal(sem_state(&dl_sem), -1);
		} else {
			TU_WAIT_FOR(sem_state(&dl_sem) == -1); /* B */
		}
		/* The release goes to B. */
		gmp_sem_release(&dl_sem);
		TU_WAIT_FOR(atomic_load(&dl_b) == 0);
		assert_int_equal(sem_state(&dl_sem), 0);
		if (a_is_thread)
			pthread_join(th, NULL);
		if (staged)
			return;
	}
}

static void test_sem_timed_waiter_leaves_queue(void **s)
{
	(void)s;
	tu_init(2);
	dl_round(false);
	dl_round(true);
	assert_int_equal(gmp_shutdown(), 0);
}

/* The race itself: a release takes off the queue a waiter whose deadline
 * has claimed it but which has not yet come back to leave. The test holds
 * the queue lock so that the releaser and the timed-out waiter both queue
 * on it, the releaser first; the unit must go on to the next waiter. A's
 * deadline must fall after that set-up, however slow the host: a round in
 * which A gave up too early is run again with a deadline twice as far. */
static int64_t race_deadline;

static void *race_a_thread(void *arg)
{
	(void)arg;
	atomic_store(&dl_a, gmp_sem_timed_acquire(&dl_sem, race_deadline));
	return NULL;
}

static void *race_release_thread(void *arg)
{
	(void)arg;
	gmp_sem_release(&dl_sem);
	return NULL;
}

static void test_sem_release_skips_waiter_whose_deadline_won(void **s)
{
	(void)s;
	tu_init(2);
	gmp__sem_words *w = gmp__sem_words_of(&dl_sem);
	for (int64_t d = 100 * MS;; d *= 2) {
		assert_true(d <= 60 * SEC);
		atomic_store(&dl_a, 1);
		atomic_store(&dl_b, 1);
		race_deadline = gmp_nanotime() + d;
		pthread_t a, rel;
		assert_int_equal(pthread_create(&a, NULL, race_a_thread, NULL),
				 0);
		TU_WAIT_FOR(sem_state(&dl_sem) == -1 ||
			    atomic_load(&dl_a) != 1);
		assert_true(gmp_go(dl_b_task, NULL) > 0);
		TU_WAIT_FOR(sem_state(&dl_sem) == -2 ||
			    atomic_load(&dl_a) != 1);
		gmp__lock(&w->lock);
		if (atomic_load(&dl_a) != 1) {
			/* A left before the stage was set: again. */
			gmp__unlock(&w->lock);
			pthread_join(a, NULL);
			TU_WAIT_FOR(sem_state(&dl_sem) == -1);
			gmp_sem_release(&dl_sem);
			TU_WAIT_FOR(atomic_load(&dl_b) == 0);
			continue;
		}
		assert_int_equal(pthread_create(&rel, NULL, race_release_thread,
						NULL),
				 0);
		TU_WAIT_FOR(gmp__load32_rlx(&w->lock.key) == GMP__SLEEPING);
		/* A's deadline passes and it queues on the lock behind the
		 * releaser: nothing observable marks the moment, so give it
		 * ample time. */
		int64_t left = race_deadline - gmp_nanotime();
		tu_sleep((left > 0 ? left : 0) + 150 * MS);
		assert_int_equal(atomic_load(&dl_a), 1); /* still inside */
		gmp__unlock(&w->lock);
		pthread_join(rel, NULL);
		pthread_join(a, NULL);
		assert_int_equal(atomic_load(&dl_a), -ETIMEDOUT);
		TU_WAIT_FOR(atomic_load(&dl_b) != 1);
		assert_int_equal(atomic_load(&dl_b), 0); /* B got the unit */
		assert_int_equal(sem_state(&dl_sem), 0);
		break;
	}
	assert_int_equal(gmp_shutdown(), 0);
}

static void past_deadline_body(void)
{
	gmp_sem sem;
	gmp_sem_init(&sem, 2);
	int64_t now = gmp_nanotime();
	T_ASSERT(gmp_sem_timed_acquire(&sem, now - 1) == 0);
	T_ASSERT(gmp_sem_timed_acquire(&sem, -7) == 0);
	T_ASSERT(gmp_sem_timed_acquire(&sem, now - 1) == -ETIMEDOUT);
	T_ASSERT(gmp_sem_timed_acquire(&sem, -1) == -ETIMEDOUT);
	T_ASSERT(gmp_sem_timed_acquire(&sem, gmp_nanotime() + 5 * MS) ==
		 -ETIMEDOUT);
	T_ASSERT((int64_t)gmp__load64_acq(&gmp__sem_words_of(&sem)->state) ==
		 0);
}

static void past_deadline_task(void *arg)
{
	(void)arg;
	past_deadline_body();
}

static void test_sem_past_deadline_with_count_acquires(void **s)
{
	(void)s;
	past_deadline_body(); /* a thread, runtime off */
	tu_init(1);
	assert_true(gmp_go(past_deadline_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- threads, no runtime ---------------------------------------------------------------- */

static void test_sem_threads_without_runtime(void **s)
{
	(void)s;
	cap_iters = TU_SCALE(20000);
	gmp_sem_init(&cap_sem, CAP);
	atomic_store(&cap_max, 0);
	gmp_wg_add(&cap_wg, 4);
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, cap_thread,
						(void *)(uintptr_t)i),
				 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(sem_state(&cap_sem), CAP);
	assert_int_equal(tu_stats().procs, 0);
}

GMP_TEST_MAIN(cmocka_unit_test(test_sem_never_exceeds_count_100_tasks),
	      cmocka_unit_test(test_sem_fifo_tasks_and_threads),
	      cmocka_unit_test(test_sem_init_and_try),
	      cmocka_unit_test(test_sem_timed_waiter_leaves_queue),
	      cmocka_unit_test(test_sem_release_skips_waiter_whose_deadline_won),
	      cmocka_unit_test(test_sem_past_deadline_with_count_acquires),
	      cmocka_unit_test(test_sem_threads_without_runtime),
	      cmocka_unit_test(test_sem_stress_randomized))
