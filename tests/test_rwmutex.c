/* gmp_rwmutex: readers overlap, a writer excludes everyone, a waiting
 * writer keeps new readers out (and the try calls fail while it waits),
 * the readers queued behind a writer go in when it leaves, tasks and
 * foreign threads mixed, threads with no runtime at all, and a stress run
 * under GMP_DEBUG=randomize. Misuse (runlock and unlock of what is not
 * locked that way) is in test_misuse.c.
 *
 * The tests look inside through sync.h (the reader count, and how many
 * sleep on each semaphore) to know when someone is really asleep. */
#include <pthread.h>

#include "gmp_test.h"
#include "export_test.h"

static gmp__rwmutex_words *words(gmp_rwmutex *rw)
{
	return gmp__rwmutex_words_of(rw);
}

static uint32_t readers_asleep(gmp_rwmutex *rw)
{
	return gmp__sema_nwaiters(&words(rw)->reader_sem);
}

static uint32_t writers_asleep(gmp_rwmutex *rw)
{
	return gmp__sema_nwaiters(&words(rw)->writer_sem);
}

static void assert_idle(gmp_rwmutex *rw)
{
	gmp_rwmutex zero = GMP_RWMUTEX_INIT;
	assert_memory_equal(rw, &zero, sizeof zero);
}

/* ---- readers overlap ---------------------------------------------------- */

enum { NOVERLAP = 16 };

static gmp_rwmutex ov_rw = GMP_RWMUTEX_INIT;
static atomic_int ov_inside, ov_done;

/* Every reader holds the read lock until all of them hold it: only
 * possible if they overlap. */
static void overlap_body(void)
{
	gmp_rwmutex_rlock(&ov_rw);
	atomic_fetch_add(&ov_inside, 1);
	TU_WAIT_FOR(atomic_load(&ov_inside) == NOVERLAP);
	gmp_rwmutex_runlock(&ov_rw);
	atomic_fetch_add(&ov_done, 1);
}

static void overlap_task(void *arg)
{
	(void)arg;
	overlap_body();
}

static void *overlap_thread(void *arg)
{
	(void)arg;
	overlap_body();
	return NULL;
}

