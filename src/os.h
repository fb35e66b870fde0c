/* The operating-system interface of the scheduler: futexes, clocks,
 * sleeping and yielding, thread creation and signal masks, the CPU count
 * and the cgroup quota, the page size and memory advice. Linux's answers
 * live in os_linux.c, cgroup_linux.c and threadstat_linux.c, and the scheduler's own code
 * (sched.c, sysmon.c, lock.c, thread.c, ...) reaches the kernel only
 * through them and pthreads (and a write(2) for gmp__throw). The parts
 * whose subject is a kernel object call the kernel themselves: the
 * network poller (netpoll.c: epoll and an eventfd; pollfd.c: poll(2),
 * eventfds and its table's mappings), the I/O calls (io.c), stack regions
 * (stack.c: mmap, mprotect, madvise) and the signal handlers (signal.c:
 * also the alternate stacks; dump.c). */
#ifndef GMP_OS_H
#define GMP_OS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Sleeps while *addr == val, at most ns nanoseconds (ns < 0: no limit).
 * Returns 0 when woken (or spuriously), -ETIMEDOUT, -EAGAIN if *addr != val,
 * -EINTR. Process-private futex. */
int gmp__futex_wait(volatile uint32_t *addr, uint32_t val, int64_t ns);
void gmp__futex_wake(volatile uint32_t *addr, int n);

int64_t gmp__nanotime(void); /* CLOCK_MONOTONIC */
/* Asks for precise timed sleeps on this thread (PR_SET_TIMERSLACK). */
void gmp__os_timerslack_min(void);
void gmp__osyield(void);
void gmp__usleep(int64_t us);
pid_t gmp__gettid(void);

/* CPUs this process may run on: the affinity mask of its main thread (the
 * one `taskset -p` changes), read afresh on each call. Always >= 1. */
int gmp__ncpu(void);

/* The CPU bandwidth quota of this process's cgroup (v2 cpu.max, or v1
 * cpu.cfs_quota_us/cfs_period_us), in whole CPUs rounded up: the tightest
 * of its cgroup and every ancestor. 0 when there is none or it cannot be
 * read. cgroup_linux.c. */
int gmp__cgroup_cpu_limit(void);
/* The child of fork() (fork.c): forgets the lock and cache above. */
void gmp__cgroup_forked(void);

/* Creates a joinable thread running fn(arg) with every signal blocked until
 * the new thread unblocks them itself (newosproc). Returns 0 or -errno. */
int gmp__thread_create(pthread_t *t, size_t stack_size, void *(*fn)(void *),
		       void *arg);
/* The signal mask new threads adopt once set up: the one the process had
 * when gmp_init ran. */
void gmp__sigmask_save(void);
void gmp__sigmask_restore(void);

/* Page size, and the kernel's vm.max_map_count (65530 if unreadable). */
size_t gmp__pagesize(void);
long gmp__max_map_count(void);

/* True if MADV_GUARD_INSTALL really guards (it can be missing, or be
 * accepted and ignored, as qemu-user does). Probed once. */
bool gmp__guard_install_works(void);
int gmp__guard_install(void *addr, size_t len);

/* madvise(2) over many ranges of our own memory with one system call:
 * process_madvise(2) on this process's pidfd, which Linux 6.13+ accepts
 * with any advice when the target is the caller. Returns the bytes
 * advised, counted from the first range (fewer than asked if the kernel
 * stopped at a range it refused), or -errno with nothing done: -EINVAL,
 * -EPERM or -ENOSYS where the kernel (or an emulator) does not allow it,
 * -EBADF if no pidfd of ours could be had. The caller falls back to
 * madvise per range. */
struct iovec;
enum gmp__madv { GMP__MADV_GUARD_INSTALL, GMP__MADV_POPULATE_WRITE };
ssize_t gmp__madvise_self(const struct iovec *iov, size_t n,
			  enum gmp__madv advice);

/* Asymmetric barriers (preempt.c): once one returns, every thread of this
 * process that was running when it began has executed a full memory
 * barrier, so its earlier stores are visible to the caller and its later
 * loads see the caller's earlier stores.
 *
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): gmp__membarrier_init
 * registers the process for it (once; it cannot be undone, and need not
 * be) and returns 0, or -errno where the kernel (or an emulator, or a
 * seccomp filter) lacks it. gmp__membarrier then issues one.
 *
 * The shoot-down (.NET's FlushProcessWriteBuffers): changing the
 * protection of a page this process has touched makes the kernel flush
 * that page's TLB entries on every CPU that runs the process, with an
 * interrupt, and an interrupt drains the interrupted CPU's store buffer.
 * That holds on x86-64, whose TLB shoot-downs are interrupts; arm64
 * broadcasts TLB invalidations in hardware, interrupting nobody, so there
 * gmp__flushwrites_init returns -ENOTSUP. 0 or -errno; one caller at a
 * time (sysmon). */
int gmp__membarrier_init(void);
void gmp__membarrier(void);
int gmp__flushwrites_init(void);
void gmp__flushwrites(void);

/* Another thread of this process, as the kernel sees it (sysmon's look at
 * the thread behind a P: slice.c; threadstat_linux.c). gmp__thread_cputime
 * reads the CPU time thread tid has run (its CPU clock), in ns: 0 or
 * -errno (-EINVAL once the thread is gone). gmp__thread_state returns its
 * state letter from /proc ('R' running or waiting for a CPU, 'S' or 'D'
 * asleep in the kernel, 'T' or 't' stopped, ...), or -errno where /proc
 * cannot tell (not mounted, restricted). Each is a system call or three;
 * neither changes errno. */
int gmp__thread_cputime(pid_t tid, int64_t *ns);
int gmp__thread_state(pid_t tid);

#endif
