/* The scheduler end to end: tasks run exactly once at several maxprocs,
 * runnext ordering, parking and readying (from tasks and foreign threads),
 * work spreading, task-local keys, restarts, and misuse. */
#include <pthread.h>

#include "export_test.h"
#include "gmp_test.h"

/* ---- every task runs exactly once --------------------------------------- */

#define MILLION TU_SCALE(1000000)

static atomic_uchar *ran;
static atomic_long nran;

static void count_once(void *arg)
{
	atomic_fetch_add(&ran[(uintptr_t)arg], 1);
	atomic_fetch_add(&nran, 1);
}

/* A tree of spawners, so spawning happens on every P at once. */
static void spawn_range(void *arg)
{
	uintptr_t lo = (uintptr_t)arg >> 32, hi = (uintptr_t)arg & 0xffffffff;
	while (hi - lo > 1000) {
		uintptr_t mid = lo + (hi - lo) / 2;
		T_ASSERT(gmp_go(spawn_range, (void *)(mid << 32 | hi)) > 0);
		hi = mid;
	}
	for (uintptr_t i = lo; i < hi; i++)
		while (gmp_go(count_once, (void *)i) < 0)
			gmp_yield();
}

static void million_at(int procs)
{
	ran = calloc(MILLION, 1);
	atomic_store(&nran, 0);
	tu_init(procs);
	assert_true(gmp_go(spawn_range, (void *)(uintptr_t)MILLION) > 0);
	assert_int_equal(gmp_shutdown(), 0); /* waits for every task */
	assert_int_equal(atomic_load(&nran), MILLION);
	for (int i = 0; i < MILLION; i++)
		assert_int_equal(ran[i], 1);
	free(ran);
}

static void test_sched_million_tasks_maxprocs_1(void **s)
{
	(void)s;
	million_at(1);
}
static void test_sched_million_tasks_maxprocs_2(void **s)
{
	(void)s;
	million_at(2);
}
static void test_sched_million_tasks_maxprocs_4(void **s)
{
	(void)s;
	million_at(4);
}
static void test_sched_million_tasks_maxprocs_8(void **s)
{
	(void)s;
	million_at(8);
}

/* ---- runnext ordering ------------------------------------------------------ */

static int order[16];
static atomic_int norder;

static void record(void *arg)
{
	order[atomic_fetch_add(&norder, 1)] = (int)(uintptr_t)arg;
}

static void spawn_five(void *arg)
{
	(void)arg;
	for (int i = 1; i <= 5; i++)
		gmp_go(record, (void *)(uintptr_t)i);
}

/* The ordering cases below hold within one time slice: at a slice's end
 * sysmon (rightly) sends runnext to the back of the queue. Under TSan a
 * spawn makes a fiber context, which takes about 3 ms (five spawns took
 * 15-40 ms), and on a loaded host the OS may deschedule the spawner for
 * longer than 10 ms: so these runs get a 10 s slice. */
static void tu_init_long_slice(void)
{
	gmp__preempt_set_slice(10 * 1000 * 1000 * 1000LL);
	tu_init(1);
}

static void shutdown_long_slice(void)
{
	gmp_shutdown();
	gmp__preempt_set_slice(0);
}

/* One run; false if the order differed. */
static bool spawn_order_once(void)
{
	atomic_store(&norder, 0);
	tu_init_long_slice();
	gmp_go(spawn_five, NULL);
	shutdown_long_slice();
	/* The newest spawn sits in runnext and runs first; each spawn kicked
	 * the previous runnext to the tail, so the rest run FIFO. */
	int want[] = { 5, 1, 2, 3, 4 };
	assert_int_equal(atomic_load(&norder), 5);
	for (int i = 0; i < 5; i++)
		if (order[i] != want[i]) {
			print_message("order: %d %d %d %d %d\n", order[0],
				      order[1], order[2], order[3], order[4]);
			return false;
		}
	return true;
}

