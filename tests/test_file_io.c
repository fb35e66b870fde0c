/* File I/O (design.md §11.5, §31): gmp_pread and gmp_pwrite, gmp_read and
 * gmp_write on regular files, through the per-P io_uring and through the
 * system call path (GMP_IO_URING=off), with the same answers.
 *
 * Cases that need the ring skip, saying why, where it is not there
 * (qemu-user has no io_uring; a kernel or sandbox that refuses it). */
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>

#include "gmp_test.h"
#include "export_test.h"

/* ---- helpers -------------------------------------------------------------------- */

/* A fresh file under $TMPDIR (or /tmp); its path in path. */
static int tmp_file(char *path, size_t len, int flags)
{
	const char *d = getenv("TMPDIR");
	snprintf(path, len, "%s/gmp_file_io_XXXXXX", d && *d ? d : "/tmp");
	int fd = mkstemp(path);
	T_ASSERT(fd >= 0);
	if (flags) {
		close(fd);
		fd = open(path, O_RDWR | flags);
		T_ASSERT(fd >= 0);
	}
	return fd;
}

/* The engine for this case: GMP_IO_URING as given, then gmp_init. */
static void init_engine(int procs, bool ring)
{
	setenv("GMP_IO_URING", ring ? "on" : "off", 1);
	tu_init(procs);
	unsetenv("GMP_IO_URING");
}

/* Skips the case (after shutting the runtime down) without a ring. */
static bool need_ring(void)
{
	const char *why = gmp__uring_off_reason();
	if (!why)
		return true;
	print_message("skipped: no io_uring here: %s\n", why);
	assert_int_equal(gmp_shutdown(), 0);
	skip();
	return false;
}

/* The byte at offset off of the pattern files hold: byte off % 8 of a
 * hash of off / 8, so that any 8 aligned bytes name their place. */
static inline uint8_t pat(uint64_t off)
{
	uint64_t x = (off >> 3) + 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (uint8_t)(x >> (8 * (off & 7)));
}

static void fill_pattern(int fd, size_t size)
{
	static uint8_t chunk[1 << 16];
	for (size_t off = 0; off < size; off += sizeof chunk) {
		for (size_t i = 0; i < sizeof chunk; i++)
			chunk[i] = pat(off + i);
		T_ASSERT(pwrite(fd, chunk, sizeof chunk, (off_t)off) ==
			 (ssize_t)sizeof chunk);
	}
	T_ASSERT(fsync(fd) == 0);
}

/* ---- exact answers ----------------------------------------------------------- */

struct edge_args {
	int fd, pipe_r, dir;
	atomic_int done;
};

static off_t pos(int fd)
{
	return lseek(fd, 0, SEEK_CUR);
}

/* The answers of pread/pwrite and read/write, checked from whoever runs
 * it: a task (the ring, or the wrapped call), or a plain thread. */
