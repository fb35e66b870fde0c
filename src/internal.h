/* What every part of the runtime needs (Go's runtime2.go): the G, M and P
 * structures with their states, the global scheduler state, the settings,
 * and the few calls that truly everything makes (the allocator pair, the
 * thread-local accessors, the G status transitions). Each subsystem
 * declares its own functions in its own header beside its .c; tests reach
 * the runtime through export_test.h.
 *
 * Read src/sched.c's opening comment first, and docs/design.md §21 for the
 * states and owners. Here, every shared field says who owns it and what
 * protects it, in one of four words:
 *
 *   "owner"      only the M that holds the object (the P's M; the G's M
 *                while it runs) reads or writes it; no atomics needed.
 *   "sched.lock" read and written under sched.lock.
 *   "atomic"     accessed only through src/atomic.h, with the order named
 *                at each access.
 *   "racy"       read without synchronisation by sysmon, stats or dumps,
 *                which tolerate stale values (still accessed atomically,
 *                relaxed, so that the C memory model and TSan agree).
 */
#ifndef GMP_INTERNAL_H
#define GMP_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmp.h"
#include "atomic.h"
#include "ctx.h"
#include "lock.h"
#include "os.h"
#include "timer.h"

typedef struct gmp__m gmp__m;
typedef struct gmp__p gmp__p;

#define GMP__LIKELY(x) __builtin_expect(!!(x), 1)
#define GMP__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GMP__CACHELINE 64

/* Debug-only consistency checks: `if (GMP__DEBUG)` keeps them compiled (and
 * so correct) in every build, and the optimiser drops them in release. */
#ifdef NDEBUG
#define GMP__DEBUG 0
#else
#define GMP__DEBUG 1
#endif

/* Test hooks: code that exists only for tests (export_test.h) is compiled
 * only into the tests' copy of the library, which the build makes from
 * the same sources with GMP_TEST_HOOKS defined (docs/hacking.md, "Test
 * hooks"). A hook's definition sits in `#if GMP__TEST_HOOKS`; library
 * code that reads a test switch reads `GMP__TEST_HOOKS && switch`, a
 * constant false in the installed libraries. It must never change a type
 * or a header's inline code: the tests' copy mixes objects built with
 * and without it. */
#ifdef GMP_TEST_HOOKS
#define GMP__TEST_HOOKS 1
#else
#define GMP__TEST_HOOKS 0
#endif

_Noreturn void gmp__throw(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), cold));

/* ------------------------------------------------------------------------
 * Tracing and metrics state kept in Ms and Ps (trace.h, trace.c,
 * metrics.c explain it). */

/* Where one writer of trace events is filling its current chunk: a P
 * (its holder), an M (its thread, while it holds no P), or the shared
 * side buffer (under its lock). pos/end point into chunk's words; epoch is
 * the trace the chunk belongs to. Owner. */
typedef struct gmp__trsrc {
	uint64_t *pos, *end;
	struct gmp__trchunk *chunk;
	uint32_t epoch;
	uint64_t id;  /* kind << 56 | number: whose events these are */
	uint64_t seq; /* chunks this source has filled in this trace */
} gmp__trsrc;

enum { GMP__HIST_NBUCKETS = 40 }; /* GMP_HIST_BUCKETS */
enum { GMP__HIST_SCHED = 0, GMP__HIST_SYSCALL = 1, GMP__HIST_SLICE = 2 };

typedef struct gmp__ptrace {
	/* Readies and system calls until the hook's next slow call (1 while
	 * tracing: each one is recorded; never 0 between calls), and, while
	 * tracing, until the next measured one. Owner. */
	uint32_t ready_tick, sys_tick;
	int32_t ready_left, sys_left;
	/* A measured slice is open: the tick it began (0: none); owner
	 * writes, stall.c reads racily. */
	volatile uint64_t slice_t0;
	/* While tracing: the task whose run is open on this P, 0 if none,
	 * and why the last switch on this P happened if not by schedule()'s
	 * own reading of the task (GMP__TRSTOP_*). Owner. */
	int64_t rung;
	gmp_g *rungp;
	uint32_t stopwhy;
	gmp__trsrc src;
	/* The P's schedule() rounds that the tracer's byte sent the slow way
	 * (owner writes, stall.c reads racily), and sysmon's record of the
	 * stretch it watches on this P (sysmon only; stall.c). */
	volatile uint32_t sched_seen;
	uint32_t stall_tick, stall_seen;
	bool stall_reported;
	gmp_g *stall_g;
	int64_t stall_gid, stall_since;
	/* The histograms: owner writes (a relaxed load and store of its
	 * own counter, no read-modify-write), gmp_metrics_read reads racily. */
	volatile uint64_t hist[3][GMP__HIST_NBUCKETS];
} gmp__ptrace;

