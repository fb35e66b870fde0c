/* The default number of Ps (maxprocs.c), from the affinity mask and the
 * cgroup CPU quota, and sysmon's check that follows them.
 */
#ifndef GMP_MAXPROCS_H
#define GMP_MAXPROCS_H

#include <stdint.h>

int gmp__maxprocs_default(void);

/* sysmon, at every round: about once a second, re-reads the CPUs and
 * resizes unless the number of Ps was set by the user. */
void gmp__maxprocs_update(int64_t now);

#endif
