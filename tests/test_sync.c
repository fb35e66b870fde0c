/* Synchronisation: the runtime semaphore (FIFO and LIFO order, handoff,
 * many addresses in one root), gmp_mutex (exclusion at several maxprocs,
 * tasks and foreign threads contending at once, trylock, starvation mode,
 * misuse) and gmp_wg (10,000 tasks, waits from tasks and from foreign
 * threads, reuse, misuse).
 *
 * Each blocking call is exercised from both kinds of caller: a task (which
 * parks) and a foreign thread (which sleeps on a futex). The tests look
 * inside the primitives through sema.h (the layouts of the words and the
 * semaphore's waiter count) to know when someone is really asleep. */
#include <pthread.h>
#include <sched.h>

#include "gmp_test.h"

#include "export_test.h"

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n);
	assert_non_null(p);
	return p;
}

static uint32_t mutex_state(gmp_mutex *mu)
{
	return gmp__load32_rlx(&gmp__mutex_words_of(mu)->state);
}

static uint32_t mutex_sleepers(gmp_mutex *mu)
{
	return gmp__sema_nwaiters(&gmp__mutex_words_of(mu)->sema);
}

/* ==== the semaphore ======================================================== */

/* ---- FIFO: sleepers, tasks and threads mixed, wake in arrival order ------- */

enum { NFIFO = 12 };

static volatile uint32_t fifo_sema;
static atomic_int fifo_order[NFIFO + 4];
static atomic_int fifo_claim, fifo_n; /* slots taken, slots filled */

struct fifo_arg {
	int id;
	bool lifo;
};

static void fifo_acquire(struct fifo_arg *a)
{
	gmp__semacquire(&fifo_sema, a->lifo, GMP__WAIT_SEMACQUIRE);
	atomic_store(&fifo_order[atomic_fetch_add(&fifo_claim, 1)], a->id);
	atomic_fetch_add(&fifo_n, 1);
}

static void fifo_task(void *arg)
{
	T_ASSERT(gmp_current() != NULL);
	fifo_acquire(arg);
}

static void *fifo_thread(void *arg)
{
	fifo_acquire(arg);
	return NULL;
}

