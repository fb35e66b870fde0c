/* The run queue on bare Ps, with no scheduler running (as Go's
 * export_test.go RunQueueTest): FIFO order at every fill level, runnext
 * override and kick-out, overflow to the global queue, steal-half, runnext
 * stealing rules, and a concurrent stress test of one owner and two
 * thieves in which every G must come out exactly once. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_test.h"
#include "export_test.h"

static gmp_g *mkgs(int n)
{
	gmp_g *gs = calloc((size_t)n, sizeof *gs);
	assert_non_null(gs);
	for (int i = 0; i < n; i++)
		gs[i].id = i;
	/* As malg does: room in the global queue for every G there is. */
	gmp__lock(&gmp__allg_lock);
	gmp__allg_n += n;
	assert_int_equal(gmp__globrunq_reserve(gmp__allg_n), 0);
	gmp__unlock(&gmp__allg_lock);
	return gs;
}

static gmp__p *mkp(int id)
{
	gmp__p *p = calloc(1, sizeof *p);
	assert_non_null(p);
	p->id = id;
	p->status = GMP__P_RUNNING;
	return p;
}

/* Drains the global queue (as the scheduler would, under its lock). */
static int64_t global_drain(int64_t *ids, int64_t max)
{
	int64_t n = 0;
	gmp__lock(&gmp__sched.lock);
	gmp_g *g;
	while ((g = gmp__globrunq_pop()) != NULL) {
		if (n < max)
			ids[n] = g->id;
		n++;
	}
	gmp__unlock(&gmp__sched.lock);
	return n;
}

static void test_runq_fifo_every_fill_level(void **state)
{
	(void)state;
	gmp__p *p = mkp(0);
	gmp_g *gs = mkgs(GMP__RUNQ_SIZE);
	for (uint32_t fill = 0; fill <= GMP__RUNQ_SIZE; fill++) {
		assert_true(gmp__runq_empty(p));
		for (uint32_t i = 0; i < fill; i++)
			gmp__runq_put(p, &gs[i], false);
		assert_int_equal(gmp__runq_len(p), fill);
		for (uint32_t i = 0; i < fill; i++) {
			bool inherit = true;
			gmp_g *g = gmp__runq_get(p, &inherit);
			assert_ptr_equal(g, &gs[i]);
			assert_false(inherit);
		}
		bool inherit;
		assert_null(gmp__runq_get(p, &inherit));
		assert_true(gmp__runq_empty(p));
	}
	assert_int_equal(gmp__sched.runq.n, 0); /* never overflowed */
	free(gs);
	free(p);
}

static void test_runq_runnext_override_and_kickout(void **state)
{
	(void)state;
	gmp__p *p = mkp(0);
	gmp_g *gs = mkgs(4);
	gmp__runq_put(p, &gs[0], false);
	gmp__runq_put(p, &gs[1], true); /* runnext = 1 */
	gmp__runq_put(p, &gs[2], true); /* runnext = 2; 1 kicked to tail */
	assert_int_equal(gmp__runq_len(p), 3);
	bool inherit;
	assert_ptr_equal(gmp__runq_get(p, &inherit), &gs[2]);
	assert_true(inherit);
	assert_ptr_equal(gmp__runq_get(p, &inherit), &gs[0]);
	assert_false(inherit);
	assert_ptr_equal(gmp__runq_get(p, &inherit), &gs[1]);
	assert_false(inherit);
	assert_null(gmp__runq_get(p, &inherit));
	free(gs);
	free(p);
}

static void test_runq_overflow_moves_half_plus_one(void **state)
{
	(void)state;
	gmp__p *p = mkp(0);
	gmp_g *gs = mkgs(GMP__RUNQ_SIZE + 1);
	for (uint32_t i = 0; i <= GMP__RUNQ_SIZE; i++)
		gmp__runq_put(p, &gs[i], false);
	/* The 257th put moved the oldest 128 and itself to the global
	 * queue, in order, in one batch. */
	assert_int_equal(gmp__runq_len(p), GMP__RUNQ_SIZE / 2);
	assert_int_equal(gmp__load64_acq(&gmp__sched.runqsize),
			 GMP__RUNQ_SIZE / 2 + 1);
	int64_t ids[GMP__RUNQ_SIZE];
	int64_t n = global_drain(ids, GMP__RUNQ_SIZE);
	assert_int_equal(n, GMP__RUNQ_SIZE / 2 + 1);
	for (int64_t i = 0; i < (int64_t)GMP__RUNQ_SIZE / 2; i++)
		assert_int_equal(ids[i], i);
	assert_int_equal(ids[GMP__RUNQ_SIZE / 2], GMP__RUNQ_SIZE);
	bool inherit;
	for (uint32_t i = GMP__RUNQ_SIZE / 2; i < GMP__RUNQ_SIZE; i++)
		assert_ptr_equal(gmp__runq_get(p, &inherit), &gs[i]);
	assert_true(gmp__runq_empty(p));
	free(gs);
	free(p);
}

