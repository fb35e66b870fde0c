/* Run queue slow paths: overflow to the global queue and stealing; and
 * the global run queue. The protocol is described in runq.h; how the
 * scheduler uses them, in design.md §23. */
#include <string.h>

#include "export_test.h"
#include "runq.h"

uint32_t gmp__prand(gmp__p *p)
{
	/* xorshift32; the state is the owner's, seeded from the id */
	uint32_t x = p->rand ? p->rand : (uint32_t)p->id * 2654435761u + 1;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	p->rand = x;
	return x;
}

/* The ring is full: move its first half plus g to the global queue in one
 * batch, under one sched.lock. Returns false if a thief moved the head
 * meanwhile (the caller retries the fast path, which now has room). */
bool gmp__runq_putslow(gmp__p *p, gmp_g *g, uint32_t h, uint32_t t)
{
	gmp_g *batch[GMP__RUNQ_SIZE / 2 + 1];
	uint32_t n = (t - h) / 2;
	if (n != GMP__RUNQ_SIZE / 2)
		gmp__throw("runq_putslow: queue is not full (%u of %u)", t - h,
			   GMP__RUNQ_SIZE);
	for (uint32_t i = 0; i < n; i++)
		batch[i] = gmp__loadp_rlx(&p->runq[(h + i) % GMP__RUNQ_SIZE]);
	/* release: we are done reading these slots (pairs with runq_put's
	 * head acquire); a thief that raced us makes the CAS fail. */
	if (!gmp__cas32_rel(&p->runqhead, h, h + n))
		return false;
	batch[n] = g;
	if (GMP__UNLIKELY(gmp__cfg.randomize)) {
		for (uint32_t i = 1; i <= n; i++) {
			uint32_t j = gmp__prand(p) % (i + 1);
			gmp_g *tmp = batch[i];
			batch[i] = batch[j];
			batch[j] = tmp;
		}
	}
	gmp__lock(&gmp__sched.lock);
	gmp__globrunq_putarray(batch, n + 1);
	gmp__unlock(&gmp__sched.lock);
	/* The running task makes work faster than this P runs it (a spawn
	 * storm): ask it to yield at its next switch point, so that what it
	 * made runs while its stacks are still in cache, instead of piling up
	 * for a whole time slice. On g0 the flag is cleared by execute(). */
	gmp__store32_rlx(gmp__tls_preempt_flag(), 1);
	return true;
}

/* Puts a list of Gs on p's ring (owner only); what does not fit goes to the
 * global queue. */
void gmp__runq_putbatch(gmp__p *p, gmp__gqueue *q)
{
	uint32_t h = gmp__load32_acq(&p->runqhead);
	uint32_t t = p->runqtail, n = 0;
	while (q->head && t - h + n < GMP__RUNQ_SIZE) {
		gmp_g *g = gmp__gq_pop(q);
		gmp__storep_rlx(&p->runq[(t + n) % GMP__RUNQ_SIZE], g);
		n++;
	}
	if (n)
		gmp__store32_rel(&p->runqtail, t + n); /* publishes the slots */
	if (q->head) {
		gmp__lock(&gmp__sched.lock);
		gmp__globrunq_putbatch(q);
		gmp__unlock(&gmp__sched.lock);
	}
}

/* Whether p has nothing to run. Racy by nature, but it never reports empty
 * for a queue that was non-empty throughout the call: head, tail and
 * runnext are read as one consistent snapshot (tail re-read to confirm). */
bool gmp__runq_empty(gmp__p *p)
{
	for (;;) {
		uint32_t h = gmp__load32_acq(&p->runqhead);
		uint32_t t = gmp__load32_acq(&p->runqtail);
		gmp_g *next = gmp__loadp_acq(&p->runnext);
		if (t == gmp__load32_acq(&p->runqtail))
			return h == t && next == NULL;
	}
}

uint32_t gmp__runq_len(gmp__p *p)
{
	uint32_t h = gmp__load32_acq(&p->runqhead);
	uint32_t t = gmp__load32_acq(&p->runqtail);
	uint32_t n = t - h;
	if (n > GMP__RUNQ_SIZE)
		n = 0; /* torn snapshot */
	return n + (gmp__loadp_rlx(&p->runnext) != NULL);
}

