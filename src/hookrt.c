/* libgmp's side of the hook library's private interface (hookrt.h,
 * design.md §32): gmp_hook_active, the table gmp_hookrt_v1_ returns, and
 * the check that a program does not run two runtimes, one of them bound to
 * the hooks.
 *
 * Everything here is a thin layer over pollfd.c: the hooks wait on a
 * descriptor exactly as io.c's calls do (a reference, an edge-count
 * snapshot before each attempt, a park in the poller), and close and
 * replace descriptors through the same protocol as gmp_close.
 */
#include <dlfcn.h>
#include <errno.h>

#include "hookrt.h"
#include "pollfd.h"
#include "preempt.h"

_Static_assert(sizeof(gmp__pd_op) <= sizeof(((gmp__hook_fd *)0)->op),
	       "gmp__hook_fd holds a gmp__pd_op");
_Static_assert(GMP__HOOK_PLAIN == GMP__PD_PLAIN, "one answer for 'plain'");

/* 0: no hook library attached; 1: attached, GMP_HOOK off (or invalid);
 * 2: attached and active. Atomic: set once by attach (CAS from 0), read
 * by anyone. */
static volatile uint32_t hook_state;

static int attach(bool active)
{
	/* release: pairs with gmp_hook_active's acquire (nothing else is
	 * published; the order only makes the answer settled) */
	return gmp__cas32_rel(&hook_state, 0, active ? 2 : 1) ? 0 : -EEXIST;
}

static bool hooked(void)
{
	return gmp__load32_acq(&hook_state) != 0;
}

/* 1 while libgmp-hook is loaded and GMP_HOOK is not off: see gmp.h. */
GMP_EXTERN int gmp_hook_active(void)
{
	return gmp__load32_acq(&hook_state) == 2;
}

/* tls.c: the M of the thread, initial-exec. */
extern __thread gmp__m *gmp__tls_m __attribute__((tls_model("initial-exec")));

/* Each entry point below runs inside the runtime (preempt.h) where it may
 * touch a P: releasing a reference may ready a closer, a new file wakes
 * the tasks parked on the old one, and making a descriptor may wait for a
 * close in progress. */
static int fd_look(int fd, gmp__hook_fd *h)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__pd_op *op = (gmp__pd_op *)h->op;
	*op = (gmp__pd_op){ 0, 0, false, false };
	int err = 0;
	h->fd = fd;
	h->pd = gmp__pd_lookup(fd, &err);
	return err;
}

static int fd_hold(gmp__hook_fd *h)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	int err = 0;
	return gmp__pd_acquire(h->fd, &err) ? 0 : err;
}

static int fd_begin(int fd, gmp__hook_fd *h)
{
	int err = fd_look(fd, h);
	return err ? err : fd_hold(h);
}

static void fd_end(gmp__hook_fd *h)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__pd_release(h->pd);
}

static void fd_snapshot(gmp__hook_fd *h)
{
	gmp__pd_snapshot(h->pd, (gmp__pd_op *)h->op);
}

static void fd_drained_at(gmp__hook_fd *h)
{
	gmp__pd_drained_at(h->pd, (gmp__pd_op *)h->op);
}

static bool fd_drained(gmp__hook_fd *h)
{
	return gmp__pd_drained(h->pd, (gmp__pd_op *)h->op);
}

/* Both waits park the calling task, which the hook has found RUNNING in
 * its own code: they enter the runtime for the park (preempt.h), which
 * also takes a P back should sysmon have detached it since. */
static int fd_wait(gmp__hook_fd *h, int mode, int64_t deadline)
{
	uint8_t was;
	gmp_g *g = gmp__enter_task(&was);
	if (!g)
		gmp__throw("libgmp-hook: fd_wait outside a running task");
	int r = gmp__pd_wait_until(h->pd, mode, (gmp__pd_op *)h->op, deadline);
	gmp__leave_task(g, was);
	return r;
}