/* The global queue's chunks: puts of every size (one G, an array, a
 * linked list) and pops interleaved at random across chunk boundaries come
 * out in FIFO order, and it never needs more chunks than malg reserved. */
static void test_runq_global_queue_fifo_across_chunks(void **state)
{
	(void)state;
	enum { N = 1000 };
	gmp_g *gs = mkgs(N);
	gmp_g *batch[300];
	int64_t in = 0, out = 0; /* gs[out..in) are queued */
	uint32_t r = 12345;
	gmp__lock(&gmp__sched.lock);
	for (int round = 0; round < 4000; round++) {
		r = r * 1103515245u + 12345u;
		uint32_t k = (r >> 8) % 300 + 1, op = (r >> 20) % 4;
		if (op == 0 && in < N) { /* one G */
			gmp__globrunq_put(&gs[in % N]);
			in++;
		} else if (op == 1) { /* an array */
			uint32_t i = 0;
			while (i < k && in - out < N)
				batch[i++] = &gs[in++ % N];
			gmp__globrunq_putarray(batch, i);
		} else if (op == 2) { /* a list */
			gmp__gqueue q = { 0 };
			while (q.n < k && in - out < N)
				gmp__gq_push(&q, &gs[in++ % N]);
			gmp__globrunq_putbatch(&q);
			assert_null(q.head);
		} else { /* pops */
			for (uint32_t i = 0; i < k; i++) {
				gmp_g *g = gmp__globrunq_pop();
				if (out == in) {
					assert_null(g);
					break;
				}
				assert_ptr_equal(g, &gs[out++ % N]);
			}
		}
		assert_int_equal(gmp__sched.runq.n, in - out);
		assert_int_equal(gmp__load64_acq(&gmp__sched.runqsize),
				 in - out);
		if (in - out == N) /* full: let it drain a little */
			for (int i = 0; i < 200; i++)
				assert_ptr_equal(gmp__globrunq_pop(),
						 &gs[out++ % N]);
	}
	gmp__unlock(&gmp__sched.lock);
	assert_true(in > 10 * N); /* the chunks went round many times */
	assert_int_equal(global_drain(NULL, 0), in - out);
	gmp__lock(&gmp__allg_lock);
	assert_int_equal(gmp__sched.runq.nchunks,
			 (gmp__allg_n + GMP__GRQ_CHUNK - 1) / GMP__GRQ_CHUNK +
				 2);
	gmp__unlock(&gmp__allg_lock);
	free(gs);
}

/* Queueing more Gs than were reserved is a broken invariant (a G that
 * did not come from malg), not a silent allocation. */
static void put_unreserved(void *arg)
{
	(void)arg;
	int64_t room = gmp__sched.runq.nchunks * GMP__GRQ_CHUNK;
	gmp_g *gs = calloc((size_t)room + 1, sizeof *gs);
	gmp__lock(&gmp__sched.lock);
	for (int64_t i = 0; i <= room; i++)
		gmp__globrunq_put(&gs[i]);
	gmp__unlock(&gmp__sched.lock);
}

static void test_runq_global_queue_unreserved_aborts(void **state)
{
	(void)state;
	free(mkgs(1));
	tu_expect_abort(put_unreserved, NULL, "no spare chunk");
}

static void test_runq_steal_half_at_every_fill_level(void **state)
{
	(void)state;
	gmp__p *victim = mkp(0), *thief = mkp(1);
	gmp_g *gs = mkgs(GMP__RUNQ_SIZE);
	for (uint32_t fill = 0; fill <= GMP__RUNQ_SIZE; fill++) {
		for (uint32_t i = 0; i < fill; i++)
			gmp__runq_put(victim, &gs[i], false);
		gmp_g *g = gmp__runq_steal(thief, victim, false);
		uint32_t want = fill - fill / 2; /* the larger half */
		if (fill == 0) {
			assert_null(g);
		} else {
			/* The oldest go to the thief; it runs the newest of
			 * them now and queues the rest in order. */
			assert_ptr_equal(g, &gs[want - 1]);
			assert_int_equal(gmp__runq_len(thief), want - 1);
		}
		assert_int_equal(gmp__runq_len(victim), fill - want);
		bool inherit;
		for (uint32_t i = 0; i + 1 < want; i++)
			assert_ptr_equal(gmp__runq_get(thief, &inherit),
					 &gs[i]);
		for (uint32_t i = want; i < fill; i++)
			assert_ptr_equal(gmp__runq_get(victim, &inherit),
					 &gs[i]);
		assert_true(gmp__runq_empty(victim));
		assert_true(gmp__runq_empty(thief));
	}
	free(gs);
	free(victim);
	free(thief);
}