typedef struct gmp__mtrace {
	gmp__trsrc src;   /* events while the M holds no P; owner */
	uint64_t sys_t0;  /* tick a measured system call began, 0: none */
	bool sys_sampled; /* it counts in the histogram (else only traced) */
	/* sysmon only (stall.c): a detached task's stretch, carried over
	 * from the P it was detached from. */
	bool stall_reported;
	gmp_g *stall_g;
	int64_t stall_gid, stall_since;
} gmp__mtrace;

/* ------------------------------------------------------------------------
 * G: a task.
 *
 * States (Go's _G* states, one transition helper: gmp__casgstatus):
 *
 *   IDLE      just allocated, not yet initialised          owner: allocator
 *   RUNNABLE  on a run queue (a P's ring, runnext, or the global queue),
 *             or in hand between a queue and execute        owner: the queue
 *   RUNNING   executing on an M that holds a P, or on an M whose P sysmon
 *             detached while the task ran its own code (see `detach`
 *             below: it takes a P back before it uses the runtime)
 *                                                            owner: that M
 *   SYSCALL   in a wrapped system call; its M may or may not still hold a
 *             P (sysmon may retake it)                       owner: its M
 *   WAITING   parked by gmp_park; only gmp_ready may move it  owner: waker
 *   DEAD      finished; on a free list with its stack        owner: free list
 *
 * The SCAN bit may be set on SYSCALL by sysmon (or by an M leaving a
 * syscall) while it inspects the G's M and P: while it is set the G cannot
 * leave SYSCALL, so the inspector may take the P (Go 1.26's scheme, see
 * src/syscall.c).
 *
 * The TRACK bit may be set on RUNNABLE by whoever readied the G, before it
 * queues it, when the ready was sampled for the scheduling-latency
 * histogram (metrics.c): execute's transition to RUNNING then finds a
 * status that is not plain RUNNABLE and takes the cold path, which
 * measures the wait and drops the bit. Readers of a G's status that
 * compare it mask GMP__G_FLAGS.
 */
enum gmp__gstatus {
	GMP__G_IDLE = 0,
	GMP__G_RUNNABLE = 1,
	GMP__G_RUNNING = 2,
	GMP__G_SYSCALL = 3,
	GMP__G_WAITING = 4,
	GMP__G_DEAD = 5,
	GMP__G_NSTATES,
	GMP__G_SCAN = 0x1000,
	GMP__G_TRACK = 0x2000,
	GMP__G_FLAGS = GMP__G_SCAN | GMP__G_TRACK,
};

/* Why a task waits; printed by dumps and the gdb extension. */
enum gmp__waitreason {
	GMP__WAIT_NONE = 0,
	GMP__WAIT_PARK,  /* gmp_park by the user */
	GMP__WAIT_YIELD, /* runnable after gmp_yield (never in WAITING) */
	GMP__WAIT_SEMACQUIRE,
	GMP__WAIT_MUTEX,
	GMP__WAIT_WG,
	GMP__WAIT_CHAN_SEND,
	GMP__WAIT_CHAN_RECV,
	GMP__WAIT_SELECT,
	GMP__WAIT_SELECT_NOCASES,
	GMP__WAIT_SLEEP,
	GMP__WAIT_IO_READ,
	GMP__WAIT_IO_WRITE,
	GMP__WAIT_RWMUTEX_RLOCK,
	GMP__WAIT_RWMUTEX_LOCK,
	GMP__WAIT_COND,
	GMP__WAIT_SEM,
	GMP__WAIT_NREASONS,
};

const char *gmp__gstatus_name(uint32_t status);
const char *gmp__waitreason_name(uint32_t reason);

/* A task's stack: usable bytes [lo, hi); the guard page (if any) sits just
 * below lo. Owned by its G for the G's whole life (dead Gs keep theirs);
 * the G's own memory comes with it (stack.c). */
typedef struct gmp__stack {
	uintptr_t lo, hi;
	bool guarded;
	uint32_t valgrind_id; /* VALGRIND_STACK_REGISTER handle, or 0 */
} gmp__stack;

