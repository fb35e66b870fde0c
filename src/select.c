/* gmp_select (Go's selectgo): wait for whichever of several channel
 * operations can proceed first. design.md §9.6 is the contract; §28.10 the
 * design: one waiter for the whole select and one queue entry (chan.h's
 * gmp__sudog) per case, which every waker and the deadline claim through
 * one CAS; the random poll order, the lock order by channel address, and
 * the three passes (look, queue and sleep, unlink what no waker took).
 */
#include <limits.h>

#include "chan.h"
#include "preempt.h"
#include "scheduler.h"
#include "wait.h"

/* Up to this many cases, the select's scratch arrays live on the stack. */
enum { SELECT_STACK_CASES = 16 };

/* ---- random ---------------------------------------------------------------- */

static __thread uint64_t thread_rand __attribute__((tls_model("initial-exec")));

/* A random 32-bit number: the M's generator on the runtime's threads, a
 * thread-local xorshift64* elsewhere. noinline: a task that moves to
 * another thread must not reuse a thread-local address computed before
 * (in practice only foreign threads, which never move, reach it). */
static __attribute__((noinline)) uint32_t sel_rand(void)
{
	gmp__m *m = gmp__getm();
	if (m)
		return gmp__cheaprand(m);
	uint64_t x = thread_rand;
	if (!x)
		x = ((uint64_t)(uintptr_t)&thread_rand *
		     0x9E3779B97F4A7C15ULL) ^
		    (uint64_t)gmp__nanotime() ^ 1;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	thread_rand = x;
	return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32);
}

/* Uniform in [0, n) (Lemire's multiply-shift; the bias for n far below
 * 2^32 is negligible). */
static uint32_t sel_randn(uint32_t n)
{
	return (uint32_t)(((uint64_t)sel_rand() * n) >> 32);
}

/* ---- locking --------------------------------------------------------------- */

struct sel {
	gmp_select_case *cases;
	uint32_t *lockorder; /* case indices, by channel address */
	uint32_t n;          /* cases with a channel */
	gmp_g *self;         /* the caller, as its gmp__stay has it */
};

static gmp_chan *chan_at(const struct sel *s, uint32_t k)
{
	return s->cases[s->lockorder[k]].chan;
}

static void sellock(const struct sel *s)
{
	gmp_chan *last = NULL;
	for (uint32_t k = 0; k < s->n; k++) {
		gmp_chan *c = chan_at(s, k);
		if (c != last)
			gmp__lock(&c->lock);
		last = c;
	}
}

/* Unlocks in reverse order. As gmp__waiter_sleep's unlock function it may
 * run on g0 while the select's task, once a waker readied it, already
 * runs on another thread. That is safe because the task's first step is
 * sellock, which cannot get past the lowest lock, released last; and after
 * that last release nothing of the select's frame is touched. */
static void selunlock(void *arg)
{
	const struct sel *s = arg;
	for (uint32_t k = s->n; k-- > 0;) {
		gmp_chan *c = chan_at(s, k);
		if (k > 0 && c == chan_at(s, k - 1))
			continue; /* the same channel: unlocked at k - 1 */
		gmp__unlock(&c->lock);
	}
}

static void unlock_nothing(void *arg)
{
	(void)arg;
}

/* ---- ordering ---------------------------------------------------------------- */

static uintptr_t key(const gmp_select_case *cases, uint32_t i)
{
	return (uintptr_t)cases[i].chan;
}

/* Sorts idx[0..n) by channel address. Small n: insertion sort, stable.
 * Otherwise heapsort, n log n and no extra memory. Either way the input is
 * the random poll order, so equal channels end up in random order. */
static void sort_by_chan(const gmp_select_case *cases, uint32_t *idx,
			 uint32_t n)
{
	if (n <= SELECT_STACK_CASES) {
		for (uint32_t i = 1; i < n; i++) {
			uint32_t x = idx[i], j = i;
			for (; j > 0 && key(cases, idx[j - 1]) > key(cases, x);
			     j--)
				idx[j] = idx[j - 1];
			idx[j] = x;
		}
		return;
	}
	/* Build a max-heap, then move the maximum to the end n-1 times. */
	for (uint32_t start = n / 2; start-- > 0;) {
		uint32_t j = start, x = idx[j];
		for (;;) {
			uint32_t c = 2 * j + 1;
			if (c >= n)
				break;
			if (c + 1 < n &&
			    key(cases, idx[c]) < key(cases, idx[c + 1]))
				c++;
			if (key(cases, x) >= key(cases, idx[c]))
				break;
			idx[j] = idx[c];
			j = c;
		}
		idx[j] = x;
	}
	for (uint32_t end = n - 1; end > 0; end--) {
		uint32_t x = idx[end], j = 0;
		idx[end] = idx[0];
		for (;;) {
			uint32_t c = 2 * j + 1;
			if (c >= end)
				break;
			if (c + 1 < end &&
			    key(cases, idx[c]) < key(cases, idx[c + 1]))
				c++;
			if (key(cases, x) >= key(cases, idx[c]))
				break;
			idx[j] = idx[c];
			j = c;
		}
		idx[j] = x;
	}
}

/* ---- the select ------------------------------------------------------------- */

/* No case has a channel: Go's select{} (forever) or a plain timeout. */
static int select_nothing(int64_t deadline)
{
	gmp__waiter w;
	gmp__waiter_init(&w);
	gmp__waiter_sleep(&w, unlock_nothing, NULL, GMP__WAIT_SELECT_NOCASES,
			  deadline);
	if (deadline < 0)
		gmp__throw("a select with no cases was woken");
	return -ETIMEDOUT;
}

/* Pass 1 (every lock held): runs the first case in poll order that can
 * proceed. Returns its index and leaves every lock released (and any
 * partner woken), or returns -1 with the locks still held. */
