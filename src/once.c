/* gmp_once: Go's sync.Once; the words are described in sync.h. The
 * contract is design.md §9.3, the design §28.6: a done flag whose
 * load-acquire is the whole fast path (it pairs with the store-release of
 * done once fn has returned), and the once's gmp_mutex, held by the caller
 * that runs fn, on which every concurrent caller sleeps until fn has
 * returned. fn runs outside the runtime bracket (preempt.h), as the
 * program's own code.
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
