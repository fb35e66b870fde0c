/* System calls (syscall.c): what sysmon and an M leaving its own syscall
 * use to take a P from a task in a syscall, under the G's SCAN bit (see
 * syscall.c's opening comment).
 */
#ifndef GMP_SYSCALL_H
#define GMP_SYSCALL_H

#include "internal.h"

/* Tries to pin the task in a syscall on p's M: on success its G is
 * SYSCALL|SCAN (it cannot leave the syscall), and *gp and *mp name the G
 * and M; the caller must then gmp__syscall_resume(*gp). */
bool gmp__block_on_exit_syscall(gmp__p *p, gmp_g **gp, gmp__m **mp);

/* Detaches p from m (the G is pinned): p becomes IDLE but is on no list;
 * the caller hands it off or runs it. */
void gmp__syscall_takep(gmp__m *m, gmp__p *p);

/* Unpins the G (clears SCAN, with a release). */
void gmp__syscall_resume(gmp_g *g);

#endif