static void test_rwmutex_readers_overlap(void **s)
{
	(void)s;
	tu_init(2);
	pthread_t th[NOVERLAP / 4];
	for (int i = 0; i < NOVERLAP / 4; i++)
		assert_int_equal(
			pthread_create(&th[i], NULL, overlap_thread, NULL), 0);
	for (int i = 0; i < NOVERLAP - NOVERLAP / 4; i++)
		assert_true(gmp_go(overlap_task, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&ov_done) == NOVERLAP);
	for (int i = 0; i < NOVERLAP / 4; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_idle(&ov_rw);
}

/* ---- a writer excludes everyone ------------------------------------------ */

static gmp_rwmutex ex_rw = GMP_RWMUTEX_INIT;
static atomic_int ex_readers, ex_writers, ex_maxreaders;
static long ex_value; /* written by writers only, read by readers */
static gmp_wg ex_wg = GMP_WG_INIT;
static int ex_iters;

static void exclusion_work(uintptr_t k)
{
	uint32_t x = (uint32_t)k * 2654435761u + 1;
	for (int i = 0; i < ex_iters; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		if (x % 8 == 0) {
			gmp_rwmutex_lock(&ex_rw);
			T_ASSERT(atomic_fetch_add(&ex_writers, 1) == 0);
			T_ASSERT(atomic_load(&ex_readers) == 0);
			long v = ex_value;
			if (i % 16 == 0)
				gmp_yield(); /* hold it across a switch */
			ex_value = v + 1;
			T_ASSERT(atomic_fetch_sub(&ex_writers, 1) == 1);
			gmp_rwmutex_unlock(&ex_rw);
		} else {
			gmp_rwmutex_rlock(&ex_rw);
			int r = atomic_fetch_add(&ex_readers, 1) + 1;
			int m = atomic_load(&ex_maxreaders);
			while (r > m && !atomic_compare_exchange_weak(
						&ex_maxreaders, &m, r))
				;
			T_ASSERT(atomic_load(&ex_writers) == 0);
			long v = ex_value;
			if (i % 32 == 0)
				gmp_yield();
			T_ASSERT(ex_value == v); /* no writer meanwhile */
			atomic_fetch_sub(&ex_readers, 1);
			gmp_rwmutex_runlock(&ex_rw);
		}
	}
	gmp_wg_done(&ex_wg);
}

static void exclusion_task(void *arg)
{
	exclusion_work((uintptr_t)arg);
}

static void *exclusion_thread(void *arg)
{
	exclusion_work((uintptr_t)arg);
	return NULL;
}

static void exclusion(int procs, bool randomize, int ntasks, int nthreads,
		      int iters)
{
	ex_iters = iters;
	ex_value = 0;
	atomic_store(&ex_maxreaders, 0);
	if (randomize)
		setenv("GMP_DEBUG", "randomize=1", 1);
	tu_init(procs);
	unsetenv("GMP_DEBUG");
	gmp_wg_add(&ex_wg, ntasks + nthreads);
	pthread_t th[8];
	for (int i = 0; i < nthreads; i++)
		assert_int_equal(pthread_create(&th[i], NULL, exclusion_thread,
						(void *)(uintptr_t)(100 + i)),
				 0);
	for (int i = 0; i < ntasks; i++)
		assert_true(gmp_go(exclusion_task, (void *)(uintptr_t)i) > 0);
	gmp_wg_wait(&ex_wg);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_idle(&ex_rw);
	assert_true(ex_value > 0);
}

static void test_rwmutex_writer_excludes_all_maxprocs_1(void **s)
{
	(void)s;
	exclusion(1, false, 8, 0, TU_SCALE(100000));
}

static void test_rwmutex_writer_excludes_all_maxprocs_4(void **s)
{
	(void)s;
	exclusion(4, false, 8, 2, TU_SCALE(100000));
	/* Whether readers overlapped here depends on timing (a sanitizer's
	 * slow-down can serialise them); readers_overlap checks it with a
	 * latch. Reported, not asserted. */
	print_message("at most %d readers inside at once\n",
		      (int)atomic_load(&ex_maxreaders));
}

static void test_rwmutex_stress_randomized(void **s)
{
	(void)s;
	exclusion(2, true, 12, 2, TU_SCALE(100000));
}

/* ---- writer preference ------------------------------------------------------ */

static gmp_rwmutex pref_rw = GMP_RWMUTEX_INIT;
static atomic_int pref_w_in, pref_r2_in, pref_w_out;
static atomic_int pref_release_r1;

static void pref_reader1(void *arg)
{
	(void)arg;
	gmp_rwmutex_rlock(&pref_rw);
	TU_WAIT_FOR(atomic_load(&pref_release_r1));
	gmp_rwmutex_runlock(&pref_rw);
}

static void pref_writer(void *arg)
{
	(void)arg;
	gmp_rwmutex_lock(&pref_rw);
	atomic_store(&pref_w_in, 1);
	/* The reader that came after us is still out. */
	T_ASSERT(atomic_load(&pref_r2_in) == 0);
	TU_WAIT_FOR(atomic_load(&pref_w_out));
	gmp_rwmutex_unlock(&pref_rw);
}

static void *pref_reader2_thread(void *arg)
{
	(void)arg;
	gmp_rwmutex_rlock(&pref_rw);
	T_ASSERT(atomic_load(&pref_w_in) == 1); /* after the writer */
	atomic_store(&pref_r2_in, 1);
	gmp_rwmutex_runlock(&pref_rw);
	return NULL;
}

static void test_rwmutex_writer_preference(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(pref_reader1, NULL) > 0);
	TU_WAIT_FOR(gmp__load32_rlx(&words(&pref_rw)->reader_count) == 1);
	assert_true(gmp_go(pref_writer, NULL) > 0);
	/* The writer waits for reader 1. */
	TU_WAIT_FOR(writers_asleep(&pref_rw) == 1);
	/* Nobody new gets in now: the try calls fail, and a new reader (a
	 * foreign thread) queues behind the writer. */
	assert_false(gmp_rwmutex_tryrlock(&pref_rw));
	assert_false(gmp_rwmutex_trylock(&pref_rw));
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, pref_reader2_thread, NULL),
			 0);
	TU_WAIT_FOR(readers_asleep(&pref_rw) == 1);
	assert_int_equal(atomic_load(&pref_w_in), 0);
	/* Reader 1 leaves: the writer goes in, reader 2 still waits. */
	atomic_store(&pref_release_r1, 1);
	TU_WAIT_FOR(atomic_load(&pref_w_in));
	assert_int_equal(readers_asleep(&pref_rw), 1);
	assert_int_equal(atomic_load(&pref_r2_in), 0);
	assert_false(gmp_rwmutex_tryrlock(&pref_rw));
	assert_false(gmp_rwmutex_trylock(&pref_rw));
	/* The writer leaves: reader 2 goes in. */
	atomic_store(&pref_w_out, 1);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&pref_r2_in), 1);
	assert_int_equal(gmp_shutdown(), 0);
	assert_idle(&pref_rw);
}

/* The readers that queued behind a writer go in before the next writer:
 * neither side starves. */
static gmp_rwmutex alt_rw = GMP_RWMUTEX_INIT;
static atomic_int alt_readers_in, alt_w2_in, alt_hold;

static void alt_writer1(void *arg)
{
	(void)arg;
	gmp_rwmutex_lock(&alt_rw);
	TU_WAIT_FOR(atomic_load(&alt_hold) == 0);
	gmp_rwmutex_unlock(&alt_rw);
}

