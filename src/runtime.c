/* The runtime's lifecycle: settings and the GMP_* variables, gmp_init,
 * gmp_shutdown, gmp_main, gmp_stats_read, gmp_set_maxprocs, and the
 * runtime hold (gmp__rt_hold, gmp__rt_release: runtime.h says when it
 * holds). design.md §1 is the contract; §35 the design: the states
 * OFF -> RUNNING -> DRAINING -> OFF, the two locks that guard them
 * (api_lock, and rt_lock behind the hold), the drain's Dekker pair with
 * gmp__pidleput, and the teardown.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "fork.h"
#include "g.h"
#include "hookrt.h"
#include "internal.h"
#include "maxprocs.h"
#include "netpoll.h"
#include "preempt.h"
#include "runtime.h"
#include "scheduler.h"
#include "signals.h"
#include "slice.h"
#include "stack.h"
#include "sysmon.h"
#include "timer.h"
#include "trace.h"
#include "uring.h"

enum { RT_OFF = 0, RT_RUNNING = 1, RT_DRAINING = 2 };

static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rt_lock =
	PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static volatile uint32_t rt_state; /* atomic; changed under rt_lock (write) */

gmp__settings gmp__cfg;

/* ---- settings --------------------------------------------------------------- */

/* An environment variable, or NULL when unset or empty. */
static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static int parse_int(const char *s, long long min, long long max,
		     long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A byte count with an optional K, M or G suffix (powers of 1024). */
static int parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case 0:
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] &&
	    !(toupper((unsigned char)end[1]) == 'B' && !end[2]))
		return -EINVAL;
	if (v > (SIZE_MAX >> 1) >> shift)
		return -EINVAL;
	*out = (size_t)v << shift;
	return 0;
}

/* GMP_DEBUG: comma-separated key=value pairs, as GODEBUG. */
static int parse_debug(const char *s, gmp__settings *st)
{
	char buf[256];
	if (strlen(s) >= sizeof buf)
		return -EINVAL;
	strcpy(buf, s);
	char *save = NULL;
	for (char *kv = strtok_r(buf, ",", &save); kv;
	     kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq)
			return -EINVAL;
		*eq = 0;
		long long v;
		if (parse_int(eq + 1, 0, INT_MAX, &v))
			return -EINVAL;
		if (!strcmp(kv, "schedtrace"))
			st->schedtrace_ms = (int)v;
		else if (!strcmp(kv, "scheddetail"))
			st->scheddetail = (int)v;
		else if (!strcmp(kv, "randomize"))
			st->randomize = (int)v;
		else if (!strcmp(kv, "sigquit"))
			st->sigquit = (int)v;
		else if (!strcmp(kv, "stall"))
			st->stall_ms = (int)v;
		else
			return -EINVAL;
	}
	return 0;
}

/* A stack size as given, before rounding: at least 16 KiB, and at most
 * half the address space, above which the rounding below (and the slot
 * arithmetic in stack.c) would wrap to a tiny stack. */
static bool is_valid_stack_size(size_t n)
{
	return n >= 16 * 1024 && n <= SIZE_MAX / 2;
}

/* Builds the settings from cfg, the environment and the defaults; nothing
 * is changed on failure. Every GMP_* variable is checked, by the rules
 * that would apply were it in effect, even where cfg overrides it: a bad
 * value is a mistake to report, not to hide behind the config. */
