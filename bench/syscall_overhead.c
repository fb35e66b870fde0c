/* bench=syscall_overhead: what wrapping a quick system call costs. One
 * task calls getpid n times raw and n times wrapped in
 * gmp_enter_syscall/gmp_exit_syscall, in alternating chunks of n/10 so
 * that both see the same clock speed and cache state (Go: syscall.Syscall
 * against syscall.RawSyscall of SYS_GETPID).
 *
 * ns_per_op is the difference per call, wrapped minus raw: the cost of the
 * fast path (two G status changes, no lock, no atomic read-modify-write on
 * the P). syscall(SYS_getpid), not getpid(), so no libc caching makes the
 * raw call free. retakes: Ps sysmon took meanwhile; a loop this long with
 * no switch point outlives its 10 ms time slice, and sysmon ends the slice
 * by retaking the P during one of the calls (Go's rule; Go's loop sees the
 * same), so there are about as many retakes as 10 ms periods. */
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

static long long n;
static int64_t raw_ns, wrapped_ns;
static gmp_stats before, after;

static void raw_loop(long long k)
{
	for (long long i = 0; i < k; i++)
		if (syscall(SYS_getpid) <= 0)
			abort();
}

static void wrapped_loop(long long k)
{
	for (long long i = 0; i < k; i++) {
		gmp_enter_syscall();
		long r = syscall(SYS_getpid);
		gmp_exit_syscall();
		if (r <= 0)
			abort();
	}
}

static int run(void *arg)
{
	(void)arg;
	enum { CHUNKS = 10 };
	long long chunk = n / CHUNKS > 0 ? n / CHUNKS : 1;
	raw_loop(chunk / 10); /* warm up both paths */
	wrapped_loop(chunk / 10);
	gmp_stats_read(&before);
	for (int c = 0; c < CHUNKS; c++) {
		int64_t t0 = bench_now_ns();
		raw_loop(chunk);
		int64_t t1 = bench_now_ns();
		wrapped_loop(chunk);
		int64_t t2 = bench_now_ns();
		raw_ns += t1 - t0;
		wrapped_ns += t2 - t1;
	}
	gmp_stats_read(&after);
	n = chunk * CHUNKS;
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 10000000);
	n = a.n;
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0 || gmp_main(run, NULL) != 0)
		return 1;
	gmp_shutdown();
	double raw = (double)raw_ns / (double)n;
	double wrapped = (double)wrapped_ns / (double)n;
	printf("bench=syscall_overhead procs=%d n=%lld ns_per_op=%.2f "
	       "raw_ns=%.2f wrapped_ns=%.2f retakes=%llu\n",
	       a.procs, n, wrapped - raw, raw, wrapped,
	       (unsigned long long)(after.retakes - before.retakes));
	return 0;
}
