/* libgmp: an M:N green-thread runtime for C, built on Go's scheduler.
 *
 * Tasks (G) run on OS threads (M) that hold logical processors (P). Spawn
 * tasks with gmp_go(); they are multiplexed over at most `maxprocs` running
 * threads, spread by work stealing. A task gives up its thread only at a
 * switch point (gmp_yield, gmp_preempt_point, a blocking libgmp call, or
 * its end); one that runs past its time slice (10 ms of CPU time; time
 * spent waiting for a CPU does not count) without reaching one loses its
 * P to the other tasks and runs on, on the same thread, until its next
 * libgmp call takes a P back (design.md §13). Wrap
 * blocking system calls in gmp_enter_syscall()/gmp_exit_syscall() so the
 * runtime can run other tasks meanwhile.
 *
 * Conventions. Functions that can fail return 0 (or a positive value) on
 * success and a negative errno on failure, and leave errno alone. Misuse
 * that breaks an invariant (readying a task that is not waiting, ...) prints
 * "gmp: <what happened>" on stderr and aborts. "From a task" means from code
 * running inside a task; "from any thread" includes threads the program
 * created itself and the thread that called gmp_init(). None of these
 * functions may be called from a signal handler.
 *
 * Names. Everything this header declares starts with gmp_ or GMP_. A name
 * that ends in an underscore (gmp_preempt_pending_, the opaque_ fields of
 * gmp_mutex and gmp_wg, ...) exists only for this header's inline code or
 * to give a type its size: programs must not use it, and it may change
 * in any release.
 *
 * This header is the whole public interface. The contract behind it, and
 * the design that keeps it, are in docs/design.md in the project's
 * repository (Part I, its chapters numbered below 20, is the contract, and
 * the headings below give its chapter numbers; Part II, from §20 on, is
 * the design).
 */
#ifndef GMP_H
#define GMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define GMP_VERSION_MAJOR 0
#define GMP_VERSION_MINOR 1
#define GMP_VERSION_PATCH 0

#if defined(GMP_BUILDING)
#define GMP_EXTERN __attribute__((visibility("default")))
#else
#define GMP_EXTERN
#endif