static int fd_poll(gmp__hook_fd *h, int events, int64_t deadline)
{
	uint8_t was;
	gmp_g *g = gmp__enter_task(&was);
	if (!g)
		gmp__throw("libgmp-hook: fd_poll outside a running task");
	int r = gmp__pd_poll_until(h->pd, events, (gmp__pd_op *)h->op,
				   deadline);
	gmp__leave_task(g, was);
	return r;
}

/* Closing and replacing may wait for the calls they woke to leave: a park
 * for a task, so inside the runtime too (as gmp_close). */
static int fd_close(int fd)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	return gmp__pd_replace(fd, -1, 0);
}

static int fd_dup(int oldfd, int newfd, int flags)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	return gmp__pd_replace(newfd, oldfd, flags);
}

static int fd_close_range(unsigned lo, unsigned hi, int flags)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	return gmp__pd_close_range(lo, hi, flags);
}

static void fd_new(int fd)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__pd_newfile(fd);
}

static const gmp__hookrt *table(void);

GMP_EXTERN const gmp__hookrt *gmp_hookrt_v1_(void)
{
	return table();
}

static gmp__hookrt rt = {
	.version = GMP__HOOKRT_VERSION,
	.size = sizeof(gmp__hookrt),
	.m_curg = offsetof(gmp__m, curg),
	.g_status = offsetof(gmp_g, status),
	.g_inrt = offsetof(gmp_g, inrt),
	.g_running = GMP__G_RUNNING,
	.attach = attach,
	.fd_look = fd_look,
	.fd_hold = fd_hold,
	.hooked = hooked,
	.fd_begin = fd_begin,
	.fd_end = fd_end,
	.fd_snapshot = fd_snapshot,
	.fd_drained_at = fd_drained_at,
	.fd_drained = fd_drained,
	.fd_wait = fd_wait,
	.fd_poll = fd_poll,
	.fd_close = fd_close,
	.fd_dup = fd_dup,
	.fd_close_range = fd_close_range,
	.fd_owned = gmp__pd_owned,
	.fd_new = fd_new,
};

static const gmp__hookrt *table(void)
{
	/* The M pointer is initial-exec TLS (tls.c): its offset from the
	 * thread pointer is the same on every thread, so it can be computed
	 * here, on whichever thread asks first, and stored without a
	 * barrier: every asker stores the same value. */
	if (!rt.tls_m) {
		rt.tls_preempt = (intptr_t)((char *)&gmp_preempt_pending_ -
					    (char *)__builtin_thread_pointer());
		rt.tls_m = (intptr_t)((char *)&gmp__tls_m -
				      (char *)__builtin_thread_pointer());
	}
	return &rt;
}

/* gmp_init: a program may link libgmp.a and have libgmp-hook.so preloaded,
 * which brings libgmp.so along and binds the hooks to it: the hooks would
 * then see none of this copy's tasks (every call would go to libc). That
 * is refused loudly. (Linked as `libgmp.a -lgmp-hook`, the program exports
 * this copy's gmp_hookrt_v1_ and the hooks bind to it: one runtime.) */
void gmp__hookrt_check(void)
{
	const gmp__hookrt *(*other)(void) = (const gmp__hookrt *(*)(void))dlsym(
		RTLD_DEFAULT, "gmp_hookrt_v1_");
	if (!other)
		return;
	const gmp__hookrt *t = other();
	if (t == &rt || t->version != GMP__HOOKRT_VERSION)
		return;
	/* Another copy of libgmp is in the process. Is a hook bound to it? */
	if (t->hooked && t->hooked())
		gmp__throw("libgmp-hook.so is loaded and bound to libgmp.so, "
			   "but this program runs a copy of libgmp of its own "
			   "(libgmp.a, linked statically): the hooks need the "
			   "shared libgmp.so (link with -lgmp-hook -lgmp)");
}