static void test_sched_spawn_order_follows_runnext(void **s)
{
	(void)s;
	for (int i = 0; i < 5; i++)
		assert_true(spawn_order_once());
}

static gmp_g *parked_g;
static atomic_int parked_flag;

static bool set_flag(gmp_g *g, void *lock)
{
	(void)g;
	atomic_store((atomic_int *)lock, 1);
	return true;
}

static void parker(void *arg)
{
	parked_g = gmp_current();
	gmp_park(set_flag, &parked_flag);
	record(arg);
}

static void readier(void *arg)
{
	(void)arg;
	/* Queue two tasks behind us, then ready the parked one: it goes to
	 * runnext and so runs before them, though they were queued first. */
	gmp_go(record, (void *)(uintptr_t)2);
	gmp_go(record, (void *)(uintptr_t)3);
	while (!atomic_load(&parked_flag))
		gmp_yield();
	gmp_ready(parked_g);
	record((void *)(uintptr_t)0);
}

static void first(void *arg)
{
	(void)arg;
	gmp_go(parker, (void *)(uintptr_t)1);
	gmp_yield(); /* let the parker park */
	gmp_go(readier, NULL);
}

static bool readied_once(void)
{
	atomic_store(&norder, 0);
	atomic_store(&parked_flag, 0);
	tu_init_long_slice();
	gmp_go(first, NULL);
	shutdown_long_slice();
	assert_int_equal(atomic_load(&norder), 4);
	/* readier records 0 and ends; the readied parker (1) runs next,
	 * then the two queued before it. */
	return order[0] == 0 && order[1] == 1;
}

static void test_sched_readied_task_runs_next(void **s)
{
	(void)s;
	for (int i = 0; i < 5; i++)
		assert_true(readied_once());
}

/* ---- park and ready -------------------------------------------------------- */

static atomic_int unlock_calls;

static bool refuse(gmp_g *g, void *lock)
{
	(void)g;
	T_ASSERT(gmp_current() == NULL); /* runs off the task's stack */
	atomic_fetch_add(&unlock_calls, 1);
	*(int *)lock = 7;
	return false; /* do not park after all */
}

static void park_refused(void *arg)
{
	int v = 0;
	int64_t me = gmp_self();
	gmp_park(refuse, &v);
	/* Resumed at once, as the same task, with the unlock fn's effect. */
	T_ASSERT(v == 7);
	T_ASSERT(gmp_self() == me);
	*(int *)arg = 1;
}

static void test_sched_park_unlockf_false_resumes(void **s)
{
	(void)s;
	int done = 0;
	atomic_store(&unlock_calls, 0);
	tu_init(2);
	gmp_go(park_refused, &done);
	gmp_shutdown();
	assert_int_equal(done, 1);
	assert_int_equal(atomic_load(&unlock_calls), 1);
}

struct handoff {
	_Atomic(gmp_g *) g;
	atomic_int woken;
};

static bool publish(gmp_g *g, void *arg)
{
	atomic_store(&((struct handoff *)arg)->g, g);
	return true;
}

static void park_until_readied(void *arg)
{
	struct handoff *h = arg;
	gmp_park(publish, h);
	atomic_fetch_add(&h->woken, 1);
}

static void *foreign_readier(void *arg)
{
	struct handoff *h = arg;
	gmp_g *g;
	while ((g = atomic_load(&h->g)) == NULL)
		sched_yield();
	gmp_ready(g);
	return NULL;
}

/* n tasks that park, each with a thread of its own that readies it. */
static void park_with_foreign_readiers(struct handoff *h, pthread_t *t, int n)
{
	for (int i = 0; i < n; i++) {
		atomic_store(&h[i].g, NULL);
		atomic_store(&h[i].woken, 0);
		assert_true(gmp_go(park_until_readied, &h[i]) > 0);
		assert_int_equal(
			pthread_create(&t[i], NULL, foreign_readier, &h[i]), 0);
	}
}