#ifdef __cplusplus
extern "C" {
#define GMP_NORETURN [[noreturn]]
#else
#define GMP_NORETURN _Noreturn
#endif

/* ------------------------------------------------------------------------
 * 1. Lifecycle
 */

typedef struct gmp_config {
	int maxprocs;      /* number of Ps; 0: $GMP_MAXPROCS, else the CPUs
			      this process may use: the smaller of its
			      affinity mask and its cgroup CPU quota
			      (rounded up), followed as they change         */
	int max_threads;   /* cap on threads (Ms); 0: $GMP_MAX_THREADS, else
			      10000                                         */
	size_t stack_size; /* task stack bytes; 0: $GMP_STACK_SIZE, else
			      256 KiB, reserved and committed only as used  */
} gmp_config;

/* Starts the runtime: allocates the Ps and starts sysmon; threads are made
 * on demand. cfg may be NULL (defaults and environment). Returns 0, or
 * -EINVAL for a bad value (negative counts, a stack_size under 16 KiB or
 * over SIZE_MAX/2, an unparsable GMP_* variable, checked even where cfg
 * gives the value it would set) and then starts nothing; -ENOMEM or
 * -EAGAIN if resources ran out (EAGAIN from thread creation only after a
 * second of retries). A valid call while running returns 0 and changes
 * nothing (from a task too, where the runtime is always running). Call
 * from any thread that is not running a task.
 *
 * Stack overflow: while it runs, the runtime handles SIGSEGV and SIGBUS. A
 * task that runs into the guard page below its stack is reported as
 * "gmp: stack overflow in task <id> (stack <lo>-<hi>)" and the program
 * aborts; any other fault goes to the handler that was installed before
 * gmp_init (or kills the program as it would have). gmp_shutdown puts that
 * handler back, unless the program has installed its own since.
 *
 * fork(): the child has one thread and the runtime is off there, whatever
 * the parent was doing; the parent's tasks never run in the child (their
 * memory is not freed there). gmp_init, or anything that starts the
 * runtime, starts a fresh one. If a task called fork(), the child goes on
 * as a plain thread (gmp_self() is 0), whose task function must not return
 * (that aborts): it ends with exec or _exit (having run what else it has
 * to do in a fresh runtime, with gmp_main say, if it likes). Mutexes,
 * wait groups and channels the parent's tasks were using must not be used
 * in the child. exec is always safe: the runtime's descriptors are
 * close-on-exec. */
GMP_EXTERN int gmp_init(const gmp_config *cfg);

/* Waits until every task has finished (a task parked forever keeps it
 * waiting), then stops every thread the runtime created and frees every
 * task, stack and structure. Afterwards gmp_init may start the runtime
 * again. Returns 0 (also when the runtime is not running), or -EPERM when
 * called from a task. While it waits, gmp_go from outside a task returns
 * -ESHUTDOWN. */
GMP_EXTERN int gmp_shutdown(void);

/* Starts the runtime if needed, runs fn(arg) as a task while the calling
 * thread waits, and returns fn's result once fn has returned. Other tasks
 * keep running. From a task it simply calls fn(arg). If the runtime cannot
 * start or the task cannot be created, returns that negative errno.
 *
 * If fn ends its task with gmp_exit instead of returning (Go's main
 * calling runtime.Goexit), gmp_main never returns: it waits while other
 * tasks run (new ones, spawned from anywhere, included), and once no task
 * is left the program aborts with "gmp: no tasks left (gmp_main's function
 * called gmp_exit): deadlock". */
GMP_EXTERN int gmp_main(int (*fn)(void *), void *arg);

/* ------------------------------------------------------------------------
 * 2. Tasks
 */

typedef struct gmp_g gmp_g; /* a task; opaque */
typedef void (*gmp_fn)(void *arg);

/* Creates a task running fn(arg) and returns its id (> 0; unique for the
 * life of the process, across gmp_shutdown and gmp_init; increasing: a
 * gmp_go that happens before another, from any task or thread, returns the
 * smaller id). From a task the new task goes into the current P's runnext
 * slot, so it runs next on this P (Go's newproc); from any other thread it
 * goes to the global queue. An idle P is woken if there is one. Never
 * switches. Starts the runtime with defaults if it is not running. Returns
 * -EINVAL if fn is NULL, -ENOMEM if no task or stack could be allocated,
 * -ESHUTDOWN from outside a task while gmp_shutdown waits. */
GMP_EXTERN int64_t gmp_go(gmp_fn fn, void *arg);

/* Lets other tasks run; the caller stays runnable and resumes later,
 * possibly on another thread (runtime.Gosched). A no-op outside a task.
 * The caller goes to the back of its P's run queue, where Go's Gosched
 * uses the global queue: a lock less per yield. Tasks in the global
 * queue (spawned or woken by threads without a P) still run within 61
 * schedules of that P, the check Go makes too. */
GMP_EXTERN void gmp_yield(void);

/* Ends the calling task (runtime.Goexit): task-local destructors run, then
 * the task is gone. Called outside a task it aborts. */
GMP_EXTERN GMP_NORETURN void gmp_exit(void);

/* The running task's id, or 0 outside a task. Never switches. */
GMP_EXTERN int64_t gmp_self(void);

/* The running task, or NULL outside a task. Never switches. */
GMP_EXTERN gmp_g *gmp_current(void);

/* Yields if sysmon asked this task to (its time slice has lasted 10 ms of
 * CPU time: time its thread spent waiting for a CPU, on a busy machine,
 * does not count; design.md §13.3). Costs one thread-local load when
 * nothing is pending: call it in long loops that have no other switch
 * point, to keep scheduling fair.
 *
 * A task that never reaches a switch point is not stuck with its P: a
 * millisecond after the request (2 ms of its CPU time, where the kernel
 * can tell) sysmon detaches the P and gives it to another thread
 * (design.md §13, unless GMP_PREEMPT=off); a task that reaches one within
 * a millisecond of CPU time is never detached, however long the kernel
 * keeps it from running. The task is not interrupted;
 * it runs on, on the same thread, and its next libgmp call that needs a P
 * takes one back, waiting if none is free. gmp_stats.detaches counts
 * these; a yield here is the cheaper way to the same fairness. */
GMP_EXTERN void gmp_preempt_point(void);

/* The check itself is inlined at the call site (a macro, so that
 * &gmp_preempt_point still names the function above): one relaxed load of
 * a thread-local flag that sysmon sets. The task may have moved to another
 * thread since the caller's last switch point, so the flag is found from
 * the thread pointer as it is at the check. On x86-64 the load goes
 * through %fs, which is that. arm64 compilers read tpidr_el0 once for a
 * whole loop, and the loop would then read the flag of a thread it left
 * (one that may have exited): there the thread pointer is read by a
 * volatile asm. The variable is initial-exec, as libgmp defines it, so
 * that code built -fPIC reaches it without a call. */
GMP_EXTERN extern __thread uint32_t gmp_preempt_pending_
	__attribute__((tls_model("initial-exec")));
GMP_EXTERN void gmp_preempt_point_slow_(void);

static inline void gmp_preempt_point_inline_(void)
{
	uint32_t pending;
#if defined(__aarch64__) && defined(__ELF__)
	unsigned long gmp_tp_, gmp_off_;
	__asm__ __volatile__(
		"mrs %0, tpidr_el0\n\t"
		"adrp %1, :gottprel:gmp_preempt_pending_\n\t"
		"ldr %1, [%1, #:gottprel_lo12:gmp_preempt_pending_]\n\t"
		"ldr %w2, [%0, %1]"
		: "=&r"(gmp_tp_), "=&r"(gmp_off_), "=r"(pending)
		:
		: "memory");
#else
	pending = __atomic_load_n(&gmp_preempt_pending_, __ATOMIC_RELAXED);
#endif
	if (__builtin_expect(pending != 0, 0))
		gmp_preempt_point_slow_();
}
#define gmp_preempt_point() gmp_preempt_point_inline_()

/* Task-local storage, like pthread keys. A new task reads NULL for every
 * key. When a task ends, each non-NULL value's destructor (if any) runs
 * once, on that task. Keys are never deleted; at most GMP_KEYS_MAX exist. */
typedef struct gmp_key {
	uint32_t id;
} gmp_key;
#define GMP_KEYS_MAX 256

/* 0, or -EAGAIN when GMP_KEYS_MAX keys exist. Any thread. */
GMP_EXTERN int gmp_key_create(gmp_key *key, void (*dtor)(void *));
/* 0; -EINVAL for a key never created; -EPERM outside a task; -ENOMEM. */
GMP_EXTERN int gmp_setspecific(gmp_key key, const void *value);
/* The value, or NULL (outside a task, or an unknown key). */
GMP_EXTERN void *gmp_getspecific(gmp_key key);

/* ------------------------------------------------------------------------
 * 3. Blocking and waking (gopark / goready)
 */

/* Called by gmp_park after the task is off its stack and before the thread
 * looks for other work; `lock` is gmp_park's second argument. Return true
 * to stay parked, false to resume at once. It runs on the scheduler's stack:
 * it must not block, yield or park; it may call gmp_ready and gmp_go. */
typedef bool (*gmp_unlock_fn)(gmp_g *g, void *lock);

/* Moves the running task to waiting until someone calls gmp_ready on it.
 * unlockf, if not NULL, runs as described above: the way for a primitive to
 * release its lock and sleep without losing a wakeup. A switch point. Called
 * outside a task it aborts. */
GMP_EXTERN void gmp_park(gmp_unlock_fn unlockf, void *lock);

/* Makes a waiting task runnable. From a task (or an unlock function) it goes
 * into the current P's runnext and inherits the time slice; from any other
 * thread it goes to the global queue and wakes an idle P. Never switches.
 * Readying a task that is not waiting aborts, as does readying one after
 * gmp_shutdown. A gmp_g pointer is valid until its task ends. */
GMP_EXTERN void gmp_ready(gmp_g *g);

/* ------------------------------------------------------------------------
 * 4. System calls
 *
 * Wrap any call that may block in the kernel:
 *
 *     gmp_enter_syscall();
 *     ssize_t n = read(fd, buf, len);
 *     int err = errno;            // read errno before gmp_exit_syscall
 *     gmp_exit_syscall();
 *
 * While the call runs, the task keeps its P, so a quick call costs almost
 * nothing; if it blocks, sysmon hands the P to another thread (after at
 * least 20 µs, and at once when the P has other work queued and nobody else
 * could run it) so the other tasks keep running. Between the two calls the
 * task must not call other libgmp functions that may switch.
 *
 * errno: the errno the call left is the one the task sees after
 * gmp_exit_syscall, even if the task continues on another thread. But glibc
 * declares errno's location constant per thread, so a compiler may keep the
 * old thread's errno address across the gmp_exit_syscall() call: read errno
 * before gmp_exit_syscall (as above) when you need it. (The I/O calls of
 * libgmp return -errno and need no errno at all.)
 *
 * Outside a task these functions do nothing.
 */

/* Marks the start of a possibly blocking call. No lock, no atomic
 * read-modify-write in this path. Aborts if already in one. */
GMP_EXTERN void gmp_enter_syscall(void);

/* Marks its end. Fast path: the P is still ours and the task simply goes
 * on. Slow path (the P was retaken): take back the old P, else an idle P,
 * else queue the task globally and park the thread until a P is free (a
 * switch point). Aborts if gmp_enter_syscall was not called first. */
GMP_EXTERN void gmp_exit_syscall(void);

/* As gmp_enter_syscall, for a call known to block: the P is handed off at
 * once instead of waiting for sysmon. End it with gmp_exit_syscall. */
GMP_EXTERN void gmp_enter_syscall_block(void);

/* ------------------------------------------------------------------------
 * 5. Threads
 */

/* Wires the calling task to its current thread (runtime.LockOSThread):
 * until it has called gmp_unlock_os_thread as many times, it runs only on
 * this thread and no other task runs there. A task that ends while locked
 * takes its thread with it: the thread exits, never to be reused, so
 * thread state the task changed (affinity, name, signal mask, namespaces)
 * cannot leak; threads created while it is locked come from a clean
 * template thread. Outside a task it does nothing. */
GMP_EXTERN void gmp_lock_os_thread(void);

/* Undoes one gmp_lock_os_thread; with no lock outstanding it does nothing
 * (as Go's UnlockOSThread). */
GMP_EXTERN void gmp_unlock_os_thread(void);

/* Sets the cap on the runtime's threads (Ms; sysmon and the template thread
 * are not counted) and returns the previous cap; n <= 0 only asks. A
 * program that needs more threads than the cap aborts with "gmp: program
 * exceeds N-thread limit", as does setting a cap below the current count
 * (debug.SetMaxThreads). Starts the runtime if it is not running. */
GMP_EXTERN int gmp_set_max_threads(int n);

/* Sets the number of Ps to n and returns the previous number; n <= 0 only
 * asks. Takes effect at once for growth; when shrinking, each P beyond n
 * stops at its task's next switch point (sysmon asks it to yield at once,
 * and takes the P from a task in a syscall) and its queued tasks and
 * timers move to the Ps that stay; until then other Ps steal its queue
 * and run its timers, so nothing waits for it. Starts the runtime with
 * defaults if it is not running. Any thread; never switches. Values above
 * 1024 are clamped.
 *
 * By default the number of Ps follows the CPUs the process may use (its
 * affinity mask and cgroup CPU quota, re-read about once a second); a
 * number set here, in gmp_config.maxprocs or in $GMP_MAXPROCS stays until
 * gmp_shutdown.
 *
 * Errors: -ENOMEM if the new Ps cannot be allocated (the old number
 * stays); -ESHUTDOWN from outside a task while gmp_shutdown drains; what
 * gmp_init returns when it had to start the runtime and could not. */
GMP_EXTERN int gmp_set_maxprocs(int n);

/* ------------------------------------------------------------------------
 * 7. Observing it
 */

typedef struct gmp_stats {
	uint64_t threads_total;    /* threads the runtime created and that are
				      alive, sysmon included; never the
				      caller's (/sched/threads/total)        */
	uint64_t tasks_in_syscall; /* tasks inside enter/exit_syscall         */
	uint64_t tasks_live;       /* spawned and not yet ended               */
	uint64_t tasks_runnable, tasks_waiting;
	uint64_t procs, procs_idle, threads_idle, threads_spinning;
	uint64_t spawned, steals, global_runq_len;
	uint64_t retakes;  /* Ps sysmon took from tasks in syscalls   */
	uint64_t handoffs; /* Ps passed to another M by handoffp      */
	uint64_t detaches; /* Ps sysmon took from tasks that ran past
			      their time slice (gmp_preempt_point)     */
	/* File operations completed through the io_uring rings (gmp_pread) */
	uint64_t uring_ops;
} gmp_stats;

/* Fills *out with a snapshot (values are read without stopping anything,
 * so they need not add up exactly). Returns 0, or -EINVAL for NULL. When
 * the runtime is not running every field is 0. Any thread; never switches. */
GMP_EXTERN int gmp_stats_read(gmp_stats *out);

/* Writes one line per live task to f, as Go prints its goroutines on
 * SIGQUIT (without stacks; the gdb extension shows those):
 *
 *     task 7 [waiting, chan receive]: entry=0x55d0c3a1b2c0 lastm=2
 *     task 9 [running]: entry=0x55d0c3a1b3f0 m=3
 *
 * id, state (runnable, running, syscall, waiting), the wait reason of a
 * waiting task, the address of its entry function, and the thread (M) it
 * runs on or last ran on. Tasks are read without stopping them, so the
 * list is a snapshot that may be slightly stale. Returns the number of
 * tasks written (0 when the runtime is not running), -EINVAL if f is
 * NULL, -EIO if writing failed. Any thread, a task included; never
 * switches; not from a signal handler (see GMP_DEBUG=sigquit=1 below).
 *
 * Environment: with GMP_DEBUG=schedtrace=MS,scheddetail=1, each trace line
 * is followed by one line per P, per M and per live task. With
 * GMP_DEBUG=sigquit=1, gmp_init installs a SIGQUIT handler that writes
 * "SIGQUIT: quit" and this list to stderr with async-signal-safe calls
 * only, then exits the process with status 2 (as a Go program does);
 * gmp_shutdown puts back the handler that was there before. */
GMP_EXTERN int gmp_dump(FILE *f);

/* Histograms of what the scheduler does, always kept (Go's
 * /sched/latencies:seconds and friends). Bucket i counts durations d with
 * 2^i <= d < 2^(i+1) nanoseconds; bucket 0 also counts d < 1 ns, and the
 * last bucket everything from 2^39 ns (about 9 minutes) up. The counts
 * are of samples: one ready in 64 and one system call in 16, per P, are
 * measured (so the shape, not the total, is what they tell), and a slice
 * is measured when the scheduler's slow path starts it (at least one in
 * 61 on a busy P) or its task's ready was sampled. docs/debugging.md has
 * the details. */
#define GMP_HIST_BUCKETS 40
typedef struct gmp_metrics {
	uint64_t sched_latency[GMP_HIST_BUCKETS]; /* a ready -> the task runs */
	uint64_t syscall_time[GMP_HIST_BUCKETS];  /* gmp_enter_syscall ->
						     gmp_exit_syscall     */
	uint64_t slice_time[GMP_HIST_BUCKETS];    /* one run of a task on a
						     P, until its next
						     switch point         */
} gmp_metrics;

/* Fills *out with the counts since gmp_init (read without stopping
 * anything, so a count made at that moment may be missed). Returns 0, or
 * -EINVAL for NULL; with the runtime not running every count is 0. Any
 * thread; never switches. */
GMP_EXTERN int gmp_metrics_read(gmp_metrics *out);

/* The execution trace: every run of every task on every P, with the
 * readies that caused them, the parks with their wait reasons, system
 * calls, creates and exits, handoffs, retakes, detaches and steals, and
 * what each thread (M) did, written as Chrome trace-event JSON that
 * ui.perfetto.dev and chrome://tracing open as it is (docs/debugging.md
 * describes the tracks, names and arguments, and src/tools/gmp-trace
 * summarises a trace and draws a picture of it).
 *
 * gmp_trace_start starts recording and writes the trace to path when
 * gmp_trace_stop is called, or gmp_shutdown, or the process exits
 * normally (exit, a return from main). Events are kept in memory per P and
 * moved to a file beside path by a thread of the tracer while the trace
 * runs; the JSON is written once it stops. Starting the trace starts the
 * runtime if it is off. Returns 0; -EBUSY if a trace is running; -EINVAL
 * for NULL or ""; -errno if path cannot be opened for writing (or the
 * runtime could not be started). Any thread, a task included; it does not
 * switch, but it blocks the calling thread while it sets up (a task
 * calling it holds its P meanwhile).
 *
 * gmp_trace_stop stops recording and writes the trace; it returns 0 once
 * the file is written and closed, -ENOENT if no trace is running, -EIO
 * (or -errno) if writing failed. Any thread, a task included; it blocks
 * the calling thread while it writes (for seconds with a long trace).
 *
 * GMP_TRACE=path makes gmp_init start a trace to path. GMP_TRACE=
 * flight:N:path starts the flight recorder instead: it keeps only the
 * last N MiB of events in memory (and writes nothing until asked), and
 * gmp_trace_dump writes that window to path; so does SIGQUIT with
 * GMP_DEBUG=sigquit=1, and an abort of the runtime (a broken invariant,
 * "gmp: ..."), before the process ends. */
GMP_EXTERN int gmp_trace_start(const char *path);
GMP_EXTERN int gmp_trace_stop(void);

/* Writes the flight recorder's window (the last N MiB of events) to path,
 * or to the path GMP_TRACE named if path is NULL, and goes on recording.
 * With a full trace running (not the flight recorder) it writes what has
 * been recorded so far, and the trace goes on too. Returns 0; -ENOENT if
 * no trace is running; -EINVAL if path is NULL and none was given;
 * -errno if the file cannot be written. Any thread, a task included; it
 * blocks the calling thread while it writes. */
GMP_EXTERN int gmp_trace_dump(const char *path);

/* ------------------------------------------------------------------------
 * 9 to 11. Synchronisation, time and I/O
 *
 * Every call here that may block parks the task when called from a task
 * (a switch point), and blocks the OS thread on a futex when called from
 * any other thread (including a task between gmp_enter_syscall and
 * gmp_exit_syscall), so the program's own threads can wait on tasks.
 */

/* A mutual exclusion lock, as Go's sync.Mutex: not tied to a task (one may
 * unlock what another locked), not recursive. Uncontended lock and unlock
 * are one atomic operation each; under contention a locker spins briefly,
 * then sleeps in FIFO order; a waiter that has waited over 1 ms switches
 * the mutex to starvation mode, where unlock hands it straight to the
 * oldest waiter. A zero-filled gmp_mutex (GMP_MUTEX_INIT) is unlocked and
 * needs no destruction. */
typedef struct gmp_mutex {
	uint64_t opaque_[1];
} gmp_mutex;
/* clang-format off */
#define GMP_MUTEX_INIT { { 0 } }
/* clang-format on */

GMP_EXTERN void gmp_mutex_lock(gmp_mutex *mu);    /* may block */
GMP_EXTERN bool gmp_mutex_trylock(gmp_mutex *mu); /* never blocks */
/* Unlocks; never blocks, but handing the lock to a starving waiter is a
 * switch point (the waiter runs next). Unlocking an unlocked mutex aborts. */
GMP_EXTERN void gmp_mutex_unlock(gmp_mutex *mu);

/* A wait group, as Go's sync.WaitGroup: add counts work in, done counts it
 * out, wait blocks until the count is zero. A zero-filled gmp_wg
 * (GMP_WG_INIT) has count 0. A negative count aborts. */
typedef struct gmp_wg {
	uint64_t opaque_[2];
} gmp_wg;
/* clang-format off */
#define GMP_WG_INIT { { 0, 0 } }
/* clang-format on */

GMP_EXTERN void gmp_wg_add(gmp_wg *wg, int64_t delta); /* never blocks */
GMP_EXTERN void gmp_wg_done(gmp_wg *wg);               /* add(-1) */
GMP_EXTERN void gmp_wg_wait(gmp_wg *wg);               /* may block */

/* Channels, as Go's chan T for a T of elem_size bytes, copied by value.
 * A NULL channel is Go's nil channel: send and receive block forever, the
 * try_ calls return -EAGAIN, closing it aborts, freeing it does nothing.
 * A send with elem NULL sends a zero value. A blocking send or receive
 * (and a select with a timeout other than 0) is a switch point even when
 * it completes at once. */
typedef struct gmp_chan gmp_chan;

/* A channel with a buffer of cap elements (cap 0: unbuffered, every send
 * meets a receive). elem_size may be 0 (signals only). NULL on -ENOMEM or
 * an absurd size. Any thread. */
GMP_EXTERN gmp_chan *gmp_chan_new(size_t elem_size, size_t cap);
/* Sends *elem, blocking until received or buffered. 0, or -EPIPE if the
 * channel is closed (also for a sender blocked when it closes). */
GMP_EXTERN int gmp_chan_send(gmp_chan *c, const void *elem);
/* Receives into *elem (NULL: discard), blocking until a value arrives.
 * 0, or -EPIPE when the channel is closed and drained (*elem is zeroed). */
GMP_EXTERN int gmp_chan_recv(gmp_chan *c, void *elem);
/* As send/recv, but never block: -EAGAIN instead. */
GMP_EXTERN int gmp_chan_try_send(gmp_chan *c, const void *elem);
GMP_EXTERN int gmp_chan_try_recv(gmp_chan *c, void *elem);
/* Closes: blocked receivers get -EPIPE (after the buffer drains), blocked
 * senders get -EPIPE. Closing twice aborts. Never blocks. */
GMP_EXTERN void gmp_chan_close(gmp_chan *c);
/* Frees a channel nobody uses any more; with tasks or threads still
 * waiting on it, aborts. */
GMP_EXTERN void gmp_chan_free(gmp_chan *c);

/* Select: wait until one of several channel operations can proceed.
 *
 *     gmp_select_case cs[] = {
 *         { .chan = in,  .op = GMP_SELECT_RECV, .elem = &v },
 *         { .chan = out, .op = GMP_SELECT_SEND, .elem = &w },
 *     };
 *     int i = gmp_select(cs, 2, -1);   // index of the case that ran
 *
 * When several cases are ready, one is chosen uniformly at random. A case
 * with chan NULL is never ready (a nil channel in Go). timeout_ns < 0 waits
 * as long as it takes; 0 is Go's `default:` (return at once if nothing is
 * ready); > 0 waits at most that long. Returns the chosen index, with that
 * case's result set (0; -EPIPE for a receive from a closed, drained channel
 * or a send on a closed channel); -EAGAIN if timeout_ns was 0 and nothing
 * was ready; -ETIMEDOUT if the timeout expired; -EINVAL for bad arguments
 * (NULL cases with n > 0, a bad op); -ENOMEM if more than 16 cases need
 * memory that cannot be had. Channel locks are taken in address
 * order, so selects never deadlock each other. */
typedef enum gmp_select_op {
	GMP_SELECT_RECV = 1,
	GMP_SELECT_SEND = 2,
} gmp_select_op;

typedef struct gmp_select_case {
	gmp_chan *chan;
	gmp_select_op op;
	void *elem; /* SEND: the value; RECV: where it goes (NULL: drop) */
	int result; /* out, for the chosen case */
} gmp_select_case;

GMP_EXTERN int gmp_select(gmp_select_case *cases, size_t n, int64_t timeout_ns);

/* Sleeps at least ns nanoseconds (time.Sleep); ns <= 0 returns at once
 * (a task still yields). Timers live in the Ps: sleeping tasks hold no
 * thread. */
GMP_EXTERN void gmp_sleep(int64_t ns);
/* Monotonic clock, nanoseconds. Never switches. */
GMP_EXTERN int64_t gmp_nanotime(void);

/* Timers and tickers, as Go's time.Timer, time.Ticker and time.AfterFunc
 * (with Go 1.23's rules for stop and reset). A timer lives in the per-P
 * timer heaps, like a sleeping task's, and holds no thread; one made on a
 * thread that is not a task works the same (it starts the runtime if it is
 * off, as gmp_go does). None of these calls blocks or switches.
 *
 *     gmp_timer *tk = gmp_timer_new(0, 10 * 1000000);   // every 10 ms
 *     int64_t at;
 *     gmp_chan_recv(gmp_timer_chan(tk), &at);   // or in a gmp_select
 *     ...
 *     gmp_timer_free(tk);
 *
 * A channel timer's channel has a buffer of one int64_t: each fire tries
 * to put there the time the fire was due (on gmp_nanotime's clock; the
 * fire happens then or a little after, never before, and a ticker's
 * values are whole periods apart), and a fire that finds the buffer full
 * is dropped, so a ticker nobody reads for a while holds
 * exactly one (the oldest) value, and its ticks are never queued up. The
 * channel is the timer's: receive from it (gmp_chan_recv, try_recv,
 * gmp_select), never send, close or free it.
 *
 * A gmp_timer still pending at gmp_shutdown never fires; free it as usual
 * (before or after). */
typedef struct gmp_timer gmp_timer;

/* A timer whose channel receives a value after delay_ns (0: at once), and
 * then every period_ns if period_ns > 0 (a ticker). NULL if either is
 * negative, on -ENOMEM, or if the runtime cannot be started. Any thread.
 *
 * Tickers of one period tick together: a ticker's ticks fall on the
 * multiples of gcd(period_ns, 1 ms) on gmp_nanotime's clock, so its first
 * tick (for a delay_ns > 0) may come up to that much (at most 1 ms, and
 * never more than the period) after delay_ns; the ticks after it are
 * exactly period_ns apart. Many tickers then cost the runtime one wake-up
 * per tick time rather than one each. One-shot timers are never moved. */
GMP_EXTERN gmp_timer *gmp_timer_new(int64_t delay_ns, int64_t period_ns);
/* A timer that runs fn(arg) as a new task after delay_ns (time.AfterFunc):
 * a task even when the timer was made on a thread that is not one. Its
 * gmp_timer_chan is NULL. NULL for a negative delay, a NULL fn, -ENOMEM,
 * or a runtime that cannot be started. */
GMP_EXTERN gmp_timer *gmp_timer_func(int64_t delay_ns, void (*fn)(void *),
				     void *arg);
/* The channel of a timer from gmp_timer_new; NULL for gmp_timer_func's.
 * NULL t aborts. */
GMP_EXTERN gmp_chan *gmp_timer_chan(gmp_timer *t);
/* Stops t: true if a fire was pending (always, for a running ticker),
 * false if it had fired already or was stopped. When it returns, no fire
 * is under way any more, and a value that fired but was not received has
 * been discarded: no receive after it gets a value from before. A func
 * timer stopped in time never runs fn. NULL t aborts. */
GMP_EXTERN bool gmp_timer_stop(gmp_timer *t);
/* Stops t as gmp_timer_stop does (with the same result and the same
 * discarding of a stale value), then arms it again to fire after
 * delay_ns, then every period_ns if that is > 0 (a func timer given a
 * period runs fn as a new task each period). A negative delay or period,
 * or NULL t, aborts. */
GMP_EXTERN bool gmp_timer_reset(gmp_timer *t, int64_t delay_ns,
				int64_t period_ns);
/* Stops t and frees it and its channel, also while it is pending or
 * firing: after it, fn of a func timer that had not fired never runs.
 * A task or thread still blocked receiving from the channel aborts, as
 * gmp_chan_free does. NULL t aborts. */
GMP_EXTERN void gmp_timer_free(gmp_timer *t);

/* I/O. Each returns what its libc namesake returns, or -errno instead of
 * -1 (errno itself is left alone). Callable from a task or any thread;
 * each is a switch point.
 *
 * From a task, on a non-blocking descriptor, a call that would block parks
 * the task in the network poller (epoll, edge-triggered) until the
 * descriptor is ready, holding no thread; on a blocking descriptor the
 * plain call runs inside gmp_enter_syscall/gmp_exit_syscall, so it holds
 * its thread but not its P. Setting O_NONBLOCK takes effect on the next
 * call; a socket that libgmp has seen non-blocking and whose O_NONBLOCK
 * the program clears later goes on parking its tasks in the poller (its
 * calls return the same data, holding no thread). From any other
 * thread (or a task inside gmp_enter_syscall) a call that would block
 * waits in poll(2) on the descriptor; gmp_close still wakes it.
 *
 * Common to all: EINTR is retried, never returned. -EBADF for a bad
 * descriptor or one that gmp_close has begun to close; -EMFILE for a
 * descriptor number of 2^24 or more (the poller's table stops there);
 * -ENOMEM if the poller's table or epoll cannot grow. A descriptor closed
 * with plain close() and its number reused for a new file works: the
 * poller notices the new file within about a millisecond of a task
 * parking on it (for a number whose earlier waits were long, within about
 * as long as those, at most about two seconds); a number gmp_accept
 * returns is known to be new at once. Closing a descriptor with close()
 * while tasks wait on it leaves them waiting until the poller notices;
 * then they are woken and retry on whatever the number names by then
 * (-EBADF if nothing). Use gmp_close, which wakes them at once. */
GMP_EXTERN ssize_t gmp_read(int fd, void *buf, size_t n);
/* Writes all n bytes, parking as often as needed; if an error stops it
 * after some bytes, returns that count, else -errno. Never raises SIGPIPE
 * on a socket: a closed peer is -EPIPE. */
GMP_EXTERN ssize_t gmp_write(int fd, const void *buf, size_t n);
/* readv(2): 0 vectors returns 0, a negative count -EINVAL. */
GMP_EXTERN ssize_t gmp_readv(int fd, const struct iovec *iov, int n);
/* writev(2) of every byte, as gmp_write: a short write goes on with the
 * rest (from a copy: iov is never modified), parking as needed; if an
 * error stops it after some bytes, returns that count. -EINVAL for a
 * negative count, more than IOV_MAX vectors or a total past SSIZE_MAX.
 * Never raises SIGPIPE. */
GMP_EXTERN ssize_t gmp_writev(int fd, const struct iovec *iov, int n);
/* recvfrom(2); *len is in-out as there. One datagram per call. */
GMP_EXTERN ssize_t gmp_recvfrom(int fd, void *buf, size_t n, int flags,
				struct sockaddr *addr, socklen_t *len);
/* sendto(2) with MSG_NOSIGNAL always: a datagram goes whole or not at all
 * (-EMSGSIZE when too large); on a stream every byte is sent, as by
 * gmp_write. */
GMP_EXTERN ssize_t gmp_sendto(int fd, const void *buf, size_t n, int flags,
			      const struct sockaddr *addr, socklen_t len);
/* recvmsg(2), control data (SCM_RIGHTS...) included; msg_namelen and
 * msg_controllen are in-out as there. */
GMP_EXTERN ssize_t gmp_recvmsg(int fd, struct msghdr *msg, int flags);
/* sendmsg(2) with MSG_NOSIGNAL always. A datagram goes whole; on a stream
 * every byte is sent, as by gmp_writev, the control data with the first
 * bytes only. msg and its vectors are never modified.
 *
 * For these four, MSG_DONTWAIT in flags means what it means to the kernel:
 * the call returns -EAGAIN instead of waiting. */
GMP_EXTERN ssize_t gmp_sendmsg(int fd, const struct msghdr *msg, int flags);
/* Accepts a connection. The new descriptor inherits the listener's
 * O_NONBLOCK (accepted from a non-blocking listener, its calls park tasks
 * in the poller, as Go's do); it is not close-on-exec, as with accept(2).
 * A connection aborted while queued (ECONNABORTED) is skipped. */
GMP_EXTERN int gmp_accept(int fd, struct sockaddr *addr, socklen_t *len);
/* Connects, waiting out EINPROGRESS on a non-blocking socket; returns 0 or
 * the connection's -errno (from SO_ERROR). */
GMP_EXTERN int gmp_connect(int fd, const struct sockaddr *addr, socklen_t len);
/* Waits until fd is ready for `events` (POLLIN, POLLOUT); returns the ready
 * bits (> 0, possibly with POLLHUP/POLLERR), 0 on timeout, or -errno
 * (-EBADF for a bad or gmp_close()d descriptor). timeout_ns < 0 waits
 * forever. */
GMP_EXTERN int gmp_poll_fd(int fd, int events, int64_t timeout_ns);
/* pread(2) and pwrite(2): at offset off, leaving the file offset alone.
 * They answer as their libc namesakes do: a negative offset is -EINVAL
 * (never "the current position"), a pipe or socket -ESPIPE, a directory
 * -EISDIR. gmp_pwrite writes all n bytes as gmp_write does (stopped by an
 * error after some, it returns that count).
 *
 * Files without a thread: from a task, these two and gmp_read/gmp_write
 * on a regular file or a block device go through the io_uring of the P
 * the task runs on, where the kernel offers one: the task parks and its P
 * runs other tasks while the disk works; gmp_stats.uring_ops counts them.
 * gmp_read and gmp_write use and advance the file offset as read and
 * write do (the ring's "current position"), and are serialised with one
 * another per descriptor so that two of them never read the same bytes;
 * a plain read(2) by other code at the same moment is not ordered with
 * them. Without io_uring (a kernel or sandbox that refuses it, qemu-user,
 * GMP_IO_URING=off) and from threads that are not tasks, the plain call
 * runs (wrapped in gmp_enter_syscall for a task), with the same results. gmp_close of a descriptor with operations
 * in flight cancels them: their tasks get -EBADF, unless the operation
 * had already completed (a disk read under way cannot be stopped; it then
 * returns its result). */
GMP_EXTERN ssize_t gmp_pread(int fd, void *buf, size_t n, off_t off);
GMP_EXTERN ssize_t gmp_pwrite(int fd, const void *buf, size_t n, off_t off);
/* The directions of gmp_set_deadline, a bit mask. */
enum { GMP_READ = 1, GMP_WRITE = 2 };
/* Sets an absolute deadline, on gmp_nanotime's clock, for the calls on fd
 * in the directions of how (Go's SetReadDeadline/SetWriteDeadline):
 * GMP_READ covers gmp_read, gmp_readv, gmp_recvfrom, gmp_recvmsg and
 * gmp_accept; GMP_WRITE gmp_write, gmp_writev, gmp_sendto, gmp_sendmsg and
 * gmp_connect. A call that would wait past it returns -ETIMEDOUT, never
 * before it; data already there is still returned, even when the deadline
 * has passed; a gmp_write or gmp_writev stopped by it after some bytes
 * returns that count. It holds until changed and applies to calls already
 * waiting, tasks and threads alike (a later or cleared deadline lets them
 * wait on). 0 clears it; a past or negative one fails every call that
 * would wait; gmp_close clears both. It bounds waits in the poller and in
 * poll(2), not a blocking descriptor's system call (as Go's). Costs no
 * system call (but one fcntl the first time the runtime sees fd, and an
 * eventfd write to tell threads already waiting in poll(2)). Returns
 * 0, -EINVAL if how is 0 or has other bits, -EBADF for a bad or
 * gmp_close()d descriptor. Any thread; not a switch point. */
GMP_EXTERN int gmp_set_deadline(int fd, int how, int64_t deadline_ns);
/* Closes fd, first waking every task and thread waiting on it in these
 * calls with -EBADF; calls made after it has begun get -EBADF. On a
 * non-blocking descriptor the number is closed once the calls in flight
 * have left, so none of them can touch a file that reuses the number; on
 * a blocking one a caller may sit in read(2) for ever, so gmp_close does
 * not wait and the last caller out closes it (as Go does). Returns 0 or
 * -errno (-EBADF if already closed by gmp_close). A switch point. */
GMP_EXTERN int gmp_close(int fd);

/* ------------------------------------------------------------------------
 * 9 and 10, continued. Read-write mutexes, once, condition variables,
 * semaphores, timers and tickers
 *
 * As above: a zero-filled value of each type is ready to use (the
 * GMP_*_INIT initialisers are all zeros) and needs no destruction; every
 * call that may block parks a task (a switch point) and blocks any other
 * thread on a futex. Deadlines are absolute, on gmp_nanotime's clock; one
 * already past (a negative one included) does not wait.
 */

/* A reader-writer lock, as Go's sync.RWMutex: any number of readers, or one
 * writer. A writer that waits keeps new readers out (they queue behind it),
 * so writers do not starve, and the readers that queued behind a writer go
 * in when it unlocks, before the next writer. Not tied to a task, not
 * recursive (a reader that read-locks again while a writer waits
 * deadlocks, as in Go). Uncontended rlock and runlock are one atomic
 * operation each; read locks that contend move off the shared word onto
 * the caller's P, so readers on different cores do not slow each other. */
typedef struct gmp_rwmutex {
	uint64_t opaque_[3];
} gmp_rwmutex;
/* clang-format off */
#define GMP_RWMUTEX_INIT { { 0, 0, 0 } }
/* clang-format on */

GMP_EXTERN void gmp_rwmutex_rlock(gmp_rwmutex *rw); /* may block */
/* Never blocks; waking the writer that waits for the last reader out does
 * not switch. Read-unlocking a rwmutex that is not read-locked (unlocked,
 * or write-locked) aborts. */
GMP_EXTERN void gmp_rwmutex_runlock(gmp_rwmutex *rw);
GMP_EXTERN void gmp_rwmutex_lock(gmp_rwmutex *rw); /* may block */
/* Never blocks (but may hand the writers' mutex to a starving writer,
 * which is a switch point, as gmp_mutex_unlock). Unlocking a rwmutex that
 * is not write-locked (unlocked, or read-locked) aborts. */
GMP_EXTERN void gmp_rwmutex_unlock(gmp_rwmutex *rw);
/* Never block: false when the lock cannot be had at once, and also while
 * a writer waits for it. */
GMP_EXTERN bool gmp_rwmutex_tryrlock(gmp_rwmutex *rw);
GMP_EXTERN bool gmp_rwmutex_trylock(gmp_rwmutex *rw);

/* Runs something exactly once, as Go's sync.Once. */
typedef struct gmp_once {
	uint64_t opaque_[3];
} gmp_once;
/* clang-format off */
#define GMP_ONCE_INIT { { 0, 0, 0 } }
/* clang-format on */

/* The first call for o runs fn(arg) on the caller's task or thread; every
 * call returns only once that fn has returned, so what fn did is visible
 * to each caller after its gmp_once_do. Once done, a call costs one load.
 * Callers that arrive while fn runs block until it returns (parking, or
 * blocking their thread). fn runs outside the runtime, as ordinary task
 * code: it may block, switch, or take a long time, but it must return: a
 * task that ends inside fn (gmp_exit) leaves every other caller waiting
 * for ever. A call from inside fn for the same o would wait for itself:
 * it aborts instead. */
GMP_EXTERN void gmp_once_do(gmp_once *o, void (*fn)(void *), void *arg);

/* A condition variable, as Go's sync.Cond, with a timed wait. Not tied to
 * one mutex, but every wait that overlaps another must name the same one.
 * Waiters are woken in the order they began to wait. There are no spurious
 * wakeups: a signal makes exactly one waiter return (one that began to
 * wait before the signal), a broadcast every waiter that began before it,
 * and a signal or broadcast with nobody waiting is not remembered. */
typedef struct gmp_cond {
	uint64_t opaque_[4];
} gmp_cond;
/* clang-format off */
#define GMP_COND_INIT { { 0, 0, 0, 0 } }
/* clang-format on */

/* Unlocks mu (which the caller must hold: otherwise the unlock aborts, as
 * gmp_mutex_unlock's does), waits for a signal or a broadcast, and locks mu
 * again before returning. A switch point. */
GMP_EXTERN void gmp_cond_wait(gmp_cond *c, gmp_mutex *mu);
/* As gmp_cond_wait, but gives up once deadline_ns has passed: returns 0 if
 * signalled (also when the signal and the deadline met), -ETIMEDOUT if
 * not. mu is locked again in either case. A waiter that gave up has left
 * the queue: a later signal goes to another waiter. Tasks wait on a timer
 * of their P, threads in a timed futex wait. */
GMP_EXTERN int gmp_cond_timedwait(gmp_cond *c, gmp_mutex *mu,
				  int64_t deadline_ns);
/* Wake the oldest waiter / every waiter. Never block, never switch; the
 * caller need not hold the mutex. One atomic load when nobody waits. */
GMP_EXTERN void gmp_cond_signal(gmp_cond *c);
GMP_EXTERN void gmp_cond_broadcast(gmp_cond *c);

/* A counting semaphore. Waiters are served in FIFO order: a release when
 * someone waits goes to the waiter queued longest (newcomers do not barge
 * in ahead of it). Uncontended acquire and release are one atomic
 * operation each. A zero-filled gmp_sem (GMP_SEM_INIT) has count 0. */
typedef struct gmp_sem {
	uint64_t opaque_[4];
} gmp_sem;
/* clang-format off */
#define GMP_SEM_INIT { { 0, 0, 0, 0 } }
/* clang-format on */

/* Sets the count of a semaphore nobody is using (a new one). A negative
 * count aborts. */
GMP_EXTERN void gmp_sem_init(gmp_sem *s, int64_t count);
/* Takes one unit, waiting until one is released if the count is 0. */
GMP_EXTERN void gmp_sem_acquire(gmp_sem *s);
/* Takes one unit if that can be done without waiting (never while others
 * wait); never blocks. */
GMP_EXTERN bool gmp_sem_try_acquire(gmp_sem *s);
/* As gmp_sem_acquire, giving up once deadline_ns has passed: 0, or
 * -ETIMEDOUT. A unit available at once is taken even when the deadline
 * has already passed; a waiter that gives up leaves the queue, and a unit
 * released as it gave up goes to the next waiter. */
GMP_EXTERN int gmp_sem_timed_acquire(gmp_sem *s, int64_t deadline_ns);
/* Gives one unit back: to the oldest waiter, else to the count. Never
 * blocks, never switches. A count beyond INT64_MAX aborts. */
GMP_EXTERN void gmp_sem_release(gmp_sem *s);

/* ------------------------------------------------------------------------
 * 12. The hook library
 *
 * libgmp-hook.so (SONAME libgmp-hook.so.0), a second library beside
 * libgmp.so, interposes libc's blocking calls (read, write, recv, send,
 * accept, connect, poll, select, epoll_wait, the sleeps, getaddrinfo,
 * fsync, ...) so that code written for threads, a database client or an
 * HTTP library, runs unchanged in tasks: a call that would block parks
 * the task instead of holding its thread. Outside a task every hooked
 * call is libc's. A program gets it by linking it ahead of libc (pkg-config
 * gmp-runtime-hook, or CMake's gmp::hook) or with LD_PRELOAD; a program
 * that does neither sees no change. GMP_HOOK=off (read when the library
 * loads) sends every call straight to libc; a value other than on or off
 * makes gmp_init return -EINVAL. See docs/guide.md, "Unmodified blocking
 * code".
 */

/* 1 while libgmp-hook is loaded in the process and GMP_HOOK is not off,
 * else 0. Any thread, before gmp_init too; never switches. */
GMP_EXTERN int gmp_hook_active(void);

/* The library's version as "MAJOR.MINOR.PATCH", a static string. Compare
 * it with the GMP_VERSION_* macros to find a program built against one
 * header but running with another libgmp. Any thread, before gmp_init
 * too; never switches.
 *
 * GNU MP's gmp.h defines gmp_version as a macro (for its variable
 * __gmp_version), so one source file cannot include both headers; the
 * libraries themselves export no common symbol and link into one
 * program. */
GMP_EXTERN const char *gmp_version(void);

#ifdef __cplusplus
}
#endif

#endif /* GMP_H */