static void test_sync_sema_fifo_tasks_and_threads(void **s)
{
	(void)s;
	tu_init(2);
	struct fifo_arg args[NFIFO];
	pthread_t th[NFIFO];
	bool is_thread[NFIFO];
	atomic_store(&fifo_n, 0);
	atomic_store(&fifo_claim, 0);
	for (int i = 0; i < NFIFO; i++) {
		args[i] = (struct fifo_arg){ .id = i, .lifo = false };
		/* Alternate, so tasks and threads sit in one line. */
		is_thread[i] = i % 3 == 1;
		if (is_thread[i])
			assert_int_equal(pthread_create(&th[i], NULL,
							fifo_thread, &args[i]),
					 0);
		else
			assert_true(gmp_go(fifo_task, &args[i]) > 0);
		/* The next one arrives only once this one sleeps. */
		TU_WAIT_FOR(gmp__sema_nwaiters(&fifo_sema) == (uint32_t)i + 1);
	}
	for (int i = 0; i < NFIFO; i++) {
		gmp__semrelease(&fifo_sema, false);
		TU_WAIT_FOR(atomic_load(&fifo_n) == i + 1);
		assert_int_equal(atomic_load(&fifo_order[i]), i);
	}
	assert_int_equal(gmp__sema_nwaiters(&fifo_sema), 0);
	assert_int_equal(fifo_sema, 0);
	for (int i = 0; i < NFIFO; i++)
		if (is_thread[i])
			pthread_join(th[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
}

/* A lifo sleeper goes to the front of the line; the rest keep their order. */
static void test_sync_sema_lifo_goes_first(void **s)
{
	(void)s;
	tu_init(1);
	struct fifo_arg args[4] = {
		{ 1, false },
		{ 2, false },
		{ 0, true },
		{ 3, false },
	};
	atomic_store(&fifo_n, 0);
	atomic_store(&fifo_claim, 0);
	for (int i = 0; i < 4; i++) {
		assert_true(gmp_go(fifo_task, &args[i]) > 0);
		TU_WAIT_FOR(gmp__sema_nwaiters(&fifo_sema) == (uint32_t)i + 1);
	}
	for (int i = 0; i < 4; i++) {
		gmp__semrelease(&fifo_sema, false);
		TU_WAIT_FOR(atomic_load(&fifo_n) == i + 1);
	}
	/* 0 queued lifo after 1 and 2 (so ahead of them); 3 queued last. */
	for (int i = 0; i < 4; i++)
		assert_int_equal(atomic_load(&fifo_order[i]), i);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- handoff: the sleeper runs next, in the releaser's place -------------- */

static volatile uint32_t ho_sema;
static char ho_log[8];
static atomic_int ho_n;

static void ho_log_put(char c)
{
	ho_log[atomic_fetch_add(&ho_n, 1)] = c;
}

static void ho_sleeper(void *arg)
{
	(void)arg;
	gmp__semacquire(&ho_sema, false, GMP__WAIT_SEMACQUIRE);
	ho_log_put('W');
}

static void ho_releaser(void *arg)
{
	bool handoff = arg != NULL;
	TU_WAIT_FOR(gmp__sema_nwaiters(&ho_sema) == 1);
	gmp__semrelease(&ho_sema, handoff);
	ho_log_put('R');
}

static void handoff_round(bool handoff, const char *want)
{
	atomic_store(&ho_n, 0);
	memset(ho_log, 0, sizeof ho_log);
	tu_init(1);
	gmp_go(ho_sleeper, NULL);
	gmp_go(ho_releaser, handoff ? (void *)1 : NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_string_equal(ho_log, want);
	assert_int_equal(ho_sema, 0);
}

static void test_sync_sema_handoff_runs_sleeper_next(void **s)
{
	(void)s;
	/* With handoff the releaser yields to the woken sleeper; without, it
	 * goes on and the sleeper (in runnext) runs when it ends. */
	handoff_round(true, "WR");
	handoff_round(false, "RW");
}

/* With handoff the count goes to the sleeper even before it runs: a
 * thread arriving meanwhile cannot take it. Without, it can, and the
 * sleeper goes back to sleep. The only P is kept busy meanwhile, so the
 * woken sleeper cannot run yet. */
static atomic_int busy_go, busy_started;

static void busy_until_told(void *arg)
{
	(void)arg;
	atomic_store(&busy_started, 1);
	while (!atomic_load(&busy_go))
		; /* no switch point: holds the only P */
}

static void test_sync_sema_handoff_keeps_count(void **s)
{
	(void)s;
	tu_init(1);
	for (int round = 0; round < 2; round++) {
		bool handoff = round == 0;
		atomic_store(&ho_n, 0);
		atomic_store(&busy_go, 0);
		atomic_store(&busy_started, 0);
		gmp_go(ho_sleeper, NULL);
		TU_WAIT_FOR(gmp__sema_nwaiters(&ho_sema) == 1);
		gmp_go(busy_until_told, NULL);
		TU_WAIT_FOR(atomic_load(&busy_started));

		gmp__semrelease(&ho_sema, handoff);
		assert_int_equal(gmp__sema_nwaiters(&ho_sema), 0);
		if (handoff) {
			assert_int_equal(ho_sema, 0);
			assert_false(gmp__cansemacquire(&ho_sema));
		} else {
			/* We arrive first and take it from the sleeper. */
			assert_true(gmp__cansemacquire(&ho_sema));
		}
		atomic_store(&busy_go, 1);
		if (!handoff) {
			/* It wakes, finds nothing, and sleeps again. */
			TU_WAIT_FOR(gmp__sema_nwaiters(&ho_sema) == 1);
			assert_int_equal(atomic_load(&ho_n), 0);
			gmp__semrelease(&ho_sema, false);
		}
		TU_WAIT_FOR(atomic_load(&ho_n) == 1);
		assert_int_equal(ho_sema, 0);
	}
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- many addresses in one root (the treap) -------------------------------- */

/* Words 251 * 8 bytes apart all hash to the same root of the table. */
enum { NADDR = 600, STRIDE_WORDS = 251 * 2 };

static uint32_t *many_words;
static atomic_int *many_woke;

static void many_sleeper(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	gmp__semacquire(&many_words[i * STRIDE_WORDS], i % 5 == 0,
			GMP__WAIT_SEMACQUIRE);
	atomic_fetch_add(&many_woke[i], 1);
}

static int nsleepers_of(int i)
{
	return 1 + i % 3;
}

static void test_sync_sema_many_addresses(void **s)
{
	(void)s;
	many_words = xmalloc(sizeof(uint32_t) * NADDR * STRIDE_WORDS);
	many_woke = xmalloc(sizeof(atomic_int) * NADDR);
	tu_init(2);
	int total = 0;
	for (int i = 0; i < NADDR; i++)
		for (int k = 0; k < nsleepers_of(i); k++) {
			assert_true(gmp_go(many_sleeper, (void *)(uintptr_t)i) >
				    0);
			total++;
		}
	for (int i = 0; i < NADDR; i++)
		TU_WAIT_FOR(gmp__sema_nwaiters(&many_words[i * STRIDE_WORDS]) ==
			    (uint32_t)nsleepers_of(i));

	/* Release the even addresses in a scrambled order, one sleeper at a
	 * time; only their sleepers may wake. */
	int order[NADDR];
	for (int i = 0; i < NADDR; i++)
		order[i] = i;
	srand(42);
	for (int i = NADDR - 1; i > 0; i--) {
		int j = rand() % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int pass = 0; pass < 3; pass++)
		for (int n = 0; n < NADDR; n++) {
			int i = order[n];
			if (i % 2 == 0 && pass < nsleepers_of(i))
				gmp__semrelease(&many_words[i * STRIDE_WORDS],
						false);
		}
	for (int i = 0; i < NADDR; i += 2)
		TU_WAIT_FOR(atomic_load(&many_woke[i]) == nsleepers_of(i));
	for (int i = 1; i < NADDR; i += 2) {
		assert_int_equal(atomic_load(&many_woke[i]), 0);
		assert_int_equal(
			gmp__sema_nwaiters(&many_words[i * STRIDE_WORDS]),
			nsleepers_of(i));
	}
	/* Then the odd ones, from the top down. */
	for (int i = NADDR - 1; i > 0; i -= 2)
		for (int k = 0; k < nsleepers_of(i); k++)
			gmp__semrelease(&many_words[i * STRIDE_WORDS], false);
	assert_int_equal(gmp_shutdown(), 0);
	int woke = 0;
	for (int i = 0; i < NADDR; i++) {
		assert_int_equal(atomic_load(&many_woke[i]), nsleepers_of(i));
		assert_int_equal(many_words[i * STRIDE_WORDS], 0);
		assert_int_equal(
			gmp__sema_nwaiters(&many_words[i * STRIDE_WORDS]), 0);
		woke += atomic_load(&many_woke[i]);
	}
	assert_int_equal(woke, total);
	free(many_words);
	free(many_woke);
}

/* ==== the mutex ============================================================= */

/* ---- mutual exclusion at several maxprocs ----------------------------------- */

enum { NINC_TASKS = 8, NINC = 100000 };

static gmp_mutex inc_mu = GMP_MUTEX_INIT;
static long inc_counter; /* plain: only the mutex protects it */
static gmp_wg inc_wg = GMP_WG_INIT;

static void incrementer(void *arg)
{
	(void)arg;
	for (int i = 0; i < NINC; i++) {
		gmp_mutex_lock(&inc_mu);
		long v = inc_counter;
		/* Now and then a switch point inside the critical section,
		 * so that even one P sees lockers find it held and sleep. */
		if (i % 1000 == 0)
			gmp_yield();
		inc_counter = v + 1;
		gmp_mutex_unlock(&inc_mu);
		gmp_preempt_point();
	}
	gmp_wg_done(&inc_wg);
}

static void exclusion_at(int procs)
{
	inc_counter = 0;
	tu_init(procs);
	gmp_wg_add(&inc_wg, NINC_TASKS);
	for (int i = 0; i < NINC_TASKS; i++)
		assert_true(gmp_go(incrementer, NULL) > 0);
	gmp_wg_wait(&inc_wg); /* a foreign thread waits for the tasks */
	assert_int_equal(inc_counter, (long)NINC_TASKS * NINC);
	assert_int_equal(gmp_shutdown(), 0);
	/* Quiescent: unlocked, nobody counted, no stray semaphore count. */
	assert_int_equal(mutex_state(&inc_mu), 0);
	assert_int_equal(gmp__mutex_words_of(&inc_mu)->sema, 0);
	assert_int_equal(mutex_sleepers(&inc_mu), 0);
}

static void test_sync_mutex_exclusion_maxprocs_1(void **s)
{
	(void)s;
	exclusion_at(1);
}

static void test_sync_mutex_exclusion_maxprocs_2(void **s)
{
	(void)s;
	exclusion_at(2);
}

static void test_sync_mutex_exclusion_maxprocs_4(void **s)
{
	(void)s;
	exclusion_at(4);
}

/* ---- tasks and foreign threads contending at once ---------------------------- */

enum { NMIX = 4, NMIX_INC = 50000 };

static void mix_work(void)
{
	for (int i = 0; i < NMIX_INC; i++) {
		gmp_mutex_lock(&inc_mu);
		long v = inc_counter;
		/* A longer critical section now and then, so that both kinds
		 * of locker really go to sleep. */
		if (i % 512 == 0)
			for (volatile int j = 0; j < 2000; j++)
				;
		inc_counter = v + 1;
		gmp_mutex_unlock(&inc_mu);
	}
}

static void mix_task(void *arg)
{
	(void)arg;
	mix_work();
	gmp_wg_done(&inc_wg);
}

static void *mix_thread(void *arg)
{
	(void)arg;
	mix_work();
	gmp_wg_done(&inc_wg);
	return NULL;
}

static void test_sync_mutex_tasks_and_threads(void **s)
{
	(void)s;
	inc_counter = 0;
	tu_init(2);
	gmp_wg_add(&inc_wg, 2 * NMIX);
	pthread_t th[NMIX];
	for (int i = 0; i < NMIX; i++) {
		assert_true(gmp_go(mix_task, NULL) > 0);
		assert_int_equal(pthread_create(&th[i], NULL, mix_thread, NULL),
				 0);
	}
	gmp_wg_wait(&inc_wg);
	assert_int_equal(inc_counter, 2L * NMIX * NMIX_INC);
	for (int i = 0; i < NMIX; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(mutex_state(&inc_mu), 0);
	assert_int_equal(gmp__mutex_words_of(&inc_mu)->sema, 0);
}

/* Deterministically: a task holds the mutex while a thread, a task and a
 * task inside a syscall window (which must block its thread, not park)
 * line up behind it; each gets it in turn. */
static gmp_mutex line_mu;
static atomic_int line_got[3];

static void *line_thread(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&line_mu);
	atomic_store(&line_got[0], 1);
	gmp_mutex_unlock(&line_mu);
	return NULL;
}

static void line_task(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&line_mu);
	atomic_store(&line_got[1], 1);
	gmp_mutex_unlock(&line_mu);
}

static void line_syscall_task(void *arg)
{
	(void)arg;
	gmp_enter_syscall();
	gmp_mutex_lock(&line_mu);
	atomic_store(&line_got[2], 1);
	gmp_mutex_unlock(&line_mu);
	gmp_exit_syscall();
}

static void test_sync_mutex_sleepers_of_both_kinds(void **s)
{
	(void)s;
	tu_init(2);
	/* The main thread takes it: unlock need not come from a task. */
	gmp_mutex_lock(&line_mu);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, line_thread, NULL), 0);
	TU_WAIT_FOR(mutex_sleepers(&line_mu) == 1);
	assert_true(gmp_go(line_task, NULL) > 0);
	TU_WAIT_FOR(mutex_sleepers(&line_mu) == 2);
	assert_true(gmp_go(line_syscall_task, NULL) > 0);
	TU_WAIT_FOR(mutex_sleepers(&line_mu) == 3);
	assert_int_equal(mutex_state(&line_mu) >> GMP__MUTEX_WAITER_SHIFT, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(atomic_load(&line_got[i]), 0);
	gmp_mutex_unlock(&line_mu);
	TU_WAIT_FOR(atomic_load(&line_got[0]) && atomic_load(&line_got[1]) &&
		    atomic_load(&line_got[2]));
	pthread_join(th, NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(mutex_state(&line_mu), 0);
}

/* Threads alone, with the runtime never started: the mutex needs none. */
static void *norun_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < NMIX_INC; i++) {
		gmp_mutex_lock(&inc_mu);
		inc_counter++;
		gmp_mutex_unlock(&inc_mu);
	}
	return NULL;
}

static void test_sync_mutex_threads_without_runtime(void **s)
{
	(void)s;
	inc_counter = 0;
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		assert_int_equal(
			pthread_create(&th[i], NULL, norun_thread, NULL), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(inc_counter, 4L * NMIX_INC);
	gmp_stats st;
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(st.procs, 0); /* still not running */
}

/* ---- trylock ------------------------------------------------------------------ */

static gmp_mutex try_mu = GMP_MUTEX_INIT;
static atomic_int try_result;

static void *try_from_thread(void *arg)
{
	(void)arg;
	atomic_store(&try_result, gmp_mutex_trylock(&try_mu) ? 1 : 2);
	return NULL;
}

static void try_in_task(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_mutex_trylock(&try_mu));
	T_ASSERT(!gmp_mutex_trylock(&try_mu)); /* not recursive */
	/* A foreign thread finds it held too. */
	pthread_t th;
	T_ASSERT(pthread_create(&th, NULL, try_from_thread, NULL) == 0);
	pthread_join(th, NULL);
	T_ASSERT(atomic_load(&try_result) == 2);
	gmp_mutex_unlock(&try_mu);
	T_ASSERT(gmp_mutex_trylock(&try_mu));
	gmp_mutex_unlock(&try_mu);
	/* Lock and trylock mix: a locked mutex refuses trylock. */
	gmp_mutex_lock(&try_mu);
	T_ASSERT(!gmp_mutex_trylock(&try_mu));
	gmp_mutex_unlock(&try_mu);
}

static void test_sync_mutex_trylock(void **s)
{
	(void)s;
	gmp_mutex zero;
	memset(&zero, 0, sizeof zero); /* zero-filled is unlocked too */
	assert_true(gmp_mutex_trylock(&zero));
	assert_false(gmp_mutex_trylock(&zero));
	gmp_mutex_unlock(&zero);
	assert_int_equal(mutex_state(&zero), 0);

	tu_init(2);
	assert_true(gmp_go(try_in_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(mutex_state(&try_mu), 0);

	/* In starvation mode the mutex belongs to its oldest sleeper even
	 * with LOCKED clear: trylock must not barge in. (Forged state.) */
	gmp__mutex_words_of(&try_mu)->state = GMP__MUTEX_STARVING |
					      1u << GMP__MUTEX_WAITER_SHIFT;
	assert_false(gmp_mutex_trylock(&try_mu));
	gmp__mutex_words_of(&try_mu)->state = 1u << GMP__MUTEX_WAITER_SHIFT;
	/* In normal mode a sleeper does not stop it. */
	assert_true(gmp_mutex_trylock(&try_mu));
	assert_int_equal(mutex_state(&try_mu),
			 GMP__MUTEX_LOCKED | 1u << GMP__MUTEX_WAITER_SHIFT);
	gmp__mutex_words_of(&try_mu)->state = 0;
}

/* ---- starvation mode ---------------------------------------------------------- */

/* A hog re-locks in a tight loop and switches (gmp_yield) while holding the
 * mutex, so a sleeper that unlock wakes always finds it held again: in
 * normal mode alone the victim would never get it. After 1 ms of waiting
 * the victim puts the mutex in starvation mode and the next unlock hands it
 * over. */
static gmp_mutex hog_mu;
static atomic_int hog_stop, hog_saw_starving;
static atomic_long hog_rounds;
static atomic_llong victim_wait_ns;
static gmp_wg hog_wg;

static void hog(void *arg)
{
	(void)arg;
	while (!atomic_load(&hog_stop)) {
		gmp_mutex_lock(&hog_mu);
		gmp_yield();
		if (mutex_state(&hog_mu) & GMP__MUTEX_STARVING)
			atomic_store(&hog_saw_starving, 1);
		gmp_mutex_unlock(&hog_mu);
		atomic_fetch_add(&hog_rounds, 1);
	}
	gmp_wg_done(&hog_wg);
}

static void victim(void *arg)
{
	(void)arg;
	TU_WAIT_FOR(atomic_load(&hog_rounds) > 100);
	int64_t t0 = tu_now_ns();
	gmp_mutex_lock(&hog_mu);
	atomic_store(&victim_wait_ns, tu_now_ns() - t0);
	atomic_store(&hog_stop, 1);
	gmp_mutex_unlock(&hog_mu);
	gmp_wg_done(&hog_wg);
}

static void starvation_at(int procs, int nhogs)
{
	atomic_store(&hog_stop, 0);
	atomic_store(&hog_saw_starving, 0);
	atomic_store(&hog_rounds, 0);
	atomic_store(&victim_wait_ns, -1);
	tu_init(procs);
	gmp_wg_add(&hog_wg, nhogs + 1);
	for (int i = 0; i < nhogs; i++)
		assert_true(gmp_go(hog, NULL) > 0);
	assert_true(gmp_go(victim, NULL) > 0);
	gmp_wg_wait(&hog_wg);
	assert_int_equal(gmp_shutdown(), 0);
	long long waited = atomic_load(&victim_wait_ns);
	print_message("procs=%d hogs=%d: victim waited %.3f ms, hog rounds "
		      "%ld, starvation mode %s\n",
		      procs, nhogs, (double)waited / 1e6,
		      atomic_load(&hog_rounds),
		      atomic_load(&hog_saw_starving) ? "seen" : "not seen");
	assert_true(waited >= 0);
	/* Generous: the mode switches after 1 ms. */
	assert_true(waited < 1000000000LL);
	/* A victim that waited well over the threshold was woken many
	 * times meanwhile, and so must have switched the mode. */
	if (procs == 1 || waited > 20000000LL)
		assert_true(atomic_load(&hog_saw_starving));
	assert_int_equal(mutex_state(&hog_mu), 0);
}

static void test_sync_mutex_starvation_maxprocs_1(void **s)
{
	(void)s;
	starvation_at(1, 1);
}

static void test_sync_mutex_starvation_maxprocs_2(void **s)
{
	(void)s;
	starvation_at(2, 2);
}

/* A sleeper that unlock readied into the P's runnext must get to run even
 * when the task that readied it keeps re-locking with no switch point of
 * its own: the contended lock (WOKEN stays set, so every lock is the slow
 * path) honours sysmon's preemption request. One P, so the woken task
 * can run nowhere else. */
static gmp_mutex spin_mu;
static atomic_int spin_done, spin_victim_slept;

static void relocker(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&spin_mu);
	gmp_yield(); /* the victim runs now and sleeps on the mutex */
	TU_WAIT_FOR(atomic_load(&spin_victim_slept));
	gmp_mutex_unlock(&spin_mu); /* readies the victim into runnext */
	int64_t until = tu_now_ns() + 10000000000LL;
	for (;;) {
		gmp_mutex_lock(&spin_mu);
		bool done = atomic_load(&spin_done);
		gmp_mutex_unlock(&spin_mu);
		if (done)
			break;
		T_ASSERT(tu_now_ns() < until);
	}
}

static void sleeper_victim(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&spin_mu);
	atomic_store(&spin_done, 1);
	gmp_mutex_unlock(&spin_mu);
}

static void *watch_victim_sleep(void *arg)
{
	(void)arg;
	TU_WAIT_FOR(mutex_sleepers(&spin_mu) == 1);
	atomic_store(&spin_victim_slept, 1);
	return NULL;
}

static void test_sync_mutex_relocker_yields_to_woken_sleeper(void **s)
{
	(void)s;
	tu_init(1);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, watch_victim_sleep, NULL),
			 0);
	int64_t t0 = tu_now_ns();
	assert_true(gmp_go(relocker, NULL) > 0);
	assert_true(gmp_go(sleeper_victim, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	pthread_join(th, NULL);
	print_message("done after %.3f ms\n", (double)(tu_now_ns() - t0) / 1e6);
	assert_true(atomic_load(&spin_done));
	assert_int_equal(mutex_state(&spin_mu), 0);
}

/* ---- misuse --------------------------------------------------------------------- */

static void unlock_unlocked(void *arg)
{
	(void)arg;
	gmp_mutex mu = GMP_MUTEX_INIT;
	gmp_mutex_unlock(&mu);
}

static int unlock_unlocked_main(void *arg)
{
	gmp_mutex mu = GMP_MUTEX_INIT;
	gmp_mutex_lock(&mu);
	gmp_mutex_unlock(&mu);
	unlock_unlocked(arg); /* the second unlock */
	return 0;
}

static void unlock_unlocked_in_task(void *arg)
{
	gmp_main(unlock_unlocked_main, arg);
}

static void test_sync_mutex_unlock_of_unlocked_aborts(void **s)
{
	(void)s;
	tu_expect_abort(unlock_unlocked, NULL, "unlock of unlocked mutex");
	tu_expect_abort(unlock_unlocked_in_task, NULL,
			"unlock of unlocked mutex");
}

/* Sleeping on the scheduler stack (here: in gmp_park's unlock function,
 * which gmp.h forbids to block) would stall the P for good: it aborts. */
static gmp_mutex g0_mu;

static bool lock_in_unlockf(gmp_g *g, void *arg)
{
	(void)g;
	gmp_mutex_lock(arg); /* held: must sleep */
	return false;
}

static int g0_lock_main(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&g0_mu);
	gmp_park(lock_in_unlockf, &g0_mu);
	return 0;
}

static void g0_lock(void *arg)
{
	gmp_main(g0_lock_main, arg);
}

static void test_sync_sema_sleep_on_scheduler_stack_aborts(void **s)
{
	(void)s;
	tu_expect_abort(g0_lock, NULL, "on the scheduler stack");
}

/* ==== the wait group ========================================================== */

/* ---- 10,000 tasks, waited for by a foreign thread ------------------------------- */

/* ThreadSanitizer counts every live task as a thread (a fiber) and dies
 * beyond 8128 of them; all of these are alive at once. */
#ifdef __SANITIZE_THREAD__
enum { NWG = 4000 };
#else
enum { NWG = 10000 };
#endif

static gmp_wg big_wg;
static gmp_mutex gate_mu;
static atomic_int big_done;

static void big_worker(void *arg)
{
	(void)arg;
	/* Every worker sleeps on the gate first: 10,000 sleepers on one
	 * address of the semaphore. */
	gmp_mutex_lock(&gate_mu);
	gmp_mutex_unlock(&gate_mu);
	atomic_fetch_add(&big_done, 1);
	gmp_wg_done(&big_wg);
}

static void *gate_opener(void *arg)
{
	(void)arg;
	/* Open only once the main thread sleeps in gmp_wg_wait. */
	TU_WAIT_FOR(gmp__sema_nwaiters(&gmp__wg_words_of(&big_wg)->sema) == 1);
	gmp_mutex_unlock(&gate_mu);
	return NULL;
}

static void test_sync_wg_10000_tasks_foreign_wait(void **s)
{
	(void)s;
	atomic_store(&big_done, 0);
	tu_init(2);
	gmp_mutex_lock(&gate_mu);
	gmp_wg_add(&big_wg, NWG);
	for (int i = 0; i < NWG; i++)
		assert_true(gmp_go(big_worker, NULL) > 0);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, gate_opener, NULL), 0);
	gmp_wg_wait(&big_wg);
	assert_int_equal(atomic_load(&big_done), NWG);
	pthread_join(th, NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(gmp__load64_rlx(&gmp__wg_words_of(&big_wg)->state), 0);
	assert_int_equal(gmp__wg_words_of(&big_wg)->sema, 0);
	assert_int_equal(mutex_state(&gate_mu), 0);
}

