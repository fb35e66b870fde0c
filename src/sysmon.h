/* sysmon, the monitor thread (sysmon.c). */
#ifndef GMP_SYSMON_H
#define GMP_SYSMON_H

#include "internal.h"

/* gmp_init / gmp_shutdown. Start returns 0 or -errno. */
int gmp__sysmon_start(void);
void gmp__sysmon_stop(void);

/* Ends sysmon's deep sleep, if it is in one (sched.lock held). */
void gmp__sysmon_wake_locked(void);

#endif
