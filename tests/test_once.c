/* gmp_once: fn runs exactly once, on the first caller's task or thread,
 * and no caller returns before it has returned, with 1000 tasks and 2
 * foreign threads racing; callers that arrive while fn blocks wait for it
 * by parking; plain threads with no runtime; many onces at once under
 * GMP_DEBUG=randomize. A recursive call is in test_misuse.c. */
#include <pthread.h>

#include "gmp_test.h"
#include "export_test.h"

/* ---- 1000 tasks and 2 threads --------------------------------------------- */

static gmp_once race_once = GMP_ONCE_INIT;
static atomic_int race_runs, race_fn_done, race_early, race_returned;
static _Atomic(gmp_g *) race_runner_task;
static atomic_long race_runner_tid;
static long race_value; /* written by fn only, read after gmp_once_do */
static gmp_wg race_wg = GMP_WG_INIT;
static atomic_int race_go;

static void race_fn(void *arg)
{
	T_ASSERT(arg == &race_value);
	atomic_fetch_add(&race_runs, 1);
	atomic_store(&race_runner_task, gmp_current());
	atomic_store(&race_runner_tid, (long)tu_gettid());
	/* Take a while, blocking if we are a task, so that others pile up
	 * behind. */
	if (gmp_current())
		gmp_sleep(20 * MS);
	else
		tu_sleep(20 * MS);
	race_value = 42;
	atomic_store(&race_fn_done, 1);
}

static void race_call(void)
{
	while (!atomic_load(&race_go))
		if (gmp_current())
			gmp_yield();
	gmp_once_do(&race_once, race_fn, &race_value);
	if (!atomic_load(&race_fn_done) || race_value != 42)
		atomic_fetch_add(&race_early, 1);
	atomic_fetch_add(&race_returned, 1);
}

static void race_task(void *arg)
{
	(void)arg;
	race_call();
	gmp_wg_done(&race_wg);
}

static void *race_thread(void *arg)
{
	(void)arg;
	race_call();
	return NULL;
}

static void test_once_1000_tasks_and_2_threads(void **s)
{
	(void)s;
	enum { NTASKS = 1000 };
	tu_init(2);
	gmp_wg_add(&race_wg, NTASKS);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(
			pthread_create(&th[i], NULL, race_thread, NULL), 0);
	for (int i = 0; i < NTASKS; i++)
		assert_true(gmp_go(race_task, NULL) > 0);
	atomic_store(&race_go, 1);
	gmp_wg_wait(&race_wg);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&race_runs), 1);
	assert_int_equal(atomic_load(&race_early), 0);
	assert_int_equal(atomic_load(&race_returned), NTASKS + 2);
	/* It ran on one of the callers: a task of ours, or one of the two
	 * threads (the runner's tid is then one of theirs, not ours). */
	assert_true(atomic_load(&race_runner_task) != NULL ||
		    atomic_load(&race_runner_tid) != (long)getpid());
	assert_int_equal(gmp_shutdown(), 0);
	/* Done: later calls return at once, without calling fn. */
	gmp_once_do(&race_once, race_fn, &race_value);
	assert_int_equal(atomic_load(&race_runs), 1);
}

/* ---- callers park while fn blocks ----------------------------------------- */

static gmp_once park_once = GMP_ONCE_INIT;
static gmp_chan *park_ch;
static atomic_int park_runner_id, park_in_call, park_returned;

static void park_fn(void *arg)
{
	(void)arg;
	atomic_store(&park_runner_id, (int)gmp_self());
	T_ASSERT(gmp_chan_recv(park_ch, NULL) == 0); /* parks */
}

static void park_caller(void *arg)
{
	(void)arg;
	atomic_fetch_add(&park_in_call, 1);
	gmp_once_do(&park_once, park_fn, NULL);
	atomic_fetch_add(&park_returned, 1);
}