static int settings_from(const gmp_config *cfg, gmp__settings *st,
			 gmp__trace_settings *trs, int *maxprocs,
			 int *max_threads)
{
	gmp_config c = { 0 };
	if (cfg)
		c = *cfg;
	memset(st, 0, sizeof *st);
	const char *v;
	long long n;

	if (c.maxprocs < 0 || c.max_threads < 0)
		return -EINVAL;
	if (c.stack_size != 0 && !is_valid_stack_size(c.stack_size))
		return -EINVAL;

	if ((v = env("GMP_MAXPROCS"))) {
		if (parse_int(v, 1, INT_MAX, &n))
			return -EINVAL;
		if (c.maxprocs == 0)
			c.maxprocs = (int)n;
	}
	st->maxprocs_from_user = c.maxprocs > 0;

	if ((v = env("GMP_MAX_THREADS"))) {
		if (parse_int(v, 1, INT_MAX, &n))
			return -EINVAL;
		if (c.max_threads == 0)
			c.max_threads = (int)n;
	}
	if (c.max_threads == 0)
		c.max_threads = 10000;

	if ((v = env("GMP_STACK_SIZE"))) {
		size_t sz;
		if (parse_size(v, &sz) || !is_valid_stack_size(sz))
			return -EINVAL;
		if (c.stack_size == 0)
			c.stack_size = sz;
	}
	if (c.stack_size == 0)
		c.stack_size = 256 * 1024;
	size_t ps = gmp__pagesize();
	st->stack_size = (c.stack_size + ps - 1) & ~(ps - 1);

	st->stack_guard = GMP__GUARD_AUTO;
	if ((v = env("GMP_STACK_GUARD"))) {
		if (!strcmp(v, "auto"))
			st->stack_guard = GMP__GUARD_AUTO;
		else if (!strcmp(v, "always"))
			st->stack_guard = GMP__GUARD_ALWAYS;
		else if (!strcmp(v, "never"))
			st->stack_guard = GMP__GUARD_NEVER;
		else
			return -EINVAL;
	}

	st->idle_thread_timeout_ns = 60 * (int64_t)1000000000;
	if ((v = env("GMP_IDLE_THREAD_TIMEOUT"))) {
		char *end;
		errno = 0;
		double secs = strtod(v, &end);
		if (errno || end == v || *end || !(secs >= 0) || secs > 1e9)
			return -EINVAL;
		st->idle_thread_timeout_ns = (int64_t)(secs * 1e9 + 0.5);
	}

	st->preempt = true;
	if ((v = env("GMP_PREEMPT"))) {
		if (!strcmp(v, "on"))
			st->preempt = true;
		else if (!strcmp(v, "off"))
			st->preempt = false;
		else
			return -EINVAL;
	}

	st->io_uring = true;
	if ((v = env("GMP_IO_URING"))) {
		if (!strcmp(v, "on"))
			st->io_uring = true;
		else if (!strcmp(v, "off"))
			st->io_uring = false;
		else
			return -EINVAL;
	}

	/* Read by libgmp-hook when it loads (hookrt.h); checked here, as
	 * every GMP_* variable is, so that a typo does not go unnoticed. */
	if ((v = env("GMP_HOOK")) && strcmp(v, "on") && strcmp(v, "off"))
		return -EINVAL;

	if ((v = env("GMP_DEBUG")) && parse_debug(v, st))
		return -EINVAL;
	st->debug = v != NULL;

	if (gmp__trace_parse(env("GMP_TRACE"), trs))
		return -EINVAL;

	/* Last, once everything has been found valid: the default reads
	 * the affinity mask and the cgroup files. */
	if (c.maxprocs == 0)
		c.maxprocs = gmp__maxprocs_default(); /* maxprocs.c */
	if (c.maxprocs > GMP__MAXPROCS_LIMIT)
		c.maxprocs = GMP__MAXPROCS_LIMIT;
	*maxprocs = c.maxprocs;
	*max_threads = c.max_threads;
	return 0;
}

/* ---- init and shutdown -------------------------------------------------------- */

