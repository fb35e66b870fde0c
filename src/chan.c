/* Channels (design.md §9.6 the contract, §28.9 the design): gmp_chan_new,
 * the blocking and try_ sends and receives, close and free. The structure
 * and the pieces select.c shares are in chan.h; sleeping and waking go
 * through waiters (wait.h).
 *
 * A blocking send or receive is a switch point even when it need not
 * block (design.md §2.2), so a task that keeps a buffered channel busy
 * still yields when sysmon says its slice is over. The try_ calls never
 * switch.
 */
#include <limits.h>
#include <stdint.h>

#include "chan.h"
#include "preempt.h"
#include "task.h"
#include "wait.h"

/* gmp__waiter_sleep's unlock function for one channel: lock is &c->lock. */
static void chan_unlock(void *lock)
{
	gmp__unlock(lock);
}

/* park_m's unlock function for a task parking on a channel (chan_park):
 * lock is &c->lock. */
static bool chan_park_unlock(gmp_g *g, void *lock)
{
	(void)g;
	gmp__unlock(lock);
	return true;
}

/* gmp__waiter_sleep(w, chan_unlock, &c->lock, reason, -1) for a waiter
 * queued on c, with the common case (a task) parked straight from here,
 * the channel's lock dropped by park_m's own unlock call: one indirection
 * fewer on every blocking send and receive. */
static inline __attribute__((always_inline)) void
chan_park(gmp__waiter *w, gmp_chan *c, uint32_t reason)
{
	if (GMP__LIKELY(w->g != NULL)) {
		gmp__park_g(w->g, chan_park_unlock, &c->lock, reason);
		/* Only a waker readies a task waiter without a deadline.
		 * acquire: pairs with the waker's release of the state, which
		 * it stores after w->result and the value. */
		(void)gmp__load32_acq(&w->state);
		return;
	}
	gmp__waiter_sleep(w, chan_unlock, &c->lock, reason, -1);
}

static void unlock_nothing(void *lock)
{
	(void)lock;
}

/* A send or receive on a NULL channel, like Go's nil channel, blocks
 * forever: a task parks, a thread sleeps on its futex word. */
static _Noreturn void block_forever(uint32_t reason)
{
	gmp__waiter w;
	gmp__waiter_init(&w);
	gmp__waiter_sleep(&w, unlock_nothing, NULL, reason, -1);
	gmp__throw("a task blocked on a nil channel was woken");
}

/* The buffer follows the struct, aligned for any element type. */
static size_t chan_hdr(void)
{
	return (sizeof(gmp_chan) + 15) & ~(size_t)15;
}

size_t gmp__chan_bytes(size_t elem_size, size_t cap)
{
	size_t hdr = chan_hdr();
	if (elem_size && cap > ((size_t)PTRDIFF_MAX - hdr) / elem_size)
		return 0;
	return hdr + elem_size * cap;
}

gmp_chan *gmp__chan_init(void *mem, size_t elem_size, size_t cap)
{
	gmp_chan *c = mem;
	c->elem_size = elem_size;
	c->cap = cap;
	c->buf = (unsigned char *)c + chan_hdr();
	return c;
}

GMP_EXTERN gmp_chan *gmp_chan_new(size_t elem_size, size_t cap)
{
	size_t bytes = gmp__chan_bytes(elem_size, cap);
	if (!bytes)
		return NULL;
	int saved = errno;
	void *mem = gmp__calloc(1, bytes);
	errno = saved;
	return mem ? gmp__chan_init(mem, elem_size, cap) : NULL;
}

/* Both directions may ready a partner into the caller's P or park:
 * inside the runtime (preempt.h), for the whole body, so that the public
 * calls tail-call them. */
static int chan_send(gmp_chan *c, const void *elem, bool block)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	if (GMP__UNLIKELY(!c)) {
		if (!block)
			return -EAGAIN;
		block_forever(GMP__WAIT_CHAN_SEND);
	}
	/* A failing try_send without the lock: not closed, then not ready.
	 * A channel never reopens and "ready to send" can only be ended by
	 * a close, so the two reads describe one moment at which the send
	 * could not proceed, whichever order they happen in. */
	if (!block && !gmp__load32_rlx(&c->closed) &&
	    (c->cap == 0 ? gmp__loadp_rlx(&c->recvq.first) == NULL
			 : gmp__load64_rlx(&c->qcount) == c->cap))
		return -EAGAIN;

	gmp__lock(&c->lock);
	if (c->closed) {
		gmp__unlock(&c->lock);
		return -EPIPE;
	}
	gmp__sudog *sg = gmp__waitq_pop(&c->recvq);
	if (sg) {
		gmp__chan_send_direct(c, sg, elem);
		gmp__waiter *w = sg->w;
		gmp__unlock(&c->lock);
		gmp__waiter_wake_by(w, stay.g);
		if (block)
			gmp_preempt_point();
		return 0;
	}
	if (c->qcount < c->cap) {
		gmp__chan_buf_put(c, elem);
		gmp__unlock(&c->lock);
		if (block)
			gmp_preempt_point();
		return 0;
	}
	if (!block) {
		gmp__unlock(&c->lock);
		return -EAGAIN;
	}

	gmp__waiter w;
	gmp__waiter_init_as(&w, stay.g);
	gmp__sudog me = { .w = &w, .c = c, .elem = (void *)elem, .casei = -1 };
	gmp__waitq_push(&c->sendq, &me);
	chan_park(&w, c, GMP__WAIT_CHAN_SEND);
	/* A receiver took the value (0), or close refused it (-EPIPE). */
	return w.result;
}

