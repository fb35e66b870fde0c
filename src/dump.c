/* Human-readable views of the runtime:
 *
 *   gmp__sched_detail   the GMP_DEBUG=scheddetail=1 lines after each
 *                       schedtrace line: one per P, per M and per live G
 *                       (GODEBUG=scheddetail=1's P/M/G lines)
 *   gmp_dump            one line per live task: id, state, wait reason
 *   SIGQUIT handler     with GMP_DEBUG=sigquit=1: "SIGQUIT: quit", the
 *                       gmp_dump lines, exit status 2 (Go's SIGQUIT)
 *
 * and, at the end of the file, the section that carries the gdb extension
 * (src/gdb/) into every program and library that links libgmp.
 *
 * design.md §7.2 and §7.3 are the contract; docs/debugging.md shows the
 * lines and says what each field means.
 *
 * Everything reads the scheduler racily, without a lock: a snapshot for
 * humans. Walking gmp__allg needs none: it only grows (prepend with a
 * release store, g.c) and Gs are never freed while the runtime runs. The
 * text is formatted by hand into a small buffer that is flushed to a FILE,
 * or with write(2) in the signal handler, where neither snprintf nor stdio
 * may be used.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dump.h"
#include "g.h"
#include "internal.h"
#include "preempt.h"
#include "runq.h"
#include "runtime.h"
#include "sys.h"
#include "trace.h"

/* ---- a tiny formatter ------------------------------------------------------ */

struct out {
	FILE *f; /* NULL: write(2) to fd */
	int fd;
	bool failed;
	size_t len;
	char buf[512];
};

static void out_flush(struct out *o)
{
	if (o->f) {
		if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len)
			o->failed = true;
	} else {
		size_t off = 0;
		while (off < o->len) {
			ssize_t r = gmp__sys_write(o->fd, o->buf + off,
						   o->len - off);
			if (r == -EINTR)
				continue;
			if (r <= 0) {
				o->failed = true;
				break;
			}
			off += (size_t)r;
		}
	}
	o->len = 0;
}

static void out_str(struct out *o, const char *s)
{
	while (*s) {
		if (o->len == sizeof o->buf)
			out_flush(o);
		o->buf[o->len++] = *s++;
	}
}

