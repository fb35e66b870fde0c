/* bench=file_read: random 4 KiB reads of a 256 MiB file opened with
 * O_DIRECT (real device reads, no page cache), by 64 tasks at once, n
 * reads in all (default 200000), at procs 2. Each task reads with
 * gmp_pread at offsets of its own random sequence. --uring=off runs the
 * same with GMP_IO_URING=off: libgmp's system call path, where every
 * blocked read holds a thread as Go's do.
 *
 * reads_per_s is n over the time from the first read to the last; and
 * threads_peak the most threads the process had meanwhile (sampled from
 * /proc/self/status every millisecond by a task, so the sampler adds no
 * thread; the count includes the program's own main thread and any
 * io_uring workers of the kernel's). The file is made once beside this
 * program (file_read.dat; --file=PATH for another) and reused; Go's twin
 * (bench/go/file_read) reads the same file with os.File.ReadAt. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

enum { TASKS = 64, BLOCK = 4096 };
#define FILE_SIZE ((off_t)256 << 20)

static int fd;
static long long nreads;
static gmp_wg wg = GMP_WG_INIT;
static atomic_int running, peak;
static atomic_llong errors;

static int proc_threads(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return 0;
	char line[256];
	int n = 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "Threads:", 8)) {
			n = atoi(line + 8);
			break;
		}
	fclose(f);
	return n;
}

static void sampler(void *arg)
{
	(void)arg;
	while (atomic_load(&running)) {
		int n = proc_threads();
		if (n > atomic_load(&peak))
			atomic_store(&peak, n);
		gmp_sleep(1000000);
	}
}

static void reader(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	long long mine =
		nreads / TASKS + ((long long)(uintptr_t)arg < nreads % TASKS);
	void *buf = aligned_alloc(BLOCK, BLOCK);
	if (!buf)
		abort();
	for (long long i = 0; i < mine; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		off_t off =
			(off_t)(seed % (uint64_t)(FILE_SIZE / BLOCK)) * BLOCK;
		if (gmp_pread(fd, buf, BLOCK, off) != BLOCK)
			atomic_fetch_add(&errors, 1);
	}
	free(buf);
	gmp_wg_done(&wg);
}

static int64_t elapsed;

static int run(void *arg)
{
	(void)arg;
	atomic_store(&running, 1);
	if (gmp_go(sampler, NULL) < 0)
		abort();
	int64_t t0 = bench_now_ns();
	gmp_wg_add(&wg, TASKS);
	for (int i = 0; i < TASKS; i++)
		if (gmp_go(reader, (void *)(uintptr_t)i) < 0)
			abort();
	gmp_wg_wait(&wg);
	elapsed = bench_now_ns() - t0;
	atomic_store(&running, 0);
	return 0;
}

/* The file, made once: random bytes, so that nothing can be deduplicated
 * or compressed beneath us. */
static int make_file(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0 && st.st_size == FILE_SIZE)
		return 0;
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int w = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (w < 0)
		return -1;
	static uint64_t chunk[1 << 17]; /* 1 MiB */
	uint64_t x = 88172645463325252ull;
	for (off_t done = 0; done < FILE_SIZE; done += sizeof chunk) {
		for (size_t i = 0; i < sizeof chunk / 8; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			chunk[i] = x;
		}
		if (write(w, chunk, sizeof chunk) != (ssize_t)sizeof chunk)
			return -1;
	}
	if (fsync(w) != 0 || close(w) != 0 || rename(tmp, path) != 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 200000);
	nreads = a.n;
	const char *uring = bench_flag(argc, argv, "uring");
	if (uring && strcmp(uring, "on") && strcmp(uring, "off")) {
		fprintf(stderr, "--uring=on|off\n");
		return 2;
	}
	if (uring)
		setenv("GMP_IO_URING", uring, 1);
	char path[4096];
	const char *file = bench_flag(argc, argv, "file");
	if (file) {
		snprintf(path, sizeof path, "%s", file);
	} else {
		ssize_t k = readlink("/proc/self/exe", path, sizeof path - 32);
		if (k <= 0)
			return 1;
		path[k] = 0;
		char *slash = strrchr(path, '/');
		strcpy(slash + 1, "file_read.dat");
	}
	if (make_file(path) != 0) {
		perror(path);
		return 1;
	}
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror("open O_DIRECT");
		return 1;
	}
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0)
		return 1;
	gmp_stats st0;
	gmp_stats_read(&st0);
	if (gmp_main(run, NULL) != 0)
		return 1;
	gmp_stats st;
	gmp_stats_read(&st);
	gmp_shutdown();
	if (atomic_load(&errors)) {
		fprintf(stderr, "%lld reads failed\n", atomic_load(&errors));
		return 1;
	}
	printf("bench=file_read procs=%d n=%lld engine=%s reads_per_s=%.0f "
	       "us_per_read=%.2f threads_peak=%d uring_ops=%llu\n",
	       a.procs, nreads,
	       uring && !strcmp(uring, "off") ? "syscall" : "uring",
	       (double)nreads * 1e9 / (double)elapsed,
	       (double)elapsed / 1e3 / (double)nreads * TASKS,
	       atomic_load(&peak),
	       (unsigned long long)(st.uring_ops - st0.uring_ops));
	return 0;
}