/* Copies up to half of p2's ring into batch[] (a ring of the same size)
 * starting at index bh, and commits by advancing p2's head. Returns how
 * many were taken. With steal_runnext, an empty ring gives up its runnext
 * under Go's rules: only on the thief's last attempt, and, if p2's owner is
 * running, after a short sleep that lets the owner schedule the G it just
 * readied itself (stealing it at once would ping-pong it between Ps). */
static uint32_t runq_grab(gmp__p *p2, gmp_g *volatile *batch, uint32_t bh,
			  bool steal_runnext)
{
	for (;;) {
		/* acquire both: pairs with the owner's tail release (the slots
		 * are published) and with other thieves' head releases. */
		uint32_t h = gmp__load32_acq(&p2->runqhead);
		uint32_t t = gmp__load32_acq(&p2->runqtail);
		uint32_t n = t - h;
		n = n - n / 2;
		if (n == 0) {
			if (steal_runnext) {
				gmp_g *next = gmp__loadp_rlx(&p2->runnext);
				if (next != NULL) {
					if (gmp__load32_rlx(&p2->status) ==
					    GMP__P_RUNNING)
						gmp__usleep(3);
					/* acquire: pairs with the owner's
					 * CAS that stored it. */
					if (!gmp__casp_acq(&p2->runnext, next,
							   NULL))
						continue;
					gmp__storep_rlx(
						&batch[bh % GMP__RUNQ_SIZE],
						next);
					return 1;
				}
			}
			return 0;
		}
		if (n > GMP__RUNQ_SIZE / 2)
			continue; /* h and t read inconsistently; retry */
		for (uint32_t i = 0; i < n; i++) {
			gmp_g *g = gmp__loadp_rlx(
				&p2->runq[(h + i) % GMP__RUNQ_SIZE]);
			gmp__storep_rlx(&batch[(bh + i) % GMP__RUNQ_SIZE], g);
		}
		if (GMP__UNLIKELY(gmp__cfg.randomize))
			gmp__jitter();
		/* release: done reading p2's slots (pairs with p2's owner's
		 * head acquire in runq_put). */
		if (gmp__cas32_rel(&p2->runqhead, h, h + n))
			return n;
	}
}

/* Steals half of p2's queue into p's (p is the caller's, and empty), and
 * returns one of the stolen Gs to run now, or NULL. */
gmp_g *gmp__runq_steal(gmp__p *p, gmp__p *p2, bool steal_runnext)
{
	uint32_t t = p->runqtail;
	uint32_t n = runq_grab(p2, p->runq, t, steal_runnext);
	if (n == 0)
		return NULL;
	n--;
	gmp_g *g = gmp__loadp_rlx(&p->runq[(t + n) % GMP__RUNQ_SIZE]);
	if (n == 0)
		return g;
	uint32_t h = gmp__load32_acq(&p->runqhead);
	if (t - h + n >= GMP__RUNQ_SIZE)
		gmp__throw("runq_steal: local queue overflow");
	/* release: publishes the copied slots to our own thieves. */
	gmp__store32_rel(&p->runqtail, t + n);
	return g;
}

/* ---- global run queue (sched.lock) -------------------------------------- */

static void runqsize_publish(void)
{
	/* release: pairs with the acquire in gmp__globrunq_has_work; only
	 * a hint, the real check is repeated under sched.lock. */
	gmp__store64_rel(&gmp__sched.runqsize, (uint64_t)gmp__sched.runq.n);
}

/* A chunk to append (the tail is full or there is none): a spare one. */
static gmp__grq_chunk *grq_newtail(gmp__grq *q)
{
	gmp__grq_chunk *c = q->spare;
	if (GMP__UNLIKELY(!c))
		gmp__throw("global run queue: no spare chunk (%lld queued, "
			   "%lld chunks)",
			   (long long)q->n, (long long)q->nchunks);
	q->spare = c->next;
	c->next = NULL;
	c->head = c->tail = 0;
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	return c;
}

/* The head chunk is used up: recycle it, unless it is also the tail
 * (then it just starts over). */
static void grq_drophead(gmp__grq *q)
{
	gmp__grq_chunk *c = q->head;
	if (c == q->tail) {
		c->head = c->tail = 0;
		return;
	}
	q->head = c->next;
	c->next = q->spare;
	q->spare = c;
}