static void edge_checks(struct edge_args *a)
{
	int fd = a->fd;
	char buf[64];
	T_ASSERT(ftruncate(fd, 0) == 0);
	T_ASSERT(lseek(fd, 3, SEEK_SET) == 3);
	/* pwrite/pread at offsets, the file offset left alone */
	T_ASSERT(gmp_pwrite(fd, "abcdef", 6, 10) == 6);
	T_ASSERT(pos(fd) == 3);
	memset(buf, 'x', sizeof buf);
	T_ASSERT(gmp_pread(fd, buf, 4, 11) == 4);
	T_ASSERT(memcmp(buf, "bcde", 4) == 0);
	T_ASSERT(gmp_pread(fd, buf, 64, 0) == 16); /* short at the end */
	T_ASSERT(memcmp(buf, "\0\0\0\0\0\0\0\0\0\0abcdef", 16) == 0);
	T_ASSERT(gmp_pread(fd, buf, 8, 16) == 0); /* at the end */
	T_ASSERT(gmp_pread(fd, buf, 8, 1000) == 0);
	T_ASSERT(pos(fd) == 3);
	/* a hole */
	T_ASSERT(gmp_pwrite(fd, "Z", 1, 100) == 1);
	T_ASSERT(gmp_pread(fd, buf, 2, 99) == 2);
	T_ASSERT(buf[0] == 0 && buf[1] == 'Z');
	/* the edges */
	T_ASSERT(gmp_pread(fd, buf, 4, -1) == -EINVAL);
	T_ASSERT(gmp_pwrite(fd, buf, 4, -5) == -EINVAL);
	T_ASSERT(gmp_pread(a->pipe_r, buf, 4, 0) == -ESPIPE);
	T_ASSERT(gmp_pread(a->dir, buf, 4, 0) == -EISDIR);
	T_ASSERT(gmp_pread(-1, buf, 4, 0) == -EBADF);
	T_ASSERT(gmp_pwrite(-1, buf, 4, 0) == -EBADF);
	T_ASSERT(gmp_pread(fd, buf, 0, 0) == 0);
	T_ASSERT(pos(fd) == 3);
	/* read/write use and advance the offset */
	T_ASSERT(lseek(fd, 0, SEEK_SET) == 0);
	T_ASSERT(gmp_write(fd, "hello", 5) == 5);
	T_ASSERT(pos(fd) == 5);
	T_ASSERT(gmp_write(fd, " world", 6) == 6);
	T_ASSERT(pos(fd) == 11);
	T_ASSERT(lseek(fd, 6, SEEK_SET) == 6);
	memset(buf, 0, sizeof buf);
	T_ASSERT(gmp_read(fd, buf, 5) == 5);
	T_ASSERT(memcmp(buf, "world", 5) == 0);
	T_ASSERT(pos(fd) == 11);
	T_ASSERT(lseek(fd, 0, SEEK_END) == 101);
	T_ASSERT(gmp_read(fd, buf, 5) == 0);
	T_ASSERT(gmp_read(a->dir, buf, 5) == -EISDIR);
	errno = 1234;
	T_ASSERT(gmp_pread(fd, buf, 1, 0) == 1);
	T_ASSERT(errno == 1234); /* left alone */
}

static void edge_task(void *arg)
{
	struct edge_args *a = arg;
	edge_checks(a);
	atomic_store(&a->done, 1);
}

static void *edge_thread(void *arg)
{
	edge_checks(arg);
	return NULL;
}

static void edges_with(bool ring)
{
	char path[256];
	struct edge_args a = { 0 };
	a.fd = tmp_file(path, sizeof path, 0);
	int p[2];
	assert_int_equal(pipe(p), 0);
	a.pipe_r = p[0];
	a.dir = open("/", O_RDONLY | O_DIRECTORY);
	assert_true(a.dir >= 0);
	init_engine(2, ring);
	if (ring && !need_ring())
		return;
	assert_true(gmp_go(edge_task, &a) > 0);
	TU_WAIT_FOR(atomic_load(&a.done));
	uint64_t ops = tu_stats().uring_ops;
	if (ring)
		assert_true(ops >= 10);
	else
		assert_int_equal(ops, 0);
	/* from a plain thread: the system call path, the same answers */
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, edge_thread, &a), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(tu_stats().uring_ops, ops);
	assert_int_equal(gmp_shutdown(), 0);
	/* and with the runtime off */
	edge_checks(&a);
	unlink(path);
	close(a.fd);
	close(p[0]);
	close(p[1]);
	close(a.dir);
}

static void test_file_edges_ring(void **s)
{
	(void)s;
	edges_with(true);
}

static void test_file_edges_syscall(void **s)
{
	(void)s;
	edges_with(false);
}