static int try_cases(struct sel *s, const uint32_t *pollorder)
{
	gmp_select_case *cases = s->cases;
	for (uint32_t k = 0; k < s->n; k++) {
		uint32_t i = pollorder[k];
		gmp_select_case *cs = &cases[i];
		gmp_chan *c = cs->chan;
		gmp__sudog *sg;
		if (cs->op == GMP_SELECT_RECV) {
			if ((sg = gmp__waitq_pop(&c->sendq)) != NULL) {
				gmp__chan_recv_direct(c, sg, cs->elem);
				gmp__waiter *w = sg->w;
				selunlock(s);
				gmp__waiter_wake_by(w, s->self);
				cs->result = 0;
				return (int)i;
			}
			if (c->qcount > 0) {
				gmp__chan_buf_take(c, cs->elem);
				selunlock(s);
				cs->result = 0;
				return (int)i;
			}
			if (c->closed) {
				selunlock(s);
				gmp__chan_copy(c, cs->elem, NULL);
				cs->result = -EPIPE;
				return (int)i;
			}
		} else {
			if (c->closed) {
				selunlock(s);
				cs->result = -EPIPE;
				return (int)i;
			}
			if ((sg = gmp__waitq_pop(&c->recvq)) != NULL) {
				gmp__chan_send_direct(c, sg, cs->elem);
				gmp__waiter *w = sg->w;
				selunlock(s);
				gmp__waiter_wake_by(w, s->self);
				cs->result = 0;
				return (int)i;
			}
			if (c->qcount < c->cap) {
				gmp__chan_buf_put(c, cs->elem);
				selunlock(s);
				cs->result = 0;
				return (int)i;
			}
		}
	}
	return -1;
}

static gmp__waitq *queue_of(gmp_select_case *cs)
{
	return cs->op == GMP_SELECT_RECV ? &cs->chan->recvq : &cs->chan->sendq;
}

GMP_EXTERN int gmp_select(gmp_select_case *cases, size_t n, int64_t timeout_ns)
{
	/* Inside the runtime (preempt.h): a select may ready a partner into
	 * the caller's P, or park. */
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	if (n > INT_MAX || (n > 0 && !cases))
		return -EINVAL;
	uint32_t nn = 0;
	for (size_t i = 0; i < n; i++) {
		if (cases[i].op != GMP_SELECT_RECV &&
		    cases[i].op != GMP_SELECT_SEND)
			return -EINVAL;
		nn += cases[i].chan != NULL;
	}
	int64_t deadline = -1;
	if (timeout_ns > 0) {
		int64_t now = gmp__nanotime();
		if (timeout_ns <= INT64_MAX - now)
			deadline = now + timeout_ns;
	}
	if (nn == 0)
		return timeout_ns == 0 ? -EAGAIN : select_nothing(deadline);

	/* Scratch: poll order, lock order and one queue entry per case. */
	uint32_t pollbuf[SELECT_STACK_CASES], lockbuf[SELECT_STACK_CASES];
	gmp__sudog sgbuf[SELECT_STACK_CASES];
	uint32_t *pollorder = pollbuf, *lockorder = lockbuf;
	gmp__sudog *sgs = sgbuf;
	void *heap = NULL;
	if (nn > SELECT_STACK_CASES) {
		int saved = errno;
		heap = gmp__malloc((size_t)nn *
				   (2 * sizeof(uint32_t) + sizeof(gmp__sudog)));
		errno = saved;
		if (!heap)
			return -ENOMEM;
		sgs = heap;
		pollorder = (uint32_t *)(sgs + nn);
		lockorder = pollorder + nn;
	}

	/* Inside-out Fisher-Yates over the cases that have a channel. */
	uint32_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!cases[i].chan)
			continue;
		uint32_t j = sel_randn(k + 1);
		pollorder[k] = pollorder[j];
		pollorder[j] = (uint32_t)i;
		k++;
	}
	memcpy(lockorder, pollorder, nn * sizeof *lockorder);
	sort_by_chan(cases, lockorder, nn);

	struct sel s = { cases, lockorder, nn, stay.g };
	sellock(&s);
	int ret = try_cases(&s, pollorder);
	if (ret >= 0) {
		if (timeout_ns != 0)
			gmp_preempt_point(); /* a switch point, like a send */
		goto out;
	}
	if (timeout_ns == 0) {
		selunlock(&s);
		ret = -EAGAIN;
		goto out;
	}

	/* Pass 2: queue on every channel, in lock order, and sleep. */
	gmp__waiter w;
	gmp__waiter_init_as(&w, stay.g);
	for (k = 0; k < nn; k++) {
		gmp_select_case *cs = &cases[lockorder[k]];
		gmp__sudog *sg = &sgs[k];
		*sg = (gmp__sudog){ .w = &w,
				    .c = cs->chan,
				    .elem = cs->elem,
				    .casei = (int32_t)lockorder[k],
				    .shared = true };
		gmp__waitq_push(queue_of(cs), sg);
	}
	bool woken = gmp__waiter_sleep(&w, selunlock, &s, GMP__WAIT_SELECT,
				       deadline);

	/* Pass 3: unlink whatever no waker took (the winner's entry is off
	 * its queue already; losers' may or may not be). */
	sellock(&s);
	for (k = 0; k < nn; k++)
		gmp__waitq_remove(queue_of(&cases[lockorder[k]]), &sgs[k]);
	selunlock(&s);
	if (woken) {
		const gmp__sudog *won = w.aux;
		ret = won->casei;
		cases[ret].result = w.result;
	} else {
		ret = -ETIMEDOUT;
	}
out:
	gmp__free(heap);
	return ret;
}
