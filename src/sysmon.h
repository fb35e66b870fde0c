/* sysmon, the monitor thread (sysmon.c). */
#ifndef GMP_SYSMON_H
#define GMP_SYSMON_H

#include "internal.h"

/* gmp_init / gmp_shutdown. Start returns 0 or -errno. */
int gmp__sysmon_start(void);
void gmp__sysmon_stop(void);

/* Ends sysmon's deep sleep, if it is in one (sched.lock held). */
void gmp__sysmon_wake_locked(void);

/* The same without sched.lock held, for a caller that work could be
 * waiting on: takes the lock only if sysmonwait says sysmon sleeps deeply.
 * That look is racy, so only for a caller whose wake, if missed, the end
 * of sysmon's current deep-sleep slice makes up for. */
void gmp__sysmon_wake(void);

/* The same, but only a deep sleep that may last longer than sysmon's
 * longest round (10 ms): taken while no task is live. */
void gmp__sysmon_wake_long_locked(void);

#endif
