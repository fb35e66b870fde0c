/* gmp_cond: a signal wakes exactly one waiter, the oldest (tasks and
 * foreign threads queued together); a broadcast wakes all; a signal with
 * nobody waiting is not remembered; timedwait times out and returns with
 * the mutex held, from a task and from a thread; a waiter that timed out
 * leaves the queue without eating a later signal; threads with no runtime;
 * a producer-consumer stress under GMP_DEBUG=randomize with timed waits
 * racing signals. Two tasks taking turns hand the mutex from the one that
 * waits to the one it woke (cond.c): mutual exclusion holds against other
 * lockers meanwhile, a task sleeping on the mutex still gets it, and a
 * waiter a signal woke quietly still runs while its signaller goes on. Misuse (waiting with the mutex unlocked) is in
 * test_misuse.c.
 *
 * How many wait is read inside (sync.h: wait - notify), so that a test
 * knows a waiter is queued before it signals. */
#include <pthread.h>

#include "gmp_test.h"
#include "export_test.h"

static uint32_t cond_waiters(gmp_cond *c)
{
	gmp__cond_words *w = gmp__cond_words_of(c);
	return gmp__load32_acq(&w->wait) - gmp__load32_acq(&w->notify);
}

static bool mutex_held(gmp_mutex *mu)
{
	return gmp__load32_rlx(&gmp__mutex_words_of(mu)->state) &
	       GMP__MUTEX_LOCKED;
}

/* ---- FIFO: signal wakes exactly one, the oldest -------------------------------- */

enum { NFIFO = 8 };

static gmp_mutex fifo_mu = GMP_MUTEX_INIT;
static gmp_cond fifo_cv = GMP_COND_INIT;
static atomic_int fifo_order[NFIFO], fifo_n;

static void fifo_wait(int id)
{
	gmp_mutex_lock(&fifo_mu);
	gmp_cond_wait(&fifo_cv, &fifo_mu);
	T_ASSERT(mutex_held(&fifo_mu));
	/* The slot first, then the count the test waits for (we hold the
	 * mutex, so no other waiter writes either meanwhile). */
	int n = atomic_load(&fifo_n);
	atomic_store(&fifo_order[n], id);
	atomic_store(&fifo_n, n + 1);
	gmp_mutex_unlock(&fifo_mu);
}

static void fifo_task(void *arg)
{
	fifo_wait((int)(uintptr_t)arg);
}

static void *fifo_thread(void *arg)
{
	fifo_wait((int)(uintptr_t)arg);
	return NULL;
}

static void fifo_syscall_task(void *arg)
{
	/* Inside a syscall window a task blocks its thread, like a thread. */
	gmp_enter_syscall();
	fifo_wait((int)(uintptr_t)arg);
	gmp_exit_syscall();
}