static void test_file_env_value(void **s)
{
	(void)s;
	setenv("GMP_IO_URING", "maybe", 1);
	assert_int_equal(gmp_init(NULL), -EINVAL);
	setenv("GMP_IO_URING", "ON", 1);
	assert_int_equal(gmp_init(NULL), -EINVAL);
	unsetenv("GMP_IO_URING");
	init_engine(1, false);
	assert_non_null(gmp__uring_off_reason());
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- read/write share one offset --------------------------------------------------- */

#define SHARED_CHUNK 4096
#define SHARED_CHUNKS 512

static int shared_fd;
static atomic_int shared_seen[SHARED_CHUNKS];
static atomic_int shared_left;

/* Tasks read one descriptor with gmp_read until the end: every chunk must
 * come exactly once, whole, in one piece. */
static void shared_reader(void *arg)
{
	(void)arg;
	uint8_t buf[SHARED_CHUNK];
	for (;;) {
		ssize_t r = gmp_read(shared_fd, buf, sizeof buf);
		T_ASSERT(r >= 0);
		if (r == 0)
			break;
		T_ASSERT(r == SHARED_CHUNK);
		/* which chunk: the pattern says */
		int found = -1;
		for (int c = 0; c < SHARED_CHUNKS && found < 0; c++) {
			int k = 0;
			while (k < 8 &&
			       buf[k] == pat((uint64_t)c * SHARED_CHUNK + k))
				k++;
			if (k == 8)
				found = c;
		}
		T_ASSERT(found >= 0);
		for (int i = 0; i < SHARED_CHUNK; i++)
			T_ASSERT(buf[i] ==
				 pat((uint64_t)found * SHARED_CHUNK + i));
		atomic_fetch_add(&shared_seen[found], 1);
	}
	atomic_fetch_sub(&shared_left, 1);
}

static void shared_offset_with(bool ring)
{
	char path[256];
	shared_fd = tmp_file(path, sizeof path, 0);
	fill_pattern(shared_fd, (size_t)SHARED_CHUNK * SHARED_CHUNKS);
	assert_int_equal(lseek(shared_fd, 0, SEEK_SET), 0);
	for (int c = 0; c < SHARED_CHUNKS; c++)
		atomic_store(&shared_seen[c], 0);
	init_engine(2, ring);
	if (ring && !need_ring())
		return;
	atomic_store(&shared_left, 16);
	for (int i = 0; i < 16; i++)
		assert_true(gmp_go(shared_reader, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&shared_left) == 0);
	for (int c = 0; c < SHARED_CHUNKS; c++)
		assert_int_equal(atomic_load(&shared_seen[c]), 1);
	assert_int_equal(lseek(shared_fd, 0, SEEK_CUR),
			 (off_t)SHARED_CHUNK * SHARED_CHUNKS);
	if (ring)
		assert_true(tu_stats().uring_ops >= SHARED_CHUNKS);
	assert_int_equal(gmp_shutdown(), 0);
	unlink(path);
	close(shared_fd);
}

static void test_file_shared_offset_ring(void **s)
{
	(void)s;
	shared_offset_with(true);
}

static void test_file_shared_offset_syscall(void **s)
{
	(void)s;
	shared_offset_with(false);
}

/* O_APPEND: every write lands at the end, whoever writes. */
static int append_fd;
static atomic_int append_left;

static void appender(void *arg)
{
	char line[16];
	snprintf(line, sizeof line, "task %03d\n", (int)(uintptr_t)arg);
	for (int i = 0; i < 20; i++)
		T_ASSERT(gmp_write(append_fd, line, 9) == 9);
	atomic_fetch_sub(&append_left, 1);
}

static void test_file_append(void **s)
{
	(void)s;
	char path[256];
	append_fd = tmp_file(path, sizeof path, O_APPEND);
	init_engine(2, true);
	atomic_store(&append_left, 10);
	for (int i = 0; i < 10; i++)
		assert_true(gmp_go(appender, (void *)(uintptr_t)i) > 0);
	TU_WAIT_FOR(atomic_load(&append_left) == 0);
	assert_int_equal(gmp_shutdown(), 0);
	struct stat st;
	assert_int_equal(fstat(append_fd, &st), 0);
	assert_int_equal(st.st_size, 10 * 20 * 9);
	char buf[9];
	int count[10] = { 0 };
	for (off_t off = 0; off < st.st_size; off += 9) {
		assert_int_equal(pread(append_fd, buf, 9, off), 9);
		int id = atoi(buf + 5);
		assert_true(id >= 0 && id < 10 && buf[8] == '\n');
		count[id]++;
	}
	for (int i = 0; i < 10; i++)
		assert_int_equal(count[i], 20);
	unlink(path);
	close(append_fd);
}

/* ---- 500 tasks, 64 MiB ------------------------------------------------------------- */

#define BIG_SIZE ((size_t)64 << 20)
#define BIG_TASKS 500
#define BIG_CHUNK 16384

static int big_fd;
static atomic_int big_left, big_sampling;
static atomic_ullong big_bytes;
static atomic_int big_peak;
static uint8_t *big_want; /* the file's contents */

static void big_reader(void *arg)
{
	int i = (int)(uintptr_t)arg;
	size_t per = (BIG_SIZE / BIG_TASKS) & ~(size_t)4095;
	size_t lo = (size_t)i * per;
	size_t hi = i == BIG_TASKS - 1 ? BIG_SIZE : lo + per;
	uint8_t *buf = malloc(BIG_CHUNK);
	T_ASSERT(buf);
	for (size_t off = lo; off < hi;) {
		size_t want = hi - off < BIG_CHUNK ? hi - off : BIG_CHUNK;
		ssize_t r = gmp_pread(big_fd, buf, want, (off_t)off);
		T_ASSERT(r > 0);
		/* memcmp, not a loop: cheap even under TSan, so that no
		 * task runs past its slice (a detach would add a thread) */
		T_ASSERT(memcmp(buf, big_want + off, (size_t)r) == 0);
		off += (size_t)r;
		atomic_fetch_add(&big_bytes, (unsigned long long)r);
	}
	free(buf);
	atomic_fetch_sub(&big_left, 1);
}

static void *big_sampler(void *arg)
{
	(void)arg;
	while (atomic_load(&big_sampling)) {
		int n = (int)tu_stats().threads_total;
		if (n > atomic_load(&big_peak))
			atomic_store(&big_peak, n);
		tu_sleep(200 * US);
	}
	return NULL;
}

static void big_with(bool ring)
{
	char path[256];
	/* Only I/O may add threads here: on a loaded host a task descheduled
	 * by the kernel for 10 ms in its own code would lose its P to a
	 * detach (design.md §10), and a new thread would take the P. */
	setenv("GMP_PREEMPT", "off", 1);
	init_engine(2, ring);
	unsetenv("GMP_PREEMPT");
	if (ring && !need_ring())
		return;
	big_fd = tmp_file(path, sizeof path, 0);
	fill_pattern(big_fd, BIG_SIZE);
	big_want = malloc(BIG_SIZE);
	assert_non_null(big_want);
	for (size_t off = 0; off < BIG_SIZE; off++)
		big_want[off] = pat(off);
	/* out of the page cache, so that the reads wait for the disk */
	posix_fadvise(big_fd, 0, 0, POSIX_FADV_DONTNEED);
	atomic_store(&big_left, BIG_TASKS);
	atomic_store(&big_bytes, 0);
	atomic_store(&big_peak, 0);
	atomic_store(&big_sampling, 1);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, big_sampler, NULL), 0);
	for (int i = 0; i < BIG_TASKS; i++)
		assert_true(gmp_go(big_reader, (void *)(uintptr_t)i) > 0);
	TU_WAIT_FOR(atomic_load(&big_left) == 0);
	atomic_store(&big_sampling, 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(atomic_load(&big_bytes) == BIG_SIZE);
	gmp_stats st = tu_stats();
	print_message("%s: peak threads %d (procs %llu), uring_ops %llu, "
		      "retakes %llu, detaches %llu, handoffs %llu\n",
		      ring ? "ring" : "syscall", atomic_load(&big_peak),
		      (unsigned long long)st.procs,
		      (unsigned long long)st.uring_ops,
		      (unsigned long long)st.retakes,
		      (unsigned long long)st.detaches,
		      (unsigned long long)st.handoffs);
	if (ring) {
		assert_true(st.uring_ops >= BIG_SIZE / BIG_CHUNK);
		assert_true(atomic_load(&big_peak) <= (int)st.procs + 4);
	} else {
		assert_int_equal(st.uring_ops, 0);
	}
	assert_int_equal(gmp_shutdown(), 0);
	unlink(path);
	close(big_fd);
	free(big_want);
}