struct gmp_g {
	gmp__gobuf sched;         /* saved context while not running; owner */
	gmp__stack stack;         /* immutable while the G is live */
	volatile uint32_t status; /* atomic: see gmp__casgstatus */
	volatile uint32_t waitreason; /* racy: written by the G as it parks */
	int64_t id; /* owner; > 0 while live, reused Gs get new ids */
	gmp_fn fn;  /* entry function and its argument; owner */
	void *arg;
	/* gmp_main's task, until its function returns: the waiting thread
	 * that gmp_exit must tell (runtime.c); NULL otherwise. Owner. */
	struct gmp__main *mainwait;
	gmp_g *schedlink; /* next in a run queue or free list; queue owner */
	/* gfreebatch: global free list: the next batch (on the first G of a
	 * batch); under gfree.lock. readyt: while the G is RUNNABLE with the
	 * TRACK bit (a dead G's field is never a live G's), the tick of the
	 * sampled ready (metrics.c); written by the readier before it
	 * queues the G, read and cleared by execute. */
	union {
		gmp_g *gfreebatch;
		uint64_t readyt;
	};
	gmp__m *volatile m; /* the M running it; NULL when not running;
				   owner writes, sysmon reads racily */
	gmp__m *lastm;      /* racy: the M it ran on last (for dumps) */
	gmp__m *lockedm;    /* M this G is locked to (LockOSThread); owner */
	/* Preemption (preempt.h). inrt: 1 while the thread running the
	 * task is inside the runtime on its behalf (using its P), 0 while
	 * it runs the task's own code; written by that thread only, with
	 * plain stores in, a store-release out; sysmon reads it after its
	 * asymmetric barrier. detach: GMP__DETACH_*, CASed by sysmon and by
	 * the task's thread as preempt.h describes. */
	volatile uint8_t inrt;
	uint8_t stkstate; /* GMP__STK_*: what trimming knows of the stack;
			     whoever holds the G (stack.c) */
	volatile uint8_t detach;
	int saved_errno; /* errno across switch points; owner */
	void **keys;     /* task-local values, gmp_key.id-indexed; owner */
	uint32_t nkeys;  /* capacity of keys[] */
	/* The length of the batch this G heads on the global free list
	 * (gfreebatch's); here, in a hole, so that gmp_g stays within
	 * 256 bytes, four cache lines beside its stack. */
	int32_t gfreen;
	/* A task parked in gmp_cond_wait: its waiter, through which the
	 * parker that takes it off runnext may hand it the mutex (cond.c);
	 * NULL otherwise. Written by the task, read by that parker while the
	 * task is off every queue. */
	void *param;
	/* How deep the running task went (stack.c): the lowest sp seen at
	 * its switch points. Owner, and the holder of the dead G. */
	uintptr_t stklow;
	gmp_g *allglink; /* all-G list, under gmp__allg_lock */
	/* Sanitizer and Valgrind state for this G's stack (src/fiber.h). */
	void *asan_fake_stack;
	uintptr_t asan_low; /* lowest live frame when the task died */
	void *tsan_fiber;
	/* Where this task's last read lock went (rwmutex.c): the rwmutex's
	 * address << 16 | its reader slot's index + 1, or 0. Owner. */
	uint64_t rwrec;
};

/* ------------------------------------------------------------------------
 * M: an OS thread the runtime created.
 *
 * An M runs scheduler code on its g0 stack, which is the thread's own stack
 * (mcall returns to g0sp, the top of it, every time: schedule() never
 * returns, so the g0 stack never holds anything older than one scheduling
 * round). An M holds at most one P; without one it is idle (parked on
 * park), spinning, in a syscall, or locked and waiting for its G.
 */
struct gmp__m {
	int64_t id;
	gmp_g *volatile curg; /* G running now; owner writes (relaxed
				    atomic), sysmon and dumps read racily */
	gmp__p *volatile p;   /* P held; owner (sysmon may clear it while
				    curg is SYSCALL|SCAN, see syscall.c) */
	gmp__p *nextp;        /* P handed over by startm; set before the
				    notewakeup that releases the M */
	gmp__p *oldp;         /* P held when the syscall began; owner */
	/* The P sysmon took when it detached curg (preempt.c): written by
	 * sysmon while curg->detach is TAKING, read by the owner once it
	 * sees DETACHED (acquire), which orders the two. */
	gmp__p *detachp;
	uint32_t syscalltick;   /* p->syscalltick at entersyscall; owner */
	volatile bool spinning; /* owner; counted in sched.nmspinning */
	volatile bool idle;     /* on sched.midle; sched.lock */
	bool exiting;           /* set with park woken: leave the thread */
	gmp__note park;         /* where the idle M sleeps */
	gmp__m *schedlink;      /* idle list (sched.midle); sched.lock */
	gmp__m *alllink;        /* all-M list; immutable once linked */
	gmp__m *freelink;       /* sched.freem; sched.lock */

	/* LockOSThread (src/thread.c): the G locked to this M, and how many
	 * gmp_lock_os_thread calls it has yet to undo. locked_int is the
	 * runtime's own lock (Go's lockedInt): a detached task waiting for
	 * a P is locked to its M for the wait, so that it never leaves its
	 * thread (preempt.c). Owner. */
	gmp_g *volatile lockedg;
	uint32_t locked_ext;
	uint32_t rwnote; /* rwmutex.c: contended read locks seen; owner */
	bool locked_int;

	/* gmp_park's arguments, consumed by park_m on g0. */
	gmp_unlock_fn waitunlockf;
	void *waitlock;
	/* While g0 runs a batch of due timers (timer.c): the tasks their
	 * functions ready, collected here in order instead of queued one
	 * by one, and queued together after the batch
	 * (gmp__ready_flush). NULL otherwise. Owner. */
	struct gmp__gqueue *readyq;

