/* The runtime's histograms (trace.h says what they measure and how the
 * hooks sample them): the tick clock they use, execute's measurement of a
 * sampled ready (the G's TRACK bit), gmp_metrics_read, and the p50/p99
 * that schedtrace prints.
 *
 * Each P keeps its own three histograms, written only by the M that
 * holds it, with a relaxed load and store per count: no read-modify-write
 * and no cache line shared with another P. A reader sums the Ps' counters
 * without stopping them; a count may be missed by a reader that races it,
 * never lost. The few counts made on a thread that holds no P (a system
 * call that lost its P) go to one shared histogram with an atomic add.
 */
#include <string.h>

#include "export_test.h"
#include "internal.h"
#include "runtime.h"
#include "trace.h"

uint32_t gmp__sample_ready = 64;
uint32_t gmp__sample_syscall = 16;

/* ---- ticks -------------------------------------------------------------- */

bool gmp__ticks_cpu;

/* The rate: ns = ticks * gmp__ticks_mult >> 32, measured over the first
 * millisecond after the anchor (t0, c0), then fixed for the process, and
 * published with a release once known (0 before). */
volatile uint64_t gmp__ticks_mult;
static struct {
	uint64_t c0;
	int64_t t0;
	bool anchored;
} clk;

static pthread_once_t ticks_once = PTHREAD_ONCE_INIT;

bool gmp__cpu_prefetchw;

#if defined(__x86_64__)
/* CPUID leaf `leaf` (subleaf 0) into r[0..3] (EAX..EDX). */
static void cpuid(uint32_t leaf, uint32_t r[4])
{
	__asm__ __volatile__("cpuid"
			     : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3])
			     : "a"(leaf), "c"(0));
}

/* CPUID extended leaf `leaf` into r; false if the CPU has no such leaf
 * (leaf 0x80000000 gives the highest). */
static bool cpuid_ext(uint32_t leaf, uint32_t r[4])
{
	cpuid(0x80000000u, r);
	if (r[0] < leaf)
		return false;
	cpuid(leaf, r);
	return true;
}
#endif

/* Whether the CPU's counter runs at a constant rate in every power state
 * and on every core (an invariant TSC, 0x80000007 EDX bit 8; arm64's
 * generic timer always does): only then are its ticks a clock. */
static bool cpu_counter_is_clock(void)
{
#if defined(__x86_64__)
	uint32_t r[4];
	return cpuid_ext(0x80000007u, r) && (r[3] >> 8 & 1);
#elif defined(__aarch64__)
	return true;
#else
	return false;
#endif
}

/* PREFETCHW: 0x80000001 ECX bit 8 (every Intel core since Broadwell, and
 * AMD's; older ones may not take the instruction). */
static bool cpu_has_prefetchw(void)
{
#if defined(__x86_64__)
	uint32_t r[4];
	return cpuid_ext(0x80000001u, r) && (r[2] >> 8 & 1);
#else
	return false;
#endif
}

static void ticks_choose(void)
{
	gmp__cpu_prefetchw = cpu_has_prefetchw();
	gmp__ticks_cpu = cpu_counter_is_clock();
	clk.c0 = gmp__ticks();
	clk.t0 = gmp__nanotime();
	if (!gmp__ticks_cpu)
		gmp__store64_rel(&gmp__ticks_mult, (uint64_t)1 << 32);
	clk.anchored = true;
}

void gmp__ticks_init(void)
{
	pthread_once(&ticks_once, ticks_choose);
}

/* Before the rate is known: computes it once a millisecond has passed
 * since the anchor (whoever first finds it due; two racing compute the
 * same), else says 0. */
uint64_t gmp__ticks_to_ns_slow(uint64_t dt)
{
	if (!clk.anchored || !dt)
		return 0;
	uint64_t c = gmp__ticks();
	int64_t t = gmp__nanotime();
	if (t - clk.t0 < 1000 * 1000 || c <= clk.c0)
		return 0;
	uint64_t mult = (uint64_t)(((__uint128_t)(uint64_t)(t - clk.t0) << 32) /
				   (c - clk.c0));
	if (!mult)
		mult = 1;
	/* release: pairs with gmp__ticks_to_ns's acquire */
	gmp__store64_rel(&gmp__ticks_mult, mult);
	return gmp__ticks_to_ns(dt);
}

/* ---- counting ------------------------------------------------------------ */

static volatile uint64_t hist_nop[3][GMP__HIST_NBUCKETS];

/* sysmon's copy of the totals at the previous schedtrace line. */
static gmp_metrics last_line;

void gmp__hist_add_nop(unsigned which, uint64_t ns)
{
	gmp__add64_rlx(&hist_nop[which][gmp__hist_bucket(ns)], 1);
}

/* ---- reading --------------------------------------------------------------- */

