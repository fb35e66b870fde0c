/* Linux: futexes, clocks, threads, CPU counts, guard pages and madvise
 * over many ranges, and the asymmetric barrier detaching needs
 * (design.md §37.4); os.h is the interface. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "export_test.h"
#include "fault.h"
#include "internal.h"
#include "sys.h"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 /* Linux 6.13; not yet in glibc 2.36 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
#ifndef PIDFD_SELF
#define PIDFD_SELF (-10000) /* the calling thread, no fd needed (2025) */
#endif

/* The futex helpers save and restore errno: they run on behalf of tasks
 * and foreign threads, and design.md §4 promises runtime code leaves errno
 * be. */
int gmp__futex_wait(volatile uint32_t *addr, uint32_t val, int64_t ns)
{
	struct timespec ts, *tsp = NULL;
	if (ns >= 0) {
		ts.tv_sec = ns / 1000000000;
		ts.tv_nsec = ns % 1000000000;
		tsp = &ts;
	}
	int saved = errno;
	long r =
		syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, tsp, NULL, 0);
	int err = r < 0 ? errno : 0;
	errno = saved;
	return -err;
}

void gmp__futex_wake(volatile uint32_t *addr, int n)
{
	int saved = errno;
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
	errno = saved;
}

int64_t gmp__nanotime(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void gmp__os_timerslack_min(void)
{
	int saved = errno;
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	errno = saved;
}

void gmp__osyield(void)
{
	sched_yield();
}

void gmp__usleep(int64_t us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	while (gmp__sys_nanosleep(&ts, &ts) == -EINTR)
		;
}

pid_t gmp__gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

int gmp__ncpu(void)
{
	cpu_set_t set;
	int n = 0;
	/* The main thread's mask, not the caller's: sysmon re-reads it. */
	if (sched_getaffinity(getpid(), sizeof set, &set) == 0 ||
	    sched_getaffinity(0, sizeof set, &set) == 0)
		n = CPU_COUNT(&set);
	if (n < 1) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (int)c : 1;
	}
	return n;
}

/* ---- threads ------------------------------------------------------------ */

static sigset_t init_sigmask;

void gmp__sigmask_save(void)
{
	pthread_sigmask(SIG_SETMASK, NULL, &init_sigmask);
}

void gmp__sigmask_restore(void)
{
	pthread_sigmask(SIG_SETMASK, &init_sigmask, NULL);
}

int gmp__thread_create(pthread_t *t, size_t stack_size, void *(*fn)(void *),
		       void *arg)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int err;

	if (gmp__fault_hit(GMP__FAULT_THREAD_EAGAIN))
		return -EAGAIN;
	if ((err = pthread_attr_init(&attr)) != 0)
		return -err;
	if (stack_size)
		pthread_attr_setstacksize(&attr, stack_size);
	/* Block every signal around the creation so the new thread starts
	 * with all of them blocked; it installs the process mask once it is
	 * set up (newosproc/minit). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(t, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return -err;
}

/* ---- memory ------------------------------------------------------------- */

size_t gmp__pagesize(void)
{
	static size_t ps;
	if (!ps)
		ps = (size_t)sysconf(_SC_PAGESIZE);
	return ps;
}

long gmp__max_map_count(void)
{
	long v = 65530;
	int saved = errno;
	FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1 || v <= 0)
			v = 65530;
		fclose(f);
	}
	errno = saved;
	return v;
}

int gmp__guard_install(void *addr, size_t len)
{
	return madvise(addr, len, MADV_GUARD_INSTALL) == 0 ? 0 : -errno;
}

/* Installs a guard on a scratch page and checks that the kernel refuses to
 * read it: write(2) from the page into a pipe must fail with EFAULT. An
 * emulator that accepts and ignores the madvise fails this probe. */
