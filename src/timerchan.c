/* Timers and tickers as channels, and timers that start a task: Go's
 * time.NewTimer, time.NewTicker and time.AfterFunc. design.md §10.2 is the
 * contract; §29.5 the design, and §29.4 the tick grid that puts a
 * ticker's first tick off to a multiple of gcd(period, 1 ms).
 *
 * A gmp_timer is one runtime timer (timer.h) in a per-P heap, a lock
 * (t->lock, for stop, reset and free) and, for a channel timer, the
 * channel right after it. Its fire functions run wherever timers run, on
 * a scheduler's g0: fire_chan try-sends the time the fire was due, and
 * fire_func starts fn(arg) as a new task. A stop or reset stops the
 * runtime timer (gmp__timer_stop waits out a fire under way) and then
 * takes out any value a fire of the old arming left, which is how no
 * stale value is received after either (Go 1.23's rule).
 */
#include <limits.h>

#include "chan.h"
#include "preempt.h"
#include "runtime.h"
#include "scheduler.h"
#include "timer.h"

struct gmp_timer {
	gmp__timer rt;   /* the runtime timer; rt.arg is this timer */
	gmp__mutex lock; /* stop, reset and free */
	gmp_chan *c;     /* the channel, at the end of this allocation (one
			    malloc per timer); NULL for a func timer */
	gmp_fn fn;       /* a func timer's function, and its argument */
	void *arg;
} __attribute__((aligned(16)));

static void fire_chan(gmp__timer *rt)
{
	gmp_timer *t = rt->arg;
	/* The time it was due, which is at most now (as Go's sendTime sends
	 * the current time less the lateness): a clock read saved per fire,
	 * and ticks exactly a period apart. Full: the reader has not taken
	 * the last one yet; drop this one. */
	int64_t when = rt->when;
	(void)gmp_chan_try_send(t->c, &when);
}

static void fire_func(gmp__timer *rt)
{
	gmp_timer *t = rt->arg;
	/* On g0 with a P: the task goes into that P's runnext. Out of memory
	 * is fatal, as for the timer heap: fn would silently never run. */
	if (gmp_go(t->fn, t->arg) < 0)
		gmp__throw(
			"out of memory starting the task of a gmp_timer_func "
			"timer");
}

/* Tickers tick on a grid of gcd(period, TICK_GRID_NS): see the top
 * comment. */
#define TICK_GRID_NS 1000000

static int64_t deadline_after(int64_t delay)
{
	int64_t now = gmp__nanotime();
	return delay > INT64_MAX - now ? INT64_MAX : now + delay;
}

/* The grid a ticker of period `period` ticks on: gcd(period, 1 ms). */
static int64_t tick_grid(int64_t period)
{
	int64_t a = period, b = TICK_GRID_NS;
	while (b) {
		int64_t r = a % b;
		a = b;
		b = r;
	}
	return a;
}

/* Arms t to fire after delay. The caller is inside the runtime. Returns 0,
 * or the error of starting the runtime for a thread that holds no P. */
static int arm(gmp_timer *t, int64_t delay)
{
	int64_t when = deadline_after(delay);
	int64_t period = t->rt.period;
	if (period > 0 && delay > 0) {
		/* A ticker's first tick goes to the next point of its grid,
		 * and so do all its later ones (the grid divides the
		 * period): see the top comment. A deadline too close to
		 * INT64_MAX to move stays where it is. */
		int64_t grid = tick_grid(period), off = when % grid;
		if (off && when <= INT64_MAX - (grid - off))
			when += grid - off;
	}
	gmp__m *m;
	gmp__getg(&m);
	if (m && m->p) {
		gmp__timer_start(&t->rt, when);
		return 0;
	}
	int err = gmp__rt_hold(true);
	if (err)
		return err;
	gmp__timer_start_on(&t->rt, when, gmp__sched.allp[0]);
	gmp__rt_release();
	return 0;
}

static gmp_timer *timer_make(int64_t delay, int64_t period, gmp_fn fn,
			     void *arg)
{
	if (delay < 0 || period < 0)
		return NULL;
	/* arms on the caller's P: inside the runtime (preempt.h) */
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	size_t chan = fn ? 0 : gmp__chan_bytes(sizeof(int64_t), 1);
	int saved = errno;
	gmp_timer *t = gmp__calloc(1, sizeof *t + chan);
	errno = saved;
	if (!t)
		return NULL;
	if (!fn)
		t->c = gmp__chan_init(t + 1, sizeof(int64_t), 1);
	t->rt.fn = fn ? fire_func : fire_chan;
	t->rt.arg = t;
	t->rt.period = period;
	t->fn = fn;
	t->arg = arg;
	if (arm(t, delay) != 0) {
		gmp__free(t);
		return NULL;
	}
	return t;
}

GMP_EXTERN gmp_timer *gmp_timer_new(int64_t delay_ns, int64_t period_ns)
{
	return timer_make(delay_ns, period_ns, NULL, NULL);
}

GMP_EXTERN gmp_timer *gmp_timer_func(int64_t delay_ns, void (*fn)(void *),
				     void *arg)
{
	if (!fn)
		return NULL;
	return timer_make(delay_ns, 0, fn, arg);
}

GMP_EXTERN gmp_chan *gmp_timer_chan(gmp_timer *t)
{
	if (!t)
		gmp__throw("gmp_timer_chan of a NULL timer");
	return t->c;
}

/* Disarms t (t->lock held) and discards a value an old fire left in the
 * channel. Returns whether a fire was pending. */
static bool disarm(gmp_timer *t)
{
	bool pending = gmp__timer_stop(&t->rt);
	if (t->c) {
		int64_t stale;
		(void)gmp_chan_try_recv(t->c, &stale);
	}
	return pending;
}

GMP_EXTERN bool gmp_timer_stop(gmp_timer *t)
{
	if (!t)
		gmp__throw("gmp_timer_stop of a NULL timer");
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__lock(&t->lock);
	bool pending = disarm(t);
	gmp__unlock(&t->lock);
	return pending;
}

GMP_EXTERN bool gmp_timer_reset(gmp_timer *t, int64_t delay_ns,
				int64_t period_ns)
{
	if (!t)
		gmp__throw("gmp_timer_reset of a NULL timer");
	if (delay_ns < 0 || period_ns < 0)
		gmp__throw("gmp_timer_reset with a negative %s (%lld)",
			   delay_ns < 0 ? "delay" : "period",
			   (long long)(delay_ns < 0 ? delay_ns : period_ns));
	/* arms on the caller's P: inside the runtime (preempt.h) */
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__lock(&t->lock);
	bool pending = disarm(t);
	t->rt.period = period_ns; /* t is in no heap now */
	int err = arm(t, delay_ns);
	gmp__unlock(&t->lock);
	if (err)
		gmp__throw("gmp_timer_reset: the runtime is not running (%d)",
			   err);
	return pending;
}

GMP_EXTERN void gmp_timer_free(gmp_timer *t)
{
	if (!t)
		gmp__throw("gmp_timer_free of a NULL timer");
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__lock(&t->lock);
	disarm(t); /* after it, no fire is under way or to come */
	gmp__unlock(&t->lock);
	if (t->c) /* with a receiver still waiting: aborts */
		gmp__chan_check_unused(t->c);
	gmp__free(t);
}