static void test_cond_signal_wakes_one_fifo(void **s)
{
	(void)s;
	tu_init(2);
	pthread_t th[NFIFO];
	int nth = 0;
	for (int i = 0; i < NFIFO; i++) {
		if (i % 3 == 1)
			assert_int_equal(pthread_create(&th[nth++], NULL,
							fifo_thread,
							(void *)(uintptr_t)i),
					 0);
		else if (i % 3 == 2)
			assert_true(gmp_go(fifo_syscall_task,
					   (void *)(uintptr_t)i) > 0);
		else
			assert_true(gmp_go(fifo_task, (void *)(uintptr_t)i) >
				    0);
		TU_WAIT_FOR(cond_waiters(&fifo_cv) == (uint32_t)i + 1);
	}
	for (int i = 0; i < NFIFO; i++) {
		gmp_cond_signal(&fifo_cv);
		TU_WAIT_FOR(atomic_load(&fifo_n) == i + 1);
		/* Exactly one: the others are all still queued. */
		assert_int_equal(cond_waiters(&fifo_cv), NFIFO - i - 1);
		assert_int_equal(atomic_load(&fifo_order[i]), i);
	}
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- broadcast ------------------------------------------------------------------ */

static gmp_mutex bc_mu = GMP_MUTEX_INIT;
static gmp_cond bc_cv = GMP_COND_INIT;
static atomic_int bc_woken;

static void bc_wait(void)
{
	gmp_mutex_lock(&bc_mu);
	gmp_cond_wait(&bc_cv, &bc_mu);
	atomic_fetch_add(&bc_woken, 1);
	gmp_mutex_unlock(&bc_mu);
}

static void bc_task(void *arg)
{
	(void)arg;
	bc_wait();
}

static void *bc_thread(void *arg)
{
	(void)arg;
	bc_wait();
	return NULL;
}

static void test_cond_broadcast_wakes_all(void **s)
{
	(void)s;
	enum { NTASKS = 100, NTHREADS = 3 };
	tu_init(2);
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, bc_thread, NULL),
				 0);
	for (int i = 0; i < NTASKS; i++)
		assert_true(gmp_go(bc_task, NULL) > 0);
	TU_WAIT_FOR(cond_waiters(&bc_cv) == NTASKS + NTHREADS);
	gmp_cond_broadcast(&bc_cv);
	TU_WAIT_FOR(atomic_load(&bc_woken) == NTASKS + NTHREADS);
	assert_int_equal(cond_waiters(&bc_cv), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- a signal is not remembered; timedwait times out ----------------------------- */

static gmp_mutex to_mu = GMP_MUTEX_INIT;
static gmp_cond to_cv = GMP_COND_INIT;
static atomic_int to_done;

static void timeout_body(void)
{
	/* Nobody waits: these vanish. */
	gmp_cond_signal(&to_cv);
	gmp_cond_broadcast(&to_cv);
	gmp_mutex_lock(&to_mu);
	int64_t t0 = gmp_nanotime();
	int r = gmp_cond_timedwait(&to_cv, &to_mu, t0 + 30 * MS);
	int64_t t1 = gmp_nanotime();
	T_ASSERT(r == -ETIMEDOUT);
	T_ASSERT(t1 - t0 >= 30 * MS);
	T_ASSERT(mutex_held(&to_mu));
	T_ASSERT(!gmp_mutex_trylock(&to_mu)); /* held: by us */
	/* A deadline already past, a negative one included: at once, mu
	 * still held afterwards. */
	T_ASSERT(gmp_cond_timedwait(&to_cv, &to_mu, t1 - 1) == -ETIMEDOUT);
	T_ASSERT(mutex_held(&to_mu));
	T_ASSERT(gmp_cond_timedwait(&to_cv, &to_mu, -5) == -ETIMEDOUT);
	T_ASSERT(mutex_held(&to_mu));
	gmp_mutex_unlock(&to_mu);
	T_ASSERT(cond_waiters(&to_cv) == 0);
	atomic_fetch_add(&to_done, 1);
}

static void timeout_task(void *arg)
{
	(void)arg;
	timeout_body();
}

static void *timeout_thread(void *arg)
{
	(void)arg;
	timeout_body();
	return NULL;
}

static void test_cond_timedwait_times_out_holding_mutex(void **s)
{
	(void)s;
	tu_init(2);
	assert_true(gmp_go(timeout_task, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&to_done) == 1);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, timeout_thread, NULL), 0);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&to_done), 2);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- a waiter that timed out does not eat a signal --------------------------------- */

static gmp_mutex eat_mu = GMP_MUTEX_INIT;
static gmp_cond eat_cv = GMP_COND_INIT;
static atomic_int eat_a_result = 1, eat_b_result = 1;

/* A's timeout: long enough for B to queue behind it, doubled by eat_round
 * when a slow host (a sanitizer, qemu, a loaded machine) needed longer. */
static int64_t eat_delay;

static void eat_a(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&eat_mu);
	atomic_store(&eat_a_result,
		     gmp_cond_timedwait(&eat_cv, &eat_mu,
					gmp_nanotime() + eat_delay));
	gmp_mutex_unlock(&eat_mu);
}

