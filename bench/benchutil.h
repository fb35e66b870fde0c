/* Shared helpers for the benchmark programs: flag parsing, a monotonic
 * clock and the one-line result format
 *
 *   bench=<name> procs=<p> n=<n> key=value ...
 *
 * that bench/run parses. Header-only so each benchmark stays one file.
 *
 * Every program also takes --trace=PATH: it runs with the execution trace
 * recording (GMP_TRACE=PATH, set before the program starts the runtime),
 * or with --trace=1 into a file of its own in $TMPDIR that is removed
 * once the program ends; the Go twins take the same flag for
 * runtime/trace. bench/run's traced rows measure what tracing costs. */
#ifndef GMP_BENCHUTIL_H
#define GMP_BENCHUTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct bench_args {
	int procs;   /* --procs=N */
	long long n; /* --n=N */
} bench_args;

static inline int64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Returns the value of --name=V in argv as a string, or NULL. */
static inline const char *bench_flag(int argc, char **argv, const char *name)
{
	size_t len = strlen(name);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] == '-' && a[1] == '-' &&
		    strncmp(a + 2, name, len) == 0 && a[2 + len] == '=')
			return a + 3 + len;
	}
	return NULL;
}

static inline long long bench_flag_ll(int argc, char **argv, const char *name,
				      long long def)
{
	const char *v = bench_flag(argc, argv, name);
	if (v == NULL)
		return def;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || *end || x < 0) {
		fprintf(stderr, "bad value for --%s: '%s'\n", name, v);
		exit(2);
	}
	return x;
}

/* --trace=1's file: removed at exit, after the runtime's own handler
 * (registered later, so run earlier) has written it. */
static char bench_trace_tmp[512];

static void bench_trace_unlink(void)
{
	if (bench_trace_tmp[0])
		remove(bench_trace_tmp);
}

static inline void bench_trace(int argc, char **argv)
{
	const char *v = bench_flag(argc, argv, "trace");
	if (v == NULL || !*v)
		return;
	if (strcmp(v, "1") == 0) {
		const char *dir = getenv("TMPDIR");
		snprintf(bench_trace_tmp, sizeof bench_trace_tmp,
			 "%s/bench-trace-%ld.json", dir && *dir ? dir : "/tmp",
			 (long)getpid());
		atexit(bench_trace_unlink);
		v = bench_trace_tmp;
	}
	setenv("GMP_TRACE", v, 1);
}

static inline bench_args bench_parse(int argc, char **argv, int def_procs,
				     long long def_n)
{
	bench_args a;
	bench_trace(argc, argv);
	a.procs = (int)bench_flag_ll(argc, argv, "procs", def_procs);
	a.n = bench_flag_ll(argc, argv, "n", def_n);
	if (a.procs < 1 || a.n < 1) {
		fprintf(stderr, "--procs and --n must be at least 1\n");
		exit(2);
	}
	return a;
}

#endif