static void out_u64(struct out *o, uint64_t v, unsigned base)
{
	char tmp[24];
	int i = (int)sizeof tmp;
	tmp[--i] = 0;
	do {
		tmp[--i] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	out_str(o, tmp + i);
}

static void out_i64(struct out *o, int64_t v)
{
	if (v < 0) {
		out_str(o, "-");
		out_u64(o, 0 - (uint64_t)v, 10);
	} else {
		out_u64(o, (uint64_t)v, 10);
	}
}

static void out_ptr(struct out *o, const void *p)
{
	out_str(o, "0x");
	out_u64(o, (uintptr_t)p, 16);
}

/* ---- the lines ------------------------------------------------------------- */

/* The readers below look at fields their owners write without atomics
 * (a G's id, fn, lockedm and, as it ends, waitreason; a P's free-list
 * count), with plain loads. The values may be stale or torn between
 * fields, which a snapshot for humans tolerates; ThreadSanitizer is told
 * not to watch these reads. */

static const char *pstatus_name(uint32_t s)
{
	switch (s) {
	case GMP__P_IDLE:
		return "idle";
	case GMP__P_RUNNING:
		return "running";
	case GMP__P_DEAD:
		return "dead";
	}
	return "?";
}

/* As racy as its callers' reads (the M may be new or recycled), so it
 * needs the attribute too: it is not inlined into them under TSan. */
GMP__RACY_READER static int64_t m_id(const gmp__m *m)
{
	return m ? m->id : -1;
}

/* "task 7 [waiting, chan receive]: entry=0x... lastm=2". Returns false
 * for a G that is not live (dead or not yet set up): nothing is written. */
GMP__RACY_READER static bool task_line(struct out *o, gmp_g *g)
{
	uint32_t st = gmp__load32_acq(&g->status) & ~(uint32_t)GMP__G_FLAGS;
	if (st == GMP__G_DEAD || st == GMP__G_IDLE)
		return false;
	out_str(o, "task ");
	out_i64(o, g->id);
	out_str(o, " [");
	out_str(o, gmp__gstatus_name(st));
	if (st == GMP__G_WAITING) {
		uint32_t r = g->waitreason;
		if (r != GMP__WAIT_NONE) {
			out_str(o, ", ");
			out_str(o, gmp__waitreason_name(r));
		}
	}
	/* running on its own thread without a P (preempt.h) */
	if (st == GMP__G_RUNNING &&
	    gmp__load8_rlx(&g->detach) == GMP__DETACH_DETACHED)
		out_str(o, ", detached");
	out_str(o, "]: entry=");
	out_ptr(o, (const void *)(uintptr_t)g->fn);
	gmp__m *m = gmp__loadp_rlx(&g->m);
	gmp__m *last = gmp__loadp_rlx(&g->lastm);
	if (m && (st == GMP__G_RUNNING || st == GMP__G_SYSCALL)) {
		out_str(o, " m=");
		out_i64(o, m->id);
	} else if (last) {
		out_str(o, " lastm=");
		out_i64(o, last->id);
	}
	if (g->lockedm) {
		out_str(o, " lockedm=");
		out_i64(o, m_id(g->lockedm));
	}
	out_str(o, "\n");
	return true;
}

/* Every live task; returns how many. */
GMP__RACY_READER static int64_t tasks(struct out *o)
{
	int64_t n = 0;
	for (gmp_g *g = gmp__loadp_acq(&gmp__allg); g; g = g->allglink)
		n += task_line(o, g);
	return n;
}

GMP__RACY_READER void gmp__sched_detail(FILE *f)
{
	struct out o = { .f = f };
	/* retiring Ps too (see sched.nallp); dead ones say so */
	uint32_t procs = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < procs; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!p)
			continue;
		out_str(&o, "  P");
		out_i64(&o, p->id);
		out_str(&o, ": status=");
		out_str(&o, pstatus_name(gmp__load32_rlx(&p->status)));
		out_str(&o, " schedtick=");
		out_u64(&o, gmp__load32_rlx(&p->schedtick), 10);
		out_str(&o, " syscalltick=");
		out_u64(&o, gmp__load32_rlx(&p->syscalltick), 10);
		out_str(&o, " m=");
		out_i64(&o, m_id(gmp__loadp_rlx(&p->m)));
		out_str(&o, " runqsize=");
		out_u64(&o, gmp__runq_len(p), 10);
		out_str(&o, " gfreecnt=");
		out_i64(&o, p->ngfree);
		out_str(&o, "\n");
	}
	for (gmp__m *m = gmp__loadp_acq(&gmp__sched.allm); m; m = m->alllink) {
		gmp__p *p = gmp__loadp_rlx(&m->p);
		gmp_g *g = gmp__loadp_rlx(&m->curg);
		gmp_g *lg = gmp__loadp_rlx(&m->lockedg);
		out_str(&o, "  M");
		out_i64(&o, m->id);
		out_str(&o, ": p=");
		out_i64(&o, p ? p->id : -1);
		out_str(&o, " curg=");
		out_i64(&o, g ? g->id : -1);
		out_str(&o, " spinning=");
		out_i64(&o, gmp__loadb_rlx(&m->spinning));
		out_str(&o, " idle=");
		out_i64(&o, gmp__loadb_rlx(&m->idle));
		out_str(&o, " lockedg=");
		out_i64(&o, lg ? lg->id : -1);
		out_str(&o, " detached=");
		out_i64(&o, g && gmp__load8_rlx(&g->detach) ==
					    GMP__DETACH_DETACHED);
		out_str(&o, " tid=");
		out_i64(&o,
			(int32_t)gmp__load32_rlx((volatile uint32_t *)&m->tid));
		out_str(&o, "\n");
	}
	for (gmp_g *g = gmp__loadp_acq(&gmp__allg); g; g = g->allglink) {
		uint32_t st = gmp__load32_acq(&g->status) &
			      ~(uint32_t)GMP__G_FLAGS;
		if (st == GMP__G_DEAD || st == GMP__G_IDLE)
			continue;
		out_str(&o, "  G");
		out_i64(&o, g->id);
		out_str(&o, ": status=");
		out_str(&o, gmp__gstatus_name(st));
		out_str(&o, "(");
		if (st == GMP__G_WAITING)
			out_str(&o, gmp__waitreason_name(g->waitreason));
		else if (st == GMP__G_RUNNING &&
			 gmp__load8_rlx(&g->detach) == GMP__DETACH_DETACHED)
			out_str(&o, "detached");
		out_str(&o, ") m=");
		out_i64(&o, m_id(gmp__loadp_rlx(&g->m)));
		out_str(&o, " lockedm=");
		out_i64(&o, m_id(g->lockedm));
		out_str(&o, "\n");
	}
	out_flush(&o);
}

