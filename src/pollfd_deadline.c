/* Poll descriptors: the deadlines of gmp_set_deadline (Go's pollDesc rd
 * and wd and their timers). A call looks at its direction's deadline only
 * when it is about to wait; a waiting task makes sure the descriptor's
 * one timer fires by then (dl_arm, pollfd_impl.h), and leaves it armed
 * when its wait ends; a change of deadline wakes whoever waits to look at
 * the new one (dl_wake). design.md §30.7 ("Deadlines") explains the design
 * and its barriers. pollfd.c holds the rest of the descriptor, and
 * pollfd_impl.h what the descriptor's files share. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "export_test.h"
#include "pollfd_impl.h"
#include "sys.h"
#include "task.h"

/* The descriptor's timer is due (a deadline of one of its directions
 * passed, or moved later since the timer was armed): on g0, with a P,
 * outside every lock. Every task parked in the slot of a direction that
 * has a deadline retries its call, and fails with -ETIMEDOUT when it
 * would wait again, or waits again (arming the timer again). */
static void dl_fire(gmp__timer *t)
{
	gmp__pd *pd = t->arg;
	/* full: before we look at the slots; pairs with a waiter's
	 * registration, then its look at dlt_when (design.md §30.7) */
	gmp__xchg64_full(&pd->dlt_when, 0);
	for (int mode = GMP__PD_READ; mode <= GMP__PD_WRITE; mode++) {
		if (!gmp__load64_rlx(&pd->dl[mode]))
			continue; /* cleared: its setter woke the waiters */
		gmp_g *g = slot_wake(mode == GMP__PD_READ ? &pd->rg : &pd->wg);
		if (g)
			gmp__ready(g, true);
	}
}

#if GMP__TEST_HOOKS
static volatile uint64_t dl_arms; /* atomic: timers started (tests) */

uint64_t gmp__pd_deadline_arms(void)
{
	return gmp__load64_rlx(&dl_arms);
}
#endif

/* dl_arm's slow half (pollfd_impl.h): the timer is not armed for dl yet,
 * unless another waiter does it first, under the lock. */
void gmp__pd_dl_arm(gmp__pd *pd, int64_t dl)
{
	gmp__lock(&pd->lock);
	if (!dl_armed_by(pd, dl)) {
#if GMP__TEST_HOOKS
		gmp__add64_rlx(&dl_arms, 1);
#endif
		/* Pending for later than dl, or firing (stop waits that
		 * out), or idle. */
		gmp__timer_stop(&pd->dlt);
		pd->dlt.fn = dl_fire;
		pd->dlt.arg = pd;
		/* Before the timer can fire (and clear it). */
		gmp__store64_rlx(&pd->dlt_when, (uint64_t)dl);
		gmp__timer_start(&pd->dlt, dl);
	}
	gmp__unlock(&pd->lock);
}

/* Under lock: a thread waiter has noticed the latest deadline change; the
 * last one to do so empties the eventfd again, unless gmp_close has
 * written it too (then it stays readable for good). */
void gmp__pd_dl_ack(gmp__pd *pd)
{
	if (!pd->dlsig || --pd->dlack != 0)
		return;
	pd->dlsig = false;
	if (gmp__load32_rlx(&pd->ref) & PD_CLOSING)
		return;
	uint64_t v;
	while (gmp__sys_read(pd->evfd1 - 1, &v, sizeof v) == -EINTR)
		;
}

/* Wakes the waiters of direction mode so that they look at its new
 * deadline: the task in the slot and those on the list retry their call
 * (and wait again with the new deadline, or fail); threads in poll(2) are
 * told through the eventfd. */
static void dl_wake(gmp__pd *pd, int mode)
{
	gmp_g *g = slot_wake(mode == GMP__PD_READ ? &pd->rg : &pd->wg);
	if (g)
		gmp__ready(g, true);
	uint32_t want = mode == GMP__PD_READ ? POLLIN : POLLOUT;
	/* acquire: after the exchange (design.md §30.7) */
	bool list = gmp__loadp_acq(&pd->list) != NULL;
	bool threads = gmp__load32_acq(&pd->twait) != 0;
	if (!list && !threads)
		return;
	gmp__waiter *chain = NULL;
	gmp__lock(&pd->lock);
	gmp__waiter *next;
	for (gmp__waiter *w = pd->list; w; w = next) {
		next = w->next;
		if (!((uint32_t)w->ticket & want) || !gmp__waiter_claim(w))
			continue;
		list_remove(pd, w);
		w->result = 0; /* "look again" */
		w->next = chain;
		chain = w;
	}
	uint32_t n = gmp__load32_rlx(&pd->twait);
	if (n) {
		pd->dlgen++;
		pd->dlack = n; /* each of them notices once */
		if (!pd->dlsig && pd->evfd1 &&
		    !(gmp__load32_rlx(&pd->ref) & PD_CLOSING)) {
			uint64_t one = 1;
			while (gmp__sys_write(pd->evfd1 - 1, &one,
					      sizeof one) == -EINTR)
				;
			pd->dlsig = true;
		}
	}
	gmp__unlock(&pd->lock);
	list_wake(chain);
}

int gmp__pd_set_deadline(gmp__pd *pd, int how, int64_t deadline)
{
	if (GMP__UNLIKELY(!gmp__load32_rlx(&pd->seen))) {
		/* The first time: is the number open at all? Once per file. */
		int fl = gmp__sys_fcntl(pd->fd, F_GETFD, 0);
		if (fl < 0)
			return -EBADF;
		gmp__store32_rlx(&pd->seen, 1);
	}
	for (int mode = GMP__PD_READ; mode <= GMP__PD_WRITE; mode++) {
		if (!(how & (1 << mode)))
			continue;
		/* full: pairs with dl_after_register's RMW; then we look for
		 * waiters that registered before it */
		gmp__xchg64_full(&pd->dl[mode], (uint64_t)deadline);
		/* Nobody waits, the common case: three loads, no lock. */
		if (gmp__loadp_acq(mode == GMP__PD_READ ? &pd->rg : &pd->wg) !=
			    PD_NIL ||
		    gmp__loadp_acq(&pd->list) != NULL ||
		    gmp__load32_acq(&pd->twait) != 0)
			dl_wake(pd, mode);
	}
	return 0;
}
