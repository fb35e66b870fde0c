/* Channels (Go's hchan) and what select.c shares with chan.c: the channel
 * structure, the queue entry (gmp__sudog) and its queue operations, and the
 * buffer and direct-handoff helpers both files use. design.md §9.6 is the
 * contract; §28.9 gives Go's invariants, which hold at every unlock, and
 * the rules for queue entries: everything about a queued entry is
 * protected by its channel's lock, and an entry and its waiter (wait.h)
 * live on the sleeper's stack, so a waker is done with both before it
 * wakes the sleeper.
 */
#ifndef GMP_CHAN_H
#define GMP_CHAN_H

#include <string.h>

#include "internal.h"
#include "wait.h"

typedef struct gmp__sudog gmp__sudog;
struct gmp__sudog {
	gmp__waiter *w;          /* the sleeper; immutable while queued */
	gmp_chan *c;             /* the channel whose queue holds it */
	void *elem;              /* SEND: the value (NULL: a zero value);
				    RECV: where it goes (NULL: dropped) */
	gmp__sudog *next, *prev; /* links in c->recvq or c->sendq; c->lock */
	int32_t casei;           /* select: its case index; -1 otherwise */
	bool queued;             /* on a queue now; c->lock */
	bool shared;             /* the waiter may be won elsewhere (select):
				    claim it before use */
};

/* A FIFO of entries. `first` is also read without the lock by the try_
 * fast paths (a hint only), so it is written with relaxed atomic stores. */
typedef struct gmp__waitq {
	gmp__sudog *volatile first;
	gmp__sudog *last;
} gmp__waitq;

struct gmp_chan {
	gmp__mutex lock;
	/* closed, qcount and the queues' `first` change only under the lock,
	 * with relaxed atomic stores, so that the try_ fast paths in chan.c
	 * (their only partners) may peek at them without it: a peek needs a
	 * value that held at some moment, never an ordering with other data. */
	volatile uint32_t closed;
	volatile uint64_t qcount; /* elements in buf */
	size_t elem_size;         /* immutable */
	size_t cap;               /* immutable: ring size (0: unbuffered) */
	size_t sendx, recvx;      /* ring positions; lock */
	gmp__waitq recvq, sendq;  /* lock */
	unsigned char *buf;       /* cap * elem_size bytes after the struct;
				     immutable */
};

/* For a channel inside another object (a gmp_timer's): the bytes one of
 * cap elements of elem_size takes, 0 if that is absurd; making one in
 * zeroed memory of that size, 16-byte aligned; and gmp_chan_free's check
 * that nobody waits on it (aborting if someone does), freeing nothing. */
size_t gmp__chan_bytes(size_t elem_size, size_t cap);
gmp_chan *gmp__chan_init(void *mem, size_t elem_size, size_t cap);
void gmp__chan_check_unused(gmp_chan *c);

/* ---- queues (c->lock held) ------------------------------------------------ */

static inline void gmp__waitq_push(gmp__waitq *q, gmp__sudog *sg)
{
	sg->next = NULL;
	sg->prev = q->last;
	if (q->last)
		q->last->next = sg;
	else
		gmp__storep_rlx(&q->first, sg);
	q->last = sg;
	sg->queued = true;
}

/* Unlinks sg if it is still queued (a waker may have taken it). */
static inline void gmp__waitq_remove(gmp__waitq *q, gmp__sudog *sg)
{
	if (!sg->queued)
		return;
	if (sg->prev)
		sg->prev->next = sg->next;
	else
		gmp__storep_rlx(&q->first, sg->next);
	if (sg->next)
		sg->next->prev = sg->prev;
	else
		q->last = sg->prev;
	sg->next = sg->prev = NULL;
	sg->queued = false;
}

/* Takes the first entry whose waiter we can own (see the top comment),
 * or NULL. Entries of selects that were already won elsewhere, or timed
 * out, are dropped on the way. */
static inline gmp__sudog *gmp__waitq_pop(gmp__waitq *q)
{
	for (;;) {
		gmp__sudog *sg = q->first;
		if (!sg)
			return NULL;
		gmp__storep_rlx(&q->first, sg->next);
		if (sg->next)
			sg->next->prev = NULL;
		else
			q->last = NULL;
		sg->next = sg->prev = NULL;
		sg->queued = false;
		if (!sg->shared || gmp__waiter_claim(sg->w))
			return sg;
	}
}

/* ---- moving elements (c->lock held) --------------------------------------- */

static inline unsigned char *gmp__chanbuf(gmp_chan *c, size_t i)
{
	return c->buf + i * c->elem_size;
}

/* dst = src, where a NULL src is a zero value and a NULL dst drops it.
 * The common small sizes are copied inline rather than through a call. */
static inline void gmp__chan_copy(gmp_chan *c, void *dst, const void *src)
{
	size_t n = c->elem_size;
	if (!dst || !n)
		return;
	if (!src) {
		memset(dst, 0, n);
		return;
	}
	switch (n) {
	case 4:
		memcpy(dst, src, 4);
		break;
	case 8:
		memcpy(dst, src, 8);
		break;
	case 16:
		memcpy(dst, src, 16);
		break;
	default:
		memcpy(dst, src, n);
	}
}

static inline void gmp__chan_qcount_set(gmp_chan *c, uint64_t n)
{
	gmp__store64_rlx(&c->qcount, n);
}

/* Appends *elem to the buffer (qcount < cap). */
static inline void gmp__chan_buf_put(gmp_chan *c, const void *elem)
{
	gmp__chan_copy(c, gmp__chanbuf(c, c->sendx), elem);
	if (++c->sendx == c->cap)
		c->sendx = 0;
	gmp__chan_qcount_set(c, c->qcount + 1);
}

/* Takes the oldest buffered element into *elem (qcount > 0). */
static inline void gmp__chan_buf_take(gmp_chan *c, void *elem)
{
	gmp__chan_copy(c, elem, gmp__chanbuf(c, c->recvx));
	if (++c->recvx == c->cap)
		c->recvx = 0;
	gmp__chan_qcount_set(c, c->qcount - 1);
}

/* A sender meets the waiting receiver sg (dequeued and owned): the value
 * goes straight into the receiver's slot, bypassing the buffer (which is
 * empty, or sg would not be waiting). The caller wakes sg->w after it has
 * dropped the lock. */
static inline void gmp__chan_send_direct(gmp_chan *c, gmp__sudog *sg,
					 const void *elem)
{
	gmp__chan_copy(c, sg->elem, elem);
	sg->w->result = 0;
	sg->w->aux = sg;
}

/* A receiver meets the waiting sender sg (dequeued and owned). Unbuffered:
 * take the sender's value. Buffered, so full: take the oldest element and
 * put the sender's value in the slot it frees, which is the ring's tail,
 * so FIFO order holds. The caller wakes sg->w after dropping the lock. */
static inline void gmp__chan_recv_direct(gmp_chan *c, gmp__sudog *sg,
					 void *elem)
{
	if (c->cap == 0) {
		gmp__chan_copy(c, elem, sg->elem);
	} else {
		unsigned char *slot = gmp__chanbuf(c, c->recvx);
		gmp__chan_copy(c, elem, slot);
		gmp__chan_copy(c, slot, sg->elem);
		if (++c->recvx == c->cap)
			c->recvx = 0;
		c->sendx = c->recvx;
	}
	sg->w->result = 0;
	sg->w->aux = sg;
}

#endif