/* ---- waiters of both kinds, from tasks, at once ------------------------------------ */

enum { NWORK = 100, NWAIT_TASKS = 3, NWAIT_THREADS = 2 };

static gmp_wg work_wg, waiters_wg;
static atomic_int work_done, waiters_saw_all;

static void work(void *arg)
{
	(void)arg;
	gmp_yield();
	atomic_fetch_add(&work_done, 1);
	gmp_wg_done(&work_wg);
}

static void wait_task(void *arg)
{
	(void)arg;
	gmp_wg_wait(&work_wg);
	if (atomic_load(&work_done) == NWORK)
		atomic_fetch_add(&waiters_saw_all, 1);
	gmp_wg_done(&waiters_wg);
}

static void *wait_thread(void *arg)
{
	wait_task(arg);
	return NULL;
}

/* The driver is a task: it adds, starts the waiters, starts the work only
 * once all waiters sleep, and waits itself too. */
static void wg_driver(void *arg)
{
	pthread_t *th = arg;
	gmp_wg_wait(&work_wg); /* zero: returns at once */
	gmp_wg_add(&work_wg, NWORK);
	gmp_wg_add(&waiters_wg, NWAIT_TASKS + NWAIT_THREADS);
	for (int i = 0; i < NWAIT_TASKS; i++)
		T_ASSERT(gmp_go(wait_task, NULL) > 0);
	for (int i = 0; i < NWAIT_THREADS; i++)
		T_ASSERT(pthread_create(&th[i], NULL, wait_thread, NULL) == 0);
	TU_WAIT_FOR(gmp__sema_nwaiters(&gmp__wg_words_of(&work_wg)->sema) ==
		    NWAIT_TASKS + NWAIT_THREADS);
	T_ASSERT(
		(uint32_t)gmp__load64_rlx(&gmp__wg_words_of(&work_wg)->state) ==
		NWAIT_TASKS + NWAIT_THREADS);
	for (int i = 0; i < NWORK; i++)
		T_ASSERT(gmp_go(work, NULL) > 0);
	gmp_wg_wait(&work_wg);
	T_ASSERT(atomic_load(&work_done) == NWORK);
	gmp_wg_wait(&waiters_wg);
	T_ASSERT(atomic_load(&waiters_saw_all) == NWAIT_TASKS + NWAIT_THREADS);
}

