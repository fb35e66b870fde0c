/* Stress: the scheduler's races, forced out by volume and, in the
 * *_randomized cases, by GMP_DEBUG=randomize=1 (runnext skipped at random,
 * shuffled overflow batches, random yields and spins inside the runtime's
 * own race windows; see src/jitter.c). Each case checks a conservation
 * law: every task that got an id runs exactly once; every wakeup wakes
 * exactly one parked task, none is lost; every syscall round completes.
 *
 * The *_long cases (ctest -L long, registered with -DGMP_LONG_TESTS=ON)
 * run the same bodies ten or more times bigger. A stuck case fails with
 * the scheduler's state printed rather than waiting for CTest's timeout. */
#include <pthread.h>
#include <sched.h>

#include "gmp_test.h"
#include "export_test.h"

static void stress_init(int procs, bool randomize)
{
	if (randomize)
		setenv("GMP_DEBUG", "randomize=1", 1);
	tu_init(procs);
	unsetenv("GMP_DEBUG");
	assert_int_equal(gmp__cfg.randomize, randomize ? 1 : 0);
}

static uint32_t xs(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* ---- spawn storm: tasks and foreign threads spawn at once ------------------- */

static struct {
	long n;            /* spawns to make in all */
	atomic_long next;  /* next spawn index to claim */
	atomic_uchar *ran; /* ran[i]: times task i ran */
	int64_t *ids;      /* ids[i]: what gmp_go returned for i */
	atomic_long nran;
} sp;

static void sp_leaf(void *arg);

/* Claims the next index and spawns a leaf for it; false when all are
 * claimed. */
static bool sp_spawn_one(void)
{
	long i = atomic_fetch_add(&sp.next, 1);
	if (i >= sp.n)
		return false;
	int64_t id = gmp_go(sp_leaf, (void *)(uintptr_t)i);
	T_ASSERT(id > 0);
	sp.ids[i] = id;
	return true;
}

static void sp_leaf(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	T_ASSERT(atomic_fetch_add(&sp.ran[i], 1) == 0);
	/* A quarter of the leaves spawn again, from a task. */
	if (i % 4 == 0)
		sp_spawn_one();
	if (i % 7 == 0)
		gmp_yield();
	atomic_fetch_add(&sp.nran, 1);
}

static void sp_task_spawner(void *arg)
{
	(void)arg;
	for (int k = 1; sp_spawn_one(); k++)
		if (k % 64 == 0)
			gmp_yield();
}

static void *sp_thread_spawner(void *arg)
{
	(void)arg;
	while (sp_spawn_one())
		;
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void spawn_storm(bool randomize, long n)
{
	enum { THREADS = 4, TASKS = 8 };
	sp.n = n;
	atomic_store(&sp.next, 0);
	atomic_store(&sp.nran, 0);
	sp.ran = calloc((size_t)n, 1);
	sp.ids = calloc((size_t)n, sizeof *sp.ids);
	stress_init(4, randomize);
	pthread_t th[THREADS];
	for (int i = 0; i < TASKS; i++)
		assert_true(gmp_go(sp_task_spawner, NULL) > 0);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, sp_thread_spawner,
						NULL),
				 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	TU_WAIT_FOR(atomic_load(&sp.nran) >= n);
	assert_int_equal(gmp_shutdown(), 0);
	for (long i = 0; i < n; i++)
		assert_int_equal(sp.ran[i], 1);
	/* Every id distinct. */
	qsort(sp.ids, (size_t)n, sizeof *sp.ids, cmp_i64);
	for (long i = 1; i < n; i++)
		assert_true(sp.ids[i] > sp.ids[i - 1]);
	free(sp.ran);
	free(sp.ids);
}

#define SPAWN_SHORT TU_SCALE(200000)
#define SPAWN_LONG TU_SCALE(4000000)

static void test_stress_spawn_storm(void **s)
{
	(void)s;
	spawn_storm(false, SPAWN_SHORT);
}
static void test_stress_spawn_storm_randomized(void **s)
{
	(void)s;
	spawn_storm(true, SPAWN_SHORT);
}
static void test_stress_spawn_storm_long(void **s)
{
	(void)s;
	spawn_storm(false, SPAWN_LONG);
}
static void test_stress_spawn_storm_randomized_long(void **s)
{
	(void)s;
	spawn_storm(true, SPAWN_LONG);
}

/* ---- park/ready races ----------------------------------------------------------
 *
 * Each parker waits for R wakeups, one at a time; wakers (tasks and
 * threads) deliver them. A wakeup may arrive before the parker parks (it
 * finds the token at the top of its loop), while it parks (its unlock
 * function, having published the G, sees the token and takes the G back:
 * gmp_park returns at once), or after (the waker finds the published G and
 * readies it), with random delays between taking the G and readying it.
 * The token and the slot form a Dekker pair (sequentially consistent):
 * parker "slot = g; read token", waker "token = 1; take slot"; at least
 * one of them moves the G on. A waker late to take the slot may find the
 * parker already a round further and parked again: it readies it anyway,
 * a spurious wakeup that the parker's loop absorbs (it parks again), so
 * readies may outnumber the rounds they end. A lost wakeup leaves a parker
 * stuck (TU_WAIT_FOR fails); a double one makes gmp_ready abort. */

struct parker {
	_Atomic(gmp_g *) slot; /* the parked G, published by unlock */
	atomic_int token;      /* a wakeup is pending */
	atomic_long issued;    /* wakeups claimed by wakers */
	atomic_long done;      /* rounds completed */
	char pad[64];
};

static struct {
	struct parker *p;
	int np;
	long rounds;
	atomic_long total;                 /* rounds completed, all parkers */
	atomic_long before, during, after; /* how wakeups met their parker */
	atomic_int stop;
} pr;

static bool pr_publish(gmp_g *g, void *arg)
{
	struct parker *p = arg;
	/* An exchange, not a store, before the token load: a read-modify-
	 * write is the #StoreLoad barrier (as src/atomic.h has the runtime do
	 * it). A seq_cst store then load is enough in C11 and on arm64, but
	 * qemu-user on an x86 host lets the load pass the store (the pair
	 * became a lost wakeup under qemu until this was an exchange). */
	(void)atomic_exchange(&p->slot, g);
	if (atomic_load(&p->token)) {
		gmp_g *want = g;
		/* Cancel, unless a waker has taken the G already. */
		if (atomic_compare_exchange_strong(&p->slot, &want, NULL)) {
			atomic_fetch_add(&pr.during, 1);
			return false;
		}
	}
	return true;
}

static void pr_parker(void *arg)
{
	struct parker *p = arg;
	for (long r = 0; r < pr.rounds; r++) {
		bool parked = false;
		while (!atomic_exchange(&p->token, 0)) {
			gmp_park(pr_publish, p);
			parked = true;
		}
		if (!parked)
			atomic_fetch_add(&pr.before, 1);
		atomic_store(&p->done, r + 1);
		atomic_fetch_add(&pr.total, 1);
	}
}

/* Delivers at most one wakeup to p; true if it did. */
static bool pr_wake(struct parker *p, uint32_t *rnd, bool task)
{
	long k = atomic_load(&p->issued);
	if (k >= pr.rounds || atomic_load(&p->done) != k)
		return false; /* finished, or its last wakeup not yet used */
	if (!atomic_compare_exchange_strong(&p->issued, &k, k + 1))
		return false;
	atomic_store(&p->token, 1);
	gmp_g *g = atomic_exchange(&p->slot, NULL);
	if (!g)
		return true; /* it will see the token */
	atomic_fetch_add(&pr.after, 1);
	uint32_t r = xs(rnd);
	switch (r & 3) {
	case 1:
		for (uint32_t i = (r >> 8) & 1023; i > 0; i--)
			__asm__ __volatile__("" ::: "memory");
		break;
	case 2:
		if (task)
			gmp_yield(); /* the G stays WAITING meanwhile */
		else
			sched_yield();
		break;
	case 3:
		if (((r >> 4) & 31) == 0)
			usleep(20);
		break;
	}
	gmp_ready(g);
	return true;
}

static void pr_scan(uint32_t *rnd, bool task)
{
	int start = (int)(xs(rnd) % (uint32_t)pr.np);
	bool any = false;
	for (int k = 0; k < pr.np; k++)
		any |= pr_wake(&pr.p[(start + k) % pr.np], rnd, task);
	if (task)
		gmp_yield();
	else if (!any)
		sched_yield();
}

static void pr_waker_task(void *arg)
{
	uint32_t rnd = (uint32_t)(uintptr_t)arg * 2654435761u | 1;
	while (!atomic_load(&pr.stop))
		pr_scan(&rnd, true);
}

static void *pr_waker_thread(void *arg)
{
	uint32_t rnd = (uint32_t)(uintptr_t)arg * 2246822519u | 1;
	while (!atomic_load(&pr.stop))
		pr_scan(&rnd, false);
	return NULL;
}

static void park_ready_race(bool randomize, int procs, long rounds)
{
	enum { PARKERS = 48, WAKER_TASKS = 2, WAKER_THREADS = 2 };
	pr.np = PARKERS;
	pr.rounds = rounds;
	pr.p = calloc(PARKERS, sizeof *pr.p);
	atomic_store(&pr.total, 0);
	atomic_store(&pr.before, 0);
	atomic_store(&pr.during, 0);
	atomic_store(&pr.after, 0);
	atomic_store(&pr.stop, 0);
	stress_init(procs, randomize);
	for (int i = 0; i < PARKERS; i++)
		assert_true(gmp_go(pr_parker, &pr.p[i]) > 0);
	for (int i = 0; i < WAKER_TASKS; i++)
		assert_true(gmp_go(pr_waker_task, (void *)(uintptr_t)(i + 1)) >
			    0);
	pthread_t th[WAKER_THREADS];
	for (int i = 0; i < WAKER_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, pr_waker_thread,
						(void *)(uintptr_t)(i + 7)),
				 0);
	TU_WAIT_FOR(atomic_load(&pr.total) >= PARKERS * rounds);
	atomic_store(&pr.stop, 1);
	for (int i = 0; i < WAKER_THREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
	long b = atomic_load(&pr.before), d = atomic_load(&pr.during),
	     a = atomic_load(&pr.after);
	print_message("wakeups: %ld before the park, %ld during, %ld after "
		      "(%ld of them spurious)\n",
		      b, d, a, b + d + a - PARKERS * rounds);
	assert_true(b + d + a >= PARKERS * rounds);
	for (int i = 0; i < PARKERS; i++)
		assert_int_equal(atomic_load(&pr.p[i].done), rounds);
	/* Wakeups that beat the park are rare without the runtime's jitter
	 * (the parker is usually parked long before a waker comes round);
	 * with it they come by the thousand. */
	assert_true(a > 0);
	if (randomize)
		assert_true(b + d > 0);
	free(pr.p);
}

#define PR_SHORT TU_SCALE(200000) / 100
#define PR_LONG TU_SCALE(200000) / 4

static void test_stress_park_ready_race_maxprocs_2(void **s)
{
	(void)s;
	park_ready_race(false, 2, PR_SHORT);
}
static void test_stress_park_ready_race_maxprocs_4_randomized(void **s)
{
	(void)s;
	park_ready_race(true, 4, PR_SHORT);
}
static void test_stress_park_ready_race_maxprocs_1_randomized(void **s)
{
	(void)s;
	park_ready_race(true, 1, PR_SHORT);
}
static void test_stress_park_ready_race_long(void **s)
{
	(void)s;
	park_ready_race(false, 4, PR_LONG);
}
static void test_stress_park_ready_race_randomized_long(void **s)
{
	(void)s;
	park_ready_race(true, 3, PR_LONG);
}

/* ---- steal storms: more Ps than cores ---------------------------------------- */

static struct {
	long n;
	atomic_uchar *ran;
	atomic_long nran, next;
	atomic_int resize_stop;
} st_;

static void st_leaf(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	T_ASSERT(atomic_fetch_add(&st_.ran[i], 1) == 0);
	/* A little work, and now and then a switch, so queues stay full. */
	volatile uint32_t x = (uint32_t)i;
	for (int k = 0; k < 200; k++)
		x = x * 1664525u + 1013904223u;
	if (i % 5 == 0)
		gmp_yield();
	atomic_fetch_add(&st_.nran, 1);
}

/* Each burst fills this P's queue (runnext, the ring, an overflow to the
 * global queue now and then); idle Ps must steal it. */
static void st_burst(void *arg)
{
	(void)arg;
	for (;;) {
		long i = atomic_fetch_add(&st_.next, 64);
		if (i >= st_.n)
			return;
		long end = i + 64 < st_.n ? i + 64 : st_.n;
		for (; i < end; i++)
			T_ASSERT(gmp_go(st_leaf, (void *)(uintptr_t)i) > 0);
		gmp_yield();
	}
}

static void *st_resizer(void *arg)
{
	(void)arg;
	for (int k = 0; !atomic_load(&st_.resize_stop); k++) {
		gmp_set_maxprocs(k % 2 ? 16 : 5);
		usleep(2000);
	}
	return NULL;
}

static void steal_storm(bool randomize, int procs, bool resize, long n)
{
	st_.n = n;
	st_.ran = calloc((size_t)n, 1);
	atomic_store(&st_.nran, 0);
	atomic_store(&st_.next, 0);
	atomic_store(&st_.resize_stop, 0);
	stress_init(procs, randomize);
	pthread_t rz;
	if (resize)
		assert_int_equal(pthread_create(&rz, NULL, st_resizer, NULL),
				 0);
	for (int i = 0; i < 4; i++)
		assert_true(gmp_go(st_burst, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&st_.nran) >= n);
	gmp_stats s = tu_stats();
	if (resize) {
		atomic_store(&st_.resize_stop, 1);
		pthread_join(rz, NULL);
	}
	print_message("steals %llu, procs %llu\n", (unsigned long long)s.steals,
		      (unsigned long long)s.procs);
	assert_true(s.steals > 0);
	assert_int_equal(gmp_shutdown(), 0);
	for (long i = 0; i < n; i++)
		assert_int_equal(st_.ran[i], 1);
	free(st_.ran);
}

#define STEAL_SHORT TU_SCALE(300000)
#define STEAL_LONG TU_SCALE(5000000)

static void test_stress_steal_storm_maxprocs_8(void **s)
{
	(void)s;
	steal_storm(false, 8, false, STEAL_SHORT);
}
static void test_stress_steal_storm_maxprocs_16_randomized(void **s)
{
	(void)s;
	steal_storm(true, 16, false, STEAL_SHORT);
}
static void test_stress_steal_storm_resizing_randomized(void **s)
{
	(void)s;
	steal_storm(true, 8, true, STEAL_SHORT);
}
static void test_stress_steal_storm_maxprocs_16_long(void **s)
{
	(void)s;
	steal_storm(false, 16, false, STEAL_LONG);
}
static void test_stress_steal_storm_resizing_randomized_long(void **s)
{
	(void)s;
	steal_storm(true, 8, true, STEAL_LONG);
}

/* ---- syscall storms: sysmon retakes while tasks come and go -------------------- */

static struct {
	long rounds;
	atomic_long done;    /* syscall rounds completed */
	atomic_long compute; /* compute rounds completed */
	atomic_int stop;
} sc;

static void sc_sleeper(void *arg)
{
	uint32_t rnd = (uint32_t)(uintptr_t)arg * 2654435761u | 1;
	for (long r = 0; r < sc.rounds; r++) {
		uint32_t x = xs(&rnd);
		int64_t ns = (int64_t)(x % 200) * US;
		/* Now and then one long enough that sysmon, which backs off
		 * to 10 ms periods while it finds nothing to retake, must
		 * see it twice. */
		if (r % 50 == 0 && (uintptr_t)arg % 10 == 0)
			ns = 25 * MS;
		tu_syscall_sleep(ns, x & 0x10000);
		atomic_fetch_add(&sc.done, 1);
		if ((x & 0x700) == 0)
			gmp_yield();
	}
}

/* Keeps the queues busy, so sysmon has reasons to retake. */
static void sc_compute(void *arg)
{
	(void)arg;
	while (!atomic_load(&sc.stop)) {
		volatile uint32_t x = 1;
		for (int k = 0; k < 2000; k++)
			x = x * 1664525u + 1013904223u;
		atomic_fetch_add(&sc.compute, 1);
		gmp_yield();
	}
}

static void syscall_storm(bool randomize, int procs, long rounds)
{
	enum { SLEEPERS = 100, COMPUTE = 4 };
	sc.rounds = rounds;
	atomic_store(&sc.done, 0);
	atomic_store(&sc.compute, 0);
	atomic_store(&sc.stop, 0);
	stress_init(procs, randomize);
	for (int i = 0; i < COMPUTE; i++)
		assert_true(gmp_go(sc_compute, NULL) > 0);
	for (int i = 0; i < SLEEPERS; i++)
		assert_true(gmp_go(sc_sleeper, (void *)(uintptr_t)(i + 1)) > 0);
	TU_WAIT_FOR(atomic_load(&sc.done) >= SLEEPERS * rounds);
	gmp_stats s = tu_stats();
	atomic_store(&sc.stop, 1);
	assert_int_equal(gmp_shutdown(), 0);
	print_message("retakes %llu, handoffs %llu, threads %llu, compute "
		      "rounds %ld\n",
		      (unsigned long long)s.retakes,
		      (unsigned long long)s.handoffs,
		      (unsigned long long)s.threads_total,
		      atomic_load(&sc.compute));
	assert_int_equal(atomic_load(&sc.done), SLEEPERS * rounds);
	assert_true(s.retakes > 0);
	assert_true(atomic_load(&sc.compute) > 0);
}

#define SC_SHORT (TU_TSAN ? 20 : 100)
#define SC_LONG (TU_TSAN ? 200 : 2000)

static void test_stress_syscall_storm_maxprocs_1(void **s)
{
	(void)s;
	syscall_storm(false, 1, SC_SHORT);
}
static void test_stress_syscall_storm_maxprocs_2_randomized(void **s)
{
	(void)s;
	syscall_storm(true, 2, SC_SHORT);
}
static void test_stress_syscall_storm_maxprocs_1_randomized(void **s)
{
	(void)s;
	syscall_storm(true, 1, SC_SHORT);
}
static void test_stress_syscall_storm_long(void **s)
{
	(void)s;
	syscall_storm(false, 2, SC_LONG);
}
static void test_stress_syscall_storm_randomized_long(void **s)
{
	(void)s;
	syscall_storm(true, 1, SC_LONG);
}

/* ---- shutdown while foreign threads spawn -------------------------------------
 *
 * Defined result: gmp_go from a foreign thread returns an id (the task
 * runs exactly once, even if gmp_shutdown has begun: shutdown waits for
 * it) or -ESHUTDOWN (while shutdown drains: nothing is created); after
 * gmp_shutdown has returned, gmp_go starts the runtime again. Tasks that
 * spawn during the drain are waited for too. */

static struct {
	long cap; /* spawn records: enough for every cycle */
	atomic_long next;
	atomic_uchar *got, *ran;
	atomic_long eshutdown, nran;
	atomic_int stop;
} sd;

static void sd_task(void *arg);

static void sd_spawn(void)
{
	long i = atomic_fetch_add(&sd.next, 1);
	if (i >= sd.cap)
		return;
	int64_t id = gmp_go(sd_task, (void *)(uintptr_t)i);
	if (id > 0) {
		atomic_store(&sd.got[i], 1);
	} else {
		T_ASSERT(id == -ESHUTDOWN);
		atomic_fetch_add(&sd.eshutdown, 1);
	}
}

static void sd_task(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	T_ASSERT(atomic_fetch_add(&sd.ran[i], 1) == 0);
	atomic_fetch_add(&sd.nran, 1);
	if (i % 8 == 0)
		sd_spawn(); /* from a task: allowed while draining */
	if (i % 3 == 0)
		gmp_yield();
}

static void *sd_spawner(void *arg)
{
	(void)arg;
	while (!atomic_load(&sd.stop) && atomic_load(&sd.next) < sd.cap) {
		sd_spawn();
		if (atomic_load(&sd.next) % 128 == 0)
			sched_yield();
	}
	return NULL;
}

static void shutdown_while_spawning(bool randomize, int cycles)
{
	enum { SPAWNERS = 4 };
	sd.cap = (long)cycles * 100000;
	sd.got = calloc((size_t)sd.cap, 1);
	sd.ran = calloc((size_t)sd.cap, 1);
	atomic_store(&sd.next, 0);
	atomic_store(&sd.eshutdown, 0);
	atomic_store(&sd.nran, 0);
	for (int c = 0; c < cycles && atomic_load(&sd.next) < sd.cap; c++) {
		atomic_store(&sd.stop, 0);
		stress_init(1 + c % 4, randomize);
		pthread_t th[SPAWNERS];
		for (int i = 0; i < SPAWNERS; i++)
			assert_int_equal(pthread_create(&th[i], NULL,
							sd_spawner, NULL),
					 0);
		usleep(2000 + (c % 5) * 1000);
		assert_int_equal(gmp_shutdown(), 0);
		/* The spawners go on a moment: their gmp_go may start the
		 * runtime again, which is allowed. */
		usleep(500);
		atomic_store(&sd.stop, 1);
		for (int i = 0; i < SPAWNERS; i++)
			pthread_join(th[i], NULL);
		assert_int_equal(gmp_shutdown(), 0);
	}
	long n = atomic_load(&sd.next);
	if (n > sd.cap)
		n = sd.cap;
	long got = 0;
	for (long i = 0; i < n; i++) {
		assert_int_equal(atomic_load(&sd.ran[i]),
				 atomic_load(&sd.got[i]));
		got += atomic_load(&sd.got[i]);
	}
	print_message("%d cycles: %ld spawns, %ld ran, %ld got -ESHUTDOWN\n",
		      cycles, n, got, atomic_load(&sd.eshutdown));
	assert_int_equal(got, atomic_load(&sd.nran));
	assert_int_equal(got + atomic_load(&sd.eshutdown), n);
	free(sd.got);
	free(sd.ran);
}

static void test_stress_shutdown_while_spawning(void **s)
{
	(void)s;
	shutdown_while_spawning(false, 20);
}
static void test_stress_shutdown_while_spawning_randomized(void **s)
{
	(void)s;
	shutdown_while_spawning(true, 20);
}
static void test_stress_shutdown_while_spawning_long(void **s)
{
	(void)s;
	shutdown_while_spawning(false, 300);
}
static void test_stress_shutdown_while_spawning_randomized_long(void **s)
{
	(void)s;
	shutdown_while_spawning(true, 300);
}

/* ---- many parked tasks, woken from everywhere --------------------------------- */

static struct {
	long n;
	_Atomic(gmp_g *) *table;
	atomic_long parked, woken, next;
} mp;

static bool mp_publish(gmp_g *g, void *arg)
{
	atomic_store(&mp.table[(uintptr_t)arg], g);
	atomic_fetch_add(&mp.parked, 1);
	return true;
}

static void mp_task(void *arg)
{
	gmp_park(mp_publish, arg);
	atomic_fetch_add(&mp.woken, 1);
}

/* Wakers claim table entries; any one may be readied by a task or a
 * thread. */
static void mp_wake_some(void)
{
	for (;;) {
		long i = atomic_fetch_add(&mp.next, 256);
		if (i >= mp.n)
			return;
		long end = i + 256 < mp.n ? i + 256 : mp.n;
		for (; i < end; i++) {
			gmp_g *g;
			while (!(g = atomic_exchange(&mp.table[i], NULL)))
				sched_yield(); /* published soon */
			gmp_ready(g);
		}
		if (gmp_self())
			gmp_yield();
	}
}

static void mp_waker_task(void *arg)
{
	(void)arg;
	mp_wake_some();
}

static void *mp_waker_thread(void *arg)
{
	(void)arg;
	mp_wake_some();
	return NULL;
}

static void many_parked(bool randomize, long n)
{
	mp.n = n;
	mp.table = calloc((size_t)n, sizeof *mp.table);
	atomic_store(&mp.parked, 0);
	atomic_store(&mp.woken, 0);
	atomic_store(&mp.next, 0);
	stress_init(2, randomize);
	for (long i = 0; i < n; i++)
		assert_true(gmp_go(mp_task, (void *)(uintptr_t)i) > 0);
	TU_WAIT_FOR(atomic_load(&mp.parked) >= n);
	gmp_stats s = tu_stats();
	assert_int_equal(s.tasks_live, (uint64_t)n);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(
			pthread_create(&th[i], NULL, mp_waker_thread, NULL), 0);
	for (int i = 0; i < 2; i++)
		assert_true(gmp_go(mp_waker_task, NULL) > 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	TU_WAIT_FOR(atomic_load(&mp.woken) >= n);
	assert_int_equal(gmp_shutdown(), 0);
	free(mp.table);
}

static void test_stress_many_parked_randomized(void **s)
{
	(void)s;
	many_parked(true, TU_SCALE(100000));
}
static void test_stress_million_parked_randomized_long(void **s)
{
	(void)s;
	many_parked(true, TU_SCALE(1000000));
}

GMP_TEST_MAIN(
	cmocka_unit_test(test_stress_spawn_storm),
	cmocka_unit_test(test_stress_spawn_storm_randomized),
	cmocka_unit_test(test_stress_spawn_storm_long),
	cmocka_unit_test(test_stress_spawn_storm_randomized_long),
	cmocka_unit_test(test_stress_park_ready_race_maxprocs_2),
	cmocka_unit_test(test_stress_park_ready_race_maxprocs_4_randomized),
	cmocka_unit_test(test_stress_park_ready_race_maxprocs_1_randomized),
	cmocka_unit_test(test_stress_park_ready_race_long),
	cmocka_unit_test(test_stress_park_ready_race_randomized_long),
	cmocka_unit_test(test_stress_steal_storm_maxprocs_8),
	cmocka_unit_test(test_stress_steal_storm_maxprocs_16_randomized),
	cmocka_unit_test(test_stress_steal_storm_resizing_randomized),
	cmocka_unit_test(test_stress_steal_storm_maxprocs_16_long),
	cmocka_unit_test(test_stress_steal_storm_resizing_randomized_long),
	cmocka_unit_test(test_stress_syscall_storm_maxprocs_1),
	cmocka_unit_test(test_stress_syscall_storm_maxprocs_2_randomized),
	cmocka_unit_test(test_stress_syscall_storm_maxprocs_1_randomized),
	cmocka_unit_test(test_stress_syscall_storm_long),
	cmocka_unit_test(test_stress_syscall_storm_randomized_long),
	cmocka_unit_test(test_stress_shutdown_while_spawning),
	cmocka_unit_test(test_stress_shutdown_while_spawning_randomized),
	cmocka_unit_test(test_stress_shutdown_while_spawning_long),
	cmocka_unit_test(test_stress_shutdown_while_spawning_randomized_long),
	cmocka_unit_test(test_stress_many_parked_randomized),
	cmocka_unit_test(test_stress_million_parked_randomized_long))