static void *eat_b(void *arg)
{
	bool timed = arg != NULL;
	gmp_mutex_lock(&eat_mu);
	int r = 0;
	if (timed)
		r = gmp_cond_timedwait(&eat_cv, &eat_mu,
				       gmp_nanotime() + 100 * SEC);
	else
		gmp_cond_wait(&eat_cv, &eat_mu);
	atomic_store(&eat_b_result, r);
	gmp_mutex_unlock(&eat_mu);
	return NULL;
}

static void eat_b_task(void *arg)
{
	eat_b(arg);
}

static void eat_round(bool b_is_task, bool b_timed)
{
	for (eat_delay = 20 * MS;; eat_delay *= 2) {
		assert_true(eat_delay <= 60 * SEC);
		atomic_store(&eat_a_result, 1);
		atomic_store(&eat_b_result, 1);
		assert_true(gmp_go(eat_a, NULL) > 0);
		TU_WAIT_FOR(cond_waiters(&eat_cv) == 1 ||
			    atomic_load(&eat_a_result) != 1);
		pthread_t th;
		void *arg = b_timed ? (void *)1 : NULL;
		if (b_is_task)
			assert_true(gmp_go(eat_b_task, arg) > 0);
		else
			assert_int_equal(pthread_create(&th, NULL, eat_b, arg),
					 0);
		TU_WAIT_FOR(cond_waiters(&eat_cv) == 2 ||
			    atomic_load(&eat_a_result) != 1);
		/* A still inside now means both were queued at once (a
		 * result, once set, stays): the stage is set. */
		bool staged = atomic_load(&eat_a_result) == 1;
		if (staged) {
			/* A, the older, gives up and leaves; B stays. */
			TU_WAIT_FOR(atomic_load(&eat_a_result) != 1);
			assert_int_equal(atomic_load(&eat_a_result),
					 -ETIMEDOUT);
			assert_int_equal(cond_waiters(&eat_cv), 1);
		} else {
			TU_WAIT_FOR(cond_waiters(&eat_cv) == 1); /* B */
		}
		/* The signal goes to B. */
		gmp_cond_signal(&eat_cv);
		TU_WAIT_FOR(atomic_load(&eat_b_result) != 1);
		assert_int_equal(atomic_load(&eat_b_result), 0);
		if (!b_is_task)
			pthread_join(th, NULL);
		assert_int_equal(cond_waiters(&eat_cv), 0);
		if (staged)
			return;
	}
}

static void test_cond_timed_out_waiter_does_not_eat_signal(void **s)
{
	(void)s;
	tu_init(2);
	eat_round(true, false);
	eat_round(true, true);
	eat_round(false, false);
	eat_round(false, true);
	assert_int_equal(gmp_shutdown(), 0);
}

/* The race itself: a signal takes off the list a waiter whose deadline has
 * already claimed it, but which has not yet come back to remove itself.
 * The test holds the list lock so that both the signaller and the timed-
 * out waiter queue on it, the signaller first; the signal must then pass
 * over the timed-out waiter to the next one. A's deadline must fall after
 * that set-up, however slow the host (qemu): a round in which A gave up
 * too early is run again with a deadline twice as far. */
static int64_t race_deadline;

static void *race_a_thread(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&eat_mu);
	atomic_store(&eat_a_result,
		     gmp_cond_timedwait(&eat_cv, &eat_mu, race_deadline));
	gmp_mutex_unlock(&eat_mu);
	return NULL;
}

static void *race_signal_thread(void *arg)
{
	(void)arg;
	gmp_cond_signal(&eat_cv);
	return NULL;
}

