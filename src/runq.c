/* Run queue slow paths: overflow to the global queue and stealing. The
 * protocol is described in runq.h. */
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