static void test_file_500_readers_ring(void **s)
{
	(void)s;
	big_with(true);
}

static void test_file_500_readers_syscall(void **s)
{
	(void)s;
	big_with(false);
}

/* ---- close, shutdown, fork with operations in flight --------------------------------- */

static int inflight_pipe[2];
static atomic_llong inflight_res;
static atomic_int inflight_done;

static void pipe_ring_reader(void *arg)
{
	(void)arg;
	char buf[16];
	ssize_t r = gmp__uring_test_read(inflight_pipe[0], buf, sizeof buf);
	atomic_store(&inflight_res, r);
	atomic_store(&inflight_done, 1);
}

/* A read that would wait for ever, cancelled by gmp_close: -EBADF. */
static void test_file_close_cancels_ring_op(void **s)
{
	(void)s;
	init_engine(2, true);
	if (!need_ring())
		return;
	assert_int_equal(pipe(inflight_pipe), 0);
	atomic_store(&inflight_done, 0);
	assert_true(gmp_go(pipe_ring_reader, NULL) > 0);
	TU_WAIT_FOR(gmp__uring_inflight() == 1);
	assert_int_equal(atomic_load(&inflight_done), 0);
	assert_int_equal(gmp_close(inflight_pipe[0]), 0);
	TU_WAIT_FOR(atomic_load(&inflight_done));
	assert_int_equal(atomic_load(&inflight_res), -EBADF);
	assert_int_equal(gmp__uring_inflight(), 0);
	/* the last user out closed the number */
	TU_WAIT_FOR(fcntl(inflight_pipe[0], F_GETFD) < 0);
	assert_int_equal(gmp_shutdown(), 0);
	close(inflight_pipe[1]);
}

