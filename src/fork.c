/* The child of fork() (design.md §1.5, as Go answers it: only exec is safe, and
 * we define a little more).
 *
 * fork() copies the calling thread only. In the child every other thread
 * of the parent is gone: its Ms (with the tasks they were running),
 * sysmon, the template thread. Whatever locks those threads held stay
 * held in the child's copy of memory. Go's answer is that the child may
 * only exec; libgmp gives the child this defined state:
 *
 *   - The runtime is OFF in the child, whatever the parent was doing.
 *     gmp_init (or anything that starts the runtime, such as gmp_go)
 *     starts a fresh one; gmp_shutdown, gmp_stats_read and the rest
 *     answer as they do when the runtime is off.
 *   - The parent's tasks do not exist in the child and never run there;
 *     their stacks, Gs, Ms, Ps and queues are leaked (a copy of the
 *     parent's memory that nobody frees; exec or exit releases it).
 *   - If a task called fork(), the child continues that code as a plain
 *     thread, not a task: gmp_self() is 0, gmp_yield does nothing, the
 *     blocking calls block the thread, gmp_park aborts as outside a task,
 *     and the task function must not return or call gmp_exit (that aborts
 *     with a message saying so): the child ends with exec or _exit, after
 *     running what else it has to do in a fresh runtime if it likes.
 *   - Mutexes, wait groups and channels that the parent's tasks or
 *     threads were using are in whatever state fork caught them, as with
 *     pthread mutexes: do not use them in the child.
 *   - Descriptors: the runtime's epoll instance and eventfds are not used
 *     by the child (its copies are closed, and all are close-on-exec as
 *     well); the child's own runtime makes new ones. Every descriptor's
 *     I/O waiters and registration are forgotten (pollfd.c).
 *
 * The child handler runs in the child before fork() returns there, on its
 * only thread, so it may reset everything without locks; it uses only
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