static int init(const gmp_config *cfg)
{
	gmp__settings st;
	gmp__trace_settings trs;
	int maxprocs, max_threads;
	int err = settings_from(cfg, &st, &trs, &maxprocs, &max_threads);
	if (err)
		return err;
	/* From a task (or an unlock function) the runtime is running, or
	 * draining with us among what it waits for: nothing to do, and
	 * api_lock, which gmp_shutdown holds while it drains, must not be
	 * waited for. */
	if (gmp__getm())
		return 0;
	pthread_mutex_lock(&api_lock);
	if (gmp__load32_acq(&rt_state) != RT_OFF) {
		pthread_mutex_unlock(&api_lock);
		return 0;
	}
	gmp__cfg = st;
	gmp__trace_cfg = trs;
	gmp__ticks_init(); /* before anything takes a sample */
	gmp__hookrt_check();
	gmp__sigmask_save();
	gmp__stack_init();
	gmp__preempt_init(); /* before sysmon, which detaches */
	gmp__slice_init();   /* and judges slices */
	err = gmp__sched_start(maxprocs, max_threads);
	/* The poller exists from the start: an idle M sleeps in it until the
	 * next timer, so timers must never find it missing (timer.h). */
	if (!err && (err = gmp__netpoll_init()) != 0)
		gmp__sched_stop();
	if (!err)
		gmp__uring_start(); /* after the poller, which watches it */
	if (!err && (err = gmp__sysmon_start()) != 0)
		gmp__sched_stop();
	if (!err) {
		pthread_rwlock_wrlock(&rt_lock);
		gmp__store32_rel(&rt_state, RT_RUNNING);
		pthread_rwlock_unlock(&rt_lock);
		gmp__sigquit_install();
		gmp__signal_install();
		gmp__fork_init();
		gmp__trace_init(); /* GMP_TRACE's trace, now that Ps exist */
	}
	pthread_mutex_unlock(&api_lock);
	return err;
}

GMP_EXTERN int gmp_init(const gmp_config *cfg)
{
	/* Public calls leave errno alone (gmp.h), but reading the settings
	 * sets it (strtoll and strtod report overflow only there), and so
	 * may starting the runtime. This covers every path, including the
	 * calls that find the runtime running and the implicit start from
	 * gmp_go. No switch happens inside, so errno is this thread's
	 * throughout. */
	int saved = errno;
	int err = init(cfg);
	errno = saved;
	return err;
}

/* Waits until no task is left (see goexit0 for the other side), from a
 * thread that holds no P: gmp_shutdown's drain, and gmp_main once its
 * task has called gmp_exit. While anyone waits here, every P that goes
 * idle bumps drain_seq, which is why only these two rare paths wait.
 * With racing set, the caller does not keep the runtime from being torn
 * down (gmp_main, while another thread may call gmp_shutdown), so each
 * count is taken under rt_lock and a runtime that is off counts as
 * empty. The registration is never undone: a drain ends in teardown
 * (gmp__sched_start clears it) and gmp_main's wait in an abort. */
static void wait_no_tasks(bool racing)
{
	/* full: Dekker with gmp__pidleput's full RMW-then-load: the last
	 * task's exit is counted before its P goes idle, so either we see it
	 * below or that P sees us and bumps drain_seq. */
	gmp__add32_full(&gmp__sched.drain_waiters, 1);
	for (;;) {
		uint32_t seq = gmp__load32_acq(&gmp__sched.drain_seq);
		int64_t live = 0;
		if (!racing) {
			live = gmp__tasks_live();
		} else if (gmp__rt_hold(false) == 0) {
			live = gmp__tasks_live();
			gmp__rt_release();
		}
		if (live == 0)
			break;
		gmp__futex_wait(&gmp__sched.drain_seq, seq, -1);
	}
}