static int guard_probe(void)
{
	size_t ps = gmp__pagesize();
	int saved = errno, ok = 0;
	void *p = mmap(NULL, ps, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		goto out;
	if (gmp__guard_install(p, ps) == 0) {
		int fds[2];
		if (gmp__sys_pipe2(fds, O_CLOEXEC) == 0) {
			ok = gmp__sys_write(fds[1], p, 1) == -EFAULT;
			gmp__sys_close(fds[0]);
			gmp__sys_close(fds[1]);
		}
	}
	munmap(p, ps);
out:
	errno = saved;
	return ok ? 1 : -1;
}

bool gmp__guard_install_works(void)
{
	static volatile uint32_t state; /* 0 unknown, 1 works, 2 does not */
	uint32_t s = gmp__load32_acq(&state);
	if (s == 0) {
		s = guard_probe() > 0 ? 1 : 2;
		gmp__store32_rel(&state, s);
	}
	return s == 1;
}

/* ---- madvise over many ranges ------------------------------------------- */

/* The pidfd gmp__madvise_self passes: PIDFD_SELF where the kernel knows it
 * (6.18 does), else one pidfd_open'ed for our pid. A forked child inherits the
 * parent's pidfd, which names the parent; the kernel refuses our advice
 * for another process (-EINVAL), so a stale fd does no harm, but we open a
 * new one once the pid has changed. The inherited fd is left alone: the
 * child may have closed it and reused the number. Racing first calls may
 * each open one; the loser closes its own. All atomic, relaxed but for
 * the fd, published with release after its pid. */
enum { PIDFD_USE_SELF, PIDFD_USE_OPENED, PIDFD_USE_FORCED };
static volatile uint32_t pidfd_mode;            /* PIDFD_USE_* */
static volatile uint32_t pidfd_fd = UINT32_MAX; /* (int)-1: none yet */
static volatile uint32_t pidfd_pid, pidfd_forced;

static int opened_pidfd(void)
{
	pid_t pid = getpid();
	uint32_t fd = gmp__load32_acq(&pidfd_fd);
	if ((int)fd >= 0 && (pid_t)gmp__load32_rlx(&pidfd_pid) == pid)
		return (int)fd;
	int nfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (nfd < 0)
		return -1;
	gmp__store32_rlx(&pidfd_pid, (uint32_t)pid);
	if (!gmp__cas32_full(&pidfd_fd, fd, (uint32_t)nfd)) {
		gmp__sys_close(nfd);
		return (int)gmp__load32_acq(&pidfd_fd);
	}
	return nfd;
}

ssize_t gmp__madvise_self(const struct iovec *iov, size_t n,
			  enum gmp__madv advice)
{
	int adv = advice == GMP__MADV_GUARD_INSTALL ? MADV_GUARD_INSTALL
						    : MADV_POPULATE_WRITE;
	int saved = errno;
	ssize_t r;
	for (;;) {
		uint32_t mode = gmp__load32_acq(&pidfd_mode);
		int fd = PIDFD_SELF;
		if (mode == PIDFD_USE_OPENED)
			fd = opened_pidfd();
		else if (GMP__TEST_HOOKS && mode == PIDFD_USE_FORCED)
			fd = (int)gmp__load32_rlx(&pidfd_forced);
		r = syscall(SYS_process_madvise, fd, iov, n, adv, 0);
		if (r >= 0)
			break;
		r = -errno;
		if (r != -EBADF || mode != PIDFD_USE_SELF)
			break;
		/* A kernel before PIDFD_SELF: use a real pidfd. */
		gmp__cas32_full(&pidfd_mode, PIDFD_USE_SELF, PIDFD_USE_OPENED);
	}
	errno = saved;
	return r;
}

#if GMP__TEST_HOOKS
void gmp__madvise_self_pidfd_set(int fd)
{
	gmp__store32_rlx(&pidfd_forced, (uint32_t)fd);
	gmp__store32_rel(&pidfd_mode,
			 fd == INT_MIN ? PIDFD_USE_SELF : PIDFD_USE_FORCED);
}
#endif

/* ---- asymmetric barriers (os.h) ------------------------------------------ */

int gmp__membarrier_init(void)
{
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds < 0)
		return -errno;
	if (!(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
	    !(cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
		return -ENOSYS;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
		    0, 0) != 0)
		return -errno;
	/* One now, so that a kernel that registers but then refuses is
	 * caught here rather than in sysmon. */
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) !=
	    0)
		return -errno;
	return 0;
}

void gmp__membarrier(void)
{
	/* It worked at init; it cannot start failing for a registered
	 * process, short of a broken kernel. */
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) !=
	    0)
		gmp__throw("membarrier failed: %s", strerror(errno));
}

/* The page whose protection the shoot-down flips; never freed (it must
 * outlive every sysmon, and one page is nothing). */
static volatile uint64_t *flush_page;

int gmp__flushwrites_init(void)
{
#if defined(__x86_64__)
	if (flush_page)
		return 0;
	void *p = mmap(NULL, gmp__pagesize(), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	/* Locked, so that the kernel never has to fault it in (a page not
	 * present has no TLB entries to shoot down); failure is harmless
	 * apart from that, and the page is dirtied before every flip. */
	(void)mlock(p, gmp__pagesize());
	flush_page = p;
	return 0;
#else
	return -ENOTSUP;
#endif
}

void gmp__flushwrites(void)
{
	size_t ps = gmp__pagesize();
	if (mprotect((void *)flush_page, ps, PROT_READ | PROT_WRITE) != 0)
		gmp__throw("mprotect of the barrier page failed: %s",
			   strerror(errno));
	/* Dirty it: a TLB entry exists on this CPU for sure, and the kernel
	 * cannot skip the flush as it might for an untouched page. */
	gmp__add64_full(flush_page, 1);
	if (mprotect((void *)flush_page, ps, PROT_NONE) != 0)
		gmp__throw("mprotect of the barrier page failed: %s",
			   strerror(errno));
}
