/* Signals (signal.c): the SIGSEGV/SIGBUS handler that reports stack
 * overflows, and each M's alternate signal stack.
 *
 * Not signal.h: tests and benchmarks put src/ on their include path, where
 * it would hide the C library's <signal.h>.
 */
#ifndef GMP_SIGNALS_H
#define GMP_SIGNALS_H

/* The handler: installed by gmp_init, removed by gmp_shutdown. */
void gmp__signal_install(void);
void gmp__signal_restore(void);

/* On a new M's thread (mstart): its alternate signal stack. */
void gmp__signal_m_init(void);

#endif
