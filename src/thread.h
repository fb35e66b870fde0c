/* Threads (thread.c): an M's life from allocm to mexit, the template
 * thread, and thread creation with retries.
 */
#ifndef GMP_THREAD_H
#define GMP_THREAD_H

#include "internal.h"

/* Creates an M that will run fn (if any), then take p (if any) and
 * schedule; spinning: the caller counted it in nmspinning. Its thread
 * comes from the template thread when the caller's thread is locked. */
void gmp__newm(void (*fn)(gmp__m *), gmp__p *p, bool spinning);

/* The calling M (which holds no P) leaves: its thread ends and its struct
 * waits on sched.freem. Never returns. */
_Noreturn void gmp__mexit(gmp__m *m);

/* gmp__thread_create, retrying EAGAIN for about a second. 0 or -errno. */
int gmp__thread_create_retry(pthread_t *t, size_t stack_size,
			     void *(*fn)(void *), void *arg);

/* Shutdown: ends the template thread, if one was started. */
void gmp__template_stop(void);

/* In the child of fork() (fork.c). */
void gmp__thread_forked(void);

#endif
