/* Dumps (dump.c): the scheddetail lines, and the GMP_DEBUG=sigquit=1
 * handler. gmp_dump itself is public.
 */
#ifndef GMP_DUMP_H
#define GMP_DUMP_H

#include <stdio.h>

#include "internal.h"

/* One line per P, per M and per live task, after a schedtrace line. */
void gmp__sched_detail(FILE *f);

/* The SIGQUIT handler: installed by gmp_init (when asked for), removed by
 * gmp_shutdown. */
void gmp__sigquit_install(void);
void gmp__sigquit_restore(void);

#endif