static void test_cond_signal_skips_waiter_whose_deadline_won(void **s)
{
	(void)s;
	tu_init(2);
	gmp__cond_words *w = gmp__cond_words_of(&eat_cv);
	for (int64_t d = 100 * MS;; d *= 2) {
		assert_true(d <= 60 * SEC);
		atomic_store(&eat_a_result, 1);
		atomic_store(&eat_b_result, 1);
		race_deadline = gmp_nanotime() + d;
		pthread_t a, sig;
		assert_int_equal(pthread_create(&a, NULL, race_a_thread, NULL),
				 0);
		TU_WAIT_FOR(cond_waiters(&eat_cv) == 1 ||
			    atomic_load(&eat_a_result) != 1);
		assert_true(gmp_go(eat_b_task, NULL) > 0);
		TU_WAIT_FOR(cond_waiters(&eat_cv) == 2 ||
			    atomic_load(&eat_a_result) != 1);
		gmp__lock(&w->lock);
		if (atomic_load(&eat_a_result) != 1) {
			/* A left before the stage was set: again. */
			gmp__unlock(&w->lock);
			pthread_join(a, NULL);
			TU_WAIT_FOR(cond_waiters(&eat_cv) == 1);
			gmp_cond_signal(&eat_cv);
			TU_WAIT_FOR(atomic_load(&eat_b_result) == 0);
			continue;
		}
		assert_int_equal(pthread_create(&sig, NULL, race_signal_thread,
						NULL),
				 0);
		TU_WAIT_FOR(gmp__load32_rlx(&w->lock.key) == GMP__SLEEPING);
		/* A's deadline passes and it queues on the lock behind the
		 * signal: nothing observable marks the moment, so give it
		 * ample time. */
		int64_t left = race_deadline - gmp_nanotime();
		tu_sleep((left > 0 ? left : 0) + 150 * MS);
		assert_int_equal(atomic_load(&eat_a_result), 1); /* inside */
		gmp__unlock(&w->lock);
		pthread_join(sig, NULL);
		pthread_join(a, NULL);
		assert_int_equal(atomic_load(&eat_a_result), -ETIMEDOUT);
		/* The signal went on to B. */
		assert_int_equal(cond_waiters(&eat_cv), 0);
		TU_WAIT_FOR(atomic_load(&eat_b_result) != 1);
		assert_int_equal(atomic_load(&eat_b_result), 0);
		break;
	}
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- threads, no runtime ------------------------------------------------------------ */

static gmp_mutex nr_mu = GMP_MUTEX_INIT;
static gmp_cond nr_cv = GMP_COND_INIT;
static int nr_turn; /* mu */

enum { NR_ROUNDS = 2000 };

/* Two threads alternate through one cond, as the benchmark's tasks do. */
static void *nr_thread(void *arg)
{
	int me = (int)(uintptr_t)arg;
	for (int i = 0; i < NR_ROUNDS; i++) {
		gmp_mutex_lock(&nr_mu);
		while (nr_turn != me)
			gmp_cond_wait(&nr_cv, &nr_mu);
		nr_turn = 1 - me;
		gmp_cond_signal(&nr_cv);
		gmp_mutex_unlock(&nr_mu);
	}
	return NULL;
}

static void test_cond_threads_without_runtime(void **s)
{
	(void)s;
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, nr_thread,
						(void *)(uintptr_t)i),
				 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(nr_turn, 0);
	assert_int_equal(cond_waiters(&nr_cv), 0);
	/* And a timed wait on a plain thread. */
	gmp_mutex_lock(&nr_mu);
	assert_int_equal(gmp_cond_timedwait(&nr_cv, &nr_mu,
					    gmp_nanotime() + 5 * MS),
			 -ETIMEDOUT);
	gmp_mutex_unlock(&nr_mu);
	assert_int_equal(tu_stats().procs, 0);
}

/* ---- a pair taking turns: the mutex handed over ---------------------------------------- */

enum { TT_ROUNDS = 20000 };

static gmp_mutex tt_mu = GMP_MUTEX_INIT;
static gmp_cond tt_cv = GMP_COND_INIT;
static int tt_turn;    /* tt_mu */
static long tt_shared; /* tt_mu: bumped by everyone, non-atomically */
static atomic_long tt_other_bumps;
static atomic_int tt_stop, tt_bad;
static gmp_wg tt_players = GMP_WG_INIT, tt_others = GMP_WG_INIT;

/* A bump of tt_shared that loses another's if the mutex lets two in:
 * it yields between the read and the write. */
static void tt_bump(void)
{
	long v = tt_shared;
	gmp_yield();
	tt_shared = v + 1;
}

