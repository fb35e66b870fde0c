/* Linux: what the kernel says about one of this process's threads, read
 * from another (sysmon's look at the thread behind a P, slice.c; why, and
 * what each look costs: design.md §37.7).
 *
 *   its CPU time    clock_gettime on the thread's CPU clock, which the
 *                   kernel lets any thread of the same process read: no
 *                   descriptor, one system call (0.15-1 µs here; the
 *                   dearer end when the thread is on a CPU, whose run
 *                   time the kernel brings up to date for the read)
 *   its state       the letter after the command name in
 *                   /proc/self/task/TID/stat: R running or waiting for a
 *                   CPU, S or D asleep in the kernel, T or t stopped
 *                   (open, read, close: 3-10 µs, so only where the CPU
 *                   time cannot decide)
 *
 * Both are read on sysmon's thread with nothing held but what the caller
 * holds; errno is left as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "export_test.h"
#include "internal.h"
#include "sys.h"

/* tests: gmp__threadstat_proc_set; NULL is /proc/self/task. Written only
 * while the runtime is off, before sysmon's thread is made. */
static const char *proc_task_dir;

#if GMP__TEST_HOOKS
void gmp__threadstat_proc_set(const char *dir)
{
	proc_task_dir = dir;
}
#endif

int gmp__thread_cputime(pid_t tid, int64_t *ns)
{
	if (tid <= 0)
		return -ESRCH; /* tid 0 would name the caller's own clock */
	/* The kernel's encoding of a thread's CPU clock (what glibc's
	 * pthread_getcpuclockid and musl's compute): the thread id, negated
	 * and less one, shifted past the clock type (CPUCLOCK_SCHED, 2)
	 * and the per-thread bit (4). A thread of another process, or one
	 * gone, gives EINVAL. */
	clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 6);
	struct timespec ts;
	int saved = errno;
	int err = clock_gettime(clock, &ts) ? -errno : 0;
	errno = saved;
	if (err)
		return err;
	*ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	return 0;
}

int gmp__thread_state(pid_t tid)
{
	if (tid <= 0)
		return -ESRCH;
	char path[96], buf[512];
	snprintf(path, sizeof path, "%s/%d/stat",
		 GMP__TEST_HOOKS && proc_task_dir ? proc_task_dir
						  : "/proc/self/task",
		 (int)tid);
	/* sys.h: never libgmp-hook's open, read and close */
	int fd = gmp__sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	ssize_t n;
	while ((n = gmp__sys_read(fd, buf, sizeof buf - 1)) == -EINTR)
		;
	gmp__sys_close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = 0;
	/* "TID (comm) S ...": the command name may hold spaces and
	 * parentheses, so the state follows the last ')'. */
	char *rp = strrchr(buf, ')');
	if (!rp || rp[1] != ' ' || rp[2] < 'A' || rp[2] > 'z')
		return -EPROTO;
	return (unsigned char)rp[2];
}