	/* Thread and g0 stack. */
	pthread_t thread;
	pid_t tid;               /* racy: for dumps and tests */
	bool thread_joinable;    /* a thread was created and not yet joined */
	uintptr_t g0sp;          /* where mcall starts g0 frames; owner */
	uintptr_t g0_lo, g0_hi;  /* the thread's stack bounds; owner */
	uint32_t valgrind_g0_id; /* g0's VALGRIND_STACK_REGISTER handle */
	void (*mstartfn)(gmp__m *);  /* run once on the new thread before
				       scheduling; NULL for plain workers */
	volatile uint32_t *preemptp; /* this thread's preempt flag (tls.c) */
	int *errnop;                 /* this thread's errno (&errno on it) */
	uint64_t rand;               /* owner: cheap per-M random state */
	int64_t idle_since;          /* when it last parked idle; owner */
	jmp_buf *exitjmp;            /* mstart's exit point; owner */

	void *asan_fake_stack_g0;
	uintptr_t asan_g0_low; /* lowest live g0 frame when it left g0 */
	void *tsan_fiber_g0, *tsan_fiber_thread;
	uint32_t tsan_g0_rounds;

	/* Tracing and metrics (trace.h): this M's event buffer, used while
	 * it holds no P, and the sampled system call in progress. */
	gmp__mtrace tr;
};

/* ------------------------------------------------------------------------
 * P: a logical processor. An M must hold one to run tasks.
 *
 * States:
 *   IDLE     on sched.pidle (no M)                          sched.lock
 *   RUNNING  held by an M (running a task, scheduling, or with its task
 *            in a syscall)                                  that M
 *   DEAD     beyond gomaxprocs after gmp_set_maxprocs shrank the count;
 *            kept (Ps are never freed while running) and revived if the
 *            count grows again                              sched.lock
 */
enum gmp__pstatus {
	GMP__P_IDLE = 0,
	GMP__P_RUNNING = 1,
	GMP__P_DEAD = 2,
};

#define GMP__RUNQ_SIZE 256u

struct gmp__p {
	int32_t id;
	volatile uint32_t status;    /* atomic store under sched.lock or by the
				     holder; racy loads by sysmon/stealers */
	gmp__p *link;                /* sched.pidle; sched.lock */
	gmp__m *volatile m;          /* holder; racy reads by sysmon */
	volatile uint32_t schedtick; /* owner writes, sysmon reads (racy) */
	volatile uint32_t syscalltick; /* owner writes, sysmon reads (racy) */
	/* Why the next schedule() on this P must take the slow way: the
	 * scheduler's short path tests both bytes at once (attn).
	 * preempt: sysmon: the slice expired, skip runnext. tattn: the
	 * tracer (trace.h): a measured slice is open, or a trace is being
	 * recorded; set by the owner, and by gmp_trace_start on every P. */
	union {
		volatile uint16_t attn;
		struct {
			volatile bool preempt;
			volatile uint8_t tattn;
		};
	};
	uint32_t rand; /* owner: randomised-scheduling state */

	/* sysmon's private record of what it saw (src/sysmon.c). */
	struct {
		uint32_t schedtick, syscalltick;
		int64_t schedwhen, syscallwhen;
		/* how long this slice may last before its task is asked to
		 * yield, and when sysmon may detach the P if it has not
		 * yielded by then (0: not asked yet); preempt.h */
		int64_t slice, detachwhen;
		/* The slice judged on CPU time (slice.c): the M whose thread
		 * the readings are of (NULL: none yet in this slice); its CPU
		 * clock at the last reading, and when that was; the CPU time
		 * the slice had used by then (before the first reading: the
		 * wall time, as if it had run all along); the figure `used`
		 * reaches when the task, asked to yield, has had its grace
		 * period; when the thread is looked at next; and when a
		 * system call's thread is looked at next. firstmax: the most
		 * the first reading takes the slice to have used; ran and
		 * ranover: the CPU time the thread got between the last two
		 * readings, and the wall time between them (0: not known).
		 * wall: this slice is judged on the wall clock
		 * (GMP_DEBUG=randomize=1 picks half the slices at random).
		 * asleep: the last look found the thread asleep in the
		 * kernel, having run little since the look before. */
		gmp__m *lookm;
		int64_t cpu, cpuwhen, used, graceused, lookwhen, syslook;
		int64_t firstmax, ran, ranover;
		bool wall, asleep;
	} sysmontick;

	/* Dead Gs with stacks, for reuse; owner (batches move to and from
	 * sched.gfree under its lock). */
	gmp_g *gfree;
	int32_t ngfree;
	uint32_t gfsweepgen; /* the last sched.gfsweepgen acted on; owner */