/* Takes TT_ROUNDS turns with its partner through tt_cv, and checks at
 * each that the turn is its own and that it holds the mutex. */
static void tt_player(void *arg)
{
	int me = (int)(uintptr_t)arg;
	for (int i = 0; i < TT_ROUNDS; i++) {
		gmp_mutex_lock(&tt_mu);
		while (tt_turn != me)
			gmp_cond_wait(&tt_cv, &tt_mu);
		if (!mutex_held(&tt_mu))
			atomic_store(&tt_bad, 1);
		tt_bump();
		tt_turn = 1 - me;
		gmp_cond_signal(&tt_cv);
		gmp_mutex_unlock(&tt_mu);
	}
	gmp_wg_done(&tt_players);
}

/* Locks and bumps until the players are done. */
static void tt_other(void *arg)
{
	(void)arg;
	while (!atomic_load(&tt_stop)) {
		gmp_mutex_lock(&tt_mu);
		tt_bump();
		gmp_mutex_unlock(&tt_mu);
		atomic_fetch_add(&tt_other_bumps, 1);
		gmp_yield();
	}
	gmp_wg_done(&tt_others);
}

/* The pair alone, then with `others` lockers beside it. */
static void turns_with_others(int procs, int others)
{
	tu_init(procs);
	for (int round = 0; round < 2; round++) {
		int n = round ? others : 0;
		tt_turn = 0;
		tt_shared = 0;
		atomic_store(&tt_other_bumps, 0);
		atomic_store(&tt_stop, 0);
		gmp_wg_add(&tt_others, n);
		for (int i = 0; i < n; i++)
			assert_true(gmp_go(tt_other, NULL) > 0);
		gmp_wg_add(&tt_players, 2);
		assert_true(gmp_go(tt_player, (void *)(uintptr_t)0) > 0);
		assert_true(gmp_go(tt_player, (void *)(uintptr_t)1) > 0);
		gmp_wg_wait(&tt_players);
		atomic_store(&tt_stop, 1);
		gmp_wg_wait(&tt_others);
		assert_int_equal(atomic_load(&tt_bad), 0);
		/* Every bump counted: nobody got in while another held it. */
		assert_int_equal(tt_shared,
				 2 * TT_ROUNDS + atomic_load(&tt_other_bumps));
		assert_int_equal(tt_turn, 0);
		assert_int_equal(cond_waiters(&tt_cv), 0);
	}
	assert_int_equal(gmp_shutdown(), 0);
}

static void test_cond_turns_hand_mutex_maxprocs_1(void **s)
{
	(void)s;
	turns_with_others(1, 2);
}

static void test_cond_turns_hand_mutex_maxprocs_2(void **s)
{
	(void)s;
	turns_with_others(2, 3);
}

/* A task that wants the mutex is not shut out by a pair that hands it
 * back and forth: the handover is only made while nobody else waits for
 * the mutex, so once the outsider sleeps on it the pair's waits unlock it
 * as usual and wake it, and within a millisecond it takes it (starvation
 * mode); at maxprocs 1 it gets in at the end of the pair's slice. */
static gmp_mutex sh_mu = GMP_MUTEX_INIT;
static gmp_cond sh_cv = GMP_COND_INIT;
static int sh_turn; /* sh_mu */
static atomic_int sh_stop;
static atomic_long sh_rounds;
static gmp_wg sh_wg = GMP_WG_INIT;

static void sh_player(void *arg)
{
	int me = (int)(uintptr_t)arg;
	gmp_mutex_lock(&sh_mu);
	while (!atomic_load(&sh_stop)) {
		while (sh_turn != me && !atomic_load(&sh_stop))
			gmp_cond_wait(&sh_cv, &sh_mu);
		sh_turn = 1 - me;
		atomic_fetch_add(&sh_rounds, 1);
		gmp_cond_signal(&sh_cv);
		gmp_mutex_unlock(&sh_mu);
		gmp_mutex_lock(&sh_mu);
	}
	gmp_cond_broadcast(&sh_cv);
	gmp_mutex_unlock(&sh_mu);
	gmp_wg_done(&sh_wg);
}