static void test_sched_ready_from_foreign_thread(void **s)
{
	(void)s;
	tu_init(2);
	enum { N = 64 };
	struct handoff h[N];
	pthread_t t[N];
	park_with_foreign_readiers(h, t, N);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	gmp_shutdown();
	for (int i = 0; i < N; i++)
		assert_int_equal(atomic_load(&h[i].woken), 1);
}

/* gmp_shutdown while the threads that readied the last tasks are still on
 * their way out of gmp_ready: each task ends at once, so the drain can
 * finish while a readier is still in the wakep after its queueing. The
 * teardown must wait for it (under TSan a missing wait is a race report on
 * the scheduler's state; natively a read of freed Ps). */
static void test_sched_shutdown_races_readiers(void **s)
{
	(void)s;
	enum { ROUNDS = 150, N = 8 };
	for (int r = 0; r < ROUNDS; r++) {
		tu_init(2);
		struct handoff h[N];
		pthread_t t[N];
		park_with_foreign_readiers(h, t, N);
		/* No join first: shutdown races the readiers' returns. */
		assert_int_equal(gmp_shutdown(), 0);
		for (int i = 0; i < N; i++) {
			pthread_join(t[i], NULL);
			assert_int_equal(atomic_load(&h[i].woken), 1);
		}
	}
}

static void ready_from_task(void *arg)
{
	struct handoff *h = arg;
	gmp_g *g;
	while ((g = atomic_load(&h->g)) == NULL)
		gmp_yield();
	gmp_ready(g);
}

static void test_sched_ready_from_task(void **s)
{
	(void)s;
	tu_init(2);
	struct handoff h = { NULL, 0 };
	gmp_go(park_until_readied, &h);
	gmp_go(ready_from_task, &h);
	gmp_shutdown();
	assert_int_equal(atomic_load(&h.woken), 1);
}

/* ---- foreign spawns ---------------------------------------------------------- */

static atomic_long foreign_ran;
#define FOREIGN_SPAWNS TU_SCALE(10000)

static void foreign_task(void *arg)
{
	(void)arg;
	atomic_fetch_add(&foreign_ran, 1);
}

static void *foreign_spawner(void *arg)
{
	(void)arg;
	for (int i = 0; i < FOREIGN_SPAWNS; i++)
		T_ASSERT(gmp_go(foreign_task, NULL) > 0);
	return NULL;
}