/* ---- gmp_dump ---------------------------------------------------------------- */

static int64_t dump(FILE *f)
{
	struct out o = { .f = f };
	int64_t n = tasks(&o);
	out_flush(&o);
	if (fflush(o.f) != 0)
		o.failed = true;
	return o.failed ? -EIO : n;
}

GMP_EXTERN int gmp_dump(FILE *f)
{
	if (!f)
		return -EINVAL;
	int64_t n = 0;
	if (gmp__getm()) {
		n = dump(f);
	} else if (gmp__rt_hold(false) == 0) {
		n = dump(f);
		gmp__rt_release();
	}
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* ---- SIGQUIT ----------------------------------------------------------------- */

static struct sigaction sigquit_old;
static bool sigquit_installed;
static volatile uint32_t sigquit_active; /* atomic: handlers running */

static void sigquit_handler(int sig)
{
	(void)sig;
	gmp__add32_full(&sigquit_active, 1);
	struct out o = { .fd = 2 };
	out_str(&o, "SIGQUIT: quit\n");
	tasks(&o);
	out_flush(&o);
	/* A trace being recorded (the flight recorder's window, above all)
	 * is written before the process goes. */
	gmp__trace_dump_emergency();
	_exit(2);
}

void gmp__sigquit_install(void)
{
	if (!gmp__cfg.sigquit || sigquit_installed)
		return;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = sigquit_handler;
	sa.sa_flags = SA_ONSTACK; /* an M's alternate stack (signal.c) */
	sigfillset(&sa.sa_mask);  /* nothing else interrupts the dump */
	if (sigaction(SIGQUIT, &sa, &sigquit_old) == 0)
		sigquit_installed = true;
}

/* Called by gmp_shutdown before the Gs go away. If the program replaced
 * our handler meanwhile, its own stays. A handler already running ends
 * the process; until it does, the Gs must stay. */
void gmp__sigquit_restore(void)
{
	if (!sigquit_installed)
		return;
	struct sigaction cur;
	if (sigaction(SIGQUIT, NULL, &cur) == 0 &&
	    !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == sigquit_handler)
		sigaction(SIGQUIT, &sigquit_old, NULL);
	sigquit_installed = false;
	while (gmp__load32_acq(&sigquit_active))
		gmp__usleep(1000);
}

/* ---- the gdb extension --------------------------------------------------------
 *
 * gdb runs the Python scripts named in a .debug_gdb_scripts section of any
 * program or library it loads (once `auto-load safe-path` admits the file;
 * see README). An entry of kind 4 holds a script inline: the kind byte,
 * the script's name up to a newline, its text, a NUL. It sits in this
 * file, which every program that uses the runtime links (gmp_init needs
 * it), so a program linked with libgmp.a carries it as libgmp.so does.
 * "MS" (mergeable strings) lets the linker fold the copies; the section is
 * not allocated, so it costs no memory at run time, and strip -g drops it
 * with the rest of the debug information, which the script needs anyway.
 */
#ifdef GMP_GDB_SCRIPT
__asm__(".pushsection .debug_gdb_scripts, \"MS\", %progbits, 1\n"
	".byte 4\n"
	".ascii \"gmp-runtime-gdb.py\\n\"\n"
	".incbin \"" GMP_GDB_SCRIPT "\"\n"
	".byte 0\n"
	".popsection\n");
#endif