	/* Timers (timer.c): any thread may stop one, so under their lock. */
	gmp__timers timers;

	/* The P's io_uring (uring.c), made by its holder on first use and
	 * published with a release; any M reaps it, under its own lock. */
	struct gmp__ring *volatile ring;

	/* Counters for gmp_stats_read; written by the owner, read racily.
	 * nspawned and nexited also give the live task count (see
	 * gmp__tasks_live): per P, so that spawning and ending a task
	 * never touch a cache line another core writes. nexited is
	 * stored with release, read with acquire by gmp__tasks_live, so a
	 * counted exit brings its spawn's count with it. */
	volatile uint64_t nspawned, nexited, nsteals;

	/* The local run queue. runqhead is advanced by the owner and by
	 * thieves (CAS); runqtail and the slots are written only by the
	 * owner. runnext may be CASed to NULL by thieves; only the owner
	 * sets it to a G. See src/runq.h for the protocol. */
	__attribute__((aligned(GMP__CACHELINE))) volatile uint32_t runqhead;
	volatile uint32_t runqtail;
	gmp_g *volatile runnext;
	gmp_g *volatile runq[GMP__RUNQ_SIZE];

	/* Tracing and metrics (trace.h): the sampling counters, the open
	 * measured slice, the trace's event buffer, the histograms. Last,
	 * on lines of their own. */
	__attribute__((aligned(GMP__CACHELINE))) gmp__ptrace tr;
};

/* ------------------------------------------------------------------------
 * A FIFO of Gs linked through schedlink, owned by whoever holds its lock. */
typedef struct gmp__gqueue {
	gmp_g *head, *tail;
	int64_t n;
} gmp__gqueue;

static inline void gmp__gq_push(gmp__gqueue *q, gmp_g *g)
{
	g->schedlink = NULL;
	if (q->tail)
		q->tail->schedlink = g;
	else
		q->head = g;
	q->tail = g;
	q->n++;
}

static inline gmp_g *gmp__gq_pop(gmp__gqueue *q)
{
	gmp_g *g = q->head;
	if (g) {
		q->head = g->schedlink;
		if (!q->head)
			q->tail = NULL;
		q->n--;
		g->schedlink = NULL;
	}
	return g;
}

/* ------------------------------------------------------------------------
 * The global run queue: a FIFO of chunks, each an array of G pointers.
 * Moving a batch in or out copies pointers and never touches the Gs
 * themselves (a linked list through schedlink costs a cache miss per G:
 * the batch a full local ring spills is its oldest, coldest Gs). Only the
 * head chunk is partly consumed and only the tail chunk partly filled, so
 * chunks for every G that exists, plus two, always suffice: malg reserves
 * them (gmp__globrunq_reserve) before a G is made, and queueing never
 * allocates or fails. Spare chunks wait on `spare`. sched.lock. */
#define GMP__GRQ_CHUNK 128

typedef struct gmp__grq_chunk {
	struct gmp__grq_chunk *next;
	uint32_t head, tail; /* g[head..tail) are queued */
	gmp_g *g[GMP__GRQ_CHUNK];
} gmp__grq_chunk;

typedef struct gmp__grq {
	gmp__grq_chunk *head, *tail, *spare;
	int64_t n;       /* Gs queued */
	int64_t nchunks; /* chunks owned, in use or spare; changed under
			    sched.lock by gmp__globrunq_reserve only, whose
			    callers allg_lock serialises: they read it
			    without sched.lock */
} gmp__grq;

/* ------------------------------------------------------------------------
 * sched: the global scheduler state (Go's schedt). What lives where:
 *
 *   per-P run queue            p->runq, runnext     lock-free (runq.h)
 *   global run queue           sched.runq           sched.lock
 *   idle Ms                    sched.midle          sched.lock
 *   idle Ps                    sched.pidle          sched.lock
 *   dead Gs                    p->gfree / sched.gfree   owner / gfree.lock
 */
#define GMP__MAXPROCS_LIMIT 1024

/* A list of batches of dead Gs (sched.gfree; g.c). head is written under
 * gfree.lock and peeked racily by gfget; n counts the Gs, under the lock. */
typedef struct gmp__gfbatches {
	gmp_g *volatile head;
	int64_t n;
} gmp__gfbatches;