static void test_sched_go_from_foreign_threads(void **s)
{
	(void)s;
	atomic_store(&foreign_ran, 0);
	tu_init(2);
	pthread_t t[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, foreign_spawner, NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	gmp_shutdown();
	assert_int_equal(atomic_load(&foreign_ran), 8 * FOREIGN_SPAWNS);
}

/* ---- work spreads ----------------------------------------------------------- */

static pid_t tids[4096];
static atomic_int ntids;

static void busy(void *arg)
{
	(void)arg;
	/* Spin a little so the spawner's P cannot run everything itself. */
	int64_t until = tu_now_ns() + 200000;
	while (tu_now_ns() < until)
		;
	tids[atomic_fetch_add(&ntids, 1)] = tu_gettid();
}

/* Fewer than a ring's worth, so nothing overflows to the global queue:
 * the other P can only get work by stealing it. */
enum { NBUSY = 200 };

static pid_t spawner_tid;

static void spawn_busy(void *arg)
{
	(void)arg;
	for (int i = 0; i < NBUSY; i++)
		gmp_go(busy, NULL);
	spawner_tid = tu_gettid();
}

static void test_sched_work_spreads_over_two_ps(void **s)
{
	(void)s;
	atomic_store(&ntids, 0);
	tu_init(2);
	gmp_go(spawn_busy, NULL);
	gmp_stats st;
	/* Read the stats before shutdown, while the runtime runs. */
	TU_WAIT_FOR(atomic_load(&ntids) >= NBUSY);
	assert_int_equal(gmp_stats_read(&st), 0);
	gmp_shutdown();
	/* The spawner counts: when spawning is slow (under TSan), the other
	 * P may steal every busy task while the spawner keeps its own P, so
	 * the busy tasks all run on one thread and the spawner on another. */
	tids[NBUSY] = spawner_tid;
	int distinct = 0;
	for (int i = 0; i <= NBUSY; i++) {
		bool seen = false;
		for (int j = 0; j < i && !seen; j++)
			seen = tids[j] == tids[i];
		distinct += !seen;
	}
	assert_true(distinct >= 2);
	assert_true(st.steals > 0);
	assert_int_equal(st.procs, 2);
	assert_true(st.spawned >= NBUSY + 1);
	assert_int_equal(st.global_runq_len, 0);
}

/* ---- gmp_main, self, current ------------------------------------------------ */

static int main_fn(void *arg)
{
	T_ASSERT(gmp_self() > 0);
	T_ASSERT(gmp_current() != NULL);
	return *(int *)arg + 1;
}

static void test_sched_main_returns_result(void **s)
{
	(void)s;
	int x = 41;
	assert_int_equal(gmp_self(), 0);
	assert_null(gmp_current());
	assert_int_equal(gmp_main(main_fn, &x), 42); /* starts the runtime */
	gmp_stats st;
	gmp_stats_read(&st);
	assert_true(st.threads_total >= 1);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_stats_read(&st);
	assert_int_equal(st.threads_total, 0);
	gmp_yield(); /* outside a task: nothing */
}

/* fn returned, so gmp_main returns its result, even though a key
 * destructor then ends the task with gmp_exit (that is no longer fn's
 * gmp_exit). */
static void exit_in_dtor(void *v)
{
	(void)v;
	gmp_exit();
}

static int main_with_exiting_dtor(void *arg)
{
	(void)arg;
	static gmp_key key;
	static int one = 1;
	T_ASSERT(gmp_key_create(&key, exit_in_dtor) == 0);
	T_ASSERT(gmp_setspecific(key, &one) == 0);
	return 7;
}

static void test_sched_main_returns_result_though_dtor_exits(void **s)
{
	(void)s;
	assert_int_equal(gmp_main(main_with_exiting_dtor, NULL), 7);
	assert_int_equal(gmp_shutdown(), 0);
}

static atomic_llong ids[1000];

static void note_id(void *arg)
{
	atomic_store(&ids[(uintptr_t)arg], gmp_self());
}

static void test_sched_ids_unique_and_positive(void **s)
{
	(void)s;
	int64_t last = 0;
	for (int round = 0; round < 3; round++) {
		tu_init(2);
		for (uintptr_t i = 0; i < 1000; i++) {
			int64_t id = gmp_go(note_id, (void *)i);
			assert_true(id > last); /* one spawner: increasing */
			last = id;
		}
		gmp_shutdown();
		for (int i = 0; i < 1000; i++)
			for (int j = i + 1; j < 1000; j++)
				assert_true(atomic_load(&ids[i]) !=
					    atomic_load(&ids[j]));
	}
}

/* Ids increase in spawn order, whoever spawns (design.md §2.1): tasks on
 * several Ps and threads outside the runtime take turns, passing the last
 * id round a ring of channels, so each spawn happens after the one before. */
enum { ID_RING = 8, ID_ROUNDS = 200 };

static gmp_chan *id_ring[ID_RING];

static void id_nop(void *arg)
{
	(void)arg;
}

static void id_turns(uintptr_t me)
{
	for (int r = 0; r < ID_ROUNDS; r++) {
		int64_t last;
		T_ASSERT(gmp_chan_recv(id_ring[me], &last) == 0);
		int64_t id = gmp_go(id_nop, NULL);
		if (id <= last) {
			fprintf(stderr,
				"round %d, turn %u: id %lld after %lld\n", r,
				(unsigned)me, (long long)id, (long long)last);
			T_ASSERT(id > last);
		}
		T_ASSERT(gmp_chan_send(id_ring[(me + 1) % ID_RING], &id) == 0);
	}
}

static void id_task(void *arg)
{
	id_turns((uintptr_t)arg);
}

static void *id_thread(void *arg)
{
	id_turns((uintptr_t)arg);
	return NULL;
}

static void test_sched_ids_increase_across_ps_and_threads(void **s)
{
	(void)s;
	tu_init(4);
	for (int i = 0; i < ID_RING; i++)
		assert_non_null(id_ring[i] = gmp_chan_new(sizeof(int64_t), 1));
	pthread_t t[ID_RING];
	for (uintptr_t i = 0; i < ID_RING; i++) {
		if (i % 2)
			assert_int_equal(pthread_create(&t[i], NULL, id_thread,
							(void *)i),
					 0);
		else
			assert_true(gmp_go(id_task, (void *)i) > 0);
	}
	int64_t zero = 0;
	assert_int_equal(gmp_chan_send(id_ring[0], &zero), 0);
	for (int i = 1; i < ID_RING; i += 2)
		pthread_join(t[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
	for (int i = 0; i < ID_RING; i++)
		gmp_chan_free(id_ring[i]);
}

/* ---- gmp_exit and task-local keys ------------------------------------------- */

static gmp_key key1, key2;
static atomic_int dtor_calls;
static atomic_int after_exit;

static void dtor(void *v)
{
	atomic_fetch_add(&dtor_calls, 1);
	T_ASSERT(*(int *)v == 5);
	/* The destructor runs on the ending task itself. */
	T_ASSERT(gmp_self() > 0);
}

static void keyed(void *arg)
{
	static int five = 5;
	T_ASSERT(gmp_getspecific(key1) == NULL); /* new task reads NULL */
	T_ASSERT(gmp_setspecific(key1, &five) == 0);
	T_ASSERT(gmp_setspecific(key2, &five) == 0);
	T_ASSERT(gmp_getspecific(key1) == &five);
	gmp_yield();
	T_ASSERT(gmp_getspecific(key1) == &five); /* follows the task */
	if (arg)
		gmp_exit();
	atomic_fetch_add(&after_exit, 1);
}

static void test_sched_keys_and_exit(void **s)
{
	(void)s;
	assert_int_equal(gmp_key_create(&key1, dtor), 0);
	assert_int_equal(gmp_key_create(&key2, NULL), 0);
	assert_int_equal(gmp_setspecific(key1, &key1), -EPERM); /* no task */
	assert_null(gmp_getspecific(key1));
	gmp_key bogus = { 999999 };
	atomic_store(&dtor_calls, 0);
	atomic_store(&after_exit, 0);
	tu_init(2);
	for (int i = 0; i < 100; i++)
		gmp_go(keyed, (void *)(uintptr_t)(i & 1));
	gmp_shutdown();
	assert_int_equal(atomic_load(&dtor_calls), 100); /* once per task */
	assert_int_equal(atomic_load(&after_exit), 50);  /* gmp_exit ends */
	assert_int_equal(gmp_setspecific(bogus, NULL), -EINVAL);
}

/* ---- gmp_set_maxprocs -------------------------------------------------------- */

static atomic_long resize_ran;

static void resize_task(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++)
		gmp_yield();
	atomic_fetch_add(&resize_ran, 1);
}

static void resizer(void *arg)
{
	(void)arg;
	int sizes[] = { 4, 1, 3, 2, 8, 1 };
	for (int r = 0; r < 6; r++) {
		for (int i = 0; i < 2000; i++)
			gmp_go(resize_task, NULL);
		gmp_set_maxprocs(sizes[r]);
		gmp_yield();
	}
}

static void test_sched_set_maxprocs_while_running(void **s)
{
	(void)s;
	atomic_store(&resize_ran, 0);
	tu_init(2);
	assert_int_equal(gmp_set_maxprocs(0), 2);
	gmp_go(resizer, NULL);
	gmp_shutdown();
	assert_int_equal(atomic_load(&resize_ran), 12000);
	tu_init(3);
	assert_int_equal(gmp_set_maxprocs(5), 3);
	gmp_stats st;
	gmp_stats_read(&st);
	assert_int_equal(st.procs, 5);
	gmp_shutdown();
}

/* ---- restart ----------------------------------------------------------------- */

static void small_work(void *arg)
{
	(void)arg;
	gmp_yield();
}

int64_t gmp__alloc_live(void);

static void test_sched_shutdown_restart_100_times(void **s)
{
	(void)s;
	int64_t base = gmp__alloc_live();
	for (int i = 0; i < 100; i++) {
		tu_init(1 + i % 4);
		for (int j = 0; j < 100; j++)
			assert_true(gmp_go(small_work, NULL) > 0);
		assert_int_equal(gmp_shutdown(), 0);
		gmp_stats st;
		gmp_stats_read(&st);
		assert_int_equal(st.threads_total, 0);
		assert_int_equal(gmp__alloc_live(), base); /* nothing leaked */
	}
	assert_int_equal(gmp_shutdown(), 0); /* not running: fine */
}

/* ---- bad input and misuse ---------------------------------------------------- */

static void test_sched_bad_input_returns_errors(void **s)
{
	(void)s;
	assert_int_equal(gmp_go(NULL, NULL), -EINVAL);
	gmp_config bad1 = { .maxprocs = -1 };
	gmp_config bad2 = { .max_threads = -3 };
	gmp_config bad3 = { .stack_size = 4096 };
	assert_int_equal(gmp_init(&bad1), -EINVAL);
	assert_int_equal(gmp_init(&bad2), -EINVAL);
	assert_int_equal(gmp_init(&bad3), -EINVAL);
	setenv("GMP_MAXPROCS", "lots", 1);
	assert_int_equal(gmp_init(NULL), -EINVAL);
	unsetenv("GMP_MAXPROCS");
	setenv("GMP_DEBUG", "schedtrace", 1);
	assert_int_equal(gmp_init(NULL), -EINVAL);
	unsetenv("GMP_DEBUG");
	gmp_stats st;
	assert_int_equal(gmp_stats_read(&st), 0); /* nothing started */
	assert_int_equal(st.threads_total, 0);
	assert_int_equal(gmp_stats_read(NULL), -EINVAL);
	tu_init(2);
	assert_int_equal(gmp_init(NULL), 0); /* running: no change */
	assert_int_equal(gmp_set_maxprocs(0), 2);
	gmp_shutdown();
}

/* gmp_init leaves errno alone (gmp.h), though parsing GMP_* variables
 * uses it: when it starts the runtime, when it finds it running, from a
 * task, on failure, and when gmp_go starts the runtime. */
static void init_in_task(void *arg)
{
	errno = 77;
	int r = gmp_init(NULL);
	int e = errno;
	T_ASSERT(r == 0);
	*(int *)arg = e;
}

static void errno_nop(void *arg)
{
	(void)arg;
}

static void test_sched_init_leaves_errno_alone(void **s)
{
	(void)s;
	setenv("GMP_MAXPROCS", "2", 1);
	setenv("GMP_MAX_THREADS", "100", 1);
	setenv("GMP_STACK_SIZE", "64K", 1);
	setenv("GMP_IDLE_THREAD_TIMEOUT", "5", 1);
	setenv("GMP_DEBUG", "randomize=0", 1);
	int r, e;
	errno = 1234;
	r = gmp_init(NULL);
	e = errno;
	assert_int_equal(r, 0);
	assert_int_equal(e, 1234);
	errno = 1234;
	r = gmp_init(NULL); /* running: no change */
	e = errno;
	assert_int_equal(r, 0);
	assert_int_equal(e, 1234);
	int in_task = 0;
	assert_true(gmp_go(init_in_task, &in_task) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(in_task, 77);

	errno = 1234;
	int64_t id = gmp_go(errno_nop, NULL); /* starts the runtime */
	e = errno;
	assert_true(id > 0);
	assert_int_equal(e, 1234);
	assert_int_equal(gmp_shutdown(), 0);

	setenv("GMP_MAXPROCS", "99999999999999999999", 1); /* ERANGE */
	errno = 1234;
	r = gmp_init(NULL);
	e = errno;
	assert_int_equal(r, -EINVAL);
	assert_int_equal(e, 1234);
	unsetenv("GMP_MAXPROCS");
	unsetenv("GMP_MAX_THREADS");
	unsetenv("GMP_STACK_SIZE");
	unsetenv("GMP_IDLE_THREAD_TIMEOUT");
	unsetenv("GMP_DEBUG");
}

static void ready_self(void *arg)
{
	(void)arg;
	gmp_ready(gmp_current()); /* running, not waiting */
}

static void child_ready_running(void *arg)
{
	(void)arg;
	tu_init(1);
	gmp_go(ready_self, NULL);
	gmp_shutdown();
}

static void test_sched_ready_of_running_task_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_ready_running, NULL, "not waiting");
}

static void child_park_outside(void *arg)
{
	(void)arg;
	gmp_park(NULL, NULL);
}

static void test_sched_park_outside_task_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_park_outside, NULL, "outside a task");
}

