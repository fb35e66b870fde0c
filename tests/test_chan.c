/* Channels and select: ordering, rendezvous, close, the try_ calls, misuse,
 * select's fairness, timeouts and default, and channels shared by tasks
 * and foreign threads at several maxprocs. */
#include <pthread.h>
#include <sched.h>

#include "gmp_test.h"

#include "export_test.h"

/* ---- helpers ---------------------------------------------------------------- */

/* How many entries wait in one of c's queues (under its lock). */
static int queued(gmp_chan *c, bool recv)
{
	gmp__lock(&c->lock);
	int n = 0;
	for (gmp__sudog *sg = recv ? c->recvq.first : c->sendq.first; sg;
	     sg = sg->next)
		n++;
	gmp__unlock(&c->lock);
	return n;
}

/* Waits (from a thread, or a task that yields) until n parties wait. */
static void wait_queued(gmp_chan *c, bool recv, int n)
{
	TU_WAIT_FOR(queued(c, recv) >= n);
}

struct run {
	void (*fn)(void *);
	void *arg;
};

/* Runs fn(arg) as a task at maxprocs procs and waits for every task. */
static void run_tasks(int procs, void (*fn)(void *), void *arg)
{
	tu_init(procs);
	assert_true(gmp_go(fn, arg) > 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- FIFO ------------------------------------------------------------------- */

enum { FIFO_N = 10000 };

static void fifo_buffered(void *arg)
{
	(void)arg;
	gmp_chan *c = gmp_chan_new(sizeof(int), 64);
	T_ASSERT(c);
	/* Fill, then drain: the buffer alone keeps the order. */
	for (int i = 0; i < 64; i++)
		T_ASSERT(gmp_chan_send(c, &i) == 0);
	T_ASSERT(gmp_chan_try_send(c, &(int){ 99 }) == -EAGAIN);
	for (int i = 0; i < 64; i++) {
		int v = -1;
		T_ASSERT(gmp_chan_recv(c, &v) == 0);
		T_ASSERT(v == i);
	}
	gmp_chan_free(c);
}

static void test_chan_fifo_buffered(void **s)
{
	(void)s;
	run_tasks(1, fifo_buffered, NULL);
}

/* Many senders, one receiver: each sender's values arrive in the order it
 * sent them, and every value arrives once. Also through a full buffer,
 * where blocked senders hand their values to the ring's tail. */
enum { SENDERS = 8, PER_SENDER = 20000 };

struct fifo_many {
	gmp_chan *c;
	atomic_int senders_left;
};

static void fifo_sender(void *arg)
{
	struct fifo_many *f = arg;
	static atomic_int next_id;
	uint64_t id = (uint64_t)atomic_fetch_add(&next_id, 1) % SENDERS;
	for (uint64_t i = 0; i < PER_SENDER; i++) {
		uint64_t v = id << 32 | i;
		T_ASSERT(gmp_chan_send(f->c, &v) == 0);
	}
	if (atomic_fetch_sub(&f->senders_left, 1) == 1)
		gmp_chan_close(f->c);
}

static void fifo_receiver(void *arg)
{
	struct fifo_many *f = arg;
	int64_t next[SENDERS] = { 0 };
	uint64_t v;
	long n = 0;
	int r;
	while ((r = gmp_chan_recv(f->c, &v)) == 0) {
		uint64_t id = v >> 32, seq = v & 0xffffffff;
		T_ASSERT(id < SENDERS);
		T_ASSERT((int64_t)seq == next[id]);
		next[id]++;
		n++;
	}
	T_ASSERT(r == -EPIPE);
	T_ASSERT(v == 0); /* zeroed on -EPIPE */
	T_ASSERT(n == (long)SENDERS * PER_SENDER);
	for (int i = 0; i < SENDERS; i++)
		T_ASSERT(next[i] == PER_SENDER);
	gmp_chan_free(f->c);
}

static void fifo_many_start(void *arg)
{
	struct fifo_many *f = arg;
	gmp_go(fifo_receiver, f);
	for (int i = 0; i < SENDERS; i++)
		gmp_go(fifo_sender, f);
}

static void fifo_many_at(int procs, size_t cap)
{
	struct fifo_many f;
	f.c = gmp_chan_new(sizeof(uint64_t), cap);
	assert_non_null(f.c);
	atomic_store(&f.senders_left, SENDERS);
	run_tasks(procs, fifo_many_start, &f);
}

static void test_chan_fifo_many_senders_buffered_1(void **s)
{
	(void)s;
	fifo_many_at(1, 16);
}
static void test_chan_fifo_many_senders_buffered_2(void **s)
{
	(void)s;
	fifo_many_at(2, 16);
}
static void test_chan_fifo_many_senders_buffered_4(void **s)
{
	(void)s;
	fifo_many_at(4, 16);
}
static void test_chan_fifo_many_senders_unbuffered_1(void **s)
{
	(void)s;
	fifo_many_at(1, 0);
}
static void test_chan_fifo_many_senders_unbuffered_2(void **s)
{
	(void)s;
	fifo_many_at(2, 0);
}
static void test_chan_fifo_many_senders_unbuffered_4(void **s)
{
	(void)s;
	fifo_many_at(4, 0);
}

/* ---- unbuffered rendezvous ------------------------------------------------- */

/* Each round the receiver announces the round, dawdles, then receives; the
 * sender checks, right after its send returns, that the receiver had
 * reached that round's receive. A send that returned early (buffering the
 * value) would see an older round. */
enum { ROUNDS = 2000 };

struct rdv {
	gmp_chan *c;
	atomic_int receiving; /* the round the receiver is about to take */
};

static void rdv_sender(void *arg)
{
	struct rdv *r = arg;
	for (int i = 1; i <= ROUNDS; i++) {
		T_ASSERT(gmp_chan_send(r->c, &i) == 0);
		T_ASSERT(atomic_load(&r->receiving) >= i);
	}
}

static void rdv_receiver(void *arg)
{
	struct rdv *r = arg;
	for (int i = 1; i <= ROUNDS; i++) {
		for (int k = 0; k < i % 7; k++)
			gmp_yield();
		atomic_store(&r->receiving, i);
		int v = 0;
		T_ASSERT(gmp_chan_recv(r->c, &v) == 0);
		T_ASSERT(v == i);
	}
}

static void *rdv_thread_sender(void *arg)
{
	rdv_sender(arg);
	return NULL;
}

static void rdv_at(int procs, bool thread_sender)
{
	struct rdv r;
	r.c = gmp_chan_new(sizeof(int), 0);
	atomic_store(&r.receiving, 0);
	tu_init(procs);
	pthread_t t;
	if (thread_sender)
		pthread_create(&t, NULL, rdv_thread_sender, &r);
	else
		gmp_go(rdv_sender, &r);
	gmp_go(rdv_receiver, &r);
	if (thread_sender)
		pthread_join(t, NULL);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(r.c);
}

static void test_chan_unbuffered_rendezvous_1(void **s)
{
	(void)s;
	rdv_at(1, false);
}
static void test_chan_unbuffered_rendezvous_2(void **s)
{
	(void)s;
	rdv_at(2, false);
}
static void test_chan_unbuffered_rendezvous_thread_sender(void **s)
{
	(void)s;
	rdv_at(2, true);
}

/* A send from a foreign thread blocks the thread until a task receives. */
static atomic_int thread_send_returned;

static void *blocking_thread_sender(void *arg)
{
	int v = 7;
	T_ASSERT(gmp_chan_send(arg, &v) == 0);
	atomic_store(&thread_send_returned, 1);
	return NULL;
}

static void late_receiver(void *arg)
{
	gmp_chan *c = arg;
	wait_queued(c, false, 1);
	T_ASSERT(atomic_load(&thread_send_returned) == 0);
	int v = 0;
	T_ASSERT(gmp_chan_recv(c, &v) == 0);
	T_ASSERT(v == 7);
}

static void test_chan_unbuffered_thread_blocks_until_received(void **s)
{
	(void)s;
	atomic_store(&thread_send_returned, 0);
	gmp_chan *c = gmp_chan_new(sizeof(int), 0);
	tu_init(2);
	pthread_t t;
	pthread_create(&t, NULL, blocking_thread_sender, c);
	wait_queued(c, false, 1); /* the thread is blocked in its send */
	assert_int_equal(atomic_load(&thread_send_returned), 0);
	gmp_go(late_receiver, c);
	pthread_join(t, NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&thread_send_returned), 1);
	gmp_chan_free(c);
}

/* ---- close ---------------------------------------------------------------- */

static atomic_int close_results[8];

static void blocked_sender(void *arg)
{
	int v = 1;
	atomic_store(&close_results[0], gmp_chan_send(arg, &v));
}

static void blocked_receiver(void *arg)
{
	long v = -1;
	int r = gmp_chan_recv(arg, &v);
	T_ASSERT(v == 0); /* zeroed */
	atomic_fetch_add(&close_results[1], r == -EPIPE);
}

static void test_chan_close_wakes_blocked_sender(void **s)
{
	(void)s;
	atomic_store(&close_results[0], 1);
	gmp_chan *c = gmp_chan_new(sizeof(int), 0);
	tu_init(2);
	gmp_go(blocked_sender, c);
	wait_queued(c, false, 1);
	gmp_chan_close(c);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&close_results[0]), -EPIPE);
	/* And later sends fail at once, blocking or not. */
	assert_int_equal(gmp_chan_send(c, &(int){ 1 }), -EPIPE);
	assert_int_equal(gmp_chan_try_send(c, &(int){ 1 }), -EPIPE);
	gmp_chan_free(c);
}

