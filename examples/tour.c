/* tour.c: gmp_main, gmp_go, gmp_yield, gmp_park/gmp_ready, system calls
 * and statistics in one program; docs/guide.md walks through it. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include <gmp.h>

/* A one-shot event built from gmp_park and gmp_ready: one task waits,
 * another sets it. This is how every blocking primitive is made. */
struct event {
	atomic_bool set;
	_Atomic(gmp_g *) waiter;
};

/* Runs inside gmp_park, after the waiter is off its stack: publish it,
 * then check again, so a set that raced with us is not lost. Returning
 * false means "do not sleep after all". */
static bool event_unlock(gmp_g *g, void *arg)
{
	struct event *e = arg;
	atomic_store(&e->waiter, g);
	return !(atomic_load(&e->set) &&
		 atomic_exchange(&e->waiter, NULL) == g);
}

static void event_wait(struct event *e)
{
	while (!atomic_load(&e->set))
		gmp_park(event_unlock, e); /* holds no thread while parked */
}

static void event_set(struct event *e)
{
	atomic_store(&e->set, true);
	gmp_g *g = atomic_exchange(&e->waiter, NULL);
	if (g)
		gmp_ready(g); /* from a task: runs next on this P */
}

static struct event slept;

/* A blocking call, wrapped so the runtime can give this thread's P to
 * another thread if the call takes long. (To sleep, gmp_sleep is better:
 * it holds no thread. nanosleep stands in for any blocking call here.) */
static void sleeper(void *arg)
{
	struct timespec ts = { .tv_nsec = 50 * 1000 * 1000 }; /* 50 ms */
	gmp_enter_syscall();
	nanosleep(&ts, NULL);
	gmp_exit_syscall();
	printf("sleeper (task %" PRId64 "): woke up\n", gmp_self());
	event_set(arg);
}

/* Cooperative: a task runs until it reaches a switch point. */
static void chatty(void *arg)
{
	for (int i = 0; i < 3; i++) {
		printf("%s (task %" PRId64 "): step %d\n", (const char *)arg,
		       gmp_self(), i);
		gmp_yield(); /* let the other tasks run */
	}
}

static int run(void *arg)
{
	(void)arg;
	gmp_go(sleeper, &slept);
	gmp_go(chatty, "ping");
	gmp_go(chatty, "pong");
	event_wait(&slept);

	gmp_stats s;
	gmp_stats_read(&s);
	printf("spawned %" PRIu64 " tasks on %" PRIu64 " procs; %" PRIu64
	       " threads; %" PRIu64 " Ps retaken from syscalls\n",
	       s.spawned, s.procs, s.threads_total, s.retakes);
	return 0;
}

/* gmp_main runs run() as a task and returns its result. */
int main(void)
{
	return gmp_main(run, NULL);
}
