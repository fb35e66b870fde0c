/* bench=ticker_many: n tickers of --period_us (default 1000) run for --ms
 * (default 2000), each read by a task of its own that receives its ticks
 * until the time is up (Go: time.NewTicker, a goroutine per ticker, in
 * bench/go/ticker_many). cpu_ms is the process's CPU time (user + system,
 * getrusage) from before the first ticker is made until the last task has
 * stopped its ticker and ended; ticks is how many values the tasks
 * received in all (ticks nobody was ready for are dropped, as Go drops
 * them), cpu_ns_per_tick the one over the other. Default --procs=2. */
#include <stdio.h>
#include <sys/resource.h>

#include <gmp.h>

#include "benchutil.h"

static int64_t period_ns;
static volatile int stop_flag;
static gmp_wg wg = GMP_WG_INIT;
static long long ticks;

static int64_t cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

static void reader(void *arg)
{
	(void)arg;
	gmp_timer *t = gmp_timer_new(period_ns, period_ns);
	gmp_chan *c = gmp_timer_chan(t);
	long long got = 0;
	int64_t v;
	while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
		gmp_chan_recv(c, &v);
		got++;
	}
	gmp_timer_free(t);
	__atomic_fetch_add(&ticks, got, __ATOMIC_RELAXED);
	gmp_wg_done(&wg);
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 10000);
	period_ns = bench_flag_ll(argc, argv, "period_us", 1000) * 1000;
	long long ms = bench_flag_ll(argc, argv, "ms", 2000);
	if (period_ns <= 0) {
		fprintf(stderr, "--period_us must be at least 1\n");
		return 2;
	}
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0)
		return 1;
	int64_t c0 = cpu_ns(), t0 = bench_now_ns();
	gmp_wg_add(&wg, a.n);
	for (long long i = 0; i < a.n; i++)
		gmp_go(reader, NULL);
	gmp_sleep(ms * 1000000);
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
	gmp_wg_wait(&wg);
	int64_t c1 = cpu_ns(), t1 = bench_now_ns();
	gmp_shutdown();
	printf("bench=ticker_many procs=%d n=%lld cpu_ms=%.1f wall_ms=%.1f "
	       "ticks=%lld cpu_ns_per_tick=%.1f\n",
	       a.procs, a.n, (double)(c1 - c0) / 1e6, (double)(t1 - t0) / 1e6,
	       ticks, ticks ? (double)(c1 - c0) / (double)ticks : 0.0);
	return 0;
}
