/* Stall reports (GMP_DEBUG=stall=MS): a line on stderr for each stretch
 * in which a task runs more than MS milliseconds without a switch point,
 * holding its P (a computation that never calls the runtime, or a
 * blocking call nobody wrapped in gmp_enter_syscall) or detached from it
 * by sysmon (preempt.h): the stretch counts once, whichever.
 *
 * sysmon looks at every round (gmp__stall_check), without stopping
 * anything. A stretch on a P is one task, one schedtick and one count of
 * the P's slow schedule rounds (tr.sched_seen): the schedtick alone does
 * not move when a task readied into runnext runs on in the same slice (a
 * task that sleeps a few microseconds at a time would look like one long
 * run). So once a stretch has lasted half the limit, sysmon sets the P's
 * tracer byte (trace.h), which sends the P's next schedule() the slow way,
 * where it counts; a task that does switch shows a new count by the next
 * look, and only one that does not is reported. When sysmon detaches a
 * task, its stretch moves to its M and goes on until the task takes a P
 * back. What the thread is doing is read from /proc (its system call,
 * stack pointer and program counter, and its scheduler state), which does
 * not interrupt it: no signal is sent.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "os.h"
#include "preempt.h"
#include "symtab.h"
#include "sys.h"
#include "trace.h"

/* Names of the system calls a stalled thread is most likely in. */
static const char *syscall_name(long nr)
{
	static const struct {
		long nr;
		const char *name;
	} names[] = {
#if defined(__x86_64__)
		{ 0, "read" },
		{ 1, "write" },
		{ 7, "poll" },
		{ 17, "pread64" },
		{ 18, "pwrite64" },
		{ 19, "readv" },
		{ 20, "writev" },
		{ 23, "select" },
		{ 35, "nanosleep" },
		{ 42, "connect" },
		{ 43, "accept" },
		{ 44, "sendto" },
		{ 45, "recvfrom" },
		{ 46, "sendmsg" },
		{ 47, "recvmsg" },
		{ 61, "wait4" },
		{ 74, "fsync" },
		{ 202, "futex" },
		{ 230, "clock_nanosleep" },
		{ 232, "epoll_wait" },
		{ 257, "openat" },
		{ 270, "pselect6" },
		{ 271, "ppoll" },
		{ 281, "epoll_pwait" },
		{ 288, "accept4" },
#elif defined(__aarch64__)
		{ 22, "epoll_pwait" },
		{ 56, "openat" },
		{ 63, "read" },
		{ 64, "write" },
		{ 65, "readv" },
		{ 66, "writev" },
		{ 67, "pread64" },
		{ 68, "pwrite64" },
		{ 72, "pselect6" },
		{ 73, "ppoll" },
		{ 82, "fsync" },
		{ 98, "futex" },
		{ 101, "nanosleep" },
		{ 115, "clock_nanosleep" },
		{ 202, "accept" },
		{ 203, "connect" },
		{ 206, "sendto" },
		{ 207, "recvfrom" },
		{ 211, "sendmsg" },
		{ 212, "recvmsg" },
		{ 242, "accept4" },
		{ 260, "wait4" },
#endif
		{ -1, NULL },
	};
	for (int i = 0; names[i].name; i++)
		if (names[i].nr == nr)
			return names[i].name;
	return "?";
}

static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = gmp__sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	ssize_t n = gmp__sys_read(fd, buf, size - 1);
	gmp__sys_close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

/* What thread tid is doing: its scheduler state (gmp__thread_state) and
 * /proc/self/task/TID/syscall. */
static void thread_doing(pid_t tid, char *out, size_t size)
{
	char path[64], sc[256];
	int st = gmp__thread_state(tid); /* os.h: its letter, or -errno */
	char state = st > 0 ? (char)st : '?';
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
	if (read_small(path, sc, sizeof sc) <= 0) {
		snprintf(out, size, "state %c", state);
		return;
	}
	sc[strcspn(sc, "\n")] = 0;
	if (!strncmp(sc, "running", 7)) {
		snprintf(out, size, "state %c, running (not in a system call)",
			 state);
		return;
	}
	/* "nr args... sp pc" or "-1 sp pc": the last two are sp and pc. */
	long nr = strtol(sc, NULL, 10);
	const char *pc = strrchr(sc, ' ');
	const char *sp = NULL;
	if (pc) {
		const char *q = pc;
		while (q > sc && q[-1] != ' ')
			q--;
		if (q > sc)
			for (sp = q - 1; sp > sc && sp[-1] != ' '; sp--)
				;
	}
	char spv[24] = "?", pcv[24] = "?";
	if (pc)
		snprintf(pcv, sizeof pcv, "%s", pc + 1);
	if (sp && pc) {
		size_t l = (size_t)(strchr(sp, ' ') - sp);
		snprintf(spv, sizeof spv, "%.*s", (int)(l < 20 ? l : 20), sp);
	}
	if (nr < 0)
		snprintf(out, size,
			 "state %c, blocked outside a system call, sp=%s "
			 "pc=%s",
			 state, spv, pcv);
	else
		snprintf(out, size,
			 "state %c, in system call %ld (%s), sp=%s pc=%s",
			 state, nr, syscall_name(nr), spv, pcv);
}