typedef struct gmp__sched {
	gmp__mutex lock;
	gmp__mutex mexit_lock; /* an M's thread stays alive while held */

	gmp__m *midle;            /* idle Ms; sched.lock */
	volatile uint32_t nmidle; /* sched.lock; racy reads for stats */
	int32_t nmidlelocked; /* locked Ms waiting for their G; sched.lock */
	int64_t mnext;        /* Ms ever created = next M id; sched.lock */
	int32_t nmfreed;      /* Ms that exited; sched.lock */
	int32_t maxmcount;    /* thread cap; sched.lock */
	int32_t nmsys; /* system threads (sysmon, template); sched.lock */
	volatile uint32_t mcreating; /* startm's thread creations in flight;
					written under sched.lock, awaited by
					gmp__sched_stop (acquire) */
	gmp__m *freem;               /* exited Ms whose threads await a join;
				     sched.lock */
	gmp__m *allm;                /* every M struct ever made; prepend-only
				     under sched.lock, read lock-free */

	gmp__p *pidle;                  /* idle Ps; sched.lock */
	volatile uint32_t npidle;       /* atomic; written under sched.lock */
	volatile uint32_t pidlegets;    /* Ps taken off the idle list, ever;
					written under sched.lock, read racily
					by sysmon */
	volatile uint32_t nmspinning;   /* atomic (see sched.c's protocol) */
	volatile uint32_t needspinning; /* atomic: a P must not go idle */

	gmp__grq runq;              /* global run queue; sched.lock */
	volatile uint64_t runqsize; /* atomic mirror of runq.n for lock-free
				       emptiness checks; written under lock */

	/* Dead Gs with stacks, in batches, each a chain on schedlink,
	 * linked by gfreebatch, aged by sysmon's sweep (g.c says how). */
	struct {
		gmp__mutex lock;
		gmp__gfbatches young; /* where Ps put theirs; lock */
		gmp__gfbatches old;   /* young at the last rotation; lock */
		gmp__gfbatches clean; /* every G in them TRIMMED; lock */
		/* The sweep's clock: sysmon only (cleared with the rest of
		 * sched at init, fork and shutdown). */
		int64_t rotwhen;   /* the last rotation (0: none yet) */
		int64_t slicewhen; /* the last slice of aging out old */
		/* atomic (relaxed), written by sysmon only; read by tests:
		 * whether it is aging out old, and how many Gs it has aged
		 * out (moved from old to clean) so far. */
		volatile uint32_t aging;
		volatile uint64_t naged;
	} gfree;
	/* atomic: bumped by sysmon as it rotates the free lists (g.c); a
	 * running P that sees it change moves its dead Gs to gfree.young
	 * (schedule_slow), so that they age like the rest. */
	volatile uint32_t gfsweepgen;

	volatile uint64_t nspawned_nop; /* atomic: spawns by threads with no P */
	volatile uint32_t nthreads;     /* atomic: live runtime threads */
	volatile uint64_t nhandoffs;    /* atomic: Ps handed to another M */
	volatile uint64_t nretakes;  /* atomic: Ps sysmon took from syscalls */
	volatile uint64_t ndetaches; /* atomic: Ps sysmon took from tasks that
					ran past their slice (preempt.c) */

	/* Ps: allp[0..gomaxprocs) are live; allp[gomaxprocs..nallp) are
	 * DEAD, or retiring (still held by an M that has yet to notice the
	 * smaller count: running a task, or in a syscall); entries beyond
	 * nallp are NULL. allp grows only; entries are never freed while
	 * running. Walkers that look for work or timers go up to nallp, so
	 * that nothing on a retiring P waits for its holder. */
	gmp__p *allp[GMP__MAXPROCS_LIMIT];
	volatile uint32_t gomaxprocs; /* atomic; changed under sched.lock */
	/* atomic; grows under sched.lock: procresize stores it (release)
	 * after publishing allp[i]; walkers load it (acquire) before the
	 * entries below it */
	volatile uint32_t nallp;

	/* The network poller (netpoll.c): lastpoll is when the last poll
	 * ended, 0 while an M is blocked in one (at most one M blocks);
	 * pollUntil is when that blocked poll will time out by itself (0:
	 * never). pollingnet: an M is doing a non-blocking poll. */
	volatile uint64_t lastpoll, pollUntil;
	volatile uint32_t pollingnet;

	/* sysmon's deep sleep (sysmon.c): set under sched.lock while it
	 * sleeps on sysmonnote because every P is idle, or long while the
	 * Ps compute (SHORT, as a deep sleep's slices); sysmonuntil is when
	 * that sleep (or its current slice) ends by itself, stored (relaxed,
	 * under sched.lock) before sysmonwait. gmp_enter_syscall reads both
	 * racily and unordered: a stale sysmonuntil only moves a wake it
	 * skips to the end of sysmon's slice, at most 10 ms away. */
	volatile uint32_t sysmonwait;
	volatile uint64_t sysmonuntil;
	gmp__note sysmonnote;

	/* Shutdown: the runtime stops once every task has ended. */
	volatile uint32_t stopping; /* atomic: Ms must exit, not park */
	/* A wait for no task to be left (wait_no_tasks in runtime.c: the
	 * drain of gmp_shutdown, and gmp_main once its task called
	 * gmp_exit) sets drain_waiters with a full RMW and then sums the
	 * task counts; gmp__pidleput makes a full RMW and then loads
	 * drain_waiters (Dekker): either the waiter sees the last exit or
	 * that P bumps drain_seq (full) and FUTEX_WAKEs it. */
	volatile uint32_t drain_seq;     /* futex word: bumped on a poke */
	volatile uint32_t drain_waiters; /* atomic: a drain is waiting */
} gmp__sched_t;