GMP_EXTERN int gmp_shutdown(void)
{
	if (gmp__getm())
		return -EPERM; /* a runtime thread: a task or its scheduler */
	pthread_mutex_lock(&api_lock);
	if (gmp__load32_acq(&rt_state) != RT_RUNNING) {
		pthread_mutex_unlock(&api_lock);
		return 0;
	}
	pthread_rwlock_wrlock(&rt_lock);
	gmp__store32_rel(&rt_state, RT_DRAINING);
	pthread_rwlock_unlock(&rt_lock);

	wait_no_tasks(false); /* api_lock keeps out any other teardown */
	/* gmp_timer timers may still be pending (design.md §10.2): drop them,
	 * and wait for any task one started as it fired. */
	while (gmp__timers_drop_all())
		wait_no_tasks(false);
	/* The trace, written while the threads still exist to be named. */
	gmp__trace_shutdown();
	gmp__sigquit_restore();
	gmp__signal_restore();
	/* Users of the runtime's structures from other threads (stats,
	 * dumps, readies) hold rt_lock for reading: the teardown waits for
	 * them. */
	pthread_rwlock_wrlock(&rt_lock);
	gmp__sysmon_stop();
	gmp__sched_stop();
	gmp__trace_release(); /* no M is left to write into a chunk */
	gmp__metrics_reset();
	gmp__gfree_all();
	gmp__stack_release_all();
	gmp__store32_rel(&rt_state, RT_OFF);
	pthread_rwlock_unlock(&rt_lock);
	pthread_mutex_unlock(&api_lock);
	return 0;
}

/* In the child of fork() (fork.c, the child's only thread): the runtime is
 * OFF whatever the parent was doing, and the parent's threads, which may
 * have held these locks, do not exist here. */
void gmp__runtime_forked(void)
{
	api_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	rt_lock = (pthread_rwlock_t)
		PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
	gmp__store32_rel(&rt_state, RT_OFF);
}

/* See runtime.h. The read lock is taken first in every case, even to
 * learn that the runtime is off: a state read without it could be stale
 * by the time the caller acts on it. */
int gmp__rt_hold(bool start)
{
	for (;;) {
		pthread_rwlock_rdlock(&rt_lock);
		uint32_t st = gmp__load32_acq(&rt_state);
		if (st == RT_RUNNING)
			return 0;
		/* Draining: the structures stay until the last task ends,
		 * and then the teardown waits for us. Only new work from a
		 * thread that is not the runtime's is refused; a runtime
		 * thread (a task in a syscall window, say) is part of what
		 * gmp_shutdown waits for, so it may still spawn. */
		if (st == RT_DRAINING && (!start || gmp__getm()))
			return 0;
		pthread_rwlock_unlock(&rt_lock);
		if (st == RT_DRAINING || !start)
			return -ESHUTDOWN;
		int err = gmp_init(NULL);
		if (err)
			return err;
	}
}

void gmp__rt_release(void)
{
	pthread_rwlock_unlock(&rt_lock);
}

/* ---- gmp_main -------------------------------------------------------------- */

/* What gmp_main's thread waits for. Its task tells it once, either with
 * fn's result or that fn called gmp_exit (Go's main calling
 * runtime.Goexit): then, as Go does, the other tasks go on running, and
 * when none is left the program dies, since nothing can make fn return
 * any more. The count of live tasks, and the wait for it to reach zero,
 * are gmp_shutdown's (wait_no_tasks). */
struct gmp__main {
	int (*fn)(void *);
	void *arg;
	int result;
	bool goexited;
	gmp__note done;
};

static void main_task(void *p)
{
	struct gmp__main *a = p;
	gmp_g *g = gmp_current();
	g->mainwait = a; /* for gmp_exit; owner */
	int r = a->fn(a->arg);
	g->mainwait = NULL; /* key destructors may still call gmp_exit */
	a->result = r;
	gmp__notewakeup(&a->done); /* full barrier publishes result */
}

/* gmp_exit from gmp_main's task, inside fn: fn will never return. */
void gmp__main_goexit(gmp_g *g)
{
	struct gmp__main *a = g->mainwait;
	g->mainwait = NULL;
	a->goexited = true;
	/* full barrier publishes goexited; a is the waiting thread's again
	 * once it wakes, so nothing here touches it after this */
	gmp__notewakeup(&a->done);
}

GMP_EXTERN int gmp_main(int (*fn)(void *), void *arg)
{
	if (!fn)
		return -EINVAL;
	gmp__m *m = gmp__getm();
	if (m) {
		if (m->curg)
			return fn(arg); /* already a task */
		return -EPERM;          /* scheduler code (an unlock fn) */
	}
	struct gmp__main a = { fn, arg, 0, false, { 0 } };
	int64_t id = gmp_go(main_task, &a);
	if (id < 0)
		return (int)id;
	gmp__notesleep(&a.done);
	if (a.goexited) {
		wait_no_tasks(true);
		gmp__throw("no tasks left (gmp_main's function called "
			   "gmp_exit): deadlock");
	}
	return a.result;
}

