/* Timers and tickers as channels, and func timers (gmp_timer_*): firing
 * once, ticking, dropping ticks nobody reads, stop and reset with no stale
 * value after them, free at any moment, func timers from tasks and
 * threads, select, a P retiring under its timers, foreign threads, and a
 * randomized stress. Underneath: a P's heap of runtime timers through
 * thousands of starts and stops (its invariants checked inside), the
 * timers it runs in batches firing in deadline order, and a crowd of
 * sleepers woken by one burst. Time is what these test, so they sleep; the bounds
 * are generous lower bounds (a timer never fires early) and far upper
 * ones. */
#include <pthread.h>

#include "gmp_test.h"
#include "export_test.h"

/* Inside a task: runs fn as gmp_main's task on a fresh runtime of procs
 * Ps and shuts down after it. */
static void in_task(int procs, int (*fn)(void *), void *arg)
{
	tu_init(procs);
	assert_int_equal(gmp_main(fn, arg), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* A value is buffered in the timer's channel now (without taking it). */
static bool buffered(gmp_timer *t)
{
	gmp_chan *c = gmp_timer_chan(t);
	return __atomic_load_n(&c->qcount, __ATOMIC_ACQUIRE) != 0;
}

static int64_t recv_time(gmp_timer *t)
{
	int64_t v = 0;
	T_ASSERT(gmp_chan_recv(gmp_timer_chan(t), &v) == 0);
	return v;
}

static bool try_time(gmp_timer *t, int64_t *v)
{
	return gmp_chan_try_recv(gmp_timer_chan(t), v) == 0;
}

/* ---- fire once ------------------------------------------------------------- */

static int fire_once_main(void *arg)
{
	(void)arg;
	int64_t t0 = gmp_nanotime();
	gmp_timer *t = gmp_timer_new(10 * MS, 0);
	T_ASSERT(t);
	int64_t v = recv_time(t);
	int64_t t1 = gmp_nanotime();
	T_ASSERT(v >= t0 + 10 * MS && v <= t1);
	/* Once only: nothing more comes, and there is nothing to stop. */
	gmp_sleep(30 * MS);
	T_ASSERT(!try_time(t, &v));
	T_ASSERT(!gmp_timer_stop(t));
	gmp_timer_free(t);
	/* A zero delay fires at once. */
	t = gmp_timer_new(0, 0);
	T_ASSERT(recv_time(t) >= t1);
	gmp_timer_free(t);
	return 0;
}

static void test_timer_fire_once(void **s)
{
	(void)s;
	in_task(2, fire_once_main, NULL);
}

static void test_timer_bad_arguments(void **s)
{
	(void)s;
	tu_init(1);
	assert_null(gmp_timer_new(-1, 0));
	assert_null(gmp_timer_new(0, -1));
	assert_null(gmp_timer_func(-1, (void (*)(void *))abort, NULL));
	assert_null(gmp_timer_func(0, NULL, NULL));
	gmp_timer *t = gmp_timer_func(SEC, (void (*)(void *))abort, NULL);
	assert_non_null(t);
	assert_null(gmp_timer_chan(t));
	assert_true(gmp_timer_stop(t));
	gmp_timer_free(t);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- tick, and drop -------------------------------------------------------- */

static int tick_main(void *arg)
{
	(void)arg;
	enum { N = 20 };
	int64_t t0 = gmp_nanotime();
	gmp_timer *t = gmp_timer_new(2 * MS, 2 * MS);
	int64_t last = t0;
	for (int i = 0; i < N; i++) {
		int64_t v = recv_time(t);
		T_ASSERT(v > last);
		last = v;
	}
	/* 20 ticks, the first after 2 ms, none early. */
	T_ASSERT(last >= t0 + N * 2 * MS);
	T_ASSERT(gmp_timer_stop(t)); /* a running ticker is pending */
	T_ASSERT(!gmp_timer_stop(t));
	gmp_timer_free(t);
	return 0;
}

static void test_timer_tick(void **s)
{
	(void)s;
	in_task(2, tick_main, NULL);
}

static int drop_main(void *arg)
{
	(void)arg;
	enum { P = 20 };
	int64_t t0 = gmp_nanotime();
	gmp_timer *t = gmp_timer_new(0, P * MS);
	/* Five ticks or so fire while nobody reads: one value is kept, the
	 * oldest (the first tick, at once), and the others are dropped. */
	gmp_sleep(5 * P * MS + P * MS / 2);
	int64_t v;
	T_ASSERT(try_time(t, &v));
	T_ASSERT(v >= t0 && v < t0 + P * MS);
	/* Nothing else is queued: a value now can only be a tick that fired
	 * after the receive, a later one (fires go in due order). */
	int64_t w;
	if (try_time(t, &w))
		T_ASSERT(w >= v + P * MS);
	/* The ticker goes on. */
	T_ASSERT(recv_time(t) >= v + P * MS);
	gmp_timer_free(t);
	return 0;
}

static void test_timer_drop(void **s)
{
	(void)s;
	in_task(2, drop_main, NULL);
}

/* ---- the tick grid --------------------------------------------------------- */

/* Tickers tick on a grid, gcd(period, 1 ms), so that tickers of one period
 * fire together: each value is a point of the grid, the first one no
 * earlier than the delay and less than a grid step after it. One-shot
 * timers are not moved. */
static int grid_main(void *arg)
{
	(void)arg;
	/* Two 1 ms tickers armed a third of a millisecond apart tick at the
	 * same instants. */
	int64_t a0 = gmp_nanotime();
	gmp_timer *a = gmp_timer_new(3 * MS, MS);
	int64_t a1 = gmp_nanotime();
	gmp_sleep(MS / 3);
	int64_t b0 = gmp_nanotime();
	gmp_timer *b = gmp_timer_new(3 * MS, MS);
	int64_t b1 = gmp_nanotime();
	int64_t va = recv_time(a), vb = recv_time(b);
	T_ASSERT(va % MS == 0 && vb % MS == 0);
	T_ASSERT(va >= a0 + 3 * MS && va < a1 + 4 * MS);
	T_ASSERT(vb >= b0 + 3 * MS && vb < b1 + 4 * MS);
	for (int i = 0; i < 5; i++) {
		int64_t v = recv_time(a), w = recv_time(b);
		T_ASSERT(v % MS == 0 && w % MS == 0);
		T_ASSERT(v > va && w > vb);
		va = v;
		vb = w;
	}
	gmp_timer_free(a);
	gmp_timer_free(b);
	/* 1.5 ms: a grid of 0.5 ms, and whole periods between values. */
	int64_t c0 = gmp_nanotime();
	gmp_timer *c = gmp_timer_new(MS, 3 * MS / 2);
	int64_t c1 = gmp_nanotime();
	int64_t first = recv_time(c);
	T_ASSERT(first % (MS / 2) == 0);
	T_ASSERT(first >= c0 + MS && first < c1 + MS + MS / 2);
	for (int i = 0; i < 4; i++) {
		int64_t v = recv_time(c);
		T_ASSERT(v > first && (v - first) % (3 * MS / 2) == 0);
	}
	/* A reset to a ticker goes on the grid too. */
	int64_t r0 = gmp_nanotime();
	gmp_timer_reset(c, 2 * MS, 2 * MS);
	int64_t r1 = gmp_nanotime();
	int64_t v = recv_time(c);
	T_ASSERT(v % MS == 0 && v >= r0 + 2 * MS && v < r1 + 3 * MS);
	/* A one-shot timer fires when asked, to the nanosecond of the
	 * arming: its value lies between the clock reads around it. */
	r0 = gmp_nanotime();
	gmp_timer_reset(c, 2 * MS, 0);
	r1 = gmp_nanotime();
	v = recv_time(c);
	T_ASSERT(v >= r0 + 2 * MS && v <= r1 + 2 * MS);
	gmp_timer_free(c);
	return 0;
}

static void test_timer_tickers_share_a_grid(void **s)
{
	(void)s;
	in_task(2, grid_main, NULL);
}

/* ---- stop and reset -------------------------------------------------------- */

static int stop_main(void *arg)
{
	(void)arg;
	int64_t v;
	/* Before the fire: true, and it never fires. */
	gmp_timer *t = gmp_timer_new(20 * MS, 0);
	T_ASSERT(gmp_timer_stop(t));
	T_ASSERT(!gmp_timer_stop(t));
	gmp_sleep(50 * MS);
	T_ASSERT(!try_time(t, &v));
	gmp_timer_free(t);
	/* After the fire, not received: false, and the value is gone. */
	t = gmp_timer_new(1 * MS, 0);
	TU_WAIT_FOR(buffered(t));
	T_ASSERT(!gmp_timer_stop(t));
	T_ASSERT(!try_time(t, &v));
	gmp_timer_free(t);
	/* A ticker with a tick waiting: stopped, nothing left. */
	t = gmp_timer_new(0, 1 * MS);
	TU_WAIT_FOR(buffered(t));
	T_ASSERT(gmp_timer_stop(t));
	T_ASSERT(!try_time(t, &v));
	gmp_sleep(10 * MS);
	T_ASSERT(!try_time(t, &v));
	gmp_timer_free(t);
	return 0;
}

static void test_timer_stop(void **s)
{
	(void)s;
	in_task(2, stop_main, NULL);
}

static int reset_main(void *arg)
{
	(void)arg;
	int64_t v;
	/* Before the fire: true; it fires after the new delay. */
	gmp_timer *t = gmp_timer_new(SEC, 0);
	int64_t r = gmp_nanotime();
	T_ASSERT(gmp_timer_reset(t, 5 * MS, 0));
	T_ASSERT(recv_time(t) >= r + 5 * MS);
	/* After the fire, not received: false, the stale value is gone, and
	 * the next value is the new arming's. */
	T_ASSERT(!gmp_timer_reset(t, 0, 0)); /* fired and received */
	TU_WAIT_FOR(buffered(t));
	r = gmp_nanotime();
	T_ASSERT(!gmp_timer_reset(t, 20 * MS, 0));
	T_ASSERT(!try_time(t, &v));
	T_ASSERT(recv_time(t) >= r + 20 * MS);
	/* A ticker with a stale tick: reset to a one-shot. */
	gmp_timer_free(t);
	t = gmp_timer_new(0, MS);
	TU_WAIT_FOR(buffered(t));
	r = gmp_nanotime();
	T_ASSERT(gmp_timer_reset(t, 10 * MS, 0));
	T_ASSERT(!try_time(t, &v));
	T_ASSERT(recv_time(t) >= r + 10 * MS);
	gmp_sleep(20 * MS);
	T_ASSERT(!try_time(t, &v)); /* one-shot now */
	/* A stopped one-shot reset to a ticker. */
	r = gmp_nanotime();
	T_ASSERT(!gmp_timer_reset(t, 2 * MS, 3 * MS));
	T_ASSERT(recv_time(t) >= r + 2 * MS);
	T_ASSERT(recv_time(t) >= r + 5 * MS);
	T_ASSERT(recv_time(t) >= r + 8 * MS);
	gmp_timer_free(t);
	return 0;
}

static void test_timer_reset(void **s)
{
	(void)s;
	in_task(2, reset_main, NULL);
}

/* ---- free ------------------------------------------------------------------ */

static atomic_long func_runs;
static atomic_long func_in_task;

static void count_run(void *arg)
{
	(void)arg;
	if (gmp_current() != NULL)
		atomic_fetch_add(&func_in_task, 1);
	atomic_fetch_add(&func_runs, 1);
}

static int free_main(void *arg)
{
	(void)arg;
	/* Pending one-shot, running ticker, ticker with a value waiting. */
	gmp_timer_free(gmp_timer_new(SEC, 0));
	gmp_timer_free(gmp_timer_new(MS, MS));
	gmp_timer *t = gmp_timer_new(0, MS);
	TU_WAIT_FOR(buffered(t));
	gmp_timer_free(t);
	/* A pending func timer never runs once freed. */
	atomic_store(&func_runs, 0);
	for (int i = 0; i < 100; i++)
		gmp_timer_free(gmp_timer_func(20 * MS, count_run, NULL));
	gmp_sleep(60 * MS);
	T_ASSERT(atomic_load(&func_runs) == 0);
	return 0;
}

static void test_timer_free_while_active(void **s)
{
	(void)s;
	in_task(2, free_main, NULL);
}

/* Frees land at every moment of a fire: before, during (the free waits
 * it out), after. ASan sees any use of a freed timer or channel. */
static void free_race_work(int n)
{
	for (int i = 0; i < n; i++) {
		int64_t d = (int64_t)(i % 7) * 3 * US;
		gmp_timer *t = (i & 1) ? gmp_timer_new(d, (i & 2) ? 2 * US : 0)
				       : gmp_timer_func(d, count_run, NULL);
		T_ASSERT(t);
		for (volatile int k = 0; k < (i % 5) * 300; k++)
			;
		gmp_timer_free(t);
	}
}

static gmp_wg race_wg;

static void free_race_task(void *arg)
{
	free_race_work((int)(intptr_t)arg);
	gmp_wg_done(&race_wg);
}

static void *free_race_thread(void *arg)
{
	free_race_work((int)(intptr_t)arg);
	return NULL;
}

static void test_timer_free_racing_fire(void **s)
{
	(void)s;
	int n = TU_SCALE(20000);
	atomic_store(&func_runs, 0);
	tu_init(2);
	gmp_wg_add(&race_wg, 4);
	for (int i = 0; i < 4; i++)
		assert_true(gmp_go(free_race_task, (void *)(intptr_t)n) > 0);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, free_race_thread,
					(void *)(intptr_t)(n / 4)),
			 0);
	gmp_wg_wait(&race_wg);
	pthread_join(th, NULL);
	assert_int_equal(gmp_shutdown(), 0);
	/* Some func timers fired before their free, most did not. */
	long runs = atomic_load(&func_runs);
	fprintf(stderr, "%ld of %d func timers ran\n", runs, 4 * n / 2 + n / 8);
	assert_true(runs <= 4 * n / 2 + n / 8 + 1);
}

/* ---- func timers ----------------------------------------------------------- */

static gmp_chan *func_done;

static void func_signal(void *arg)
{
	int64_t v = (int64_t)(intptr_t)arg;
	T_ASSERT(gmp_current() != NULL); /* a task */
	T_ASSERT(gmp_chan_send(func_done, &v) == 0);
}

static int func_main(void *arg)
{
	(void)arg;
	int64_t t0 = gmp_nanotime();
	gmp_timer *t = gmp_timer_func(5 * MS, func_signal, (void *)7);
	int64_t v = 0;
	T_ASSERT(gmp_chan_recv(func_done, &v) == 0 && v == 7);
	T_ASSERT(gmp_nanotime() >= t0 + 5 * MS);
	T_ASSERT(!gmp_timer_stop(t)); /* it has fired */
	/* Reset runs it again, once. */
	T_ASSERT(!gmp_timer_reset(t, MS, 0));
	T_ASSERT(gmp_chan_recv(func_done, &v) == 0 && v == 7);
	gmp_sleep(10 * MS);
	T_ASSERT(gmp_chan_try_recv(func_done, &v) == -EAGAIN);
	gmp_timer_free(t);
	return 0;
}

static void test_timer_func_from_task(void **s)
{
	(void)s;
	func_done = gmp_chan_new(sizeof(int64_t), 0);
	in_task(2, func_main, NULL);
	gmp_chan_free(func_done);
}

static void test_timer_func_from_thread(void **s)
{
	(void)s;
	/* The runtime is off: the timer starts it, as gmp_go would. */
	func_done = gmp_chan_new(sizeof(int64_t), 0);
	gmp_timer *t = gmp_timer_func(2 * MS, func_signal, (void *)9);
	assert_non_null(t);
	int64_t v = 0;
	assert_int_equal(gmp_chan_recv(func_done, &v), 0);
	assert_int_equal(v, 9);
	/* Many, from this thread; each runs once, in a task. */
	atomic_store(&func_runs, 0);
	atomic_store(&func_in_task, 0);
	gmp_timer *ts[50];
	for (int i = 0; i < 50; i++)
		ts[i] = gmp_timer_func((int64_t)i * 100 * US, count_run, NULL);
	TU_WAIT_FOR(atomic_load(&func_runs) == 50);
	assert_int_equal(atomic_load(&func_in_task), 50);
	for (int i = 0; i < 50; i++)
		gmp_timer_free(ts[i]);
	gmp_timer_free(t);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(func_done);
}

/* ---- select ---------------------------------------------------------------- */

static void select_sender(void *arg)
{
	int64_t v = 42;
	T_ASSERT(gmp_chan_send(arg, &v) == 0);
}

static int select_main(void *arg)
{
	(void)arg;
	gmp_chan *c = gmp_chan_new(sizeof(int64_t), 0);
	gmp_timer *t = gmp_timer_new(100 * SEC, 0);
	int64_t cv = 0, tv = 0;
	gmp_select_case cs[] = {
		{ .chan = c, .op = GMP_SELECT_RECV, .elem = &cv },
		{ .chan = gmp_timer_chan(t),
		  .op = GMP_SELECT_RECV,
		  .elem = &tv },
	};
	/* The channel first (the timer is far off), then the timer, armed
	 * again to fire soon; then nothing, until the select's own timeout. */
	T_ASSERT(gmp_go(select_sender, c) > 0);
	T_ASSERT(gmp_select(cs, 2, -1) == 0 && cv == 42);
	int64_t t0 = gmp_nanotime();
	T_ASSERT(gmp_timer_reset(t, 30 * MS, 0));
	T_ASSERT(gmp_select(cs, 2, -1) == 1 && cs[1].result == 0);
	T_ASSERT(tv >= t0 + 30 * MS);
	T_ASSERT(gmp_select(cs, 2, 20 * MS) == -ETIMEDOUT);
	/* A ticker in a select loop, beside a channel that stays quiet. */
	T_ASSERT(!gmp_timer_reset(t, MS, MS));
	for (int i = 0; i < 10; i++)
		T_ASSERT(gmp_select(cs, 2, -1) == 1);
	/* A stopped one in a select with a default: nothing. */
	T_ASSERT(gmp_timer_stop(t));
	T_ASSERT(gmp_select(cs, 2, 0) == -EAGAIN);
	gmp_timer_free(t);
	gmp_chan_free(c);
	return 0;
}

static void test_timer_in_select(void **s)
{
	(void)s;
	in_task(2, select_main, NULL);
}

/* ---- a P retiring under its timers ----------------------------------------- */

enum { NRET = 8 };
static gmp_wg ret_made, ret_done;
static atomic_int ret_on_other_p;

static void retire_task(void *arg)
{
	(void)arg;
	/* Hold this P a while, so that the other tasks spread over Ps. */
	tu_sleep(20 * MS);
	int64_t t0 = gmp_nanotime();
	gmp_timer *once = gmp_timer_new(150 * MS, 0);
	gmp_timer *tick = gmp_timer_new(150 * MS, 5 * MS);
	gmp_timer *retick = gmp_timer_new(0, 2 * MS);
	gmp__m *m = gmp__getm();
	if (m && m->p && m->p->id != 0)
		atomic_fetch_add(&ret_on_other_p, 1);
	gmp_wg_done(&ret_made);
	T_ASSERT(recv_time(once) >= t0 + 150 * MS);
	int64_t last = 0;
	for (int i = 0; i < 5; i++) {
		int64_t v = recv_time(tick);
		T_ASSERT(v > last && v >= t0 + 150 * MS);
		last = v;
	}
	for (int i = 0; i < 5; i++)
		recv_time(retick);
	gmp_timer_free(once);
	gmp_timer_free(tick);
	gmp_timer_free(retick);
	gmp_wg_done(&ret_done);
}

static void test_timer_survives_p_retiring(void **s)
{
	(void)s;
	tu_init(4);
	atomic_store(&ret_on_other_p, 0);
	gmp_wg_add(&ret_made, NRET);
	gmp_wg_add(&ret_done, NRET);
	for (int i = 0; i < NRET; i++)
		assert_true(gmp_go(retire_task, NULL) > 0);
	gmp_wg_wait(&ret_made);
	/* Some timers are on Ps that are about to go. */
	assert_true(atomic_load(&ret_on_other_p) > 0);
	assert_int_equal(gmp_set_maxprocs(1), 4);
	gmp_wg_wait(&ret_done);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- foreign threads ------------------------------------------------------- */

static void *thread_timers(void *arg)
{
	(void)arg;
	int64_t t0 = gmp_nanotime(), v;
	gmp_timer *t = gmp_timer_new(5 * MS, 0);
	T_ASSERT(t);
	T_ASSERT(recv_time(t) >= t0 + 5 * MS); /* blocks this thread */
	gmp_timer *tk = gmp_timer_new(MS, MS);
	for (int i = 0; i < 5; i++)
		recv_time(tk);
	TU_WAIT_FOR(buffered(tk));
	int64_t r = gmp_nanotime();
	T_ASSERT(gmp_timer_reset(tk, 3 * MS, 0));
	T_ASSERT(!try_time(tk, &v));
	T_ASSERT(recv_time(tk) >= r + 3 * MS);
	T_ASSERT(!gmp_timer_stop(tk));
	/* A select on a thread. */
	T_ASSERT(!gmp_timer_reset(t, 2 * MS, 0));
	gmp_select_case cs[] = {
		{ .chan = gmp_timer_chan(t), .op = GMP_SELECT_RECV, .elem = &v },
	};
	T_ASSERT(gmp_select(cs, 1, -1) == 0);
	gmp_timer_free(t);
	gmp_timer_free(tk);
	return NULL;
}

static void test_timer_foreign_threads(void **s)
{
	(void)s;
	tu_init(2);
	pthread_t th[3];
	for (int i = 0; i < 3; i++)
		assert_int_equal(
			pthread_create(&th[i], NULL, thread_timers, NULL), 0);
	thread_timers(NULL); /* and this one */
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
	/* Made before gmp_init: the timer starts the runtime. */
	gmp_timer *t = gmp_timer_new(MS, 0);
	assert_non_null(t);
	assert_true(recv_time(t) > 0);
	gmp_timer_free(t);
	assert_int_equal(gmp_shutdown(), 0);
}

/* A timer left pending at shutdown never fires; freeing it after works. */
static void test_timer_pending_at_shutdown(void **s)
{
	(void)s;
	atomic_store(&func_runs, 0);
	tu_init(2);
	gmp_timer *a = gmp_timer_new(10 * MS, 10 * MS);
	gmp_timer *b = gmp_timer_func(10 * MS, count_run, NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_false(gmp_timer_stop(a));
	gmp_timer_free(a);
	gmp_timer_free(b);
	assert_int_equal(atomic_load(&func_runs), 0);
}

/* ---- stress ---------------------------------------------------------------- */

/* Each task owns a timer and checks Go 1.23's rule at every step: after a
 * stop nothing is buffered, after a reset to delay d every value it
 * receives is at least d after the reset began; a value is never received
 * twice. With GMP_DEBUG=randomize sysmon detaches at random moments. */
enum { NSTRESS = 8 };
static gmp_wg stress_wg;

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void stress_work(uint64_t seed, int rounds)
{
	gmp_chan *quiet = gmp_chan_new(sizeof(int64_t), 0);
	int64_t armed = gmp_nanotime(), delay = 0, v;
	gmp_timer *t = gmp_timer_new(0, 0);
	for (int i = 0; i < rounds; i++) {
		uint64_t r = xorshift(&seed);
		switch (r % 6) {
		case 0:
			gmp_timer_stop(t);
			T_ASSERT(!try_time(t, &v));
			break;
		case 1:
		case 2:
			armed = gmp_nanotime();
			delay = (int64_t)(r >> 8) % (200 * US);
			gmp_timer_reset(t, delay, (r & 64) ? 50 * US : 0);
			break;
		case 3:
			if (try_time(t, &v))
				T_ASSERT(v >= armed + delay);
			break;
		case 4: {
			gmp_select_case cs[] = {
				{ .chan = quiet, .op = GMP_SELECT_RECV },
				{ .chan = gmp_timer_chan(t),
				  .op = GMP_SELECT_RECV,
				  .elem = &v },
			};
			int k = gmp_select(cs, 2, 300 * US);
			T_ASSERT(k == 1 || k == -ETIMEDOUT);
			if (k == 1)
				T_ASSERT(v >= armed + delay);
			break;
		}
		case 5:
			gmp_timer_free(t);
			armed = gmp_nanotime();
			delay = (int64_t)(r >> 8) % (100 * US);
			t = gmp_timer_new(delay, 0);
			T_ASSERT(t);
			break;
		}
		if (r & 0x100)
			gmp_yield();
	}
	gmp_timer_free(t);
	gmp_chan_free(quiet);
}

static void stress_task(void *arg)
{
	stress_work((uint64_t)(uintptr_t)arg, TU_SCALE(20000));
	gmp_wg_done(&stress_wg);
}

static void *stress_thread(void *arg)
{
	stress_work((uint64_t)(uintptr_t)arg, TU_SCALE(20000) / 10);
	return NULL;
}

static void test_timer_stress_randomized(void **s)
{
	(void)s;
	setenv("GMP_DEBUG", "randomize=1", 1);
	tu_init(2);
	unsetenv("GMP_DEBUG");
	gmp_wg_add(&stress_wg, NSTRESS);
	for (int i = 0; i < NSTRESS; i++)
		assert_true(gmp_go(stress_task,
				   (void *)(uintptr_t)(0x9e3779b9u + i)) > 0);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, stress_thread,
					(void *)(uintptr_t)12345),
			 0);
	/* The count changing under the tickers, too. */
	for (int i = 0; i < 10; i++) {
		tu_sleep(20 * MS);
		assert_true(gmp_set_maxprocs(1 + (i & 1) * 2) > 0);
	}
	gmp_wg_wait(&stress_wg);
	pthread_join(th, NULL);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- the heap of runtime timers ------------------------------------------ */

enum { NHEAP = 5000 };

static gmp__timer heap_t[NHEAP];
static int64_t fired_when[4 * NHEAP];
static atomic_int nfired;

/* Runs on g0, in a batch: records the deadline it fired for. */
static void record_fire(gmp__timer *t)
{
	int i = atomic_fetch_add(&nfired, 1);
	if (i < 4 * NHEAP)
		fired_when[i] = t->when;
}

static uint64_t heap_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Thousands of timers started on P0 and stopped in a random order, none
 * due: after every few hundred operations the heap is checked inside
 * (order, the slots' copies of the deadlines, the timers' positions, the
 * lock-free earliest), and every stop of a pending timer says so once. */
static void test_timer_heap_start_stop_many(void **s)
{
	(void)s;
	tu_init(1);
	assert_int_equal(gmp__rt_hold(false), 0);
	gmp__p *p0 = gmp__sched.allp[0];
	int32_t base = gmp__timers_check(p0);
	uint64_t x = 88172645463325252ull;
	int64_t far = gmp_nanotime() + 3600 * 1000 * MS;
	memset(heap_t, 0, sizeof heap_t);
	for (int i = 0; i < NHEAP; i++) {
		heap_t[i].fn = record_fire;
		/* Many equal deadlines too: ties must keep the order. */
		gmp__timer_start_on(&heap_t[i],
				    far + (int64_t)(heap_rand(&x) % 1000) * MS,
				    p0);
		if (i % 397 == 0)
			assert_int_equal(gmp__timers_check(p0), base + i + 1);
	}
	assert_int_equal(gmp__timers_check(p0), base + NHEAP);
	/* A random order of stops, half of them, then the rest. */
	int order[NHEAP];
	for (int i = 0; i < NHEAP; i++)
		order[i] = i;
	for (int i = NHEAP - 1; i > 0; i--) {
		int j = (int)(heap_rand(&x) % (uint64_t)(i + 1));
		int tmp = order[i];
		order[i] = order[j];
		order[j] = tmp;
	}
	for (int k = 0; k < NHEAP; k++) {
		assert_true(gmp__timer_stop(&heap_t[order[k]]));
		assert_false(gmp__timer_stop(&heap_t[order[k]]));
		if (k % 251 == 0 || k == NHEAP / 2)
			assert_int_equal(gmp__timers_check(p0),
					 base + NHEAP - k - 1);
	}
	assert_int_equal(gmp__timers_check(p0), base);
	assert_int_equal(atomic_load(&nfired), 0);
	gmp__rt_release();
	assert_int_equal(gmp_shutdown(), 0);
}

/* Thousands of timers due within a few milliseconds of each other, a
 * quarter of them periodic, all started before the first is due: the
 * scheduler runs them in batches, and they fire in deadline order (one P,
 * so one heap and one runner at a time), each deadline reached. */
static void test_timer_heap_fires_in_deadline_order(void **s)
{
	(void)s;
	tu_init(1);
	gmp__p *p0 = gmp__sched.allp[0];
	uint64_t x = 0x2545f4914f6cdd1dull;
	/* All must be in the heap before the first is due, or one added
	 * late could rightly fire before one that fired already: a slow host
	 * (a sanitizer, qemu) gets a longer lead, and another try. */
	int64_t lead = 50 * MS * tu_host_slowdown(), start = 0;
	for (bool clean = false; !clean; lead *= 4) {
		assert_int_equal(gmp__rt_hold(false), 0);
		atomic_store(&nfired, 0);
		memset(heap_t, 0, sizeof heap_t);
		start = gmp_nanotime() + lead;
		for (int i = 0; i < NHEAP; i++) {
			heap_t[i].fn = record_fire;
			heap_t[i].period = i % 4 == 0 ? 2 * MS : 0;
			gmp__timer_start_on(
				&heap_t[i],
				start + (int64_t)(heap_rand(&x) % (5 * MS)),
				p0);
		}
		clean = gmp_nanotime() < start;
		gmp__timers_check(p0);
		gmp__rt_release();
		/* Every one-shot timer, and the periodic ones at least
		 * once. */
		TU_WAIT_FOR(atomic_load(&nfired) >= NHEAP + NHEAP / 4);
		assert_int_equal(gmp__rt_hold(false), 0);
		int periodic = 0;
		for (int i = 0; i < NHEAP; i++)
			periodic += gmp__timer_stop(&heap_t[i]);
		assert_int_equal(periodic, NHEAP / 4);
		gmp__timers_check(p0);
		gmp__rt_release();
	}
	/* The periodic ones go on firing until stopped; the record keeps
	 * the first 4 * NHEAP. */
	int n = atomic_load(&nfired);
	if (n > 4 * NHEAP)
		n = 4 * NHEAP;
	assert_true(fired_when[0] >= start);
	for (int i = 1; i < n; i++)
		if (fired_when[i] < fired_when[i - 1])
			fail_msg(
				"fire %d was due at %lld, before fire %d's %lld",
				i, (long long)fired_when[i], i - 1,
				(long long)fired_when[i - 1]);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- a crowd of sleepers woken by one burst --------------------------------- */

enum { NCROWD = 2000 };

static int64_t crowd_deadline;
static atomic_int crowd_early;
static gmp_wg crowd_wg = GMP_WG_INIT;

static void crowd_task(void *arg)
{
	(void)arg;
	gmp_sleep(crowd_deadline - gmp_nanotime());
	if (gmp_nanotime() < crowd_deadline)
		atomic_fetch_add(&crowd_early, 1);
	gmp_wg_done(&crowd_wg);
}

/* Sleepers that all end at the same moment are readied by the same runs
 * of their Ps' timers, many per batch: every one wakes, none early. */
static void test_timer_crowd_of_sleepers(void **s)
{
	(void)s;
	tu_init(2);
	crowd_deadline = gmp_nanotime() + 100 * MS;
	gmp_wg_add(&crowd_wg, NCROWD);
	for (int i = 0; i < NCROWD; i++)
		assert_true(gmp_go(crowd_task, NULL) > 0);
	gmp_wg_wait(&crowd_wg);
	assert_true(gmp_nanotime() >= crowd_deadline);
	assert_int_equal(atomic_load(&crowd_early), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

GMP_TEST_MAIN(cmocka_unit_test(test_timer_fire_once),
	      cmocka_unit_test(test_timer_bad_arguments),
	      cmocka_unit_test(test_timer_tick),
	      cmocka_unit_test(test_timer_drop),
	      cmocka_unit_test(test_timer_tickers_share_a_grid),
	      cmocka_unit_test(test_timer_stop),
	      cmocka_unit_test(test_timer_reset),
	      cmocka_unit_test(test_timer_free_while_active),
	      cmocka_unit_test(test_timer_free_racing_fire),
	      cmocka_unit_test(test_timer_func_from_task),
	      cmocka_unit_test(test_timer_func_from_thread),
	      cmocka_unit_test(test_timer_in_select),
	      cmocka_unit_test(test_timer_survives_p_retiring),
	      cmocka_unit_test(test_timer_foreign_threads),
	      cmocka_unit_test(test_timer_pending_at_shutdown),
	      cmocka_unit_test(test_timer_stress_randomized),
	      cmocka_unit_test(test_timer_heap_start_stop_many),
	      cmocka_unit_test(test_timer_heap_fires_in_deadline_order),
	      cmocka_unit_test(test_timer_crowd_of_sleepers))