extern gmp__sched_t gmp__sched;

/* Settings fixed at gmp_init (runtime.c). */
typedef struct gmp__settings {
	size_t stack_size;              /* usable bytes per task stack */
	int stack_guard;                /* GMP__GUARD_AUTO/ALWAYS/NEVER */
	int64_t idle_thread_timeout_ns; /* 0: keep idle threads */
	int schedtrace_ms, scheddetail, randomize, sigquit;
	int stall_ms;            /* GMP_DEBUG=stall=MS (stall.c); 0: off */
	bool maxprocs_from_user; /* maxprocs was given, not detected */
	bool preempt;            /* GMP_PREEMPT: sysmon may detach Ps */
	bool io_uring;           /* GMP_IO_URING: file I/O through rings */
	bool debug;              /* GMP_DEBUG was set at all */
} gmp__settings;
extern gmp__settings gmp__cfg;

enum { GMP__GUARD_AUTO = 0, GMP__GUARD_ALWAYS = 1, GMP__GUARD_NEVER = 2 };

/* ------------------------------------------------------------------------
 * Thread-local state (tls.c). These are out-of-line on purpose: a task can
 * move to another thread at any switch point, and a compiler may keep a
 * thread-local address (or glibc's const __errno_location) in a register
 * across the call that switched threads. A call into another translation
 * unit is opaque, so each access reads the current thread's copy. */
/* A function that reads fields other threads own without
 * synchronisation, for an estimate or a snapshot (Ms and Gs are never
 * freed while the runtime runs): ThreadSanitizer does not watch it. Its
 * reads must be plain ones; atomic.h's calls are watched wherever made. */
#define GMP__RACY_READER __attribute__((no_sanitize("thread")))

gmp__m *gmp__getm(void);
void gmp__setm(gmp__m *m);
int gmp__errno_get(void);
void gmp__errno_set(int e);
volatile uint32_t *gmp__tls_preempt_flag(void);

/* gmp__getm for the hot entries (gmp__getg). On x86-64 the slot is read
 * with an instruction the compiler cannot see into: the asm is volatile
 * (never merged with another read, never dropped) and clobbers memory
 * (never moved across a call, such as a switch point), and it reads %fs,
 * the thread pointer, as it is when it runs, so each read is the current
 * thread's copy, as with the call, at the cost of a load (two in a shared
 * library: the slot's offset comes from the GOT). Elsewhere, the call. */
static inline __attribute__((always_inline)) gmp__m *gmp__getm_inline(void)
{
#if defined(__x86_64__) && defined(__ELF__)
	gmp__m *m;
	__asm__ __volatile__("movq gmp__tls_m@gottpoff(%%rip), %0\n\t"
			     "movq %%fs:(%0), %0"
			     : "=r"(m)
			     :
			     : "memory");
	return m;
#else
	return gmp__getm();
#endif
}

/* Who is calling, and may it use its P? (Go's getg().) The one way into
 * the runtime for code that runs on any thread and uses the caller's P.
 *
 * A thread that is not the runtime's has no M. An M runs either scheduler
 * code on g0 (m->curg NULL) or a task (m->curg). Whether m->p is the
 * caller's to read depends on the task's status, which must be read
 * first: while the task is inside a gmp_enter_syscall window (SYSCALL),
 * sysmon may take the P and clear m->p at any moment; once it is RUNNING,
 * or on g0, nobody but this thread changes m->p. (m->p may still be NULL
 * then, briefly, while gmp_enter_syscall_block hands the P off or
 * gmp_exit_syscall's slow path looks for one, and on an M without work.)
 *
 * Returns the task running on this thread if it is RUNNING, else NULL
 * (g0, a task in a syscall window, a thread without an M). If mp is not
 * NULL, *mp is the calling M when its P is the caller's (g0 or a RUNNING
 * task), else NULL. Every entry into the runtime that uses the caller's P
 * goes through here, so that this is the one place to change should such
 * entries ever need marking. Inline: it is on every hot entry (gmp_go,
 * gmp_yield, readying, waiters) and costs the TLS read (gmp__getm_inline) and two loads. */
static inline __attribute__((always_inline)) gmp_g *gmp__getg(gmp__m **mp)
{
	gmp__m *m = gmp__getm_inline();
	gmp_g *g = m ? m->curg : NULL;
	if (g && gmp__load32_rlx(&g->status) != GMP__G_RUNNING) {
		m = NULL;
		g = NULL;
	}
	if (mp)
		*mp = m;
	return g;
}