static void test_chan_close_wakes_blocked_receivers(void **s)
{
	(void)s;
	atomic_store(&close_results[1], 0);
	gmp_chan *c = gmp_chan_new(sizeof(long), 4);
	tu_init(2);
	for (int i = 0; i < 5; i++)
		gmp_go(blocked_receiver, c);
	wait_queued(c, true, 5);
	gmp_chan_close(c);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&close_results[1]), 5);
	gmp_chan_free(c);
}

/* Receivers drain what was buffered before close, then get -EPIPE. */
static void test_chan_close_drains_then_epipe(void **s)
{
	(void)s;
	gmp_chan *c = gmp_chan_new(sizeof(int), 4);
	for (int i = 1; i <= 3; i++)
		assert_int_equal(gmp_chan_send(c, &i), 0);
	gmp_chan_close(c);
	int v;
	for (int i = 1; i <= 3; i++) {
		v = -1;
		assert_int_equal(i == 2 ? gmp_chan_try_recv(c, &v)
					: gmp_chan_recv(c, &v),
				 0);
		assert_int_equal(v, i);
	}
	v = -1;
	assert_int_equal(gmp_chan_recv(c, &v), -EPIPE);
	assert_int_equal(v, 0);
	v = -1;
	assert_int_equal(gmp_chan_try_recv(c, &v), -EPIPE);
	assert_int_equal(v, 0);
	assert_int_equal(gmp_chan_recv(c, NULL), -EPIPE);
	gmp_chan_free(c);
}