/* ---- settings at run time ----------------------------------------------------- */

static int set_maxprocs(int n)
{
	gmp__lock(&gmp__sched.lock);
	int old = (int)gmp__load32_rlx(&gmp__sched.gomaxprocs);
	int err = n > 0 ? gmp__procresize(n) : 0;
	/* Under sched.lock, where sysmon's maxprocs update looks. */
	if (!err && n > 0)
		gmp__cfg.maxprocs_from_user = true;
	gmp__unlock(&gmp__sched.lock);
	if (err)
		return err;
	/* More Ps: put them to work. Fewer: an idle P's M steals what the
	 * retiring ones have queued. */
	if (n > 0 && n != old)
		gmp__wakep();
	return old;
}

GMP_EXTERN int gmp_set_maxprocs(int n)
{
	if (gmp__getm())
		return set_maxprocs(n);
	int err = gmp__rt_hold(true);
	if (err)
		return err;
	int r = set_maxprocs(n);
	gmp__rt_release();
	return r;
}

GMP_EXTERN const char *gmp_version(void)
{
#define GMP__STR2(x) #x
#define GMP__STR(x) GMP__STR2(x)
	return GMP__STR(GMP_VERSION_MAJOR) "." GMP__STR(
		GMP_VERSION_MINOR) "." GMP__STR(GMP_VERSION_PATCH);
}

/* ---- stats ------------------------------------------------------------------- */

static void stats_read(gmp_stats *st)
{
	memset(st, 0, sizeof *st);
	st->threads_total = gmp__load32_rlx(&gmp__sched.nthreads);
	st->tasks_live = (uint64_t)gmp__tasks_live();
	for (gmp_g *g = gmp__loadp_acq(&gmp__allg); g; g = g->allglink) {
		switch (gmp__load32_rlx(&g->status) & ~(uint32_t)GMP__G_FLAGS) {
		case GMP__G_RUNNABLE:
			st->tasks_runnable++;
			break;
		case GMP__G_WAITING:
			st->tasks_waiting++;
			break;
		case GMP__G_SYSCALL:
			st->tasks_in_syscall++;
			break;
		}
	}
	uint32_t procs = gmp__load32_acq(&gmp__sched.gomaxprocs);
	st->procs = procs;
	st->procs_idle = gmp__load32_rlx(&gmp__sched.npidle);
	st->threads_idle = gmp__load32_rlx(&gmp__sched.nmidle);
	st->threads_spinning = gmp__load32_rlx(&gmp__sched.nmspinning);
	st->spawned = gmp__load64_rlx(&gmp__sched.nspawned_nop);
	for (int i = 0; i < GMP__MAXPROCS_LIMIT; i++) {
		gmp__p *pp = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!pp)
			break;
		st->spawned += gmp__load64_rlx(&pp->nspawned);
		st->steals += gmp__load64_rlx(&pp->nsteals);
	}
	st->global_runq_len = gmp__load64_rlx(&gmp__sched.runqsize);
	st->retakes = gmp__load64_rlx(&gmp__sched.nretakes);
	st->detaches = gmp__load64_rlx(&gmp__sched.ndetaches);
	st->handoffs = gmp__load64_rlx(&gmp__sched.nhandoffs);
	st->uring_ops = gmp__uring_ops();
}

GMP_EXTERN int gmp_stats_read(gmp_stats *out)
{
	if (!out)
		return -EINVAL;
	if (gmp__getm()) {
		stats_read(out);
		return 0;
	}
	if (gmp__rt_hold(false) != 0) {
		memset(out, 0, sizeof *out);
		return 0;
	}
	stats_read(out);
	gmp__rt_release();
	return 0;
}