/* ------------------------------------------------------------------------
 * G status transitions (the names and the cold paths are in g.c). */

static inline uint32_t gmp__readgstatus(const gmp_g *g)
{
	return gmp__load32_acq(&g->status);
}

/* The legal transitions (Go's casgstatus table, minus what we lack). With
 * constant arguments, as at every call site, this folds away. */
static inline __attribute__((always_inline)) bool
gmp__gstatus_legal(uint32_t from, uint32_t to)
{
	switch (from) {
	case GMP__G_IDLE:
		return to == GMP__G_DEAD;
	case GMP__G_DEAD:
		return to == GMP__G_RUNNABLE;
	case GMP__G_RUNNABLE:
		return to == GMP__G_RUNNING;
	case GMP__G_RUNNING:
		return to == GMP__G_RUNNABLE || to == GMP__G_WAITING ||
		       to == GMP__G_SYSCALL || to == GMP__G_DEAD;
	case GMP__G_SYSCALL:
		return to == GMP__G_RUNNING;
	case GMP__G_WAITING:
		return to == GMP__G_RUNNABLE;
	}
	return false;
}

_Noreturn void gmp__gstatus_bad(gmp_g *g, uint32_t cur, uint32_t from,
				uint32_t to) __attribute__((cold));
void gmp__casgstatus_cas(gmp_g *g, uint32_t from, uint32_t to);

/* The one way a G's status changes; an illegal transition, or a G not in
 * `from`, aborts naming both states. Transitions that can race use a CAS:
 *
 *   WAITING -> RUNNABLE   two wakers (a bug we must catch, not corrupt on)
 *   SYSCALL -> RUNNING    sysmon may hold the SCAN bit (syscall.c): wait
 *
 * Every other transition is made by the G's sole owner, so a checked
 * store-release suffices; the release publishes the owner's writes (the
 * saved context above all) to whoever acquires the new status. */
static inline __attribute__((always_inline)) void
gmp__casgstatus(gmp_g *g, uint32_t from, uint32_t to)
{
	if (GMP__UNLIKELY(!gmp__gstatus_legal(from, to)))
		gmp__gstatus_bad(g, from, from, to);
	if (from == GMP__G_WAITING || from == GMP__G_SYSCALL) {
		gmp__casgstatus_cas(g, from, to);
		return;
	}
	uint32_t cur = gmp__load32_rlx(&g->status);
	if (GMP__UNLIKELY(cur != from))
		gmp__gstatus_bad(g, cur, from, to);
	gmp__store32_rel(&g->status, to);
}

_Noreturn void gmp__execute_odd(gmp__m *m, gmp_g *g, bool inherit, uint32_t cur)
	__attribute__((cold));

/* gmp__casgstatus(g, RUNNABLE, RUNNING) as execute makes it, the one
 * transition out of RUNNABLE: a status that is not plain RUNNABLE goes to
 * gmp__execute_odd (sched.c), which measures a sampled ready (TRACK) and
 * executes g again, or aborts as casgstatus would. That path never
 * returns here, so execute's own code is what it is without the bit. */
static inline __attribute__((always_inline)) void
gmp__casgstatus_execute(gmp__m *m, gmp_g *g, bool inherit)
{
	uint32_t cur = gmp__load32_rlx(&g->status);
	if (GMP__UNLIKELY(cur != GMP__G_RUNNABLE))
		gmp__execute_odd(m, g, inherit, cur);
	/* release: as in gmp__casgstatus */
	gmp__store32_rel(&g->status, GMP__G_RUNNING);
}

/* A ready sampled for the latency histogram (metrics.c): g, RUNNABLE and
 * not yet queued by its readier, gets the TRACK bit. */
static inline void gmp__gstatus_track(gmp_g *g)
{
	uint32_t cur = gmp__load32_rlx(&g->status);
	if (GMP__UNLIKELY(cur != GMP__G_RUNNABLE))
		gmp__gstatus_bad(g, cur, GMP__G_RUNNABLE, GMP__G_RUNNABLE);
	/* release: as the RUNNABLE store it follows */
	gmp__store32_rel(&g->status, GMP__G_RUNNABLE | GMP__G_TRACK);
}

/* ------------------------------------------------------------------------
 * alloc.c: the one allocator pair, counted (and fault-injectable; the
 * count is for tests, in export_test.h). */
void *gmp__malloc(size_t n);
void *gmp__calloc(size_t n, size_t size);
void *gmp__realloc(void *p, size_t n);
void gmp__free(void *p);

/* jitter.c: GMP_DEBUG=randomize=1 widens the runtime's race windows with
 * random yields and short spins; each call site reads
 * `if (GMP__UNLIKELY(gmp__cfg.randomize)) gmp__jitter();`. */
void gmp__jitter(void);

#endif
