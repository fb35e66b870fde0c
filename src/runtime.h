/* The runtime's lifecycle (runtime.c): what threads without a P use to
 * find the runtime running (or to start it), and gmp_main's exit path.
 */
#ifndef GMP_RUNTIME_H
#define GMP_RUNTIME_H

#include "internal.h"

/* Runs fn with the runtime held RUNNING (starting it if it is off), from a
 * thread that holds no P. Returns fn's result, or -ESHUTDOWN while
 * draining, or gmp_init's error. */
int64_t gmp__with_runtime(int64_t (*fn)(void *), void *arg);

/* Runs fn(arg) if the runtime is running or draining, holding it there;
 * else returns off. From a thread that holds no P. */
int64_t gmp__if_running(int64_t (*fn)(void *), void *arg, int64_t off);

/* gmp_go from a thread without a P (through gmp__with_runtime). */
int64_t gmp__go_foreign(gmp_fn fn, void *arg);

/* gmp_exit from gmp_main's task, inside its function: tell the waiting
 * thread that the function will not return. */
void gmp__main_goexit(gmp_g *g);

/* In the child of fork() (fork.c). */
void gmp__runtime_forked(void);

#endif