static void sh_outsider(void *arg)
{
	(void)arg;
	/* Let the pair get going first. */
	while (atomic_load(&sh_rounds) < 10000)
		gmp_yield();
	gmp_mutex_lock(&sh_mu);
	atomic_store(&sh_stop, 1);
	gmp_cond_broadcast(&sh_cv);
	gmp_mutex_unlock(&sh_mu);
	gmp_wg_done(&sh_wg);
}

static void test_cond_turns_do_not_shut_out_sleeper(void **s)
{
	(void)s;
	for (int procs = 1; procs <= 2; procs++) {
		tu_init(procs);
		sh_turn = 0;
		atomic_store(&sh_stop, 0);
		atomic_store(&sh_rounds, 0);
		gmp_wg_add(&sh_wg, 3);
		assert_true(gmp_go(sh_player, (void *)(uintptr_t)0) > 0);
		assert_true(gmp_go(sh_player, (void *)(uintptr_t)1) > 0);
		assert_true(gmp_go(sh_outsider, NULL) > 0);
		gmp_wg_wait(&sh_wg);
		assert_true(atomic_load(&sh_rounds) >= 10000);
		assert_int_equal(cond_waiters(&sh_cv), 0);
		assert_int_equal(gmp_shutdown(), 0);
	}
}

/* A waiter that a signal made under the mutex woke without waking an idle
 * P (it sits in the signaller's runnext) still runs while its signaller
 * goes on computing, at the end of the signaller's time slice. */
static gmp_mutex qw_mu = GMP_MUTEX_INIT;
static gmp_cond qw_cv = GMP_COND_INIT;
static bool qw_flag; /* qw_mu */
static atomic_int qw_ran;
static gmp_wg qw_wg = GMP_WG_INIT;

static void qw_waiter(void *arg)
{
	(void)arg;
	gmp_mutex_lock(&qw_mu);
	while (!qw_flag)
		gmp_cond_wait(&qw_cv, &qw_mu);
	gmp_mutex_unlock(&qw_mu);
	atomic_store(&qw_ran, 1);
	gmp_wg_done(&qw_wg);
}

static void qw_signaller(void *arg)
{
	(void)arg;
	TU_WAIT_FOR(cond_waiters(&qw_cv) == 1);
	gmp_mutex_lock(&qw_mu);
	qw_flag = true;
	gmp_cond_signal(&qw_cv);
	gmp_mutex_unlock(&qw_mu);
	/* Compute on, with switch points for the slice's end, until the
	 * waiter has run: never, if nothing ran it. */
	int64_t end = gmp_nanotime() + 5000 * MS;
	while (!atomic_load(&qw_ran) && gmp_nanotime() < end)
		gmp_preempt_point();
	gmp_wg_done(&qw_wg);
}

static void test_cond_quietly_woken_waiter_runs(void **s)
{
	(void)s;
	for (int procs = 1; procs <= 2; procs++) {
		tu_init(procs);
		qw_flag = false;
		atomic_store(&qw_ran, 0);
		gmp_wg_add(&qw_wg, 2);
		assert_true(gmp_go(qw_waiter, NULL) > 0);
		assert_true(gmp_go(qw_signaller, NULL) > 0);
		gmp_wg_wait(&qw_wg);
		assert_int_equal(atomic_load(&qw_ran), 1);
		assert_int_equal(gmp_shutdown(), 0);
	}
}

/* ---- producers and consumers, timed waits racing signals ------------------------------ */

enum { PC_CAP = 4 };

static gmp_mutex pc_mu = GMP_MUTEX_INIT;
static gmp_cond pc_notempty = GMP_COND_INIT, pc_notfull = GMP_COND_INIT;
static long pc_count; /* items in the buffer; mu */
static atomic_long pc_consumed, pc_wakeups, pc_signals;
static long pc_per_producer;
static gmp_wg pc_wg = GMP_WG_INIT;