static void test_sync_wg_waiters_tasks_and_threads(void **s)
{
	(void)s;
	tu_init(2);
	pthread_t th[NWAIT_THREADS];
	assert_true(gmp_go(wg_driver, th) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	for (int i = 0; i < NWAIT_THREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&waiters_saw_all),
			 NWAIT_TASKS + NWAIT_THREADS);
	assert_int_equal(gmp__load64_rlx(&gmp__wg_words_of(&work_wg)->state),
			 0);
}

/* ---- reuse, round after round ------------------------------------------------------- */

static gmp_wg round_wg;
static atomic_int round_count;

static void round_worker(void *arg)
{
	(void)arg;
	atomic_fetch_add(&round_count, 1);
	gmp_wg_done(&round_wg);
}

static void rounds_driver(void *arg)
{
	(void)arg;
	for (int r = 1; r <= 200; r++) {
		gmp_wg_add(&round_wg, 10);
		for (int i = 0; i < 10; i++)
			T_ASSERT(gmp_go(round_worker, NULL) > 0);
		gmp_wg_wait(&round_wg);
		T_ASSERT(atomic_load(&round_count) == 10 * r);
	}
}

static void test_sync_wg_reuse(void **s)
{
	(void)s;
	atomic_store(&round_count, 0);
	tu_init(2);
	assert_true(gmp_go(rounds_driver, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&round_count), 2000);
}

