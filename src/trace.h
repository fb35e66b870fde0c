/* Tracing and metrics (trace.c, tracejson.c, metrics.c, stall.c): the
 * hooks the scheduler calls, and what they share. design.md §8 is the
 * contract, §38 the design.
 *
 * Two things watch the scheduler at run time:
 *
 *   - the histograms (metrics.c), always on: scheduling latency (a ready
 *     to the run it caused), the time inside gmp_enter_syscall brackets,
 *     and the length of slices (one run of a task on a P). They sample,
 *     as Go's /sched/latencies does, so that the paths that a program
 *     takes millions of times a second pay only a decrement and a branch
 *     per ready or system call, and nothing at all per switch;
 *   - the execution trace (trace.c), off until gmp_trace_start or
 *     GMP_TRACE: every switch, ready, create, system call, handoff,
 *     retake, detach, steal and M transition, recorded into per-P
 *     buffers (the P's holder writes, nobody else), per-M buffers (an M
 *     that holds no P) and a small locked side buffer (sysmon and threads
 *     that are not the runtime's), and written as Chrome trace-event JSON
 *     (tracejson.c) off the paths that record it.
 *
 * How a switch costs nothing: the scheduler's short path (gmp__schedule)
 * already tests sysmon's preempt byte of the P; the tracer's byte, tattn,
 * sits beside it and the two are tested as one 16-bit word. While tattn
 * is clear the short path is exactly what it was. The tracer sets it on a
 * P when that P's next schedule() must be seen: while a trace is being
 * recorded (always), and while a measured slice is open (its end is the
 * next schedule). schedule_slow then records the end of the run and, on
 * the way out, the start of the next (gmp__trace_sched, gmp__trace_run).
 *
 * Where a run ends for any other reason than a schedule() on its P (the
 * P released, retaken from a system call, detached by sysmon, the task
 * exits), a hook on that rarer path closes it.
 *
 * Scheduling latency needs the time of the ready: a sampled ready (one in
 * gmp__sample_ready per P) stores it in the G and sets the G's TRACK bit
 * (internal.h), which execute's status check meets on whatever P runs the
 * G (gmp__metrics_tracked), so no ready sample is lost whichever path the
 * G takes, and execute's short path is unchanged.
 *
 * Timestamps are CPU ticks (rdtsc, cntvct_el0: a few nanoseconds, against
 * some twenty for clock_gettime here), turned into the runtime's clock
 * (gmp__nanotime, CLOCK_MONOTONIC) with a linear fit: for the histograms,
 * a rate measured once per process; for a trace, the (ticks, ns) pairs
 * taken when it starts and stops. Where the TSC is not invariant the
 * ticks are gmp__nanotime itself.
 */
#ifndef GMP_TRACE_H
#define GMP_TRACE_H

#include "internal.h"

/* ---- ticks ------------------------------------------------------------- */

/* Whether ticks come from the CPU's counter, and whether an x86 CPU has
 * PREFETCHW (trace.c uses it): metrics.c decides both once per process,
 * at the first gmp_init; read-only after. */
extern bool gmp__ticks_cpu, gmp__cpu_prefetchw;

/* The CPU's tick counter itself (only where gmp__ticks_cpu says it is
 * used; 0 on other architectures, which never use it). */