static void shutdown_from_task(void *arg)
{
	*(int *)arg = gmp_shutdown();
}

static void test_sched_shutdown_from_task_eperm(void **s)
{
	(void)s;
	int r = 0;
	tu_init(1);
	gmp_go(shutdown_from_task, &r);
	gmp_shutdown();
	assert_int_equal(r, -EPERM);
}

GMP_TEST_MAIN(cmocka_unit_test(test_sched_million_tasks_maxprocs_1),
	      cmocka_unit_test(test_sched_million_tasks_maxprocs_2),
	      cmocka_unit_test(test_sched_million_tasks_maxprocs_4),
	      cmocka_unit_test(test_sched_million_tasks_maxprocs_8),
	      cmocka_unit_test(test_sched_spawn_order_follows_runnext),
	      cmocka_unit_test(test_sched_readied_task_runs_next),
	      cmocka_unit_test(test_sched_park_unlockf_false_resumes),
	      cmocka_unit_test(test_sched_ready_from_foreign_thread),
	      cmocka_unit_test(test_sched_shutdown_races_readiers),
	      cmocka_unit_test(test_sched_ready_from_task),
	      cmocka_unit_test(test_sched_go_from_foreign_threads),
	      cmocka_unit_test(test_sched_work_spreads_over_two_ps),
	      cmocka_unit_test(test_sched_main_returns_result),
	      cmocka_unit_test(test_sched_main_returns_result_though_dtor_exits),
	      cmocka_unit_test(test_sched_ids_unique_and_positive),
	      cmocka_unit_test(test_sched_ids_increase_across_ps_and_threads),
	      cmocka_unit_test(test_sched_keys_and_exit),
	      cmocka_unit_test(test_sched_set_maxprocs_while_running),
	      cmocka_unit_test(test_sched_shutdown_restart_100_times),
	      cmocka_unit_test(test_sched_bad_input_returns_errors),
	      cmocka_unit_test(test_sched_init_leaves_errno_alone),
	      cmocka_unit_test(test_sched_ready_of_running_task_aborts),
	      cmocka_unit_test(test_sched_park_outside_task_aborts),
	      cmocka_unit_test(test_sched_shutdown_from_task_eperm))