/* Many disk reads in flight when the file is closed: each ends with its
 * data or -EBADF, and the number is closed once they have left. */
#define CLOSE_TASKS 64
static int close_fd;
static atomic_int close_left, close_badf, close_started;

static void close_reader(void *arg)
{
	uint8_t *buf = aligned_alloc(4096, 4096);
	T_ASSERT(buf);
	uint64_t seed = (uint64_t)(uintptr_t)arg * 7919 + 1;
	atomic_fetch_add(&close_started, 1);
	for (;;) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		off_t off = (off_t)((seed >> 33) % ((8u << 20) / 4096)) * 4096;
		ssize_t r = gmp_pread(close_fd, buf, 4096, off);
		if (r == -EBADF) {
			atomic_fetch_add(&close_badf, 1);
			break;
		}
		T_ASSERT(r == 4096);
		T_ASSERT(buf[0] == pat((uint64_t)off) &&
			 buf[4095] == pat((uint64_t)off + 4095));
	}
	free(buf);
	atomic_fetch_sub(&close_left, 1);
}

static void test_file_close_with_disk_reads_in_flight(void **s)
{
	(void)s;
	char path[256];
	int fd = tmp_file(path, sizeof path, 0);
	fill_pattern(fd, 8u << 20);
	close(fd);
	close_fd = open(path, O_RDONLY | O_DIRECT);
	if (close_fd < 0) /* a file system without O_DIRECT */
		close_fd = open(path, O_RDONLY);
	assert_true(close_fd >= 0);
	init_engine(2, true);
	if (!need_ring())
		return;
	atomic_store(&close_left, CLOSE_TASKS);
	atomic_store(&close_badf, 0);
	atomic_store(&close_started, 0);
	for (int i = 0; i < CLOSE_TASKS; i++)
		assert_true(gmp_go(close_reader, (void *)(uintptr_t)i) > 0);
	TU_WAIT_FOR(atomic_load(&close_started) == CLOSE_TASKS);
	uint64_t before = tu_stats().uring_ops;
	TU_WAIT_FOR(tu_stats().uring_ops > before + 1000);
	assert_int_equal(gmp_close(close_fd), 0);
	TU_WAIT_FOR(atomic_load(&close_left) == 0);
	assert_int_equal(atomic_load(&close_badf), CLOSE_TASKS);
	assert_int_equal(gmp__uring_inflight(), 0);
	TU_WAIT_FOR(fcntl(close_fd, F_GETFD) < 0);
	assert_int_equal(gmp_shutdown(), 0);
	unlink(path);
}

/* gmp_shutdown waits for the task whose read is in flight; the read
 * completes when a thread of ours writes, once shutdown has begun. */
static void *late_pipe_writer(void *arg)
{
	(void)arg;
	/* Nothing observable marks "gmp_shutdown is waiting": a pause. */
	tu_sleep(50 * MS);
	T_ASSERT(write(inflight_pipe[1], "late", 4) == 4);
	return NULL;
}

static void test_file_shutdown_waits_for_ring_op(void **s)
{
	(void)s;
	init_engine(2, true);
	if (!need_ring())
		return;
	assert_int_equal(pipe(inflight_pipe), 0);
	atomic_store(&inflight_done, 0);
	assert_true(gmp_go(pipe_ring_reader, NULL) > 0);
	TU_WAIT_FOR(gmp__uring_inflight() == 1);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, late_pipe_writer, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&inflight_done), 1);
	assert_int_equal(atomic_load(&inflight_res), 4);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(gmp__alloc_live(), 0);
	close(inflight_pipe[0]);
	close(inflight_pipe[1]);
}

