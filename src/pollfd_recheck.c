/* Poll descriptors: checking later that a number a task parked on still
 * names the file the poller watches. A park on a descriptor registered
 * with the live epoll instance is made on trust (pollfd.c's prepare), and
 * the descriptor goes on a wheel that sysmon turns (gmp__pd_watch_run); a
 * call still waiting at two looks in a row has its registration checked
 * with EPOLL_CTL_ADD (probe), and each check that finds the same file
 * doubles the descriptor's interval. design.md §30.6 ("A number closed with
 * plain close() and reused") explains why and how. pollfd.c holds the
 * rest of the descriptor, and pollfd_impl.h what the descriptor's files
 * share. */
#include <errno.h>
#include <string.h>

#include "netpoll.h"
#include "pollfd_impl.h"
#include "scheduler.h"
#include "sysmon.h"

/* The wheel of descriptors that tasks park on trust. A tick is 2^20 ns,
 * about a millisecond; a descriptor on the wheel is looked at every
 * 2^vshift ticks, vshift growing by one with every check that finds
 * nothing wrong (up to VW_MAX_SHIFT: about a second) and starting again
 * at 0 whenever the descriptor is reset. VW_SLOTS covers the longest
 * interval, so each slot holds only the descriptors due at its tick. */
#define VW_TICK_SHIFT 20
#define VW_MAX_SHIFT 10
#define VW_SLOTS (1 << VW_MAX_SHIFT)
#define VW_BATCH 64

static struct {
	gmp__mutex lock;
	int64_t tick;            /* lock: the next tick to look at */
	uint32_t n;              /* lock: descriptors on the slots */
	volatile int64_t next;   /* atomic: when the earliest look is due
				    (ns), 0 for none; read by sysmon */
	gmp__pd *slot[VW_SLOTS]; /* lock */
} vw = { .lock = GMP__MUTEX_INIT };

int64_t gmp__pd_watch_next(void)
{
	return (int64_t)gmp__load64_acq((volatile uint64_t *)&vw.next);
}

/* Under vw.lock. */
static void vw_insert(gmp__pd *pd, int64_t due)
{
	if (vw.n == 0 && vw.tick < due - VW_SLOTS)
		vw.tick = due - 1; /* an empty wheel: catch up at once */
	pd->vdue = due;
	gmp__pd **slot = &vw.slot[due & (VW_SLOTS - 1)];
	pd->vnext = *slot;
	*slot = pd;
	vw.n++;
}

/* Under vw.lock: the time of the first tick from vw.tick on with a
 * descriptor, 0 if the wheel is empty. */
static int64_t vw_first(void)
{
	if (vw.n == 0)
		return 0;
	for (int64_t t = vw.tick; t < vw.tick + VW_SLOTS; t++)
		if (vw.slot[t & (VW_SLOTS - 1)])
			return t << VW_TICK_SHIFT;
	return vw.tick << VW_TICK_SHIFT;
}

/* Whether any task waits on pd, in a slot (parked or about to) or on the
 * list. */
static bool pd_waited_on(gmp__pd *pd)
{
	return gmp__loadp_acq(&pd->rg) != PD_NIL ||
	       gmp__loadp_acq(&pd->wg) != PD_NIL ||
	       gmp__loadp_acq(&pd->list) != NULL;
}

void gmp__pd_watch_slow(gmp__pd *pd)
{
	int64_t now = gmp__nanotime();
	int64_t due =
		(now >> VW_TICK_SHIFT) + (1 << gmp__load32_rlx(&pd->vshift));
	bool sooner = false;
	gmp__lock(&vw.lock);
	if (!gmp__load32_rlx(&pd->vqueued)) {
		gmp__store32_rlx(&pd->vqueued, 1);
		/* As if looked at now: a waiting call, which the next look
		 * checks if it is still waiting then. */
		pd->vlast_call = gmp__load32_rlx(&pd->vcall);
		pd->vlast_wait = 1;
		vw_insert(pd, due);
		int64_t next = gmp__pd_watch_next();
		if (next == 0 || (due << VW_TICK_SHIFT) < next) {
			gmp__store64_rel((volatile uint64_t *)&vw.next,
					 (uint64_t)(due << VW_TICK_SHIFT));
			sooner = true;
		}
	}
	gmp__unlock(&vw.lock);
	if (sooner) {
		/* sysmon may be in its deep sleep, timed by the old `next`
		 * (it reads `next` under sched.lock before it sleeps). */
		gmp__lock(&gmp__sched.lock);
		gmp__sysmon_wake_locked();
		gmp__unlock(&gmp__sched.lock);
	}
}

/* The deferred check: the same EPOLL_CTL_ADD as arm's. Pushes the tasks it
 * wakes to q. */