void gmp__globrunq_putarray(gmp_g *const *gs, uint32_t n)
{
	gmp__grq *q = &gmp__sched.runq;
	while (n) {
		gmp__grq_chunk *c = q->tail;
		if (!c || c->tail == GMP__GRQ_CHUNK)
			c = grq_newtail(q);
		uint32_t k = GMP__GRQ_CHUNK - c->tail;
		if (k > n)
			k = n;
		memcpy(&c->g[c->tail], gs, k * sizeof *gs);
		c->tail += k;
		q->n += k;
		gs += k;
		n -= k;
	}
	runqsize_publish();
}

void gmp__globrunq_put(gmp_g *g)
{
	gmp__globrunq_putarray(&g, 1);
}

void gmp__globrunq_putbatch(gmp__gqueue *q)
{
	gmp_g *batch[64];
	uint32_t n = 0;
	gmp_g *g;
	while ((g = gmp__gq_pop(q)) != NULL) {
		batch[n++] = g;
		if (n == 64) {
			gmp__globrunq_putarray(batch, n);
			n = 0;
		}
	}
	if (n)
		gmp__globrunq_putarray(batch, n);
}

/* Takes the G at the head of a non-empty queue; the caller counts it. */
static gmp_g *grq_take(gmp__grq *q)
{
	gmp__grq_chunk *c = q->head;
	gmp_g *g = c->g[c->head++];
	if (c->head == c->tail)
		grq_drophead(q);
	return g;
}

#if GMP__TEST_HOOKS
/* The G at the head of the global queue, or NULL. */
gmp_g *gmp__globrunq_pop(void)
{
	gmp__grq *q = &gmp__sched.runq;
	if (q->n == 0)
		return NULL;
	gmp_g *g = grq_take(q);
	q->n--;
	runqsize_publish();
	return g;
}
#endif

/* Makes sure the queue can hold ngs Gs (see gmp__grq). Callers are
 * serialised by allg_lock; chunks are only freed at shutdown. Returns 0
 * or -ENOMEM. */
int gmp__globrunq_reserve(int64_t ngs)
{
	gmp__grq *q = &gmp__sched.runq;
	int64_t need = (ngs + GMP__GRQ_CHUNK - 1) / GMP__GRQ_CHUNK + 2;
	while (q->nchunks < need) {
		gmp__grq_chunk *c = gmp__malloc(sizeof *c);
		if (!c)
			return -ENOMEM;
		gmp__lock(&gmp__sched.lock);
		c->next = q->spare;
		q->spare = c;
		q->nchunks++;
		gmp__unlock(&gmp__sched.lock);
	}
	return 0;
}

/* Shutdown (the queue is empty) and failed starts. */
void gmp__globrunq_free_all(void)
{
	gmp__grq *q = &gmp__sched.runq;
	if (q->n)
		gmp__throw("global run queue: %lld tasks left at shutdown",
			   (long long)q->n);
	for (int i = 0; i < 2; i++) {
		gmp__grq_chunk *c = i ? q->spare : q->head;
		while (c) {
			gmp__grq_chunk *next = c->next;
			gmp__free(c);
			c = next;
		}
	}
	memset(q, 0, sizeof *q);
}

/* Takes one G to run from the global queue, and up to max-1 more onto p's
 * ring (which must have room: the callers' rings are empty). Takes a fair
 * share: no more than runqsize/gomaxprocs + 1. Copies pointers only. */
gmp_g *gmp__globrunq_get(gmp__p *p, int64_t max)
{
	gmp__grq *q = &gmp__sched.runq;
	int64_t n = q->n;
	if (n == 0)
		return NULL;
	int64_t share =
		n / (int64_t)gmp__load32_rlx(&gmp__sched.gomaxprocs) + 1;
	if (n > share)
		n = share;
	if (n > max)
		n = max;
	q->n -= n;
	gmp_g *g = grq_take(q);
	if (n > 1) {
		uint32_t h = gmp__load32_acq(&p->runqhead);
		uint32_t t = p->runqtail;
		if (t - h + (uint32_t)(n - 1) > GMP__RUNQ_SIZE)
			gmp__throw("globrunq_get: no room in the local queue");
		for (int64_t i = 1; i < n; i++, t++)
			gmp__storep_rlx(&p->runq[t % GMP__RUNQ_SIZE],
					grq_take(q));
		gmp__store32_rel(&p->runqtail, t); /* publishes the slots */
	}
	runqsize_publish();
	return g;
}
