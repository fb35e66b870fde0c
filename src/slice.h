/* Time slices judged on the CPU time a task's thread receives (slice.c,
 * design.md §37.7): what sysmon's retake asks before it ends a slice,
 * detaches a P or retakes one from a system call. All of it runs on
 * sysmon, and reads and writes p->sysmontick, sysmon's own record. */
#ifndef GMP_SLICE_H
#define GMP_SLICE_H

#include "internal.h"

/* gmp_init, before sysmon starts: whether sysmon can look at threads
 * (their CPU clocks and their states in /proc). Where it cannot, slices
 * are measured on the wall clock, as they were before, and with GMP_DEBUG
 * set it says why on stderr. */
void gmp__slice_init(void);

/* Whether sysmon looks at threads (else slices are wall-clock ones). */
bool gmp__slice_cpu(void);

/* A new slice on p: retake saw a new schedtick at `now`, and counts the
 * slice from `since` (now, or earlier if sysmon slept long and the slice
 * may have begun well before it was seen). `asked`: the slice before
 * was asked to end (its task answered). `settled`: the slice before had
 * lasted a look's period by the look before (the P computes in long
 * slices). Returns whether the new slice's thread was read already (it
 * follows the asked one on the same thread, or the P is settled): then
 * it needs no look before it could have run its CPU time. */
bool gmp__slice_begin(gmp__p *p, int64_t since, int64_t now, bool asked,
		      bool settled);

/* Whether the slice on p, which has not been asked to end yet, has ended:
 * its thread has run the slice's length in CPU time (the task hogs the
 * CPU), or the slice has lasted that long on the wall clock and the thread
 * sleeps in the kernel (a call libgmp was not told about). A thread that
 * the kernel keeps waiting for a CPU, or that is stopped, has not: its
 * slice goes on, judged on the CPU time it gets. */
bool gmp__slice_ended(gmp__p *p, int64_t now);

/* p's task has just been asked to yield, with `grace` ns to do so. */
void gmp__slice_asked(gmp__p *p, int64_t now, int64_t grace);

/* The grace period after the request is over and someone wants p:
 * whether its task is at fault, and sysmon may detach p. It is if its
 * thread has run twice the grace period in CPU time since the request
 * without reaching a switch point, or sleeps in the kernel; if the kernel keeps
 * it waiting (or it is stopped) it keeps p, and the next look is set. */
bool gmp__slice_detachable(gmp__p *p, int64_t now);

/* Go's rules would retake p from its task's system call: whether the call
 * really blocks (its thread sleeps in the kernel). A thread the kernel
 * runs, or keeps waiting for a CPU, inside the call is not blocked: p is
 * left to it, and looked at again after as long as the call has lasted.
 * The caller must not hold the task's SCAN bit: this reads /proc. */
bool gmp__slice_syscall_blocks(gmp__p *p, int64_t now);

/* Whether the thread holding p got less than three quarters of a CPU
 * between the last two readings of its clock: the kernel keeps it
 * waiting, and its looks need not be exact in wall time (sysmon.c). */
bool gmp__slice_waits(const gmp__p *p);

/* When the slice on p, not yet asked to end, wants sysmon's next look
 * (the first reading of its thread's CPU clock, or when it could have
 * run its CPU time; on the wall clock, its end). */
int64_t gmp__slice_next(const gmp__p *p);

/* sysmon's sleep of `slept` ns came back `late` ns later than it should
 * have (at `now`). Beyond a few milliseconds, sysmon was stopped or
 * throttled with the rest of the process, or kept from a CPU: if no
 * thread behind a P is seen to have run meanwhile, nobody is judged for
 * that time, and every P's wall-clock marks move on by `late`. */
void gmp__slice_stalled(int64_t slept, int64_t late, int64_t now);

#endif