static void probe(gmp__pd *pd, uint32_t gen, gmp__gqueue *q)
{
	gmp__lock(&pd->lock);
	if ((gmp__load32_rlx(&pd->ref) & PD_CLOSING) ||
	    gmp__load32_rlx(&pd->epgen) != gen) {
		gmp__unlock(&pd->lock); /* gmp_close's, or not ours to check */
		return;
	}
	uint32_t seq = gmp__load32_rlx(&pd->seq) & PD_SEQ_MASK;
	uint32_t nseq = (seq + 1) & PD_SEQ_MASK;
	int err = gmp__netpoll_open(pd->fd, cookie(pd, nseq));
	if (err == -EEXIST) {
		/* Still the file we registered: look less often. */
		uint32_t sh = gmp__load32_rlx(&pd->vshift);
		if (sh < VW_MAX_SHIFT)
			gmp__store32_rlx(&pd->vshift, sh + 1);
		gmp__unlock(&pd->lock);
		return;
	}
	if (err == 0) {
		/* A new file, now registered (as in arm). The tasks parked
		 * here may have parked on the old file or on the new one:
		 * they are woken to retry, on the new file (broken). */
		gmp__store32_rlx(&pd->vretry, seq);
		gmp__store32_rel(&pd->seq, nseq);
		gmp__netpoll_modify(pd->fd, cookie(pd, nseq));
	} else {
		/* No file (a plain close(), not reused yet) or one epoll
		 * cannot watch: not registered any more. The woken tasks
		 * retry their calls, which report what the number is now
		 * (a park arms first). */
		gmp__store32_rlx(&pd->epgen, 0);
	}
	forget_file(pd, GMP__PD_KIND_UNKNOWN);
	edges_bump(pd);
	gmp_g *rg = slot_wake(&pd->rg);
	gmp_g *wg = slot_wake(&pd->wg);
	gmp__waiter *chain = list_take_all(pd, 0); /* 0: look again */
	gmp__unlock(&pd->lock);
	if (rg)
		gmp__gq_push(q, rg);
	if (wg)
		gmp__gq_push(q, wg);
	list_wake(chain);
}

/* sysmon's look at one descriptor taken off the wheel: a call still
 * waiting that was already waiting at the previous look has waited at
 * least one interval, so its registration is checked. Returns whether the
 * descriptor stays on the wheel (someone waits, or a new call has waited
 * since the last look). */
static bool look(gmp__pd *pd, uint32_t gen, gmp__gqueue *q)
{
	bool waiting = pd_waited_on(pd);
	uint32_t call = gmp__load32_rlx(&pd->vcall);
	bool again = waiting && pd->vlast_wait && call == pd->vlast_call;
	if (again && gen) {
		probe(pd, gen, q);
		waiting = pd_waited_on(pd);
	}
	bool keep = waiting || call != pd->vlast_call;
	pd->vlast_wait = waiting;
	pd->vlast_call = call;
	return keep;
}

/* Under vw.lock: pd leaves the wheel unless a task has just parked on it
 * (see watch for the RMW pair). */
static bool vw_drop(gmp__pd *pd)
{
	gmp__store32_rlx(&pd->vqueued, 0);
	gmp__add32_full(&pd->edges, 0);
	if (!pd_waited_on(pd))
		return true;
	gmp__store32_rlx(&pd->vqueued, 1);
	return false;
}

int64_t gmp__pd_watch_run(int64_t now)
{
	int64_t next = gmp__pd_watch_next();
	if (next == 0 || next > now)
		return next;
	int64_t tick = now >> VW_TICK_SHIFT;
	uint32_t gen = gmp__netpoll_generation();
	gmp__pd *batch[VW_BATCH];
	int nb = 0;
	bool more = false;
	gmp__lock(&vw.lock);
	if (tick - vw.tick >= VW_SLOTS)
		vw.tick = tick - VW_SLOTS + 1; /* every slot once */
	for (; vw.tick <= tick; vw.tick++) {
		gmp__pd **pp = &vw.slot[vw.tick & (VW_SLOTS - 1)];
		while (*pp && nb < VW_BATCH) {
			gmp__pd *pd = *pp;
			if (pd->vdue <= tick) {
				*pp = pd->vnext; /* still vqueued: ours now */
				vw.n--;
				batch[nb++] = pd;
			} else {
				pp = &pd->vnext;
			}
		}
		if (*pp) {
			more = true; /* the batch is full: the rest soon */
			break;
		}
	}
	gmp__unlock(&vw.lock);

	gmp__gqueue q = { 0 };
	bool keep[VW_BATCH];
	for (int i = 0; i < nb; i++)
		keep[i] = look(batch[i], gen, &q);

	gmp__lock(&vw.lock);
	for (int i = 0; i < nb; i++) {
		gmp__pd *pd = batch[i];
		if (keep[i] || !vw_drop(pd))
			vw_insert(pd,
				  tick + (1 << gmp__load32_rlx(&pd->vshift)));
	}
	next = more ? now : vw_first();
	gmp__store64_rel((volatile uint64_t *)&vw.next, (uint64_t)next);
	gmp__unlock(&vw.lock);
	if (q.n)
		gmp__injectglist(&q);
	return next;
}

/* In the child of fork(), from gmp__pd_forked: the wheel's lock may have
 * been held by a thread of the parent's; the descriptors on it were just
 * taken off. */
void gmp__pd_watch_forked(void)
{
	memset(&vw, 0, sizeof vw);
	vw.lock = (gmp__mutex)GMP__MUTEX_INIT;
}