static void pc_produce(uintptr_t k)
{
	for (long i = 0; i < pc_per_producer; i++) {
		gmp_mutex_lock(&pc_mu);
		while (pc_count == PC_CAP) {
			/* Short deadlines, so timeouts race the signals. */
			int r = gmp_cond_timedwait(
				&pc_notfull, &pc_mu,
				gmp_nanotime() + (int64_t)(k % 3) * 50 * US);
			T_ASSERT(r == 0 || r == -ETIMEDOUT);
			T_ASSERT(mutex_held(&pc_mu));
			if (r == 0)
				atomic_fetch_add(&pc_wakeups, 1);
		}
		pc_count++;
		atomic_fetch_add(&pc_signals, 1);
		gmp_cond_signal(&pc_notempty);
		gmp_mutex_unlock(&pc_mu);
	}
	gmp_wg_done(&pc_wg);
}

static void pc_consume(long n)
{
	for (long i = 0; i < n; i++) {
		gmp_mutex_lock(&pc_mu);
		while (pc_count == 0)
			gmp_cond_wait(&pc_notempty, &pc_mu);
		pc_count--;
		atomic_fetch_add(&pc_signals, 1);
		gmp_cond_signal(&pc_notfull);
		gmp_mutex_unlock(&pc_mu);
		atomic_fetch_add(&pc_consumed, 1);
	}
	gmp_wg_done(&pc_wg);
}

static void pc_producer_task(void *arg)
{
	pc_produce((uintptr_t)arg);
}

static void pc_consumer_task(void *arg)
{
	pc_consume((long)(intptr_t)arg);
}

static void *pc_consumer_thread(void *arg)
{
	pc_consume((long)(intptr_t)arg);
	return NULL;
}

static void test_cond_stress_randomized(void **s)
{
	(void)s;
	enum { NPROD = 6, NCONS = 4 };
	pc_per_producer = TU_SCALE(10000);
	long total = NPROD * pc_per_producer;
	setenv("GMP_DEBUG", "randomize=1", 1);
	tu_init(2);
	unsetenv("GMP_DEBUG");
	gmp_wg_add(&pc_wg, NPROD + NCONS);
	pthread_t th;
	/* Consumers: three tasks and a thread, sharing the items. */
	long share = total / NCONS;
	assert_int_equal(pthread_create(&th, NULL, pc_consumer_thread,
					(void *)(intptr_t)(total - 3 * share)),
			 0);
	for (int i = 0; i < NCONS - 1; i++)
		assert_true(gmp_go(pc_consumer_task, (void *)(intptr_t)share) >
			    0);
	for (int i = 0; i < NPROD; i++)
		assert_true(gmp_go(pc_producer_task, (void *)(uintptr_t)i) > 0);
	gmp_wg_wait(&pc_wg);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&pc_consumed), total);
	assert_int_equal(pc_count, 0);
	/* No waiter returned 0 without a signal taking it. */
	assert_true(atomic_load(&pc_wakeups) <= atomic_load(&pc_signals));
	assert_int_equal(cond_waiters(&pc_notempty), 0);
	assert_int_equal(cond_waiters(&pc_notfull), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

GMP_TEST_MAIN(cmocka_unit_test(test_cond_signal_wakes_one_fifo),
	      cmocka_unit_test(test_cond_broadcast_wakes_all),
	      cmocka_unit_test(test_cond_timedwait_times_out_holding_mutex),
	      cmocka_unit_test(test_cond_timed_out_waiter_does_not_eat_signal),
	      cmocka_unit_test(test_cond_signal_skips_waiter_whose_deadline_won),
	      cmocka_unit_test(test_cond_threads_without_runtime),
	      cmocka_unit_test(test_cond_stress_randomized),
	      cmocka_unit_test(test_cond_turns_hand_mutex_maxprocs_1),
	      cmocka_unit_test(test_cond_turns_hand_mutex_maxprocs_2),
	      cmocka_unit_test(test_cond_turns_do_not_shut_out_sleeper),
	      cmocka_unit_test(test_cond_quietly_woken_waiter_runs))