/* Reads fields other threads own (a G's id and fn, an M's curg and tid)
 * racily, as dump.c does. */
GMP__RACY_READER static void report(gmp_g *g, int64_t gid, gmp__m *m, int p,
				    int64_t ns, bool detached)
{
	char fn[256], doing[256], line[1024];
	gmp__symbolize((uintptr_t)g->fn, fn, sizeof fn);
	pid_t tid = (pid_t)gmp__load32_rlx((volatile uint32_t *)&m->tid);
	thread_doing(tid, doing, sizeof doing);
	char where[64];
	if (detached)
		snprintf(where, sizeof where, "detached from its P");
	else
		snprintf(where, sizeof where, "holding P%d, not detached", p);
	int n = snprintf(line, sizeof line,
			 "gmp: stall: task %lld (%s) has run %.1fms without a "
			 "switch point, %s; M%lld (thread %d): %s\n",
			 (long long)gid, fn, (double)ns / 1e6, where,
			 (long long)m->id, (int)tid, doing);
	if (n > (int)sizeof line - 1)
		n = (int)sizeof line - 1;
	gmp__sys_write(2, line, (size_t)n);
}

/* sysmon's count of Ms that carry an unreported detached stretch (set by
 * the last gmp__stall_check). */
static uint32_t watching;

bool gmp__stall_watching(void)
{
	return watching != 0;
}

GMP__RACY_READER void gmp__stall_check(int64_t now)
{
	int64_t limit = (int64_t)gmp__cfg.stall_ms * 1000000;
	uint32_t n = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < n; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!p)
			continue;
		gmp__ptrace *t = &p->tr;
		gmp__m *m = NULL;
		gmp_g *g = NULL;
		if (gmp__load32_acq(&p->status) == GMP__P_RUNNING &&
		    (m = gmp__loadp_acq(&p->m)) != NULL)
			g = gmp__loadp_acq(&m->curg);
		bool running = g &&
			       (gmp__load32_rlx(&g->status) &
				~(uint32_t)GMP__G_FLAGS) == GMP__G_RUNNING &&
			       gmp__load8_rlx(&g->detach) !=
				       GMP__DETACH_DETACHED;
		uint32_t tick = gmp__load32_rlx(&p->schedtick);
		uint32_t seen = gmp__load32_rlx(&t->sched_seen);
		if (t->stall_g &&
		    (!running || g != t->stall_g || tick != t->stall_tick ||
		     seen != t->stall_seen)) {
			/* The stretch on this P is over; a task sysmon
			 * detached goes on with it on its own M. */
			gmp_g *og = t->stall_g;
			gmp__m *om = gmp__loadp_rlx(&og->m);
			if (og->id == t->stall_gid && om &&
			    gmp__load8_acq(&og->detach) ==
				    GMP__DETACH_DETACHED) {
				om->tr.stall_g = og;
				om->tr.stall_gid = t->stall_gid;
				om->tr.stall_since = t->stall_since;
				om->tr.stall_reported = t->stall_reported;
			}
			t->stall_g = NULL;
		}
		if (!running)
			continue;
		if (!t->stall_g) {
			t->stall_g = g;
			t->stall_gid = g->id;
			t->stall_tick = tick;
			t->stall_seen = seen;
			t->stall_since = now;
			t->stall_reported = false;
			/* A measured slice (trace.h) is this one: it says when
			 * the stretch began, which sysmon, busy elsewhere or
			 * asleep, may only now see. */
			uint64_t t0 = gmp__load64_rlx(&t->slice_t0);
			uint64_t ns = t0 ? gmp__ticks_to_ns(gmp__ticks() - t0)
					 : 0;
			if (ns && ns < (uint64_t)now)
				t->stall_since = now - (int64_t)ns;
			continue;
		}
		if (t->stall_reported)
			continue;
		if (now - t->stall_since >= limit) {
			report(g, t->stall_gid, m, p->id, now - t->stall_since,
			       false);
			t->stall_reported = true;
		} else if (now - t->stall_since >= limit / 2) {
			/* Show me the next switch (see above). */
			gmp__store8_rlx(&p->tattn, 1);
		}
	}
	uint32_t nwatch = 0;
	for (gmp__m *m = gmp__loadp_acq(&gmp__sched.allm); m; m = m->alllink) {
		gmp_g *og = m->tr.stall_g;
		if (!og)
			continue;
		/* The stretch is over once the task took a P back, or is
		 * taking one: inside the runtime (inrt), a detached task is
		 * at a switch point, waiting for a P, not running its own
		 * code (the wait may be long on a loaded host). */
		if (gmp__loadp_rlx(&og->m) != m || og->id != m->tr.stall_gid ||
		    gmp__load8_acq(&og->detach) != GMP__DETACH_DETACHED ||
		    gmp__load8_rlx(&og->inrt) != 0) {
			m->tr.stall_g = NULL;
			continue;
		}
		if (!m->tr.stall_reported && now - m->tr.stall_since >= limit) {
			report(og, m->tr.stall_gid, m, -1,
			       now - m->tr.stall_since, true);
			m->tr.stall_reported = true;
		}
		nwatch += !m->tr.stall_reported;
	}
	watching = nwatch;
}
