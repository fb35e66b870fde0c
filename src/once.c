/* gmp_once: Go's sync.Once (the words are described in sync.h).
 *
 * done is the whole fast path: one load-acquire, which pairs with the
 * store-release of done after fn has returned, so a caller that sees 1
 * also sees everything fn did. A caller that sees 0 takes the once's
 * mutex; the first to get it runs fn while holding it, and the others,
 * sleeping on the mutex, get it afterwards, see done (under the mutex, so
 * a plain look would do) and leave. Sleeping on the mutex is what makes
 * concurrent callers wait for fn: there is no separate wait queue.
 *
 * Why not a CAS on done to pick the runner, as a first guess would have
 * it: the losers would return before fn has finished, which is exactly
 * what the contract forbids (Go's sync.Once says the same).
 *
 * fn runs outside the runtime bracket (preempt.h): it is the program's
 * own code and may run long, so sysmon must be free to detach its P.
 * Parking on the mutex brackets itself, inside gmp_mutex_lock.
 */
#include "sync.h"

/* Who is calling, as owner records it: a task's id, or minus the thread's
 * id for a thread that is not running a task. Never 0. */
static int64_t caller_id(void)
{
	int64_t id = gmp_self();
	return id > 0 ? id : -(int64_t)gmp__gettid();
}

static __attribute__((noinline)) void once_slow(gmp_once *o, void (*fn)(void *),
						void *arg)
{
	gmp__once_words *w = gmp__once_words_of(o);
	int64_t me = caller_id();
	/* relaxed: only the caller itself can have stored its own id. */
	if ((int64_t)gmp__load64_rlx(&w->owner) == me)
		gmp__throw("gmp_once_do of %p called from its own fn",
			   (void *)o);
	gmp_mutex_lock(&w->mu);
	if (gmp__load32_rlx(&w->done) == 0) { /* under mu */
		gmp__store64_rlx(&w->owner, (uint64_t)me);
		fn(arg);
		gmp__store64_rlx(&w->owner, 0);
		/* release: pairs with the fast path's load-acquire. */
		gmp__store32_rel(&w->done, 1);
	}
	gmp_mutex_unlock(&w->mu);
}

GMP_EXTERN void gmp_once_do(gmp_once *o, void (*fn)(void *), void *arg)
{
	/* acquire: pairs with the release of done in once_slow. */
	if (GMP__LIKELY(gmp__load32_acq(&gmp__once_words_of(o)->done) != 0))
		return;
	once_slow(o, fn, arg);
}
