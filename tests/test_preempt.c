/* Preemption (design.md §13): sysmon detaches the P from a task that runs
 * past its slice without reaching a switch point. The hogs here loop on
 * arithmetic and relaxed loads, calling nothing: without detaching they
 * would hold their Ps for ever and the sleepers beside them never wake.
 *
 * Each case needs a working asymmetric barrier (membarrier, or the
 * mprotect shoot-down on x86-64); where the runtime found none, detaching
 * is off and the case skips, saying why. */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "gmp_test.h"

#include "export_test.h"

/* ---- hogs -------------------------------------------------------------------- */

/* A hog's work: an LCG stepped `iters` times. Checked afterwards against
 * the same loop run on the test's own thread, so a hog whose registers or
 * stack a detach disturbed would be caught. */
static uint64_t lcg(uint64_t x, uint64_t iters)
{
	for (uint64_t i = 0; i < iters; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

struct hog {
	atomic_int *stop;     /* set to end the loop */
	uint64_t seed;        /* in */
	uint64_t iters, x;    /* out: how far it got and where */
	pid_t tid0;           /* its thread at the start */
	atomic_bool moved;    /* its thread ever changed inside its loop */
	atomic_bool detached; /* it saw itself detached at some point */
	gmp_wg *done;
};

/* Never reaches a switch point: steps the LCG in chunks, checking the
 * stop flag and its thread id (a plain system call, not a libgmp one). */
static void hog(void *arg)
{
	struct hog *h = arg;
	uint64_t x = h->seed, n = 0;
	h->tid0 = tu_gettid();
	while (!atomic_load_explicit(h->stop, memory_order_relaxed)) {
		for (int i = 0; i < 4096; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		n += 4096;
		if (tu_gettid() != h->tid0)
			atomic_store_explicit(&h->moved, true,
					      memory_order_relaxed);
		if (gmp__detached())
			atomic_store_explicit(&h->detached, true,
					      memory_order_relaxed);
	}
	h->iters = n;
	h->x = x;
	if (h->done)
		gmp_wg_done(h->done);
}

static void skip_without_detach(void)
{
	const char *why = gmp__preempt_off_reason();
	if (why) {
		fprintf(stderr, "detaching is off here: %s\n", why);
		skip();
	}
}

static void init_procs(int procs)
{
	tu_init(procs);
	skip_without_detach();
}

/* ---- k hogs at maxprocs p: a sleeper still wakes on time ----------------------- */

/* How late a 10 ms sleep beside hogs may wake. The runtime's part is a
 * slice and a grace (11 ms) per hog still on the P, and the hand-off; the
 * rest is the host's: a detached hog is a thread of its own that the
 * kernel shares the CPUs with the sleeper's thread, so the sleeper's
 * thread, once woken, waits its turn among them. Natively that turn is a
 * few milliseconds; under qemu-user, which emulates every thread, with
 * another suite's hogs running beside it in CI, it was seen at 30-80 ms,
 * once the hogs were all detached and the P idle. A task that was never
 * detached would not wake at all. */
static int64_t wake_bound_ns(void)
{
	return 50 * MS * tu_host_slowdown();
}

struct sleeper_run {
	int nhogs;
	int rounds;
	int64_t worst_ns; /* the latest a 10 ms sleep woke */
};

static struct hog hogs[8];
static atomic_int hogs_stop;
static gmp_wg hogs_wg;

static void start_hogs(int k)
{
	atomic_store(&hogs_stop, 0);
	memset(&hogs_wg, 0, sizeof hogs_wg);
	gmp_wg_add(&hogs_wg, k);
	for (int i = 0; i < k; i++) {
		hogs[i] = (struct hog){ .stop = &hogs_stop,
					.seed = 0x1234u + (uint64_t)i,
					.done = &hogs_wg };
		assert_true(gmp_go(hog, &hogs[i]) > 0);
	}
}

static void stop_hogs(int k)
{
	atomic_store(&hogs_stop, 1);
	gmp_wg_wait(&hogs_wg);
	for (int i = 0; i < k; i++) {
		T_ASSERT(hogs[i].iters > 0);
		T_ASSERT(hogs[i].x == lcg(hogs[i].seed, hogs[i].iters));
		T_ASSERT(!hogs[i].moved);
	}
}

static int sleeper_main(void *arg)
{
	struct sleeper_run *r = arg;
	start_hogs(r->nhogs);
	for (int i = 0; i < r->rounds; i++) {
		int64_t t0 = gmp_nanotime();
		gmp_sleep(10 * MS);
		int64_t late = gmp_nanotime() - t0 - 10 * MS;
		if (late > r->worst_ns)
			r->worst_ns = late;
	}
	stop_hogs(r->nhogs);
	return 0;
}

static void hogs_beside_sleeper(int procs, int k)
{
	init_procs(procs);
	struct sleeper_run r = { .nhogs = k, .rounds = 30 };
	assert_int_equal(gmp_main(sleeper_main, &r), 0);
	gmp_stats s = tu_stats();
	fprintf(stderr,
		"procs=%d hogs=%d: worst wake %.1f ms late, %llu "
		"detaches\n",
		procs, k, (double)r.worst_ns / 1e6,
		(unsigned long long)s.detaches);
	assert_true(r.worst_ns <= wake_bound_ns());
	assert_true(s.detaches >= (uint64_t)k - (k > procs ? 0 : 1));
	assert_int_equal(gmp_shutdown(), 0);
}

static void test_preempt_p1_one_hog(void **s)
{
	(void)s;
	hogs_beside_sleeper(1, 1);
}

static void test_preempt_p1_three_hogs(void **s)
{
	(void)s;
	hogs_beside_sleeper(1, 3);
}

static void test_preempt_p2_two_hogs(void **s)
{
	(void)s;
	hogs_beside_sleeper(2, 2);
}

static void test_preempt_p2_four_hogs(void **s)
{
	(void)s;
	hogs_beside_sleeper(2, 4);
}

/* ---- a detached hog goes on using the runtime ------------------------------------ */

static gmp_mutex dh_mu = GMP_MUTEX_INIT;
static long dh_counter;
static atomic_int dh_child_ran;

static void dh_child(void *arg)
{
	(void)arg;
	atomic_store(&dh_child_ran, 1);
}

static void dh_echo(void *arg)
{
	gmp_chan **ch = arg;
	int v;
	while (gmp_chan_recv(ch[0], &v) == 0) {
		gmp_mutex_lock(&dh_mu); /* contended with the hog below */
		dh_counter++;
		gmp_mutex_unlock(&dh_mu);
		v++;
		T_ASSERT(gmp_chan_send(ch[1], &v) == 0);
	}
}

/* Spins until sysmon has detached it, then spawns, locks, sends and
 * receives: each takes a P back first. */
static int detached_hog_main(void *arg)
{
	(void)arg;
	gmp_chan *ch[2] = { gmp_chan_new(sizeof(int), 0),
			    gmp_chan_new(sizeof(int), 0) };
	T_ASSERT(ch[0] && ch[1]);
	T_ASSERT(gmp_go(dh_echo, ch) > 0);
	pid_t tid = tu_gettid();
	for (int round = 0; round < 5; round++) {
		int64_t until = tu_now_ns() + 10000 * MS;
		while (!gmp__detached())
			T_ASSERT(tu_now_ns() < until); /* no switch point */
		T_ASSERT(tu_gettid() == tid);
		atomic_store(&dh_child_ran, 0);
		T_ASSERT(gmp_go(dh_child, NULL) > 0);
		T_ASSERT(!gmp__detached()); /* gmp_go took a P back */
		gmp_mutex_lock(&dh_mu);
		dh_counter++;
		gmp_mutex_unlock(&dh_mu);
		int v = round * 10;
		T_ASSERT(gmp_chan_send(ch[0], &v) == 0);
		T_ASSERT(gmp_chan_recv(ch[1], &v) == 0);
		T_ASSERT(v == round * 10 + 1);
		gmp_yield();
		T_ASSERT(atomic_load(&dh_child_ran) == 1);
		/* Back to spinning on whatever thread the yield left us. */
		tid = tu_gettid();
	}
	gmp_chan_close(ch[0]);
	gmp_sleep(10 * MS);
	gmp_chan_free(ch[0]);
	gmp_chan_free(ch[1]);
	return 0;
}

static void test_preempt_detached_hog_spawns_locks_sends(void **s)
{
	(void)s;
	/* A second task keeps the P wanted (a sleeper's timer), so the hog
	 * is detached every time it spins past its slice. */
	init_procs(1);
	assert_int_equal(gmp_main(detached_hog_main, NULL), 0);
	assert_int_equal(dh_counter, 10);
	assert_true(tu_stats().detaches >= 5);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- a hog keeps its thread ------------------------------------------------------ */

static int keeps_thread_main(void *arg)
{
	struct hog *h = arg;
	atomic_int stop = 0;
	*h = (struct hog){ .stop = &stop, .seed = 7 };
	gmp_wg wg = GMP_WG_INIT;
	h->done = &wg;
	gmp_wg_add(&wg, 1);
	T_ASSERT(gmp_go(hog, h) > 0);
	/* The sleeps keep wanting the P the hog holds. */
	for (int i = 0; i < 30; i++)
		gmp_sleep(10 * MS);
	atomic_store(&stop, 1);
	gmp_wg_wait(&wg);
	return 0;
}

static void test_preempt_hog_keeps_its_thread(void **s)
{
	(void)s;
	init_procs(1);
	struct hog h;
	assert_int_equal(gmp_main(keeps_thread_main, &h), 0);
	assert_true(h.detached);
	assert_false(h.moved);
	assert_true(h.x == lcg(h.seed, h.iters));
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- GMP_PREEMPT ----------------------------------------------------------------- */

/* Computes for about 100 ms of wall time, calling nothing of libgmp. */
static void bounded_hog(void *arg)
{
	gmp_wg *wg = arg;
	int64_t until = tu_now_ns() + 100 * MS;
	uint64_t x = 1;
	while (tu_now_ns() < until)
		x = lcg(x, 1000);
	T_ASSERT(x != 0);
	gmp_wg_done(wg);
}

static int bounded_hogs_main(void *arg)
{
	(void)arg;
	gmp_wg wg = GMP_WG_INIT;
	gmp_wg_add(&wg, 3);
	for (int i = 0; i < 3; i++)
		T_ASSERT(gmp_go(bounded_hog, &wg) > 0);
	gmp_wg_wait(&wg);
	return 0;
}

static void test_preempt_off_keeps_detaches_zero(void **s)
{
	(void)s;
	setenv("GMP_PREEMPT", "off", 1);
	tu_init(1);
	unsetenv("GMP_PREEMPT");
	assert_int_equal(gmp_main(bounded_hogs_main, NULL), 0);
	assert_int_equal(tu_stats().detaches, 0);
	assert_int_equal(gmp_shutdown(), 0);
}

static void test_preempt_env_values(void **s)
{
	(void)s;
	setenv("GMP_PREEMPT", "sometimes", 1);
	assert_int_equal(gmp_init(NULL), -EINVAL);
	setenv("GMP_PREEMPT", "", 1); /* empty counts as unset */
	assert_int_equal(gmp_init(NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
	setenv("GMP_PREEMPT", "on", 1);
	assert_int_equal(gmp_init(NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
	unsetenv("GMP_PREEMPT");
}

/* ---- locked tasks, syscalls and ends while detached -------------------------------- */

static void wait_detached(void)
{
	int64_t until = tu_now_ns() + 10000 * MS;
	while (!gmp__detached())
		T_ASSERT(tu_now_ns() < until);
}

static atomic_int side_stop;

/* Keeps a timer on the P wanted while the hogs spin. */
static void side_sleeper(void *arg)
{
	(void)arg;
	while (!atomic_load(&side_stop))
		gmp_sleep(2 * MS);
}

static int locked_main(void *arg)
{
	(void)arg;
	gmp_lock_os_thread();
	pid_t tid = tu_gettid();
	for (int round = 0; round < 3; round++) {
		wait_detached();
		T_ASSERT(gmp_go(dh_child, NULL) > 0);
		gmp_yield(); /* locked: comes back on this thread */
		gmp_sleep(MS);
		T_ASSERT(tu_gettid() == tid);
	}
	gmp_unlock_os_thread();
	atomic_store(&side_stop, 1);
	return 0;
}

static void test_preempt_locked_task_is_detached_and_keeps_its_m(void **s)
{
	(void)s;
	init_procs(1);
	atomic_store(&side_stop, 0);
	assert_true(gmp_go(side_sleeper, NULL) > 0);
	assert_int_equal(gmp_main(locked_main, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

static int syscall_main(void *arg)
{
	(void)arg;
	for (int round = 0; round < 3; round++) {
		wait_detached();
		struct timespec ts = { 0, 5 * MS };
		gmp_enter_syscall();
		nanosleep(&ts, NULL);
		gmp_exit_syscall();
		T_ASSERT(!gmp__detached());
		gmp_yield();
	}
	atomic_store(&side_stop, 1);
	return 0;
}

static void test_preempt_syscall_from_detached_task(void **s)
{
	(void)s;
	init_procs(1);
	atomic_store(&side_stop, 0);
	assert_true(gmp_go(side_sleeper, NULL) > 0);
	assert_int_equal(gmp_main(syscall_main, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

static atomic_int ended;

static void exits_detached(void *arg)
{
	(void)arg;
	wait_detached();
	atomic_fetch_add(&ended, 1);
	gmp_exit();
}

static void returns_detached(void *arg)
{
	(void)arg;
	wait_detached();
	atomic_fetch_add(&ended, 1);
}

static void test_preempt_task_ends_while_detached(void **s)
{
	(void)s;
	init_procs(1);
	atomic_store(&ended, 0);
	atomic_store(&side_stop, 0);
	assert_true(gmp_go(side_sleeper, NULL) > 0);
	assert_true(gmp_go(exits_detached, NULL) > 0);
	assert_true(gmp_go(returns_detached, NULL) > 0);
	int64_t until = tu_now_ns() + 20000 * MS;
	while (atomic_load(&ended) < 2 && tu_now_ns() < until)
		usleep(1000);
	assert_int_equal(atomic_load(&ended), 2);
	atomic_store(&side_stop, 1);
	/* Every task, the two that ended detached included, is gone. */
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- an unwrapped blocking call loses its P the same way ----------------------------- */

static void unwrapped_poller(void *arg)
{
	gmp_wg *wg = arg;
	for (int i = 0; i < 6; i++)
		poll(NULL, 0, 50); /* not wrapped: holds its P */
	gmp_wg_done(wg);
}

static int unwrapped_main(void *arg)
{
	int64_t *worst = arg;
	gmp_wg wg = GMP_WG_INIT;
	gmp_wg_add(&wg, 1);
	T_ASSERT(gmp_go(unwrapped_poller, &wg) > 0);
	for (int i = 0; i < 25; i++) {
		int64_t t0 = gmp_nanotime();
		gmp_sleep(10 * MS);
		int64_t late = gmp_nanotime() - t0 - 10 * MS;
		if (late > *worst)
			*worst = late;
	}
	gmp_wg_wait(&wg);
	return 0;
}

static void test_preempt_unwrapped_blocking_call_loses_its_p(void **s)
{
	(void)s;
	init_procs(1);
	int64_t worst = 0;
	assert_int_equal(gmp_main(unwrapped_main, &worst), 0);
	assert_true(worst <= wake_bound_ns());
	assert_true(tu_stats().detaches >= 1);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- the thread cap counts detached threads ------------------------------------------- */

static void cap_child(void *arg)
{
	(void)arg;
	gmp_config c = { .maxprocs = 1, .max_threads = 3 };
	if (gmp_init(&c) != 0)
		_exit(3);
	if (gmp__preempt_off_reason())
		_exit(4);
	atomic_int stop = 0;
	struct hog h[6];
	for (int i = 0; i < 6; i++) {
		h[i] = (struct hog){ .stop = &stop, .seed = (uint64_t)i };
		gmp_go(hog, &h[i]);
	}
	sleep(20); /* the runtime aborts long before */
	_exit(5);
}

static void test_preempt_thread_cap_counts_detached_threads(void **s)
{
	(void)s;
	init_procs(1); /* only to learn whether to skip */
	assert_int_equal(gmp_shutdown(), 0);
	tu_expect_abort(cap_child, NULL, "exceeds 3-thread limit");
}

/* ---- what dumps show -------------------------------------------------------------------- */

static int dump_main(void *arg)
{
	char *out = arg;
	atomic_int stop = 0;
	struct hog h = { .stop = &stop, .seed = 3 };
	gmp_wg wg = GMP_WG_INIT;
	h.done = &wg;
	gmp_wg_add(&wg, 1);
	T_ASSERT(gmp_go(hog, &h) > 0);
	int64_t until = tu_now_ns() + 10000 * MS;
	while (!atomic_load(&h.detached)) {
		T_ASSERT(tu_now_ns() < until);
		gmp_sleep(MS);
	}
	FILE *f = fmemopen(out, 4096, "w");
	T_ASSERT(f);
	T_ASSERT(gmp_dump(f) >= 2);
	fclose(f);
	atomic_store(&stop, 1);
	gmp_wg_wait(&wg);
	return 0;
}

static void test_preempt_dump_shows_detached_task(void **s)
{
	(void)s;
	init_procs(1);
	char out[4096] = { 0 };
	assert_int_equal(gmp_main(dump_main, out), 0);
	if (!strstr(out, "detached"))
		fail_msg("no detached task in the dump:\n%s", out);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- the barrier --------------------------------------------------------------- */

/* Without a barrier, detaching is off, says so under GMP_DEBUG, and a hog
 * keeps its P (the cooperative request is all that remains). */
static void no_barrier_child(void *arg)
{
	(void)arg;
	gmp__preempt_force_barrier(0);
	setenv("GMP_DEBUG", "sigquit=0", 1);
	gmp_config c = { .maxprocs = 1 };
	if (gmp_init(&c) != 0)
		_exit(3);
	const char *why = gmp__preempt_off_reason();
	if (!why || !strstr(why, "no asymmetric barrier"))
		_exit(4);
	if (gmp_main(bounded_hogs_main, NULL) != 0)
		_exit(5);
	if (tu_stats().detaches != 0)
		_exit(6);
	gmp_shutdown();
	_exit(0);
}

static void test_preempt_without_a_barrier_detaching_is_off(void **s)
{
	(void)s;
	char err[4096];
	int status = tu_run_child(no_barrier_child, NULL, err, sizeof err);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("child status %#x, stderr:\n%s", status, err);
	if (!strstr(err, "gmp: preemption:") ||
	    !strstr(err, "no asymmetric barrier"))
		fail_msg("GMP_DEBUG did not say why detaching is off:\n%s",
			 err);
}

/* The mprotect shoot-down, where membarrier is missing: a barrier on
 * x86-64, which detaches as with membarrier; none on arm64, which then
 * says so. */
static void test_preempt_shootdown_barrier(void **s)
{
	(void)s;
	gmp__preempt_force_barrier(2);
	tu_init(1);
	gmp__preempt_force_barrier(-1);
	const char *why = gmp__preempt_off_reason();
#if defined(__x86_64__)
	assert_null(why);
	struct sleeper_run r = { .nhogs = 2, .rounds = 15 };
	assert_int_equal(gmp_main(sleeper_main, &r), 0);
	assert_true(r.worst_ns <= wake_bound_ns());
	assert_true(tu_stats().detaches >= 1);
#else
	assert_non_null(why);
	assert_non_null(strstr(why, "not a barrier on this CPU"));
#endif
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- stress: detaches racing with entries into the runtime ------------------------------ */

static gmp_mutex st_mu = GMP_MUTEX_INIT;
static long st_locked;
static atomic_long st_spawned_ran;

static void st_child(void *arg)
{
	(void)arg;
	atomic_fetch_add_explicit(&st_spawned_ran, 1, memory_order_relaxed);
}

struct st_worker {
	gmp_chan *in, *out; /* to and from the echo partner */
	long rounds;
	uint64_t x;
	gmp_wg *wg;
};

static void st_partner(void *arg)
{
	struct st_worker *w = arg;
	long v;
	while (gmp_chan_recv(w->in, &v) == 0) {
		v = v * 3 + 1;
		T_ASSERT(gmp_chan_send(w->out, &v) == 0);
	}
}

/* Short stretches of computing between calls that need a P, and now and
 * then a long one (about 100 µs) that outlasts a randomized slice: sysmon,
 * in randomized mode, then detaches at random moments, so many of these
 * calls find their task detached, or being detached, or racing a claim. */
static uint64_t st_step(uint64_t x, long i)
{
	return lcg(x, (i & 255) == 0 ? 100000 : (x >> 54) + 20);
}

static void st_worker(void *arg)
{
	struct st_worker *w = arg;
	uint64_t x = w->x;
	for (long i = 0; i < w->rounds; i++) {
		x = st_step(x, i);
		switch (i % 4) {
		case 0:
			T_ASSERT(gmp_go(st_child, NULL) > 0);
			break;
		case 1:
			gmp_mutex_lock(&st_mu);
			st_locked++;
			gmp_mutex_unlock(&st_mu);
			break;
		case 2: {
			long v = i;
			T_ASSERT(gmp_chan_send(w->in, &v) == 0);
			T_ASSERT(gmp_chan_recv(w->out, &v) == 0);
			T_ASSERT(v == i * 3 + 1);
			break;
		}
		case 3:
			gmp_preempt_point();
			break;
		}
	}
	w->x = x;
	gmp_chan_close(w->in);
	gmp_wg_done(w->wg);
}

static void stress(int procs)
{
	setenv("GMP_DEBUG", "randomize=1", 1);
	init_procs(procs);
	unsetenv("GMP_DEBUG");
	enum { NW = 6 };
	long rounds = TU_SCALE(1000000) / NW;
	static struct st_worker w[NW];
	gmp_wg wg = GMP_WG_INIT;
	gmp_wg_add(&wg, NW);
	st_locked = 0;
	atomic_store(&st_spawned_ran, 0);
	for (int i = 0; i < NW; i++) {
		w[i] = (struct st_worker){ gmp_chan_new(sizeof(long), 0),
					   gmp_chan_new(sizeof(long), 0),
					   rounds, 0x9e37u + (uint64_t)i, &wg };
		assert_true(gmp_go(st_partner, &w[i]) > 0);
		assert_true(gmp_go(st_worker, &w[i]) > 0);
	}
	gmp_wg_wait(&wg);
	uint64_t nd = tu_stats().detaches;
	assert_true(nd >= 10);
	assert_int_equal(gmp_shutdown(), 0);
	/* Rounds i with i % 4 == 0 spawn, those with i % 4 == 1 lock. */
	assert_int_equal(atomic_load(&st_spawned_ran), NW * ((rounds + 3) / 4));
	assert_int_equal(st_locked, NW * ((rounds + 2) / 4));
	fprintf(stderr, "%llu detaches\n", (unsigned long long)nd);
	for (int i = 0; i < NW; i++) {
		uint64_t x = 0x9e37u + (uint64_t)i;
		for (long k = 0; k < rounds; k++)
			x = st_step(x, k);
		assert_true(w[i].x == x);
		gmp_chan_free(w[i].in);
		gmp_chan_free(w[i].out);
	}
}

static void test_preempt_stress_randomized_p1(void **s)
{
	(void)s;
	stress(1);
}

static void test_preempt_stress_randomized_p2(void **s)
{
	(void)s;
	stress(2);
}

GMP_TEST_MAIN(
	cmocka_unit_test(test_preempt_p1_one_hog),
	cmocka_unit_test(test_preempt_p1_three_hogs),
	cmocka_unit_test(test_preempt_p2_two_hogs),
	cmocka_unit_test(test_preempt_p2_four_hogs),
	cmocka_unit_test(test_preempt_detached_hog_spawns_locks_sends),
	cmocka_unit_test(test_preempt_hog_keeps_its_thread),
	cmocka_unit_test(test_preempt_off_keeps_detaches_zero),
	cmocka_unit_test(test_preempt_env_values),
	cmocka_unit_test(test_preempt_locked_task_is_detached_and_keeps_its_m),
	cmocka_unit_test(test_preempt_syscall_from_detached_task),
	cmocka_unit_test(test_preempt_task_ends_while_detached),
	cmocka_unit_test(test_preempt_unwrapped_blocking_call_loses_its_p),
	cmocka_unit_test(test_preempt_thread_cap_counts_detached_threads),
	cmocka_unit_test(test_preempt_dump_shows_detached_task),
	cmocka_unit_test(test_preempt_without_a_barrier_detaching_is_off),
	cmocka_unit_test(test_preempt_shootdown_barrier),
	cmocka_unit_test(test_preempt_stress_randomized_p1),
	cmocka_unit_test(test_preempt_stress_randomized_p2))
