/* What the tests may reach inside the runtime (Go's export_test.go).
 *
 * Tests include this header, never the runtime's own headers one by one:
 * it brings the types and the internal calls they drive directly (run
 * queues on bare Ps, semaphores, fault injection, the all-G list, stack
 * and maxprocs internals), and, in its second half, declares the hooks
 * that exist only for tests: functions and switches that no file of src/
 * uses outside the one that defines them. Those are compiled only into
 * the tests' copy of the library (gmp_test_static, built with
 * GMP_TEST_HOOKS: see GMP__TEST_HOOKS in internal.h), which the tests
 * link; the installed libgmp.a and libgmp.so have none of them, and the
 * gmp_symbols test checks that for every name declared after the "test
 * hooks" line below. The file that defines a hook includes this header
 * for its prototype; nothing else in src/ does.
 */
#ifndef GMP_EXPORT_TEST_H
#define GMP_EXPORT_TEST_H

#include "internal.h"
#include "chan.h"
#include "fault.h"
#include "g.h"
#include "maxprocs.h"
#include "runq.h"
#include "runtime.h"
#include "sema.h"
#include "stack.h"
#include "sync.h"
#include "timer.h"

/* fault.c: arms kind: after `skip` more operations succeed, the next
 * `count` fail (count < 0: all of them). Disarm with count 0. */
void gmp__fault_arm(enum gmp__fault kind, int64_t skip, int64_t count);

/* runq.c: the global queue's primitive, under sched.lock: queue n Gs at
 * the tail. */
void gmp__globrunq_putarray(gmp_g *const *gs, uint32_t n);

/* sema.c: takes one from *addr if it is positive (never blocks). */
bool gmp__cansemacquire(volatile uint32_t *addr);

/* stack.c: gives back an unused stack's pages below its top `keep`
 * bytes. */
void gmp__stack_trim(gmp__stack *s, size_t keep);

/* ---- test hooks: only in the tests' copy of the library ---------------- */

/* alloc.c: allocations outstanding (gmp__malloc and gmp__calloc, minus
 * gmp__free), so that a test can check that shutdown freed everything. */
int64_t gmp__alloc_live(void);

/* g.c: the global free lists' lengths and the sweep's progress. */
typedef struct gmp__gfree_stats {
	int64_t young, old, clean; /* Gs in each list */
	uint64_t aged;             /* Gs aged out of old so far */
	bool aging;                /* sysmon is aging out old */
} gmp__gfree_stats;
void gmp__gfree_stats_get(gmp__gfree_stats *s);

/* runq.c: takes the G at the global queue's head (NULL if empty), under
 * sched.lock. */
gmp_g *gmp__globrunq_pop(void);

/* sema.c: how many sleepers wait on addr now (takes the table's lock). */
uint32_t gmp__sema_nwaiters(volatile uint32_t *addr);

/* stack.c: the trims so far, as tasks ended and by sweeps; how many
 * stacks have guards, and whether the guards are MADV_GUARD_INSTALL
 * ones. */
void gmp__stack_trims(uint64_t *at_exit, uint64_t *swept);
void gmp__stack_counts(uint64_t *guarded, uint64_t *unguarded, bool *install);

/* cgroup_linux.c: gmp__cgroup_cpu_limit, reading these files for
 * /proc/self/cgroup and /proc/self/mountinfo. */
int gmp__cgroup_cpu_limit_from(const char *cgroup, const char *mountinfo);

/* os_linux.c: make gmp__madvise_self use fd as our pidfd (an invalid one
 * makes it fail with -EBADF); INT_MIN restores the default. */
void gmp__madvise_self_pidfd_set(int fd);

/* rwmutex.c: how many reader slots hold rw now (one pass, not a
 * snapshot); and, when set, trylock skips its look at the slots before
 * announcing itself, so that a test can make it find readers only after
 * (the path where it leaves the unlock to them). */
int32_t gmp__rwmutex_slot_readers(gmp_rwmutex *rw);
extern bool gmp__rwmutex_prescan_off;
/* Turns reader slots on (if no writer is pending), as contended read
 * locks would. */