/* A thread blocked in recv (on its futex) is woken by close too. */
static void *thread_receiver_epipe(void *arg)
{
	int v = 5;
	T_ASSERT(gmp_chan_recv(arg, &v) == -EPIPE);
	T_ASSERT(v == 0);
	return NULL;
}

static void closer_task(void *arg)
{
	wait_queued(arg, true, 2);
	gmp_chan_close(arg);
}

static void test_chan_close_wakes_threads(void **s)
{
	(void)s;
	gmp_chan *c = gmp_chan_new(sizeof(int), 0);
	tu_init(1);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, thread_receiver_epipe, c);
	gmp_go(closer_task, c);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(c);
}

static void child_close_twice(void *arg)
{
	(void)arg;
	gmp_chan *c = gmp_chan_new(1, 0);
	gmp_chan_close(c);
	gmp_chan_close(c);
}

static void test_chan_close_twice_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_close_twice, NULL, "close of closed channel");
}

static void child_close_nil(void *arg)
{
	(void)arg;
	gmp_chan_close(NULL);
}

static void test_chan_close_nil_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_close_nil, NULL, "close of nil channel");
}

/* ---- free with waiters ------------------------------------------------------ */

static void parked_receiver(void *arg)
{
	int v;
	gmp_chan_recv(arg, &v);
}

static void child_free_with_task_waiter(void *arg)
{
	(void)arg;
	gmp_chan *c = gmp_chan_new(sizeof(int), 0);
	gmp_config cfg = { .maxprocs = 1 };
	gmp_init(&cfg);
	gmp_go(parked_receiver, c);
	wait_queued(c, true, 1);
	gmp_chan_free(c);
}

static void *thread_sender_forever(void *arg)
{
	int v = 1;
	gmp_chan_send(arg, &v);
	return NULL;
}

static void child_free_with_thread_waiter(void *arg)
{
	(void)arg;
	gmp_chan *c = gmp_chan_new(sizeof(int), 0);
	pthread_t t;
	pthread_create(&t, NULL, thread_sender_forever, c);
	wait_queued(c, false, 1);
	gmp_chan_free(c);
}

static void test_chan_free_with_waiters_aborts(void **s)
{
	(void)s;
	tu_expect_abort(child_free_with_task_waiter, NULL, "receivers");
	tu_expect_abort(child_free_with_thread_waiter, NULL, "senders");
}

/* ---- try_ ----------------------------------------------------------------- */

static void sender_of_one(void *arg)
{
	T_ASSERT(gmp_chan_send(arg, &(int){ 1 }) == 0);
}

static void try_with_partners(void *arg)
{
	(void)arg;
	gmp_chan *c = gmp_chan_new(sizeof(int), 0);
	int v = 0;
	/* Nobody there. */
	T_ASSERT(gmp_chan_try_send(c, &(int){ 1 }) == -EAGAIN);
	T_ASSERT(gmp_chan_try_recv(c, &v) == -EAGAIN);
	/* A parked receiver takes a try_send. */
	gmp_go(parked_receiver, c);
	wait_queued(c, true, 1);
	T_ASSERT(gmp_chan_try_send(c, &(int){ 1 }) == 0);
	/* A parked sender feeds a try_recv. */
	gmp_go(sender_of_one, c);
	wait_queued(c, false, 1);
	T_ASSERT(gmp_chan_try_recv(c, &v) == 0);
	T_ASSERT(v == 1);
	T_ASSERT(gmp_chan_try_recv(c, &v) == -EAGAIN);
	gmp_chan_close(c);
	T_ASSERT(gmp_chan_try_send(c, &(int){ 1 }) == -EPIPE);
	T_ASSERT(gmp_chan_try_recv(c, &v) == -EPIPE);
	/* Woken parties never touch the channel again: free it now. */
	gmp_chan_free(c);
}