static void alt_reader(void *arg)
{
	(void)arg;
	gmp_rwmutex_rlock(&alt_rw);
	T_ASSERT(atomic_load(&alt_w2_in) == 0);
	atomic_fetch_add(&alt_readers_in, 1);
	TU_WAIT_FOR(atomic_load(&alt_readers_in) == 3); /* together */
	gmp_rwmutex_runlock(&alt_rw);
}

static void alt_writer2(void *arg)
{
	(void)arg;
	gmp_rwmutex_lock(&alt_rw);
	T_ASSERT(atomic_load(&alt_readers_in) == 3);
	atomic_store(&alt_w2_in, 1);
	gmp_rwmutex_unlock(&alt_rw);
}

static void test_rwmutex_queued_readers_before_next_writer(void **s)
{
	(void)s;
	tu_init(2);
	atomic_store(&alt_hold, 1);
	assert_true(gmp_go(alt_writer1, NULL) > 0);
	TU_WAIT_FOR((int32_t)gmp__load32_rlx(&words(&alt_rw)->reader_count) <
		    0);
	for (int i = 0; i < 3; i++)
		assert_true(gmp_go(alt_reader, NULL) > 0);
	TU_WAIT_FOR(readers_asleep(&alt_rw) == 3);
	assert_true(gmp_go(alt_writer2, NULL) > 0);
	/* Writer 2 waits for the writers' mutex. */
	TU_WAIT_FOR(gmp__sema_nwaiters(
			    &gmp__mutex_words_of(&words(&alt_rw)->w)->sema) ==
		    1);
	atomic_store(&alt_hold, 0);
	TU_WAIT_FOR(atomic_load(&alt_w2_in));
	assert_int_equal(gmp_shutdown(), 0);
	assert_idle(&alt_rw);
}

/* ---- try ---------------------------------------------------------------------- */

static gmp_rwmutex try_rw = GMP_RWMUTEX_INIT;
static atomic_int try_thread_result;

static void *try_write_thread(void *arg)
{
	(void)arg;
	atomic_store(&try_thread_result, gmp_rwmutex_trylock(&try_rw) ? 1 : 2);
	return NULL;
}

static void try_task(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_rwmutex_tryrlock(&try_rw));
	T_ASSERT(gmp_rwmutex_tryrlock(&try_rw)); /* readers share */
	T_ASSERT(!gmp_rwmutex_trylock(&try_rw));
	pthread_t th;
	T_ASSERT(pthread_create(&th, NULL, try_write_thread, NULL) == 0);
	pthread_join(th, NULL);
	T_ASSERT(atomic_load(&try_thread_result) == 2);
	gmp_rwmutex_runlock(&try_rw);
	gmp_rwmutex_runlock(&try_rw);
	T_ASSERT(gmp_rwmutex_trylock(&try_rw));
	T_ASSERT(!gmp_rwmutex_trylock(&try_rw));
	T_ASSERT(!gmp_rwmutex_tryrlock(&try_rw));
	gmp_rwmutex_unlock(&try_rw);
	gmp_rwmutex_lock(&try_rw);
	T_ASSERT(!gmp_rwmutex_tryrlock(&try_rw));
	gmp_rwmutex_unlock(&try_rw);
}

static void test_rwmutex_try(void **s)
{
	(void)s;
	gmp_rwmutex zero;
	memset(&zero, 0, sizeof zero);
	assert_true(gmp_rwmutex_trylock(&zero));
	assert_false(gmp_rwmutex_tryrlock(&zero));
	gmp_rwmutex_unlock(&zero);
	assert_true(gmp_rwmutex_tryrlock(&zero));
	gmp_rwmutex_runlock(&zero);
	assert_idle(&zero);
	tu_init(2);
	assert_true(gmp_go(try_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_idle(&try_rw);
}

/* ---- foreign threads, no runtime --------------------------------------------- */

static void *norun_thread(void *arg)
{
	exclusion_work((uintptr_t)arg);
	return NULL;
}

static void test_rwmutex_threads_without_runtime(void **s)
{
	(void)s;
	ex_iters = TU_SCALE(20000);
	ex_value = 0;
	gmp_wg_add(&ex_wg, 4);
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, norun_thread,
						(void *)(uintptr_t)i),
				 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_idle(&ex_rw);
	assert_true(ex_value > 0);
	assert_int_equal(tu_stats().procs, 0); /* still not running */
}

GMP_TEST_MAIN(cmocka_unit_test(test_rwmutex_readers_overlap),
	      cmocka_unit_test(test_rwmutex_writer_excludes_all_maxprocs_1),
	      cmocka_unit_test(test_rwmutex_writer_excludes_all_maxprocs_4),
	      cmocka_unit_test(test_rwmutex_writer_preference),
	      cmocka_unit_test(test_rwmutex_queued_readers_before_next_writer),
	      cmocka_unit_test(test_rwmutex_try),
	      cmocka_unit_test(test_rwmutex_threads_without_runtime),
	      cmocka_unit_test(test_rwmutex_stress_randomized))