static void test_once_callers_park_while_fn_blocks(void **s)
{
	(void)s;
	enum { N = 5 };
	tu_init(1);
	park_ch = gmp_chan_new(0, 0);
	assert_non_null(park_ch);
	int64_t first = gmp_go(park_caller, NULL);
	assert_true(first > 0);
	TU_WAIT_FOR(atomic_load(&park_runner_id) != 0);
	assert_int_equal(atomic_load(&park_runner_id), first);
	for (int i = 1; i < N; i++)
		assert_true(gmp_go(park_caller, NULL) > 0);
	/* All of them wait, parked (on one P nothing else could run the
	 * first one's fn to its end if they spun). */
	TU_WAIT_FOR(atomic_load(&park_in_call) == N &&
		    tu_stats().tasks_waiting == N);
	assert_int_equal(atomic_load(&park_returned), 0);
	assert_int_equal(gmp_chan_send(park_ch, NULL), 0);
	TU_WAIT_FOR(atomic_load(&park_returned) == N);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(park_ch);
}

/* ---- threads, no runtime ------------------------------------------------------ */

static gmp_once thr_once = GMP_ONCE_INIT;
static atomic_int thr_runs, thr_early;
static atomic_long thr_runner;
static long thr_caller_tid[4];

static void thr_fn(void *arg)
{
	(void)arg;
	atomic_fetch_add(&thr_runs, 1);
	atomic_store(&thr_runner, (long)tu_gettid());
	tu_sleep(10 * MS);
}

static void *thr_thread(void *arg)
{
	long *me = arg;
	*me = (long)tu_gettid();
	gmp_once_do(&thr_once, thr_fn, NULL);
	if (atomic_load(&thr_runner) == 0)
		atomic_fetch_add(&thr_early, 1);
	return NULL;
}

static void test_once_threads_without_runtime(void **s)
{
	(void)s;
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, thr_thread,
						&thr_caller_tid[i]),
				 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&thr_runs), 1);
	assert_int_equal(atomic_load(&thr_early), 0);
	bool on_a_caller = false;
	for (int i = 0; i < 4; i++)
		on_a_caller |= thr_caller_tid[i] == atomic_load(&thr_runner);
	assert_true(on_a_caller);
	assert_int_equal(tu_stats().procs, 0);
}

/* ---- many onces, randomized ---------------------------------------------------- */

enum { NONCES = 64 };
static gmp_once many_once[NONCES];
static atomic_int many_runs[NONCES];
static gmp_wg many_wg = GMP_WG_INIT;

static void many_fn(void *arg)
{
	int i = (int)(uintptr_t)arg;
	atomic_fetch_add(&many_runs[i], 1);
	if (i % 3 == 0)
		gmp_yield();
}

static void many_work(uintptr_t k)
{
	for (int j = 0; j < NONCES; j++) {
		int i = (int)((j + k) % NONCES);
		gmp_once_do(&many_once[i], many_fn, (void *)(uintptr_t)i);
		T_ASSERT(atomic_load(&many_runs[i]) == 1);
	}
	gmp_wg_done(&many_wg);
}

static void many_task(void *arg)
{
	many_work((uintptr_t)arg);
}

static void *many_thread(void *arg)
{
	many_work((uintptr_t)arg);
	return NULL;
}

static void test_once_stress_randomized(void **s)
{
	(void)s;
	enum { NTASKS = 200, NTHREADS = 2 };
	for (int round = 0; round < 5; round++) {
		memset(many_once, 0, sizeof many_once);
		for (int i = 0; i < NONCES; i++)
			atomic_store(&many_runs[i], 0);
		setenv("GMP_DEBUG", "randomize=1", 1);
		tu_init(2);
		unsetenv("GMP_DEBUG");
		gmp_wg_add(&many_wg, NTASKS + NTHREADS);
		pthread_t th[NTHREADS];
		for (int i = 0; i < NTHREADS; i++)
			assert_int_equal(pthread_create(&th[i], NULL,
							many_thread,
							(void *)(uintptr_t)i),
					 0);
		for (int i = 0; i < NTASKS; i++)
			assert_true(gmp_go(many_task, (void *)(uintptr_t)i) >
				    0);
		gmp_wg_wait(&many_wg);
		for (int i = 0; i < NTHREADS; i++)
			pthread_join(th[i], NULL);
		assert_int_equal(gmp_shutdown(), 0);
		for (int i = 0; i < NONCES; i++)
			assert_int_equal(atomic_load(&many_runs[i]), 1);
	}
}

GMP_TEST_MAIN(cmocka_unit_test(test_once_1000_tasks_and_2_threads),
	      cmocka_unit_test(test_once_callers_park_while_fn_blocks),
	      cmocka_unit_test(test_once_threads_without_runtime),
	      cmocka_unit_test(test_once_stress_randomized))
