/* Human-readable views of the scheduler: GMP_DEBUG=scheddetail=1 lines. */
#include <stdio.h>

#include "internal.h"
#include "runq.h"

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

/* Per-P and per-M detail after a schedtrace line (GODEBUG=scheddetail=1).
 * Racy reads throughout: a snapshot for humans. Returns bytes written. */
int gmp__sched_detail(char *buf, size_t size)
{
	int len = 0;
#define OUT(...)                                                              \
	do {                                                                  \
		if ((size_t)len < size)                                       \
			len += snprintf(buf + len, size - (size_t)len,        \
					__VA_ARGS__);                         \
	} while (0)
	uint32_t procs = gmp__load32_acq(&gmp__sched.gomaxprocs);
	for (uint32_t i = 0; i < procs; i++) {
		gmp_p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!p)
			continue;
		gmp_m *m = gmp__loadp_rlx(&p->m);
		OUT("  P%d: status=%s schedtick=%u syscalltick=%u m=%lld "
		    "runqsize=%u gfreecnt=%d\n",
		    p->id, pstatus_name(gmp__load32_rlx(&p->status)),
		    gmp__load32_rlx(&p->schedtick),
		    gmp__load32_rlx(&p->syscalltick), m ? (long long)m->id : -1LL,
		    gmp__runq_len(p), p->ngfree);
	}
	for (gmp_m *m = gmp__loadp_acq(&gmp__sched.allm); m; m = m->alllink) {
		gmp_p *p = gmp__loadp_rlx(&m->p);
		gmp_g *g = gmp__loadp_rlx(&m->curg);
		gmp_g *lg = gmp__loadp_rlx(&m->lockedg);
		OUT("  M%lld: p=%d curg=%lld spinning=%d idle=%d lockedg=%lld "
		    "tid=%d\n",
		    (long long)m->id, p ? p->id : -1, g ? (long long)g->id : -1LL,
		    (int)m->spinning, (int)m->idle, lg ? (long long)lg->id : -1LL,
		    (int)m->tid);
	}
#undef OUT
	if ((size_t)len >= size)
		len = (int)size - 1;
	return len;
}