void gmp__rwmutex_slots_on(gmp_rwmutex *rw);
/* When set, writers leave slots as they found them (on stays on), so that
 * a test exercises the slot paths under writers all along. */
extern bool gmp__rwmutex_keep_slots;

/* preempt.c: why sysmon does not detach Ps from tasks that run past their
 * slice (GMP_PREEMPT=off, or no barrier), or NULL when it does; whether
 * the task calling it is detached right now (a read, which does not enter
 * the runtime); and, before gmp_init, which barrier the next gmp_init may
 * use at most: 1 membarrier (the default, with the fallback), 2 only the
 * mprotect shoot-down, 0 none; -1 restores the default. */
const char *gmp__preempt_off_reason(void);
bool gmp__detached(void);
void gmp__preempt_force_barrier(int kind);
/* The length of a time slice from the next gmp_init on (0: the default,
 * 10 ms), for tests of what happens within one slice on hosts (TSan) too
 * slow to finish it in 10 ms. Call it only while the runtime is off. */
void gmp__preempt_set_slice(int64_t ns);

/* slice.c: why sysmon judges slices on the wall clock (it cannot look at
 * threads here), or NULL when it judges them on CPU time; and the stalls
 * it noticed (sleeps that came back far later than asked: the process
 * stopped or throttled) and their total length. threadstat_linux.c: from
 * the next gmp_init on, read thread states from dir/TID/stat instead of
 * /proc/self/task (a missing dir stands for a restricted /proc); NULL
 * restores the default. Call it only while the runtime is off. */
const char *gmp__slice_off_reason(void);
void gmp__slice_stalls(uint64_t *n, uint64_t *ns);
void gmp__threadstat_proc_set(const char *dir);

/* sysmon.c: how many long sleeps sysmon has taken while Ps computed
 * (BUSY_LONG_US), and how many slices it first saw after one, counted
 * from before they were seen; since the last gmp_init. */
void gmp__sysmon_long_sleeps(uint64_t *sleeps, uint64_t *unseen,
			     uint64_t *woken);

/* timer.c: checks p's heap (p's timer lock taken): the heap order, each
 * slot's copy of its timer's deadline, each timer's idx and p, and the
 * lock-free mirror of the earliest deadline; aborts naming what is wrong.
 * Returns the number of timers in it. */
int32_t gmp__timers_check(gmp__p *p);

/* uring.c: whether file I/O goes through the rings in this run (NULL) or
 * why not; operations in flight in all rings; and one read(2) at the
 * current position of any descriptor (a pipe, say, which gmp_read never
 * sends to a ring) through the ring of the calling task's P, so that a
 * test can hold an operation in flight for as long as it likes: its
 * result, or -ENOSYS without a ring. */
const char *gmp__uring_off_reason(void);
uint32_t gmp__uring_inflight(void);
ssize_t gmp__uring_test_read(int fd, void *buf, size_t n);
/* The number of entries of the rings made from now on (0: the default), so
 * that a test can fill one: its submission queue with cancels, its
 * completion queue (twice as long) with completions nobody has reaped. */
void gmp__uring_set_entries(unsigned n);

/* pollfd_deadline.c: how many times a wait with a deadline armed its
 * descriptor's timer, ever (the rest found it armed for no later
 * already). */
uint64_t gmp__pd_deadline_arms(void);

/* metrics.c: measure one ready in `ready` and one system call in
 * `syscall` from now on (0: the defaults, 64 and 16), so that a test can
 * measure each one. */
void gmp__metrics_set_sampling(int32_t ready, int32_t syscall);

/* trace.c: starts the flight recorder (keeping mb MiB) with path for its
 * dumps, as GMP_TRACE=flight:mb:path would; and the bytes the recorder
 * holds in chunks now (its memory, less a few words of bookkeeping). */
int gmp__trace_start_flight(const char *path, uint64_t mb);
size_t gmp__trace_bytes(void);

#endif