static int chan_recv(gmp_chan *c, void *elem, bool block)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	if (GMP__UNLIKELY(!c)) {
		if (!block)
			return -EAGAIN;
		block_forever(GMP__WAIT_CHAN_RECV);
	}
	/* A failing try_recv without the lock: not ready, then not closed.
	 * Here the order matters (acquire on the first read keeps the second
	 * after it): an empty channel can become closed-and-empty, so seeing
	 * "open" after "empty" proves both held at the first read. */
	if (!block &&
	    (c->cap == 0 ? gmp__loadp_acq(&c->sendq.first) == NULL
			 : gmp__load64_acq(&c->qcount) == 0) &&
	    !gmp__load32_rlx(&c->closed))
		return -EAGAIN;

	gmp__lock(&c->lock);
	if (c->closed && c->qcount == 0) {
		gmp__unlock(&c->lock);
		gmp__chan_copy(c, elem, NULL);
		return -EPIPE;
	}
	gmp__sudog *sg = gmp__waitq_pop(&c->sendq);
	if (sg) {
		gmp__chan_recv_direct(c, sg, elem);
		gmp__waiter *w = sg->w;
		gmp__unlock(&c->lock);
		gmp__waiter_wake_by(w, stay.g);
		if (block)
			gmp_preempt_point();
		return 0;
	}
	if (c->qcount > 0) {
		gmp__chan_buf_take(c, elem);
		gmp__unlock(&c->lock);
		if (block)
			gmp_preempt_point();
		return 0;
	}
	if (!block) {
		gmp__unlock(&c->lock);
		return -EAGAIN;
	}

	gmp__waiter w;
	gmp__waiter_init_as(&w, stay.g);
	gmp__sudog me = { .w = &w, .c = c, .elem = elem, .casei = -1 };
	gmp__waitq_push(&c->recvq, &me);
	chan_park(&w, c, GMP__WAIT_CHAN_RECV);
	/* A sender filled *elem (0), or close zeroed it (-EPIPE). */
	return w.result;
}

GMP_EXTERN int gmp_chan_send(gmp_chan *c, const void *elem)
{
	return chan_send(c, elem, true);
}

GMP_EXTERN int gmp_chan_recv(gmp_chan *c, void *elem)
{
	return chan_recv(c, elem, true);
}

GMP_EXTERN int gmp_chan_try_send(gmp_chan *c, const void *elem)
{
	return chan_send(c, elem, false);
}

GMP_EXTERN int gmp_chan_try_recv(gmp_chan *c, void *elem)
{
	return chan_recv(c, elem, false);
}

/* Moves every entry of q whose waiter we can own onto the list *tail,
 * with result -EPIPE (receivers' slots zeroed). */
static gmp__sudog **close_queue(gmp_chan *c, gmp__waitq *q, bool recv,
				gmp__sudog **tail)
{
	gmp__sudog *sg;
	while ((sg = gmp__waitq_pop(q)) != NULL) {
		if (recv)
			gmp__chan_copy(c, sg->elem, NULL);
		sg->w->result = -EPIPE;
		sg->w->aux = sg;
		/* sg is off the queue: its link is ours until we wake it. */
		*tail = sg;
		tail = &sg->next;
	}
	return tail;
}

static void chan_close(gmp_chan *c)
{
	/* readies every waiter: inside the runtime (preempt.h) */
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__lock(&c->lock);
	if (c->closed) {
		gmp__unlock(&c->lock);
		gmp__throw("close of closed channel");
	}
	gmp__store32_rlx(&c->closed, 1);
	/* Collect everyone under the lock, wake them after: each waiter
	 * appears once (a select's other entries here fail the claim). */
	gmp__sudog *list = NULL;
	gmp__sudog **tail = close_queue(c, &c->recvq, true, &list);
	close_queue(c, &c->sendq, false, tail);
	gmp__unlock(&c->lock);
	while (list) {
		gmp__sudog *sg = list;
		list = sg->next; /* before the wake: then sg is not ours */
		gmp__waiter_wake_by(sg->w, stay.g);
	}
}

GMP_EXTERN void gmp_chan_close(gmp_chan *c)
{
	if (!c)
		gmp__throw("close of nil channel");
	chan_close(c);
}

void gmp__chan_check_unused(gmp_chan *c)
{
	gmp__lock(&c->lock);
	bool recv = c->recvq.first != NULL, send = c->sendq.first != NULL;
	gmp__unlock(&c->lock);
	if (recv || send)
		gmp__throw("free of a channel with %s still waiting on it",
			   recv ? "receivers" : "senders");
}

GMP_EXTERN void gmp_chan_free(gmp_chan *c)
{
	if (!c)
		return;
	gmp__chan_check_unused(c);
	gmp__free(c);
}