/* ---- misuse ----------------------------------------------------------------------------- */

static void wg_negative(void *arg)
{
	(void)arg;
	gmp_wg wg = GMP_WG_INIT;
	gmp_wg_add(&wg, 2);
	gmp_wg_done(&wg);
	gmp_wg_done(&wg);
	gmp_wg_done(&wg); /* one too many */
}

static int wg_negative_main(void *arg)
{
	wg_negative(arg);
	return 0;
}

static void wg_negative_in_task(void *arg)
{
	gmp_main(wg_negative_main, arg);
}

static void test_sync_wg_negative_counter_aborts(void **s)
{
	(void)s;
	tu_expect_abort(wg_negative, NULL, "negative wait group counter");
	tu_expect_abort(wg_negative_in_task, NULL,
			"negative wait group counter");
}

/* A positive add from zero while a waiter is registered: the race Go
 * panics on. Forged: a waiter counted on a zero counter, as in the window
 * where the last done has zeroed the counter but not yet reset the word. */
static void wg_add_during_wait(void *arg)
{
	(void)arg;
	gmp_wg wg = GMP_WG_INIT;
	gmp__wg_words_of(&wg)->state = 1;
	gmp_wg_add(&wg, 1);
}

static void test_sync_wg_add_during_wait_aborts(void **s)
{
	(void)s;
	tu_expect_abort(wg_add_during_wait, NULL,
			"add called concurrently with wait");
}

