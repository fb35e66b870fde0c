/* The operating-system interface. Linux-specific code lives in
 * os_linux.c; nothing else in the runtime issues raw system calls. */
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

int64_t gmp__nanotime(void);     /* CLOCK_MONOTONIC */
/* Asks for precise timed sleeps on this thread (PR_SET_TIMERSLACK). */
void gmp__os_timerslack_min(void);
void gmp__osyield(void);
void gmp__usleep(int64_t us);
pid_t gmp__gettid(void);

/* CPUs this process may run on (the affinity mask; see os_linux.c for the
 * cgroup quota). Always >= 1. */
int gmp__ncpu(void);

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

#endif