static void metrics_sum(gmp_metrics *out)
{
	memset(out, 0, sizeof *out);
	uint32_t n = gmp__load32_acq(&gmp__sched.nallp);
	for (uint32_t i = 0; i < n; i++) {
		gmp__p *p = gmp__loadp_acq(&gmp__sched.allp[i]);
		if (!p)
			continue;
		for (int b = 0; b < GMP__HIST_NBUCKETS; b++) {
			out->sched_latency[b] += gmp__load64_rlx(
				&p->tr.hist[GMP__HIST_SCHED][b]);
			out->syscall_time[b] += gmp__load64_rlx(
				&p->tr.hist[GMP__HIST_SYSCALL][b]);
			out->slice_time[b] += gmp__load64_rlx(
				&p->tr.hist[GMP__HIST_SLICE][b]);
		}
	}
	for (int b = 0; b < GMP__HIST_NBUCKETS; b++) {
		out->sched_latency[b] +=
			gmp__load64_rlx(&hist_nop[GMP__HIST_SCHED][b]);
		out->syscall_time[b] +=
			gmp__load64_rlx(&hist_nop[GMP__HIST_SYSCALL][b]);
		out->slice_time[b] +=
			gmp__load64_rlx(&hist_nop[GMP__HIST_SLICE][b]);
	}
}

_Static_assert(GMP_HIST_BUCKETS == GMP__HIST_NBUCKETS,
	       "gmp.h and internal.h agree on the buckets");

GMP_EXTERN int gmp_metrics_read(gmp_metrics *out)
{
	if (!out)
		return -EINVAL;
	if (gmp__getm()) {
		metrics_sum(out);
		return 0;
	}
	if (gmp__rt_hold(false) != 0) {
		memset(out, 0, sizeof *out);
		return 0;
	}
	metrics_sum(out);
	gmp__rt_release();
	return 0;
}

/* Forgets the shared histogram (gmp_shutdown: the Ps' go with the Ps, so
 * that a new runtime starts from zero). */
void gmp__metrics_reset(void)
{
	memset(&last_line, 0, sizeof last_line);
	for (int w = 0; w < 3; w++)
		for (int b = 0; b < GMP__HIST_NBUCKETS; b++)
			gmp__store64_rlx(&hist_nop[w][b], 0);
}

/* ---- schedtrace ------------------------------------------------------------ */

/* The upper edge of the bucket holding the q-th quantile of h (q in
 * thousandths), or -1 if h is empty. */
static int64_t quantile_edge(const uint64_t *h, unsigned q)
{
	uint64_t total = 0;
	for (int b = 0; b < GMP__HIST_NBUCKETS; b++)
		total += h[b];
	if (!total)
		return -1;
	uint64_t want = (total * q + 999) / 1000, seen = 0;
	for (int b = 0; b < GMP__HIST_NBUCKETS; b++) {
		seen += h[b];
		if (seen >= want)
			return b == GMP__HIST_NBUCKETS - 1
				       ? INT64_MAX
				       : (int64_t)1 << (b + 1);
	}
	return INT64_MAX;
}

static int fmt_dur(char *buf, size_t size, int64_t ns)
{
	if (ns < 0)
		return snprintf(buf, size, "-");
	if (ns == INT64_MAX)
		return snprintf(buf, size, "inf");
	if (ns < 1000)
		return snprintf(buf, size, "%lldns", (long long)ns);
	if (ns < 1000 * 1000)
		return snprintf(buf, size, "%.3gus", (double)ns / 1e3);
	if (ns < 1000 * 1000 * 1000)
		return snprintf(buf, size, "%.3gms", (double)ns / 1e6);
	return snprintf(buf, size, "%.3gs", (double)ns / 1e9);
}

int gmp__metrics_schedtrace(char *buf, size_t size)
{
	gmp_metrics now;
	metrics_sum(&now);
	static const char *const names[3] = { "schedlat", "syscall", "slice" };
	uint64_t d[GMP__HIST_NBUCKETS];
	int len = 0;
	for (int w = 0; w < 3; w++) {
		const uint64_t *a = w == 0   ? now.sched_latency
				    : w == 1 ? now.syscall_time
					     : now.slice_time;
		const uint64_t *b = w == 0   ? last_line.sched_latency
				    : w == 1 ? last_line.syscall_time
					     : last_line.slice_time;
		for (int i = 0; i < GMP__HIST_NBUCKETS; i++)
			d[i] = a[i] >= b[i] ? a[i] - b[i] : 0;
		char p50[16], p99[16];
		fmt_dur(p50, sizeof p50, quantile_edge(d, 500));
		fmt_dur(p99, sizeof p99, quantile_edge(d, 990));
		int n = snprintf(buf + len, size - (size_t)len,
				 " %s_p50=%s %s_p99=%s", names[w], p50,
				 names[w], p99);
		if (n < 0 || (size_t)(len + n) >= size)
			break;
		len += n;
	}
	last_line = now;
	return len;
}

/* ---- tests --------------------------------------------------------------------- */

#if GMP__TEST_HOOKS
void gmp__metrics_set_sampling(int32_t ready, int32_t syscall)
{
	gmp__sample_ready = ready > 0 ? (uint32_t)ready : 64;
	gmp__sample_syscall = syscall > 0 ? (uint32_t)syscall : 16;
}
#endif