static void test_runq_runnext_stolen_only_when_allowed(void **state)
{
	(void)state;
	gmp__p *victim = mkp(0), *thief = mkp(1);
	gmp_g *gs = mkgs(2);
	gmp__runq_put(victim, &gs[0], true);
	/* Not on the thief's last attempt: runnext stays with its owner. */
	assert_null(gmp__runq_steal(thief, victim, false));
	assert_int_equal(gmp__runq_len(victim), 1);
	/* On the last attempt it may go (after the owner had its chance). */
	assert_ptr_equal(gmp__runq_steal(thief, victim, true), &gs[0]);
	assert_true(gmp__runq_empty(victim));
	/* A non-empty ring is stolen from, never its runnext. */
	gmp__runq_put(victim, &gs[0], false);
	gmp__runq_put(victim, &gs[1], true);
	assert_ptr_equal(gmp__runq_steal(thief, victim, true), &gs[0]);
	bool inherit;
	assert_ptr_equal(gmp__runq_get(victim, &inherit), &gs[1]);
	assert_true(inherit);
	free(gs);
	free(victim);
	free(thief);
}

/* ---- concurrent stress --------------------------------------------------- */

enum { STRESS_GS = 1 << 16 };
/* 40 rounds of 65,536 Gs: 2.6 M puts; a tenth under the sanitizers. */
#define STRESS_ROUNDS (TU_TSAN || TU_ASAN ? 4 : 40)

static struct {
	gmp__p *owner, *thieves[2];
	gmp_g *gs;
	atomic_uint seen[STRESS_GS];
	atomic_int stop;
	atomic_long stolen;
	atomic_long dups; /* Gs seen twice: counted here, asserted on the
			     main thread (cmocka asserts only there) */
} st;

static void take(gmp_g *g)
{
	if (atomic_fetch_add(&st.seen[g->id], 1) != 0)
		atomic_fetch_add(&st.dups, 1);
}

/* How many Gs nobody has taken yet this round. */
static int unseen(void)
{
	int n = 0;
	for (int i = 0; i < STRESS_GS; i++)
		n += atomic_load(&st.seen[i]) == 0;
	return n;
}

static void *thief_main(void *arg)
{
	gmp__p *me = arg;
	bool inherit;
	while (!atomic_load(&st.stop)) {
		gmp_g *g = gmp__runq_steal(me, st.owner,
					   (atomic_load(&st.stolen) & 3) == 0);
		if (!g)
			continue;
		atomic_fetch_add(&st.stolen, 1);
		take(g);
		/* Run what we stole, as the thief's M would. */
		while ((g = gmp__runq_get(me, &inherit)) != NULL)
			take(g);
	}
	return NULL;
}

static void test_runq_concurrent_owner_and_two_thieves(void **state)
{
	(void)state;
	st.owner = mkp(0);
	st.thieves[0] = mkp(1);
	st.thieves[1] = mkp(2);
	st.gs = mkgs(STRESS_GS);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, thief_main,
						st.thieves[i]),
				 0);
	int64_t total = 0;
	int64_t *ids = malloc(sizeof(int64_t) * STRESS_GS);
	for (int round = 0; round < STRESS_ROUNDS; round++) {
		for (int i = 0; i < STRESS_GS; i++)
			atomic_store(&st.seen[i], 0);
		/* The owner puts everything (some via runnext), taking one
		 * back every third put, so the ring is often near full and
		 * overflows to the global queue too. */
		bool inherit;
		for (int i = 0; i < STRESS_GS; i++) {
			gmp__runq_put(st.owner, &st.gs[i], (i % 7) == 0);
			if (i % 3 == 0) {
				gmp_g *g = gmp__runq_get(st.owner, &inherit);
				if (g)
					take(g);
			}
		}
		gmp_g *g;
		while ((g = gmp__runq_get(st.owner, &inherit)) != NULL)
			take(g);
		/* Let the thieves finish what they hold. */
		for (int spin = 0; spin < 1000; spin++)
			sched_yield();
		int64_t n = global_drain(ids, STRESS_GS);
		for (int64_t i = 0; i < n && i < STRESS_GS; i++)
			take(&st.gs[ids[i]]);
		/* Thieves may still be running a stolen batch: wait until
		 * every G is accounted for. */
		TU_WAIT_FOR(unseen() == 0);
		for (int i = 0; i < STRESS_GS; i++)
			assert_int_equal(atomic_load(&st.seen[i]), 1);
		assert_int_equal(atomic_load(&st.dups), 0);
		total += STRESS_GS;
	}
	atomic_store(&st.stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_true(atomic_load(&st.stolen) > 0);
	assert_int_equal(total, (int64_t)STRESS_GS * STRESS_ROUNDS);
	free(ids);
	free(st.gs);
	free(st.owner);
	free(st.thieves[0]);
	free(st.thieves[1]);
}

GMP_TEST_MAIN(cmocka_unit_test(test_runq_fifo_every_fill_level),
	      cmocka_unit_test(test_runq_runnext_override_and_kickout),
	      cmocka_unit_test(test_runq_overflow_moves_half_plus_one),
	      cmocka_unit_test(test_runq_global_queue_fifo_across_chunks),
	      cmocka_unit_test(test_runq_global_queue_unreserved_aborts),
	      cmocka_unit_test(test_runq_steal_half_at_every_fill_level),
	      cmocka_unit_test(test_runq_runnext_stolen_only_when_allowed),
	      cmocka_unit_test(test_runq_concurrent_owner_and_two_thieves))
