/* The child of fork() (fork.c). */
#ifndef GMP_FORK_H
#define GMP_FORK_H

/* gmp_init: registers the child handler, once per process. It calls each
 * subsystem's *_forked hook, declared in that subsystem's header. */
void gmp__fork_init(void);

#endif
