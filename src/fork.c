/* The child of fork(): the pthread_atfork child handler, which leaves the
 * runtime OFF in the child and a task that forked going on as a plain
 * thread. design.md §1.5 is the contract (Go's answer is that the child may
 * only exec; libgmp defines a little more); §36 lists what the handler
 * resets, each subsystem through its *_forked hook.
 *
 * The handler runs in the child before fork() returns there, on its only
 * thread, so it may reset everything without locks; it uses only
 * async-signal-safe operations (stores and close(2)).
 */
#include <pthread.h>
#include <string.h>

#include "fork.h"
#include "g.h"
#include "internal.h"
#include "netpoll.h"
#include "pollfd.h"
#include "runtime.h"
#include "sema.h"
#include "stack.h"
#include "thread.h"
#include "trace.h"
#include "uring.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void child(void)
{
	/* This thread may have been an M, even running a task: it is a
	 * plain thread now. */
	gmp__setm(NULL);
	gmp__runtime_forked();
	gmp__uring_forked(); /* walks nothing of sched: first */
	memset(&gmp__sched, 0, sizeof gmp__sched);
	gmp__allg_lock = (gmp__mutex)GMP__MUTEX_INIT;
	gmp__allg = NULL;
	gmp__allg_n = 0;
	gmp__thread_forked();
	gmp__sema_forked();
	gmp__netpoll_forked();
	gmp__stack_forked();
	gmp__pd_forked();
	gmp__cgroup_forked();
	gmp__trace_forked();
}

static void register_handler(void)
{
	pthread_atfork(NULL, NULL, child);
}

/* gmp_init: registers the child handler, once per process. */
void gmp__fork_init(void)
{
	pthread_once(&once, register_handler);
}