/* gmp_main returns while a read is in flight: the process ends cleanly. */
static int main_fn(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_go(pipe_ring_reader, NULL) > 0);
	while (gmp__uring_inflight() != 1)
		gmp_yield();
	return 7;
}

static void exit_child(void *arg)
{
	(void)arg;
	setenv("GMP_IO_URING", "on", 1);
	T_ASSERT(pipe(inflight_pipe) == 0);
	_exit(gmp_main(main_fn, NULL));
}

static void test_file_main_returns_with_ring_op(void **s)
{
	(void)s;
	init_engine(1, true);
	if (!need_ring())
		return;
	assert_int_equal(gmp_shutdown(), 0);
	char err[512];
	int st = tu_run_child(exit_child, NULL, err, sizeof err);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 7);
}

/* fork: the child has no ring until its gmp_init, then one of its own. */
static int fork_fd;
static atomic_int fork_left, fork_started;

static void fork_reader(void *arg)
{
	(void)arg;
	uint8_t buf[512];
	for (int i = 0; i < 50; i++) {
		off_t off = (off_t)i * 512;
		T_ASSERT(gmp_pread(fork_fd, buf, sizeof buf, off) == 512);
		T_ASSERT(buf[7] == pat((uint64_t)off + 7));
		if (i == 0)
			atomic_fetch_add(&fork_started, 1);
	}
	atomic_fetch_sub(&fork_left, 1);
}

static void fork_child(void *arg)
{
	(void)arg;
	T_ASSERT(tu_stats().uring_ops == 0); /* off in the child */
	uint8_t b;
	T_ASSERT(gmp_pread(fork_fd, &b, 1, 3) == 1 && b == pat(3));
	if (TU_TSAN) /* it cannot start threads in the child of a threaded
			fork (tests/test_fork.c says more) */
		_exit(0);
	gmp_config c = { .maxprocs = 2 };
	T_ASSERT(gmp_init(&c) == 0);
	T_ASSERT(gmp__uring_off_reason() == NULL);
	atomic_store(&fork_left, 4);
	for (int i = 0; i < 4; i++)
		T_ASSERT(gmp_go(fork_reader, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&fork_left) == 0);
	T_ASSERT(tu_stats().uring_ops >= 200);
	T_ASSERT(gmp_shutdown() == 0);
	_exit(0);
}

static void test_file_fork_child(void **s)
{
	(void)s;
	char path[256];
	fork_fd = tmp_file(path, sizeof path, 0);
	fill_pattern(fork_fd, 1 << 16);
	init_engine(2, true);
	if (!need_ring())
		return;
	atomic_store(&fork_left, 4);
	atomic_store(&fork_started, 0);
	for (int i = 0; i < 4; i++)
		assert_true(gmp_go(fork_reader, NULL) > 0);
	/* Fork once every reader has read: the Ms that run them have
	 * started and each P has made its ring. Not before: AddressSanitizer's
	 * allocator (GCC 12's) is not fork-safe, and a thread of ours inside
	 * it at the fork (as a thread starting, or a ring being made, is)
	 * leaves the child's first allocation waiting for ever. glibc's
	 * malloc is fork-safe; this orders the test, not the runtime. */
	TU_WAIT_FOR(atomic_load(&fork_started) == 4);
	char err[1024];
	int st = tu_run_child(fork_child, NULL, err, sizeof err);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		print_error("child: %s\n", err);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	TU_WAIT_FOR(atomic_load(&fork_left) == 0);
	/* the parent's ring still works */
	atomic_store(&fork_left, 2);
	for (int i = 0; i < 2; i++)
		assert_true(gmp_go(fork_reader, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&fork_left) == 0);
	assert_true(tu_stats().uring_ops >= 300);
	assert_int_equal(gmp_shutdown(), 0);
	unlink(path);
	close(fork_fd);
}

/* Shrinking maxprocs while reads are in flight on the rings of the Ps
 * that retire, and growing it back. */
static atomic_int resize_left;