GMP_TEST_MAIN(cmocka_unit_test(test_sync_sema_fifo_tasks_and_threads),
	      cmocka_unit_test(test_sync_sema_lifo_goes_first),
	      cmocka_unit_test(test_sync_sema_handoff_runs_sleeper_next),
	      cmocka_unit_test(test_sync_sema_handoff_keeps_count),
	      cmocka_unit_test(test_sync_sema_many_addresses),
	      cmocka_unit_test(test_sync_mutex_exclusion_maxprocs_1),
	      cmocka_unit_test(test_sync_mutex_exclusion_maxprocs_2),
	      cmocka_unit_test(test_sync_mutex_exclusion_maxprocs_4),
	      cmocka_unit_test(test_sync_mutex_tasks_and_threads),
	      cmocka_unit_test(test_sync_mutex_sleepers_of_both_kinds),
	      cmocka_unit_test(test_sync_mutex_threads_without_runtime),
	      cmocka_unit_test(test_sync_mutex_trylock),
	      cmocka_unit_test(test_sync_mutex_starvation_maxprocs_1),
	      cmocka_unit_test(test_sync_mutex_starvation_maxprocs_2),
	      cmocka_unit_test(test_sync_mutex_relocker_yields_to_woken_sleeper),
	      cmocka_unit_test(test_sync_mutex_unlock_of_unlocked_aborts),
	      cmocka_unit_test(test_sync_sema_sleep_on_scheduler_stack_aborts),
	      cmocka_unit_test(test_sync_wg_10000_tasks_foreign_wait),
	      cmocka_unit_test(test_sync_wg_waiters_tasks_and_threads),
	      cmocka_unit_test(test_sync_wg_reuse),
	      cmocka_unit_test(test_sync_wg_negative_counter_aborts),
	      cmocka_unit_test(test_sync_wg_add_during_wait_aborts))