static void test_chan_try(void **s)
{
	(void)s;
	gmp_chan *c = gmp_chan_new(sizeof(int), 2);
	int v = 0;
	assert_int_equal(gmp_chan_try_recv(c, &v), -EAGAIN);
	assert_int_equal(gmp_chan_try_send(c, &(int){ 10 }), 0);
	assert_int_equal(gmp_chan_try_send(c, &(int){ 11 }), 0);
	assert_int_equal(gmp_chan_try_send(c, &(int){ 12 }), -EAGAIN);
	assert_int_equal(gmp_chan_try_recv(c, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(gmp_chan_try_recv(c, &v), 0);
	assert_int_equal(v, 11);
	assert_int_equal(gmp_chan_try_recv(c, &v), -EAGAIN);
	gmp_chan_close(c);
	assert_int_equal(gmp_chan_try_send(c, &(int){ 1 }), -EPIPE);
	assert_int_equal(gmp_chan_try_recv(c, &v), -EPIPE);
	gmp_chan_free(c);
	/* A nil channel is never ready. */
	assert_int_equal(gmp_chan_try_send(NULL, &v), -EAGAIN);
	assert_int_equal(gmp_chan_try_recv(NULL, &v), -EAGAIN);
	gmp_chan_free(NULL);

	run_tasks(1, try_with_partners, NULL);
}

/* elem_size 0: a channel of signals. */
static void test_chan_zero_size_elements(void **s)
{
	(void)s;
	gmp_chan *c = gmp_chan_new(0, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(gmp_chan_try_send(c, NULL), 0);
	assert_int_equal(gmp_chan_try_send(c, NULL), -EAGAIN);
	for (int i = 0; i < 3; i++)
		assert_int_equal(gmp_chan_recv(c, NULL), 0);
	assert_int_equal(gmp_chan_try_recv(c, NULL), -EAGAIN);
	gmp_chan_free(c);
	assert_null(gmp_chan_new(SIZE_MAX / 2, 4)); /* absurd */
}

/* ---- foreign threads and tasks at once -------------------------------------- */

enum {
	TPRODUCERS = 2,
	TASK_PRODUCERS = 2,
	PER_PRODUCER = 20000,
	TASK_CONSUMERS = 4,
	THREAD_CONSUMERS = 1
};

struct mixed {
	gmp_chan *c;
	atomic_int producers_left;
	atomic_llong sum, count;
	atomic_llong per_producer[TPRODUCERS + TASK_PRODUCERS];
};

static void mixed_produce(struct mixed *m, long long id)
{
	for (long long i = 1; i <= PER_PRODUCER; i++) {
		long long v = id << 32 | i;
		T_ASSERT(gmp_chan_send(m->c, &v) == 0);
	}
	if (atomic_fetch_sub(&m->producers_left, 1) == 1)
		gmp_chan_close(m->c);
}

static void mixed_consume(struct mixed *m)
{
	long long v, last[TPRODUCERS + TASK_PRODUCERS] = { 0 };
	while (gmp_chan_recv(m->c, &v) == 0) {
		long long id = v >> 32, seq = v & 0xffffffff;
		T_ASSERT(id >= 0 && id < TPRODUCERS + TASK_PRODUCERS);
		/* One consumer sees a rising subsequence of each producer. */
		T_ASSERT(seq > last[id]);
		last[id] = seq;
		atomic_fetch_add(&m->sum, seq);
		atomic_fetch_add(&m->count, 1);
		atomic_fetch_add(&m->per_producer[id], 1);
	}
}

static struct mixed mixed;

static void *mixed_thread_producer(void *arg)
{
	mixed_produce(&mixed, (long long)(intptr_t)arg);
	return NULL;
}

static void *mixed_thread_consumer(void *arg)
{
	(void)arg;
	mixed_consume(&mixed);
	return NULL;
}

static void mixed_task_producer(void *arg)
{
	mixed_produce(&mixed, (long long)(intptr_t)arg);
}

static void mixed_task_consumer(void *arg)
{
	(void)arg;
	mixed_consume(&mixed);
}

static void mixed_at(int procs, size_t cap)
{
	mixed.c = gmp_chan_new(sizeof(long long), cap);
	atomic_store(&mixed.producers_left, TPRODUCERS + TASK_PRODUCERS);
	atomic_store(&mixed.sum, 0);
	atomic_store(&mixed.count, 0);
	for (int i = 0; i < TPRODUCERS + TASK_PRODUCERS; i++)
		atomic_store(&mixed.per_producer[i], 0);
	tu_init(procs);
	pthread_t t[TPRODUCERS + THREAD_CONSUMERS];
	for (int i = 0; i < TASK_CONSUMERS; i++)
		gmp_go(mixed_task_consumer, NULL);
	for (int i = 0; i < THREAD_CONSUMERS; i++)
		pthread_create(&t[TPRODUCERS + i], NULL, mixed_thread_consumer,
			       NULL);
	for (int i = 0; i < TPRODUCERS; i++)
		pthread_create(&t[i], NULL, mixed_thread_producer,
			       (void *)(intptr_t)i);
	for (int i = 0; i < TASK_PRODUCERS; i++)
		gmp_go(mixed_task_producer, (void *)(intptr_t)(TPRODUCERS + i));
	for (int i = 0; i < TPRODUCERS + THREAD_CONSUMERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(gmp_shutdown(), 0);
	long long n = TPRODUCERS + TASK_PRODUCERS;
	assert_int_equal(atomic_load(&mixed.count), n * PER_PRODUCER);
	assert_int_equal(atomic_load(&mixed.sum),
			 n * (long long)PER_PRODUCER * (PER_PRODUCER + 1) / 2);
	for (int i = 0; i < n; i++)
		assert_int_equal(atomic_load(&mixed.per_producer[i]),
				 PER_PRODUCER);
	gmp_chan_free(mixed.c);
}

static void test_chan_threads_and_tasks_unbuffered_1(void **s)
{
	(void)s;
	mixed_at(1, 0);
}
static void test_chan_threads_and_tasks_unbuffered_2(void **s)
{
	(void)s;
	mixed_at(2, 0);
}
static void test_chan_threads_and_tasks_unbuffered_4(void **s)
{
	(void)s;
	mixed_at(4, 0);
}
static void test_chan_threads_and_tasks_buffered_1(void **s)
{
	(void)s;
	mixed_at(1, 8);
}
static void test_chan_threads_and_tasks_buffered_2(void **s)
{
	(void)s;
	mixed_at(2, 8);
}
static void test_chan_threads_and_tasks_buffered_4(void **s)
{
	(void)s;
	mixed_at(4, 8);
}

/* ---- select: fairness, default, timeout -------------------------------------- */

enum { FAIR_N = 10000 };

/* Two receive cases that are always ready: each must win 40-60%. */
static void select_fairness(void *arg)
{
	int *counts = arg;
	gmp_chan *a = gmp_chan_new(sizeof(int), 1);
	gmp_chan *b = gmp_chan_new(sizeof(int), 1);
	T_ASSERT(gmp_chan_try_send(a, &(int){ 0 }) == 0);
	T_ASSERT(gmp_chan_try_send(b, &(int){ 1 }) == 0);
	for (int i = 0; i < FAIR_N; i++) {
		int va = -1, vb = -1;
		gmp_select_case cs[] = {
			{ .chan = a, .op = GMP_SELECT_RECV, .elem = &va },
			{ .chan = b, .op = GMP_SELECT_RECV, .elem = &vb },
		};
		int k = gmp_select(cs, 2, -1);
		T_ASSERT(k == 0 || k == 1);
		T_ASSERT(cs[k].result == 0);
		T_ASSERT(k == 0 ? va == 0 : vb == 1);
		counts[k]++;
		/* Ready again for the next round. */
		T_ASSERT(gmp_chan_try_send(k == 0 ? a : b, &k) == 0);
	}
	gmp_chan_free(a);
	gmp_chan_free(b);
}

static void check_fair(const int *counts)
{
	assert_int_equal(counts[0] + counts[1], FAIR_N);
	for (int k = 0; k < 2; k++) {
		if (counts[k] < FAIR_N * 4 / 10 || counts[k] > FAIR_N * 6 / 10)
			fail_msg("case %d chosen %d of %d times", k, counts[k],
				 FAIR_N);
	}
}

static void test_chan_select_fairness(void **s)
{
	(void)s;
	int counts[2] = { 0, 0 };
	run_tasks(1, select_fairness, counts); /* the M's random */
	check_fair(counts);
	counts[0] = counts[1] = 0;
	select_fairness(counts); /* this thread's random */
	check_fair(counts);
}

/* Two send cases with room, and cases on one channel twice. */
static void test_chan_select_fairness_send_and_same_channel(void **s)
{
	(void)s;
	gmp_chan *a = gmp_chan_new(sizeof(int), 1);
	gmp_chan *b = gmp_chan_new(sizeof(int), 1);
	int counts[2] = { 0, 0 }, v = 0;
	for (int i = 0; i < FAIR_N; i++) {
		gmp_select_case cs[] = {
			{ .chan = a, .op = GMP_SELECT_SEND, .elem = &i },
			{ .chan = b, .op = GMP_SELECT_SEND, .elem = &i },
		};
		int k = gmp_select(cs, 2, -1);
		assert_true(k == 0 || k == 1);
		counts[k]++;
		assert_int_equal(gmp_chan_try_recv(k == 0 ? a : b, &v), 0);
		assert_int_equal(v, i);
	}
	check_fair(counts);
	/* The same channel in both cases: locked once, each case wins. */
	counts[0] = counts[1] = 0;
	for (int i = 0; i < FAIR_N; i++) {
		assert_int_equal(gmp_chan_try_send(a, &i), 0);
		gmp_select_case cs[] = {
			{ .chan = a, .op = GMP_SELECT_RECV, .elem = &v },
			{ .chan = a, .op = GMP_SELECT_RECV, .elem = &v },
		};
		int k = gmp_select(cs, 2, -1);
		assert_true(k == 0 || k == 1);
		assert_int_equal(v, i);
		counts[k]++;
	}
	check_fair(counts);
	gmp_chan_free(a);
	gmp_chan_free(b);
}

static void select_default(void *arg)
{
	(void)arg;
	gmp_chan *a = gmp_chan_new(sizeof(int), 0);
	gmp_chan *b = gmp_chan_new(sizeof(int), 1);
	int v = 0;
	gmp_select_case cs[] = {
		{ .chan = a, .op = GMP_SELECT_RECV, .elem = &v },
		{ .chan = a, .op = GMP_SELECT_SEND, .elem = &v },
		{ .chan = NULL, .op = GMP_SELECT_RECV, .elem = &v },
		{ .chan = b, .op = GMP_SELECT_RECV, .elem = &v },
	};
	T_ASSERT(gmp_select(cs, 4, 0) == -EAGAIN);
	T_ASSERT(queued(a, true) == 0 && queued(a, false) == 0);
	T_ASSERT(gmp_chan_try_send(b, &(int){ 42 }) == 0);
	T_ASSERT(gmp_select(cs, 4, 0) == 3);
	T_ASSERT(cs[3].result == 0 && v == 42);
	/* Nothing at all, and NULL channels only. */
	T_ASSERT(gmp_select(NULL, 0, 0) == -EAGAIN);
	T_ASSERT(gmp_select(&cs[2], 1, 0) == -EAGAIN);
	gmp_chan_free(a);
	gmp_chan_free(b);
}

static void test_chan_select_default(void **s)
{
	(void)s;
	select_default(NULL);
	run_tasks(1, select_default, NULL);
}

static void test_chan_select_bad_arguments(void **s)
{
	(void)s;
	gmp_chan *a = gmp_chan_new(sizeof(int), 0);
	gmp_select_case cs[] = { { .chan = a, .op = 0 } };
	assert_int_equal(gmp_select(NULL, 1, -1), -EINVAL);
	assert_int_equal(gmp_select(cs, 1, -1), -EINVAL);
	cs[0].op = 3;
	assert_int_equal(gmp_select(cs, 1, -1), -EINVAL);
	gmp_chan_free(a);
}

enum { TIMEOUT_NS = 20 * 1000 * 1000 };

static void select_timeout(void *arg)
{
	(void)arg;
	gmp_chan *a = gmp_chan_new(sizeof(int), 0);
	gmp_chan *b = gmp_chan_new(sizeof(int), 0);
	int v = 0;
	gmp_select_case cs[] = {
		{ .chan = a, .op = GMP_SELECT_RECV, .elem = &v },
		{ .chan = b, .op = GMP_SELECT_SEND, .elem = &v },
	};
	int64_t t0 = tu_now_ns();
	T_ASSERT(gmp_select(cs, 2, TIMEOUT_NS) == -ETIMEDOUT);
	int64_t dt = tu_now_ns() - t0;
	T_ASSERT(dt >= TIMEOUT_NS);
	T_ASSERT(dt < 2000LL * 1000 * 1000);
	/* The timed-out select left nothing behind on the channels. */
	T_ASSERT(queued(a, true) == 0 && queued(b, false) == 0);
	/* No channels at all: a plain timed sleep. */
	t0 = tu_now_ns();
	T_ASSERT(gmp_select(NULL, 0, TIMEOUT_NS) == -ETIMEDOUT);
	dt = tu_now_ns() - t0;
	T_ASSERT(dt >= TIMEOUT_NS && dt < 2000LL * 1000 * 1000);
	gmp_chan_free(a);
	gmp_chan_free(b);
}

static void test_chan_select_timeout_task(void **s)
{
	(void)s;
	run_tasks(1, select_timeout, NULL);
}

static void test_chan_select_timeout_thread(void **s)
{
	(void)s;
	select_timeout(NULL);
}

/* A select that will time out gets a value first: exactly one of the two
 * outcomes, and the value is never lost. */
static void timeout_race_sender(void *arg)
{
	gmp_chan *c = arg;
	for (int i = 1; i <= 200; i++) {
		int r = gmp_chan_send(c, &i);
		T_ASSERT(r == 0 || r == -EPIPE);
		if (r)
			break;
	}
}

static void select_timeout_race(void *arg)
{
	(void)arg;
	gmp_chan *c = gmp_chan_new(sizeof(int), 0);
	gmp_go(timeout_race_sender, c);
	int expect = 1, timeouts = 0;
	while (expect <= 200) {
		int v = 0;
		gmp_select_case cs[] = {
			{ .chan = c, .op = GMP_SELECT_RECV, .elem = &v },
		};
		int r = gmp_select(cs, 1, 1000 + (expect % 5) * 20000);
		if (r == -ETIMEDOUT) {
			timeouts++;
			continue;
		}
		T_ASSERT(r == 0 && cs[0].result == 0);
		T_ASSERT(v == expect);
		expect++;
	}
	(void)timeouts;
	/* The sender's last send has returned or is returning; it does not
	 * touch the channel after its wake-up. */
	gmp_chan_close(c);
	gmp_chan_free(c);
}

static void test_chan_select_timeout_races_value_2(void **s)
{
	(void)s;
	run_tasks(2, select_timeout_race, NULL);
}

/* ---- select: mixed sends and receives ---------------------------------------- */

/* A relay task selects between receiving from `in` and sending to `out`
 * (unbuffered both), so its waiter sits on two queues of two kinds; a
 * producer and a consumer on the other ends. */
enum { RELAY_N = 20000 };

struct relay {
	gmp_chan *in, *out;
	long long got_sum, sent_sum;
};

static void relay_producer(void *arg)
{
	struct relay *r = arg;
	for (long long i = 1; i <= RELAY_N; i++)
		T_ASSERT(gmp_chan_send(r->in, &i) == 0);
}

static void relay_consumer(void *arg)
{
	struct relay *r = arg;
	long long v, expect = 1;
	for (int i = 0; i < RELAY_N; i++) {
		T_ASSERT(gmp_chan_recv(r->out, &v) == 0);
		T_ASSERT(v == expect++);
	}
}

static void relay(void *arg)
{
	struct relay *r = arg;
	long long next_out = 1, v = 0;
	int received = 0, sent = 0;
	while (received < RELAY_N || sent < RELAY_N) {
		gmp_select_case cs[] = {
			{ .chan = received < RELAY_N ? r->in : NULL,
			  .op = GMP_SELECT_RECV,
			  .elem = &v },
			{ .chan = sent < RELAY_N ? r->out : NULL,
			  .op = GMP_SELECT_SEND,
			  .elem = &next_out },
		};
		int k = gmp_select(cs, 2, -1);
		T_ASSERT(k == 0 || k == 1);
		T_ASSERT(cs[k].result == 0);
		if (k == 0) {
			T_ASSERT(v == received + 1);
			r->got_sum += v;
			received++;
		} else {
			r->sent_sum += next_out;
			next_out++;
			sent++;
		}
	}
}

static void relay_start(void *arg)
{
	gmp_go(relay_producer, arg);
	gmp_go(relay_consumer, arg);
	gmp_go(relay, arg);
}

static void relay_at(int procs)
{
	struct relay r = { gmp_chan_new(sizeof(long long), 0),
			   gmp_chan_new(sizeof(long long), 0), 0, 0 };
	run_tasks(procs, relay_start, &r);
	long long want = (long long)RELAY_N * (RELAY_N + 1) / 2;
	assert_int_equal(r.got_sum, want);
	assert_int_equal(r.sent_sum, want);
	gmp_chan_free(r.in);
	gmp_chan_free(r.out);
}

static void test_chan_select_send_and_recv_1(void **s)
{
	(void)s;
	relay_at(1);
}
static void test_chan_select_send_and_recv_2(void **s)
{
	(void)s;
	relay_at(2);
}
static void test_chan_select_send_and_recv_4(void **s)
{
	(void)s;
	relay_at(4);
}

/* Selects against selects: every task offers to send and to receive on
 * the same unbuffered channel, so waiters meet waiters and each match must
 * complete exactly one send and one receive. A foreign thread takes part,
 * and closing `quit` ends everyone's select. */
enum { SWARM = 6, SWARM_TARGET = 30000 };

struct swarm {
	gmp_chan *c, *quit;
	atomic_llong sent_sum, recv_sum, sent_n, recv_n;
};

static struct swarm swarm;

static void swarm_member(long long id)
{
	long long seq = 0, in;
	for (;;) {
		long long out = id << 40 | ++seq;
		gmp_select_case cs[] = {
			{ .chan = swarm.c, .op = GMP_SELECT_SEND, .elem = &out },
			{ .chan = swarm.c, .op = GMP_SELECT_RECV, .elem = &in },
			{ .chan = swarm.quit,
			  .op = GMP_SELECT_RECV,
			  .elem = NULL },
		};
		int k = gmp_select(cs, 3, -1);
		if (k == 2) {
			T_ASSERT(cs[2].result == -EPIPE);
			return;
		}
		T_ASSERT(cs[k].result == 0);
		if (k == 0) {
			atomic_fetch_add(&swarm.sent_sum, out);
			atomic_fetch_add(&swarm.sent_n, 1);
		} else {
			T_ASSERT((in >> 40) != id); /* never matched itself */
			atomic_fetch_add(&swarm.recv_sum, in);
			atomic_fetch_add(&swarm.recv_n, 1);
		}
	}
}

static void swarm_task(void *arg)
{
	swarm_member((long long)(intptr_t)arg);
}

static void *swarm_thread(void *arg)
{
	swarm_member((long long)(intptr_t)arg);
	return NULL;
}

static void swarm_at(int procs)
{
	swarm.c = gmp_chan_new(sizeof(long long), 0);
	swarm.quit = gmp_chan_new(0, 0);
	atomic_store(&swarm.sent_sum, 0);
	atomic_store(&swarm.recv_sum, 0);
	atomic_store(&swarm.sent_n, 0);
	atomic_store(&swarm.recv_n, 0);
	tu_init(procs);
	for (int i = 1; i <= SWARM; i++)
		gmp_go(swarm_task, (void *)(intptr_t)i);
	pthread_t t;
	pthread_create(&t, NULL, swarm_thread, (void *)(intptr_t)(SWARM + 1));
	TU_WAIT_FOR(atomic_load(&swarm.recv_n) >= SWARM_TARGET);
	gmp_chan_close(swarm.quit);
	pthread_join(t, NULL);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&swarm.sent_n),
			 atomic_load(&swarm.recv_n));
	assert_true(atomic_load(&swarm.sent_sum) ==
		    atomic_load(&swarm.recv_sum));
	assert_int_equal(queued(swarm.c, true) + queued(swarm.c, false), 0);
	gmp_chan_free(swarm.c);
	gmp_chan_free(swarm.quit);
}

static void test_chan_select_against_select_1(void **s)
{
	(void)s;
	swarm_at(1);
}
static void test_chan_select_against_select_2(void **s)
{
	(void)s;
	swarm_at(2);
}
static void test_chan_select_against_select_4(void **s)
{
	(void)s;
	swarm_at(4);
}

/* A blocked select is woken by close, with that case's -EPIPE; a send case
 * on a closed channel is ready with -EPIPE. */
static void select_close(void *arg)
{
	(void)arg;
	gmp_chan *a = gmp_chan_new(sizeof(int), 0);
	gmp_chan *b = gmp_chan_new(sizeof(int), 0);
	gmp_go(closer_task, b); /* waits for two receivers on b */
	int va = 1, vb = 1;
	gmp_select_case cs[] = {
		{ .chan = a, .op = GMP_SELECT_RECV, .elem = &va },
		{ .chan = b, .op = GMP_SELECT_RECV, .elem = &vb },
		{ .chan = b, .op = GMP_SELECT_RECV, .elem = &vb },
	};
	int k = gmp_select(cs, 3, -1);
	T_ASSERT(k == 1 || k == 2);
	T_ASSERT(cs[k].result == -EPIPE && vb == 0 && va == 1);
	T_ASSERT(queued(a, true) == 0 && queued(b, true) == 0);
	gmp_select_case snd[] = {
		{ .chan = a, .op = GMP_SELECT_RECV, .elem = &va },
		{ .chan = b, .op = GMP_SELECT_SEND, .elem = &va },
	};
	T_ASSERT(gmp_select(snd, 2, -1) == 1);
	T_ASSERT(snd[1].result == -EPIPE);
	gmp_chan_free(a);
	gmp_chan_free(b);
}

static void test_chan_select_woken_by_close(void **s)
{
	(void)s;
	run_tasks(2, select_close, NULL);
}

/* More cases than fit on the stack (the heap-sorted path), several on
 * each channel, with values flowing through every one of them. */
enum { MANY_CHANS = 12, MANY_CASES = 48, MANY_ROUNDS = 3000 };

static gmp_chan *many[MANY_CHANS];

static void many_feeder(void *arg)
{
	int i = (int)(intptr_t)arg;
	for (int r = 0; r < MANY_ROUNDS / MANY_CHANS; r++)
		T_ASSERT(gmp_chan_send(many[i], &i) == 0);
}

static void many_selector(void *arg)
{
	int *counts = arg;
	int vals[MANY_CASES];
	gmp_select_case cs[MANY_CASES];
	for (int i = 0; i < MANY_CASES; i++)
		cs[i] = (gmp_select_case){ .chan = many[i % MANY_CHANS],
					   .op = GMP_SELECT_RECV,
					   .elem = &vals[i] };
	for (int r = 0; r < MANY_ROUNDS / MANY_CHANS * MANY_CHANS; r++) {
		int k = gmp_select(cs, MANY_CASES, -1);
		T_ASSERT(k >= 0 && k < MANY_CASES && cs[k].result == 0);
		T_ASSERT(vals[k] == k % MANY_CHANS);
		counts[k]++;
	}
}

static void many_start(void *arg)
{
	gmp_go(many_selector, arg);
	for (int i = 0; i < MANY_CHANS; i++)
		gmp_go(many_feeder, (void *)(intptr_t)i);
}

static void test_chan_select_many_cases(void **s)
{
	(void)s;
	int counts[MANY_CASES] = { 0 };
	for (int i = 0; i < MANY_CHANS; i++)
		many[i] = gmp_chan_new(sizeof(int), i % 2);
	run_tasks(2, many_start, counts);
	int total = 0, used = 0;
	for (int i = 0; i < MANY_CASES; i++) {
		total += counts[i];
		used += counts[i] > 0;
	}
	assert_int_equal(total, MANY_ROUNDS / MANY_CHANS * MANY_CHANS);
	assert_true(used > MANY_CASES / 2);
	for (int i = 0; i < MANY_CHANS; i++)
		gmp_chan_free(many[i]);
}

GMP_TEST_MAIN(
	cmocka_unit_test(test_chan_fifo_buffered),
	cmocka_unit_test(test_chan_fifo_many_senders_buffered_1),
	cmocka_unit_test(test_chan_fifo_many_senders_buffered_2),
	cmocka_unit_test(test_chan_fifo_many_senders_buffered_4),
	cmocka_unit_test(test_chan_fifo_many_senders_unbuffered_1),
	cmocka_unit_test(test_chan_fifo_many_senders_unbuffered_2),
	cmocka_unit_test(test_chan_fifo_many_senders_unbuffered_4),
	cmocka_unit_test(test_chan_unbuffered_rendezvous_1),
	cmocka_unit_test(test_chan_unbuffered_rendezvous_2),
	cmocka_unit_test(test_chan_unbuffered_rendezvous_thread_sender),
	cmocka_unit_test(test_chan_unbuffered_thread_blocks_until_received),
	cmocka_unit_test(test_chan_close_wakes_blocked_sender),
	cmocka_unit_test(test_chan_close_wakes_blocked_receivers),
	cmocka_unit_test(test_chan_close_drains_then_epipe),
	cmocka_unit_test(test_chan_close_wakes_threads),
	cmocka_unit_test(test_chan_close_twice_aborts),
	cmocka_unit_test(test_chan_close_nil_aborts),
	cmocka_unit_test(test_chan_free_with_waiters_aborts),
	cmocka_unit_test(test_chan_try),
	cmocka_unit_test(test_chan_zero_size_elements),
	cmocka_unit_test(test_chan_threads_and_tasks_unbuffered_1),
	cmocka_unit_test(test_chan_threads_and_tasks_unbuffered_2),
	cmocka_unit_test(test_chan_threads_and_tasks_unbuffered_4),
	cmocka_unit_test(test_chan_threads_and_tasks_buffered_1),
	cmocka_unit_test(test_chan_threads_and_tasks_buffered_2),
	cmocka_unit_test(test_chan_threads_and_tasks_buffered_4),
	cmocka_unit_test(test_chan_select_fairness),
	cmocka_unit_test(test_chan_select_fairness_send_and_same_channel),
	cmocka_unit_test(test_chan_select_default),
	cmocka_unit_test(test_chan_select_bad_arguments),
	cmocka_unit_test(test_chan_select_timeout_task),
	cmocka_unit_test(test_chan_select_timeout_thread),
	cmocka_unit_test(test_chan_select_timeout_races_value_2),
	cmocka_unit_test(test_chan_select_send_and_recv_1),
	cmocka_unit_test(test_chan_select_send_and_recv_2),
	cmocka_unit_test(test_chan_select_send_and_recv_4),
	cmocka_unit_test(test_chan_select_against_select_1),
	cmocka_unit_test(test_chan_select_against_select_2),
	cmocka_unit_test(test_chan_select_against_select_4),
	cmocka_unit_test(test_chan_select_woken_by_close),
	cmocka_unit_test(test_chan_select_many_cases))