static void resize_reader(void *arg)
{
	(void)arg;
	uint8_t buf[4096];
	for (int i = 0; i < 300; i++) {
		off_t off = (off_t)((i * 37) % 16) * 4096;
		T_ASSERT(gmp_pread(fork_fd, buf, sizeof buf, off) == 4096);
		T_ASSERT(buf[100] == pat((uint64_t)off + 100));
	}
	atomic_fetch_sub(&resize_left, 1);
}

static void test_file_maxprocs_shrinks_with_ops_in_flight(void **s)
{
	(void)s;
	char path[256];
	fork_fd = tmp_file(path, sizeof path, 0);
	fill_pattern(fork_fd, 1 << 16);
	init_engine(4, true);
	if (!need_ring())
		return;
	atomic_store(&resize_left, 64);
	for (int i = 0; i < 64; i++)
		assert_true(gmp_go(resize_reader, NULL) > 0);
	for (int k = 0; atomic_load(&resize_left) > 0; k++) {
		gmp_set_maxprocs(k % 2 ? 4 : 1);
		tu_sleep(1 * MS);
	}
	assert_true(tu_stats().uring_ops >= 64 * 300);
	assert_int_equal(gmp__uring_inflight(), 0);
	assert_int_equal(gmp_shutdown(), 0);
	unlink(path);
	close(fork_fd);
}

/* Tiny rings (2 entries, 4 completions): 32 reads in flight on one pipe,
 * then 32 cancels through a submission queue that fills after two, then
 * many disk reads through a completion queue that overflows. Nothing is
 * lost. */
static atomic_int tiny_left;
static atomic_int tiny_badf;

static void tiny_pipe_reader(void *arg)
{
	(void)arg;
	char buf[8];
	ssize_t r = gmp__uring_test_read(inflight_pipe[0], buf, sizeof buf);
	T_ASSERT(r == -EBADF);
	atomic_fetch_add(&tiny_badf, 1);
	atomic_fetch_sub(&tiny_left, 1);
}

static void test_file_tiny_rings(void **s)
{
	(void)s;
	gmp__uring_set_entries(2);
	init_engine(1, true);
	if (!need_ring()) {
		gmp__uring_set_entries(0);
		return;
	}
	assert_int_equal(pipe(inflight_pipe), 0);
	atomic_store(&tiny_left, 32);
	atomic_store(&tiny_badf, 0);
	for (int i = 0; i < 32; i++)
		assert_true(gmp_go(tiny_pipe_reader, NULL) > 0);
	TU_WAIT_FOR(gmp__uring_inflight() == 32);
	assert_int_equal(gmp_close(inflight_pipe[0]), 0);
	TU_WAIT_FOR(atomic_load(&tiny_left) == 0);
	assert_int_equal(atomic_load(&tiny_badf), 32);
	close(inflight_pipe[1]);

	char path[256];
	fork_fd = tmp_file(path, sizeof path, 0);
	fill_pattern(fork_fd, 1 << 16);
	atomic_store(&resize_left, 64);
	for (int i = 0; i < 64; i++)
		assert_true(gmp_go(resize_reader, NULL) > 0);
	TU_WAIT_FOR(atomic_load(&resize_left) == 0);
	assert_true(tu_stats().uring_ops >= 64 * 300);
	assert_int_equal(gmp__uring_inflight(), 0);
	assert_int_equal(gmp_shutdown(), 0);
	gmp__uring_set_entries(0);
	unlink(path);
	close(fork_fd);
}

GMP_TEST_MAIN(cmocka_unit_test(test_file_edges_ring),
	      cmocka_unit_test(test_file_edges_syscall),
	      cmocka_unit_test(test_file_env_value),
	      cmocka_unit_test(test_file_shared_offset_ring),
	      cmocka_unit_test(test_file_shared_offset_syscall),
	      cmocka_unit_test(test_file_append),
	      cmocka_unit_test(test_file_500_readers_ring),
	      cmocka_unit_test(test_file_500_readers_syscall),
	      cmocka_unit_test(test_file_close_cancels_ring_op),
	      cmocka_unit_test(test_file_close_with_disk_reads_in_flight),
	      cmocka_unit_test(test_file_shutdown_waits_for_ring_op),
	      cmocka_unit_test(test_file_main_returns_with_ring_op),
	      cmocka_unit_test(test_file_fork_child),
	      cmocka_unit_test(test_file_maxprocs_shrinks_with_ops_in_flight),
	      cmocka_unit_test(test_file_tiny_rings))
