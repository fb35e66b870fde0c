/* Thread-local state, reached only through out-of-line functions
 * (design.md §22.3; internal.h declares them, and gmp__getm_inline is the
 * x86-64 exception).
 *
 * A task may resume on a different thread after any switch point. Within
 * one function, a compiler is free to compute a thread-local address once
 * (aarch64 reads tpidr_el0 into a register; glibc declares
 * __errno_location const) and reuse it after a call that, unknown to the
 * compiler, moved the task to another thread. Keeping every access in this
 * file, behind calls the compiler cannot see through (no LTO), makes each
 * access read the current thread's copy. Do not inline these. */
#include <errno.h>

#include "internal.h"
#include "task.h"

#if defined(__clang__)
#define GMP__OPAQUE __attribute__((noinline, optnone))
#else
#define GMP__OPAQUE __attribute__((noinline, noipa))
#endif

/* initial-exec: a static-TLS slot, one instruction to reach; the library
 * is small enough for glibc's static TLS surplus even when dlopen()ed.
 * Not static: on x86-64, gmp__getm_inline (internal.h) reads it by name
 * from inline assembly, which is as opaque to the compiler as a call. */
__thread gmp__m *gmp__tls_m __attribute__((tls_model("initial-exec")));

/* Set by sysmon (through m->preemptp) when the task running on this thread
 * has used up its time slice, or by runq_putslow in a spawn storm; cleared
 * by execute(). Exported (see gmp.h) so gmp_preempt_point's check inlines
 * into the caller: a program reads it with one relaxed load. */
GMP_EXTERN __thread uint32_t gmp_preempt_pending_
	__attribute__((tls_model("initial-exec")));

GMP__OPAQUE gmp__m *gmp__getm(void)
{
	return gmp__tls_m;
}

GMP__OPAQUE void gmp__setm(gmp__m *m)
{
	gmp__tls_m = m;
}

GMP__OPAQUE int gmp__errno_get(void)
{
	return errno;
}

GMP__OPAQUE void gmp__errno_set(int e)
{
	errno = e;
}

GMP__OPAQUE volatile uint32_t *gmp__tls_preempt_flag(void)
{
	return &gmp_preempt_pending_;
}