static inline __attribute__((always_inline)) uint64_t gmp__cputicks(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

static inline __attribute__((always_inline)) uint64_t gmp__ticks(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	if (GMP__LIKELY(gmp__ticks_cpu))
		return gmp__cputicks();
#endif
	return (uint64_t)gmp__nanotime();
}

/* Nanoseconds in a span of ticks (0 until the rate is known: the first
 * millisecond of the process's first runtime). */
uint64_t gmp__ticks_to_ns_slow(uint64_t dt);
extern volatile uint64_t gmp__ticks_mult;

static inline __attribute__((always_inline)) uint64_t
gmp__ticks_to_ns(uint64_t dt)
{
	/* acquire: pairs with the release that publishes the rate */
	uint64_t mult = gmp__load64_acq(&gmp__ticks_mult);
	if (GMP__UNLIKELY(!mult))
		return gmp__ticks_to_ns_slow(dt);
	uint64_t ns = (uint64_t)(((__uint128_t)dt * mult) >> 32);
	return ns ? ns : dt != 0;
}
/* Picks the tick source and starts measuring its rate (gmp_init). */
void gmp__ticks_init(void);

/* ---- what a trace records -----------------------------------------------
 *
 * An event is a header word, tick << 8 | kind, then the kind's argument
 * words (gmp__trev_words). Events of one writer are in time order. */
enum gmp__trev {
	GMP__EV_PSTART = 1, /* P buf: [m] a P is held by M m from here */
	GMP__EV_PSTOP,      /* P buf: [m | why << 56] the P is let go */
	GMP__EV_RUN,        /* P buf: [gid, fn] a task's run begins */
	GMP__EV_STOP,       /* P buf: [gid, how | reason << 8] it ends */
	GMP__EV_READY,      /* any: [gid, reason | by << 8 | byg << 16] */
	GMP__EV_CREATE,     /* any: [gid, fn, parent gid] */
	GMP__EV_SYSENTER,   /* P buf: [gid | block << 63] */
	GMP__EV_SYSEXIT,    /* P or M buf: [gid | lost << 63] */
	GMP__EV_STEAL,      /* P buf: [victim P | n << 32] */
	GMP__EV_HANDOFF,    /* any: [P] handed to another M */
	GMP__EV_MSTART,     /* M buf: [tid] the thread began */
	GMP__EV_MPARK,      /* M buf: [] the M sleeps (idle) */
	GMP__EV_MUNPARK,    /* M buf: [] it woke */
	GMP__EV_MWAKE,      /* any: [m] wakes idle M m */
	GMP__EV_MEXIT,      /* M buf: [] the thread ends */
	GMP__EV_STATE,      /* side: [gid, status | reason << 8 | (P+1) << 16,
				fn] a task as the trace found it at its start */
	GMP__EV_MSTATE,     /* side: [m, tid] an M the trace found at its
				start */
	GMP__EV_LOST,       /* any: [n] events a writer could not record */
	GMP__EV_SWITCH,     /* P buf: [gid, how | reason << 8, gid2, fn2]
			       STOP of gid and RUN of gid2 at one tick */
	GMP__EV_NKINDS,
};

/* Why a run ended (EV_STOP's how). */
enum {
	GMP__TRSTOP_NONE = 0,
	GMP__TRSTOP_YIELD,   /* runnable again, at its own request */
	GMP__TRSTOP_PREEMPT, /* runnable again, its slice over (sysmon) */
	GMP__TRSTOP_PARK,    /* waiting: the reason follows */
	GMP__TRSTOP_EXIT,    /* it ended */
	GMP__TRSTOP_SYSCALL, /* in a system call that lost the P */
	GMP__TRSTOP_DETACH,  /* sysmon took the P; the task runs on */
	GMP__TRSTOP_LOCKED,  /* its P went to another M (a locked task) */
	GMP__TRSTOP_NKINDS,
};

/* Why a P was let go (EV_PSTOP's why, and gmp__trace_pstop's). */
enum {
	GMP__TRP_RELEASE = 0, /* its M released it (idle, handoff) */
	GMP__TRP_TAKEN = 1,   /* taken from its M's task: a retake from a
				 system call, or a detach */
};

/* Who readied a task (EV_READY's by). */
enum {
	GMP__TRBY_TASK = 0, /* the task byg */
	GMP__TRBY_TIMER,    /* a timer, on g0 */
	GMP__TRBY_POLL,     /* the network poller or the io_uring reaper */
	GMP__TRBY_SCHED,    /* scheduler code on g0 (an unlock function) */
	GMP__TRBY_THREAD,   /* a thread that is not a task */
	GMP__TRBY_NKINDS,
};

/* Writers (gmp__trsrc.id >> 56). */
enum { GMP__TRSRC_P = 1, GMP__TRSRC_M = 2, GMP__TRSRC_SIDE = 3 };

unsigned gmp__trev_words(unsigned kind);

/* Whether a trace is being recorded: set (release) by gmp_trace_start,
 * cleared by gmp_trace_stop; hooks on rare paths test it (relaxed). */
extern volatile uint32_t gmp__trace_on;

static inline bool gmp__tracing(void)
{
	return GMP__UNLIKELY(gmp__load32_rlx(&gmp__trace_on) != 0);
}

/* ---- sampling and the histograms ------------------------------------------ */

/* One in this many readies, and system calls, per P, is measured
 * (export_test.h lets tests measure every one). */
extern uint32_t gmp__sample_ready, gmp__sample_syscall;

/* Bucket i counts durations d with 2^i <= d < 2^(i+1) ns; bucket 0 also
 * d < 1 ns, the last everything longer. */
static inline __attribute__((always_inline)) unsigned
gmp__hist_bucket(uint64_t ns)
{
	if (ns < 2)
		return 0;
	unsigned b = 63u - (unsigned)__builtin_clzll(ns);
	return b < GMP__HIST_NBUCKETS ? b : GMP__HIST_NBUCKETS - 1;
}

/* Counts ns in one of p's histograms: its owner only (a relaxed load and
 * store, no read-modify-write; gmp_metrics_read reads racily). */
static inline __attribute__((always_inline)) void
gmp__hist_add(gmp__p *p, unsigned which, uint64_t ns)
{
	volatile uint64_t *c = &p->tr.hist[which][gmp__hist_bucket(ns)];
	gmp__store64_rlx(c, gmp__load64_rlx(c) + 1);
}

/* The same from a thread without a P (a system call that lost its P):
 * into a shared histogram, with an atomic add, on that rare path. */
void gmp__hist_add_nop(unsigned which, uint64_t ns);

/* The task g, readied with the TRACK bit, is about to run on p (execute's
 * odd path, sched.c; the bit goes with the RUNNING store). Its wait is
 * measured, and its run becomes a measured slice: the P's next schedule()
 * ends it (tattn). */
static inline __attribute__((always_inline)) void
gmp__metrics_tracked(gmp__p *p, gmp_g *g)
{
	uint64_t now = gmp__ticks();
	uint64_t ns = gmp__ticks_to_ns(now - g->readyt);
	g->readyt = 0;
	if (ns)
		gmp__hist_add(p, GMP__HIST_SCHED, ns);
	gmp__store64_rlx(&p->tr.slice_t0, now);
	gmp__store8_rlx(&p->tattn, 1);
}

/* A measured slice on p ends at tick `now` (the owner, or whoever took p
 * from it). */
static inline __attribute__((always_inline)) void gmp__slice_end(gmp__p *p,
								 uint64_t now)
{
	uint64_t t0 = gmp__load64_rlx(&p->tr.slice_t0);
	if (t0) {
		gmp__store64_rlx(&p->tr.slice_t0, 0);
		uint64_t ns = gmp__ticks_to_ns(now - t0);
		if (ns)
			gmp__hist_add(p, GMP__HIST_SLICE, ns);
	}
}

/* ---- the hooks ------------------------------------------------------------
 *
 * Each inline hook is the whole cost its call site pays while nothing is
 * measured or recorded; its out-of-line half is in trace.c or metrics.c. */

void gmp__trace_ready_slow(gmp__p *p, gmp_g *g, gmp_g *self, unsigned by);
void gmp__trace_ready_nop(gmp_g *g, unsigned by);

/* Whether this ready on p is one the tracer or the sampler wants: p's
 * countdown reaches zero (every ready while a trace is recorded). */
static inline __attribute__((always_inline)) bool
gmp__trace_ready_due(gmp__p *p)
{
#if defined(__x86_64__)
	/* One instruction and a branch: GCC would load, subtract and store. */
	__asm__ goto("subl $1, %0\n\tjz %l[slow]"
		     :
		     : "m"(p->tr.ready_tick)
		     : "cc", "memory"
		     : slow);
	return false;
slow:
	return true;
#else
	return GMP__UNLIKELY(--p->tr.ready_tick == 0);
#endif
}

/* g (RUNNABLE, not yet queued) was readied on a thread holding p: by the
 * running task self, or by g0 code (self NULL; `by` says which). */
static inline __attribute__((always_inline)) void
gmp__trace_ready(gmp__p *p, gmp_g *g, gmp_g *self, unsigned by)
{
	if (gmp__trace_ready_due(p))
		gmp__trace_ready_slow(p, g, self, by);
}

/* gmp__trace_ready's slow half and the queueing of g into p's run queue
 * (gmp__runq_put), for a ready that is due: the clock is read before the
 * queueing and the event's time word written after, so that the queue's
 * atomic read-modify-write does not wait for the clock (trace.c). */
void gmp__trace_ready_put(gmp__p *p, gmp_g *g, gmp_g *self, unsigned by,
			  bool next);

void gmp__trace_sched_slow(gmp__m *m, gmp__p *p);
void gmp__trace_run_slow(gmp__m *m, gmp__p *p, gmp_g *g, bool natural);

/* schedule_slow's first act, when it was sent by the tracer's byte (or
 * the P has a measured slice open): the run that ended is recorded. */
static inline bool gmp__trace_sched(gmp__m *m, gmp__p *p)
{
	if (GMP__LIKELY(!gmp__load8_rlx(&p->tattn)))
		return false;
	gmp__trace_sched_slow(m, p);
	return true;
}

/* While tracing: the run on p ends and g's begins, at one tick, `now`
 * (the scheduler's short path, sent by the tracer's byte). */
void gmp__trace_switch(gmp__m *m, gmp__p *p, gmp_g *g, uint64_t now);

/* The owner gives up the tracer's byte, unless a trace is being
 * recorded. A trace that starts meanwhile may find its store overwritten:
 * the P then joins it at its next ready or system call slow path. */
static inline __attribute__((always_inline)) void gmp__tattn_clear(gmp__p *p)
{
	gmp__store8_rlx(&p->tattn, 0);
	if (GMP__UNLIKELY(gmp__load32_rlx(&gmp__trace_on)))
		gmp__store8_rlx(&p->tattn, 1);
}

/* gmp__trace_slice_done without a call, where the clock allows (the CPU's
 * ticks, their rate known): true if done, false (nothing done) else. So
 * that its caller, which schedules next, needs no frame. */
static inline __attribute__((always_inline)) bool
gmp__trace_slice_done_fast(gmp__p *p)
{
#if defined(__x86_64__) || defined(__aarch64__)
	/* acquire: pairs with the release that publishes the rate */
	uint64_t mult = gmp__load64_acq(&gmp__ticks_mult);
	if (GMP__UNLIKELY(!gmp__ticks_cpu || !mult))
		return false;
	/* racy readers: stall.c */
	gmp__store32_rlx(&p->tr.sched_seen, p->tr.sched_seen + 1);
	uint64_t t0 = gmp__load64_rlx(&p->tr.slice_t0);
	if (t0) {
		gmp__store64_rlx(&p->tr.slice_t0, 0);
		uint64_t ns = (uint64_t)(((__uint128_t)(gmp__cputicks() - t0) *
					  mult) >>
					 32);
		if (ns)
			gmp__hist_add(p, GMP__HIST_SLICE, ns);
	}
	gmp__tattn_clear(p);
	return true;
#else
	(void)p;
	return false;
#endif
}

/* The P's schedule() came the slow way because of the tracer's byte, and
 * no trace is being recorded: a measured slice ends (if one is open),
 * and the byte is cleared. Counted for stall.c. */
static inline __attribute__((always_inline)) void
gmp__trace_slice_done(gmp__p *p)
{
	/* racy readers: stall.c */
	gmp__store32_rlx(&p->tr.sched_seen, p->tr.sched_seen + 1);
	gmp__slice_end(p, gmp__ticks());
	gmp__tattn_clear(p);
}

/* m is about to run g on p by a way other than gmp__schedule's short path:
 * the run is recorded while tracing, and measured if natural (the P came
 * to schedule on its own, not sent by the tracer). */
static inline __attribute__((always_inline)) void
gmp__trace_run(gmp__m *m, gmp__p *p, gmp_g *g, bool natural)
{
	if (GMP__LIKELY(!gmp__load8_rlx(&p->tattn))) {
		if (natural) {
			gmp__store64_rlx(&p->tr.slice_t0, gmp__ticks());
			gmp__store8_rlx(&p->tattn, 1);
		}
		return;
	}
	gmp__trace_run_slow(m, p, g, natural);
}

void gmp__trace_pstart_slow(gmp__m *m, gmp__p *p);
void gmp__trace_pstop_slow(gmp__m *m, gmp__p *p, unsigned why);

/* m now holds p (gmp__acquirep). */
static inline void gmp__trace_pstart(gmp__m *m, gmp__p *p)
{
	if (gmp__tracing())
		gmp__trace_pstart_slow(m, p);
}

/* m is letting p go (gmp__releasep), or someone took it from m's task
 * (gmp__syscall_takep: why is the task's status then). */
static inline void gmp__trace_pstop(gmp__m *m, gmp__p *p, unsigned why)
{
	if (GMP__UNLIKELY(gmp__load8_rlx(&p->tattn)))
		gmp__trace_pstop_slow(m, p, why);
}

void gmp__trace_sysenter_slow(gmp__m *m, gmp__p *p, gmp_g *g, bool block);
void gmp__trace_sysexit_slow(gmp__m *m, gmp_g *g);

/* g, running on m with p, enters a system call bracket. */
static inline __attribute__((always_inline)) void
gmp__trace_sysenter(gmp__m *m, gmp__p *p, gmp_g *g, bool block)
{
	if (GMP__UNLIKELY(--p->tr.sys_tick == 0))
		gmp__trace_sysenter_slow(m, p, g, block);
}

/* g is RUNNING again after its system call (m->p is ours or NULL). */
static inline __attribute__((always_inline)) void gmp__trace_sysexit(gmp__m *m,
								     gmp_g *g)
{
	if (GMP__UNLIKELY(m->tr.sys_t0 != 0))
		gmp__trace_sysexit_slow(m, g);
}

void gmp__trace_create_slow(gmp__p *p, gmp_g *g);
static inline void gmp__trace_create(gmp__p *p, gmp_g *g)
{
	if (gmp__tracing())
		gmp__trace_create_slow(p, g);
}

void gmp__trace_exit_slow(gmp__m *m, gmp__p *p, gmp_g *g);
/* g ends on m (goexit0, before its G is cached for reuse). */
static inline void gmp__trace_exit(gmp__m *m, gmp__p *p, gmp_g *g)
{
	if (GMP__UNLIKELY(gmp__load8_rlx(&p->tattn)))
		gmp__trace_exit_slow(m, p, g);
}

/* The task on m switches out because its slice is over (gopreempt_m). */
static inline void gmp__trace_preempted(gmp__m *m)
{
	gmp__p *p = m->p;
	if (GMP__UNLIKELY(gmp__load8_rlx(&p->tattn)))
		p->tr.stopwhy = GMP__TRSTOP_PREEMPT;
}

/* A new P (its trace writer's id). */
static inline void gmp__trace_p_init(gmp__p *p)
{
	p->tr.src.id = (uint64_t)GMP__TRSRC_P << 56 | (uint32_t)p->id;
	p->tr.ready_tick = p->tr.sys_tick = 1; /* never 0: see above */
}

/* Rarer events, recorded only while tracing (trace.c). */
void gmp__trace_mstart(gmp__m *m);
void gmp__trace_mexit(gmp__m *m);
void gmp__trace_mpark(gmp__m *m, bool woke);
void gmp__trace_mwake(gmp__m *nm);
void gmp__trace_handoff(gmp__p *p);
void gmp__trace_steal(gmp__p *p, gmp__p *victim, uint32_t n);

/* ---- the rest of the runtime's side ---------------------------------------- */

/* gmp_init (after the scheduler started) and gmp_shutdown (before the
 * scheduler stops): GMP_TRACE's trace. */
void gmp__trace_init(void);
void gmp__trace_shutdown(void);
/* gmp_shutdown, after the Ms exited: frees what the trace kept. */
void gmp__trace_release(void);
/* gmp_shutdown: the histograms start from zero in the next runtime. */
void gmp__metrics_reset(void);
/* In the child of fork(): no trace runs there. */
void gmp__trace_forked(void);
/* Writes a flight recorder's window now, best effort, from a signal
 * handler or a thread about to abort (no locks waited for, no malloc). */
void gmp__trace_dump_emergency(void);
/* sysmon, every round: the stall report (stall.c); and whether it watches
 * a detached task's stretch, which it must go on looking at even with
 * every P idle (no deep sleep). */
void gmp__stall_check(int64_t now);
bool gmp__stall_watching(void);
/* sysmon's schedtrace line: appends the histograms' p50 and p99 since the
 * previous line (metrics.c). Returns the length written. */
int gmp__metrics_schedtrace(char *buf, size_t size);

/* The settings GMP_TRACE and GMP_DEBUG=stall give (runtime.c parses). */
typedef struct gmp__trace_settings {
	char path[4096];    /* "" if GMP_TRACE is unset */
	uint64_t flight_mb; /* 0: a full trace; else the flight recorder's
			       size in MiB */
} gmp__trace_settings;
int gmp__trace_parse(const char *v, gmp__trace_settings *out);
extern gmp__trace_settings gmp__trace_cfg;

#endif
