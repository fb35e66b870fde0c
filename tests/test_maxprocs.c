/* The default number of Ps follows the CPUs the process may use: its
 * affinity mask and its cgroup CPU quota (src/maxprocs.c,
 * src/cgroup_linux.c), re-read by sysmon about once a second, unless the
 * user chose a number.
 *
 * The cgroup cases make a real cgroup, move this process into it and
 * change its quota; they need root and a writable cgroup hierarchy with
 * the cpu controller (v2: enabled in the parent's subtree_control, which
 * the test tries to do), and are skipped with the reason otherwise. The
 * parsing cases run on made-up /proc files and cgroup trees in a
 * temporary directory, anywhere. */
#include <dirent.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "gmp_test.h"

#include "export_test.h"

/* Paths here are built from PATH_MAX-sized parts and cannot overflow in
 * practice; GCC cannot know that. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

static int procs(void)
{
	return gmp_set_maxprocs(0);
}

/* Waits up to 5 s (sysmon checks once a second) for procs() == want. */
static int wait_procs(int want)
{
	int64_t end = tu_now_ns() + 5 * (int64_t)1000000000;
	int n;
	while ((n = procs()) != want && tu_now_ns() < end)
		usleep(10 * 1000);
	return n;
}

/* Asserts that procs() stays `want` for 2.5 s: two and a half checks. */
static void assert_procs_stay(int want)
{
	int64_t end = tu_now_ns() + 2500 * (int64_t)1000000;
	while (tu_now_ns() < end) {
		assert_int_equal(procs(), want);
		usleep(50 * 1000);
	}
}

static cpu_set_t all_cpus;

static int ncpus_allowed(void)
{
	assert_int_equal(sched_getaffinity(0, sizeof all_cpus, &all_cpus), 0);
	return CPU_COUNT(&all_cpus);
}

/* Restricts this (the main) thread to the first CPU it may use. */
static void pin_to_one_cpu(void)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all_cpus)) {
			CPU_SET(c, &one);
			break;
		}
	assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
}

static void unpin(void)
{
	assert_int_equal(sched_setaffinity(0, sizeof all_cpus, &all_cpus), 0);
}

/* A few tasks that keep the Ps busy while they are resized. */
static atomic_int stop_busy, busy_running;

static void busy(void *arg)
{
	(void)arg;
	atomic_fetch_add(&busy_running, 1);
	while (!atomic_load(&stop_busy))
		gmp_yield();
	atomic_fetch_add(&busy_running, -1);
}

static void start_busy(int n)
{
	atomic_store(&stop_busy, 0);
	for (int i = 0; i < n; i++)
		assert_true(gmp_go(busy, NULL) > 0);
}

static void stop_busy_tasks(void)
{
	atomic_store(&stop_busy, 1);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&busy_running), 0);
}

/* ---- affinity -------------------------------------------------------------- */

static void test_maxprocs_default(void **state)
{
	(void)state;
	unsetenv("GMP_MAXPROCS");
	assert_int_equal(gmp_init(NULL), 0);
	int n = procs();
	int limit = gmp__cgroup_cpu_limit();
	int want = ncpus_allowed();
	if (limit > 0 && limit < want)
		want = limit;
	printf("cpus allowed %d, cgroup limit %d: maxprocs %d\n",
	       ncpus_allowed(), limit, n);
	assert_int_equal(n, want);
	assert_int_equal(gmp_shutdown(), 0);
}

static void test_maxprocs_affinity_at_init(void **state)
{
	(void)state;
	unsetenv("GMP_MAXPROCS");
	if (ncpus_allowed() < 2)
		skip(); /* one CPU: nothing to restrict */
	pin_to_one_cpu();
	assert_int_equal(gmp_init(NULL), 0);
	assert_int_equal(procs(), 1);
	assert_int_equal(gmp_shutdown(), 0);
	unpin();
}

static void test_maxprocs_affinity_follows(void **state)
{
	(void)state;
	unsetenv("GMP_MAXPROCS");
	int all = ncpus_allowed();
	if (all < 2 || gmp__maxprocs_default() < 2) {
		printf("skipped: needs 2 CPUs (affinity %d, default %d)\n", all,
		       gmp__maxprocs_default());
		skip();
	}
	int n0 = gmp__maxprocs_default();
	assert_int_equal(gmp_init(NULL), 0);
	assert_int_equal(procs(), n0);
	start_busy(4);

	pin_to_one_cpu();
	assert_int_equal(wait_procs(1), 1);
	unpin();
	assert_int_equal(wait_procs(n0), n0);

	stop_busy_tasks();
}

/* ---- the user's choice stays ------------------------------------------------ */

/* With procs pinned to 2 by `how`, a narrower affinity (whose default
 * would be 1) changes nothing. */
static void check_pinned(const char *how)
{
	ncpus_allowed();
	start_busy(2);
	assert_int_equal(procs(), 2);
	pin_to_one_cpu();
	assert_int_equal(gmp__maxprocs_default(), 1);
	assert_procs_stay(2);
	unpin();
	stop_busy_tasks();
	printf("maxprocs set by %s: not adjusted\n", how);
}

static void test_maxprocs_env_pins(void **state)
{
	(void)state;
	setenv("GMP_MAXPROCS", "2", 1);
	assert_int_equal(gmp_init(NULL), 0);
	unsetenv("GMP_MAXPROCS");
	check_pinned("GMP_MAXPROCS");
}

static void test_maxprocs_config_pins(void **state)
{
	(void)state;
	unsetenv("GMP_MAXPROCS");
	tu_init(2);
	check_pinned("gmp_config.maxprocs");
}

static void test_maxprocs_set_pins(void **state)
{
	(void)state;
	unsetenv("GMP_MAXPROCS");
	assert_int_equal(gmp_init(NULL), 0);
	gmp_set_maxprocs(2);
	check_pinned("gmp_set_maxprocs");
}

/* ---- shrinking while tasks sleep, sit in syscalls or run -------------------- */

/* Ps beyond a smaller count must not strand what they hold: their timers,
 * their queued tasks while their own task sits in a syscall or runs a long
 * slice. Each case first gets n tasks running at once, which puts them on
 * n distinct Ps (a P runs one task at a time); they wait for each other
 * without yielding, with sched_yield to let the other threads of this
 * 2-CPU machine run. Holding a P by spinning is what detaching
 * (design.md §13) undoes when the wait outlasts a slice, as it can under qemu-user or
 * a loaded machine, so these cases run with GMP_PREEMPT=off (spread_init). */
static atomic_int spread_arrived;

/* The id of the P the calling task runs on once n tasks run at once; -1
 * if they never did within 5 s. Tasks record, the main thread asserts. */
static void spread_init(int procs)
{
	setenv("GMP_PREEMPT", "off", 1);
	tu_init(procs);
	unsetenv("GMP_PREEMPT");
	atomic_store(&spread_arrived, 0);
}

static int spread_wait(int n)
{
	atomic_fetch_add(&spread_arrived, 1);
	int64_t end = tu_now_ns() + 5 * (int64_t)1000000000;
	while (atomic_load(&spread_arrived) < n && tu_now_ns() < end)
		sched_yield();
	if (atomic_load(&spread_arrived) < n)
		return -1;
	return gmp__getm()->p->id;
}

static atomic_int sleepers_woke, sleepers_beyond;

static void shrink_sleeper(void *arg)
{
	(void)arg;
	int id = spread_wait(4);
	if (id >= 1)
		atomic_fetch_add(&sleepers_beyond, 1);
	else if (id < 0)
		atomic_fetch_add(&sleepers_beyond, 100); /* fails the test */
	gmp_sleep(200 * 1000 * 1000);
	atomic_fetch_add(&sleepers_woke, 1);
}

/* Sleepers whose timers are on Ps that go away still wake on time. */
static void test_maxprocs_shrink_keeps_timers(void **state)
{
	(void)state;
	spread_init(4);
	atomic_store(&sleepers_woke, 0);
	atomic_store(&sleepers_beyond, 0);
	for (int i = 0; i < 4; i++)
		assert_true(gmp_go(shrink_sleeper, NULL) > 0);
	/* All four asleep (their timers on P0..P3), then three Ps go. */
	gmp_stats st;
	TU_WAIT_FOR((st = tu_stats()).tasks_waiting >= 4);
	assert_int_equal(st.tasks_waiting, 4);
	assert_int_equal(atomic_load(&sleepers_beyond), 3);
	assert_int_equal(gmp_set_maxprocs(1), 4);
	/* Due 200 ms after they slept; allow two seconds. */
	int64_t end = tu_now_ns() + 2 * (int64_t)1000000000;
	while (atomic_load(&sleepers_woke) < 4 && tu_now_ns() < end)
		usleep(1000);
	assert_int_equal(atomic_load(&sleepers_woke), 4);
	assert_int_equal(gmp_shutdown(), 0);
}

/* The task on a retiring P spawns two tasks (into that P's queue), then
 * blocks in a syscall or computes for a second; they must run meanwhile,
 * not after. */
static _Atomic int64_t queued_ran_at;
static atomic_int retiring_mode;        /* 0: syscall, 1: long slice */
static _Atomic int64_t retiring_result; /* see retiring_task */

static void queued_task(void *arg)
{
	(void)arg;
	int64_t zero = 0;
	atomic_compare_exchange_strong(&queued_ran_at, &zero, tu_now_ns());
}

/* retiring_result: how long after the spawns the first queued task ran
 * (ns), -1 if it had not run when the second was over, -2 if the tasks
 * never ran at once, -3 if gmp_set_maxprocs said something unexpected. */
static void retiring_task(void *arg)
{
	(void)arg;
	int id = spread_wait(2);
	if (id < 0)
		atomic_store(&retiring_result, -2);
	if (id != 1)
		return; /* the other one does the test */
	if (gmp_set_maxprocs(1) != 2) {
		atomic_store(&retiring_result, -3);
		return;
	}
	/* Now on a P beyond the count: what it queues must still run. */
	int64_t t0 = tu_now_ns();
	gmp_go(queued_task, NULL);
	gmp_go(queued_task, NULL);
	if (atomic_load(&retiring_mode) == 0) {
		tu_syscall_sleep(1 * SEC, false);
	} else {
		while (tu_now_ns() - t0 < 1000 * 1000 * (int64_t)1000)
			gmp_preempt_point();
	}
	int64_t ran = atomic_load(&queued_ran_at);
	atomic_store(&retiring_result, ran ? ran - t0 : -1);
}

static void shrink_with_retiring_task(int mode)
{
	spread_init(2);
	atomic_store(&queued_ran_at, 0);
	atomic_store(&retiring_result, -4);
	atomic_store(&retiring_mode, mode);
	assert_true(gmp_go(retiring_task, NULL) > 0);
	assert_true(gmp_go(retiring_task, NULL) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	/* The queued tasks ran long before the second was over (the
	 * retiring P's queue is stolen, or the P retaken from the syscall
	 * or preempted): allow half of it. */
	int64_t r = atomic_load(&retiring_result);
	assert_true(r >= 0);
	assert_true(r < 500 * 1000 * (int64_t)1000);
}

static void test_maxprocs_shrink_retiring_p_in_syscall(void **state)
{
	(void)state;
	shrink_with_retiring_task(0);
}

static void test_maxprocs_shrink_retiring_p_long_slice(void **state)
{
	(void)state;
	shrink_with_retiring_task(1);
}

/* ---- a real cgroup ------------------------------------------------------------ */

static int write_file(const char *path, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, buf, (size_t)n);
	int err = w == n ? 0 : w < 0 ? -errno : -EIO;
	close(fd);
	return err;
}

static int read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t r = read(fd, buf, size - 1);
	close(fd);
	if (r < 0)
		return -errno;
	buf[r] = 0;
	return 0;
}

/* The mount point of the first mount of type `type` whose super options
 * contain `opt` (NULL: any), from mountinfo. */
static bool find_mount(const char *type, const char *opt, char *out)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	bool found = false;
	while (f && !found && fgets(line, sizeof line, f)) {
		char mnt[PATH_MAX], fstype[64], super[1024];
		char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %*s %1023s", fstype, super) != 2)
			continue;
		if (strcmp(fstype, type) != 0)
			continue;
		if (opt) {
			bool has = false;
			for (char *t = strtok(super, ","); t;
			     t = strtok(NULL, ","))
				has |= !strcmp(t, opt);
			if (!has)
				continue;
		}
		strcpy(out, mnt);
		found = true;
	}
	if (f)
		fclose(f);
	return found;
}

/* This process's cgroup path in the v2 hierarchy ("0::") or the v1 one
 * holding the cpu controller. */
static bool own_cgroup(bool v2, char *out)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096];
	bool found = false;
	while (f && !found && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':'),
		     *c2 = c1 ? strchr(c1 + 1, ':') : 0;
		if (!c2)
			continue;
		*c2 = 0;
		bool match = v2 && line[0] == '0' && c1 == line + 1 &&
			     c2 == c1 + 1;
		for (char *t = strtok(c1 + 1, ","); !v2 && t;
		     t = strtok(NULL, ","))
			match |= !strcmp(t, "cpu");
		if (match) {
			strcpy(out, c2 + 1);
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

struct cg {
	bool v2;
	char dir[PATH_MAX];  /* the cgroup we made */
	char home[PATH_MAX]; /* the one we came from */
};

/* Makes a cgroup next to this process's own (under the mount's root when
 * that one has processes of its own, as the v2 rules require), with the
 * cpu controller. Returns false, printing why, when it cannot. */
static bool cg_make(struct cg *cg, bool v2)
{
	char mnt[PATH_MAX], own[PATH_MAX], path[2 * PATH_MAX + 64], buf[512];
	cg->v2 = v2;
	if (geteuid() != 0) {
		printf("skipped: cgroups can be written by root only here\n");
		return false;
	}
	if (v2 ? !find_mount("cgroup2", NULL, mnt)
	       : !find_mount("cgroup", "cpu", mnt)) {
		printf("skipped: no cgroup %s mount%s\n", v2 ? "v2" : "v1",
		       v2 ? "" : " with the cpu controller");
		return false;
	}
	if (!own_cgroup(v2, own)) {
		printf("skipped: this process is in no cgroup %s\n",
		       v2 ? "v2" : "v1 cpu hierarchy");
		return false;
	}
	snprintf(cg->home, sizeof cg->home, "%s%s", mnt,
		 strcmp(own, "/") ? own : "");
	/* v2: the parent must delegate the cpu controller to its children,
	 * and a non-root cgroup that holds processes cannot: use the root
	 * of the mount then. */
	const char *parent = v2 && strcmp(own, "/") ? mnt : cg->home;
	if (v2) {
		snprintf(path, sizeof path, "%s/cgroup.controllers", parent);
		if (read_file(path, buf, sizeof buf) || !strstr(buf, "cpu")) {
			printf("skipped: the cpu controller is not available in "
			       "%s (cgroup.controllers: \"%s\"; on a hybrid "
			       "system cgroup v1 holds it)\n",
			       parent, strtok(buf, "\n") ? buf : "");
			return false;
		}
		snprintf(path, sizeof path, "%s/cgroup.subtree_control",
			 parent);
		int err = write_file(path, "+cpu");
		if (err) {
			printf("skipped: cannot enable +cpu in %s: %s\n", path,
			       strerror(-err));
			return false;
		}
	}
	snprintf(cg->dir, sizeof cg->dir, "%s/gmp-test-%d", parent,
		 (int)getpid());
	if (mkdir(cg->dir, 0755) != 0) {
		printf("skipped: cannot make %s: %s\n", cg->dir,
		       strerror(errno));
		return false;
	}
	return true;
}

static int cg_set_quota(struct cg *cg, long quota, long period)
{
	char path[2 * PATH_MAX];
	if (cg->v2) {
		snprintf(path, sizeof path, "%s/cpu.max", cg->dir);
		return write_file(path, "%ld %ld", quota, period);
	}
	snprintf(path, sizeof path, "%s/cpu.cfs_period_us", cg->dir);
	int err = write_file(path, "%ld", period);
	snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", cg->dir);
	return err ? err : write_file(path, "%ld", quota);
}

static int cg_enter(const char *dir)
{
	char path[2 * PATH_MAX];
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	return write_file(path, "%d", (int)getpid());
}

static void cg_remove(struct cg *cg)
{
	cg_enter(cg->home);
	rmdir(cg->dir);
}

/* In a cgroup with half a CPU the runtime starts with 1 P; raising the
 * quota to 1.5 CPUs gives 2 (with 2 CPUs allowed) within a few seconds. */
static void cgroup_case(bool v2)
{
	unsetenv("GMP_MAXPROCS");
	struct cg cg;
	if (!cg_make(&cg, v2))
		skip();
	int err = cg_set_quota(&cg, 50000, 100000);
	if (!err)
		err = cg_enter(cg.dir);
	if (err) {
		cg_remove(&cg);
		printf("skipped: cannot set up %s: %s\n", cg.dir,
		       strerror(-err));
		skip();
	}
	int cpus = ncpus_allowed();
	int limit = gmp__cgroup_cpu_limit();
	assert_int_equal(gmp_init(NULL), 0);
	int at_init = procs();

	int err2 = cg_set_quota(&cg, 150000, 100000);
	int want = cpus < 2 ? cpus : 2;
	int later = err2 ? -1 : wait_procs(want);
	int limit2 = gmp__cgroup_cpu_limit();
	assert_int_equal(gmp_shutdown(), 0);
	cg_remove(&cg);

	printf("cgroup %s %s: quota 0.5 CPU -> limit %d, maxprocs %d; "
	       "1.5 CPU -> limit %d, maxprocs %d\n",
	       v2 ? "v2" : "v1", cg.dir, limit, at_init, limit2, later);
	assert_int_equal(limit, 1);
	assert_int_equal(at_init, 1);
	assert_int_equal(err2, 0);
	assert_int_equal(limit2, 2);
	assert_int_equal(later, want);
}

static void test_maxprocs_cgroup_v2(void **state)
{
	(void)state;
	cgroup_case(true);
}

static void test_maxprocs_cgroup_v1(void **state)
{
	(void)state;
	cgroup_case(false);
}

/* ---- reading cgroup files, on made-up trees ----------------------------------- */

static char tmp[PATH_MAX];

static void mkdirs(const char *fmt, ...)
{
	char path[PATH_MAX], *p;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof path, fmt, ap);
	va_end(ap);
	for (p = path + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(path, 0755);
			*p = '/';
		}
	mkdir(path, 0755);
}

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", tmp, rel);
	char *slash = strrchr(path, '/');
	*slash = 0;
	mkdirs("%s", path);
	*slash = '/';
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int limit_of(const char *cgroup, const char *mountinfo)
{
	char c[PATH_MAX], m[PATH_MAX];
	put("proc/cgroup", cgroup);
	put("proc/mountinfo", mountinfo);
	snprintf(c, sizeof c, "%s/proc/cgroup", tmp);
	snprintf(m, sizeof m, "%s/proc/mountinfo", tmp);
	return gmp__cgroup_cpu_limit_from(c, m);
}

static int setup_tmp(void)
{
	snprintf(tmp, sizeof tmp, "/tmp/gmp-test-cgroup-XXXXXX");
	return mkdtemp(tmp) ? 0 : -1;
}

static void teardown_tmp(void)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	assert_int_equal(system(cmd), 0);
}

/* A mountinfo with a cgroup2 mount at <tmp>/cg2 (root "/"). */
static const char *v2_mountinfo(void)
{
	static char s[2 * PATH_MAX];
	snprintf(s, sizeof s,
		 "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		 "31 22 0:28 / %s/cg2 rw,nosuid shared:9 - cgroup2 cgroup2 "
		 "rw,nsdelegate\n",
		 tmp);
	return s;
}

static void test_maxprocs_cgroup_parse_v2(void **state)
{
	(void)state;
	assert_int_equal(setup_tmp(), 0);
	const char *mi = v2_mountinfo();
	put("cg2/a/b/cpu.max", "150000 100000\n");
	put("cg2/a/cpu.max", "max 100000\n");
	assert_int_equal(limit_of("0::/a/b\n", mi), 2);

	/* Rounded up: exactly one CPU, a hair over, a half, two and a half. */
	put("cg2/a/b/cpu.max", "100000 100000\n");
	assert_int_equal(limit_of("0::/a/b\n", mi), 1);
	put("cg2/a/b/cpu.max", "100001 100000\n");
	assert_int_equal(limit_of("0::/a/b\n", mi), 2);
	put("cg2/a/b/cpu.max", "50000 100000\n");
	assert_int_equal(limit_of("0::/a/b\n", mi), 1);
	put("cg2/a/b/cpu.max", "250000 100000\n");
	assert_int_equal(limit_of("0::/a/b\n", mi), 3);

	/* No limit anywhere. */
	put("cg2/a/b/cpu.max", "max 100000\n");
	assert_int_equal(limit_of("0::/a/b\n", mi), 0);
	/* The cgroup root itself (no cpu.max there). */
	assert_int_equal(limit_of("0::/\n", mi), 0);
	teardown_tmp();
}

static void test_maxprocs_cgroup_parse_ancestors(void **state)
{
	(void)state;
	assert_int_equal(setup_tmp(), 0);
	const char *mi = v2_mountinfo();
	/* A tighter parent binds the child (Go reads the leaf only). */
	put("cg2/p/c/cpu.max", "400000 100000\n");
	put("cg2/p/cpu.max", "120000 100000\n");
	assert_int_equal(limit_of("0::/p/c\n", mi), 2);
	/* A looser parent does not loosen the child. */
	put("cg2/p/cpu.max", "800000 100000\n");
	assert_int_equal(limit_of("0::/p/c\n", mi), 4);
	/* A level without the cpu controller (no cpu.max) is skipped. */
	put("cg2/q/r/s/cpu.max", "max 100000\n");
	put("cg2/q/cpu.max", "30000 100000\n");
	assert_int_equal(limit_of("0::/q/r/s\n", mi), 1);
	teardown_tmp();
}

static void test_maxprocs_cgroup_parse_mounts(void **state)
{
	(void)state;
	assert_int_equal(setup_tmp(), 0);
	char mi[4 * PATH_MAX];

	/* A mount of the sub-tree /k8s/pod1 (mountinfo's root field): our
	 * cgroup /k8s/pod1/ctr lives at <mount>/ctr. */
	put("sub/ctr/cpu.max", "300000 100000\n");
	snprintf(mi, sizeof mi,
		 "31 22 0:28 /k8s/pod1 %s/sub rw - cgroup2 cgroup2 rw\n", tmp);
	assert_int_equal(limit_of("0::/k8s/pod1/ctr\n", mi), 3);
	/* A cgroup outside the mounted sub-tree cannot be read. */
	assert_int_equal(limit_of("0::/other/ctr\n", mi), 0);
	/* Nor one outside our cgroup namespace. */
	assert_int_equal(limit_of("0::/../x\n", v2_mountinfo()), 0);

	/* An escaped mount point (a space is \040 in mountinfo). */
	put("with space/x/cpu.max", "200000 100000\n");
	snprintf(mi, sizeof mi,
		 "31 22 0:28 / %s/with\\040space rw - cgroup2 cgroup2 rw\n",
		 tmp);
	assert_int_equal(limit_of("0::/x\n", mi), 2);

	/* No cgroup mount at all; no cgroup line. */
	assert_int_equal(limit_of("0::/x\n",
				  "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"),
			 0);
	assert_int_equal(limit_of("", v2_mountinfo()), 0);
	teardown_tmp();
}

static void test_maxprocs_cgroup_parse_v1(void **state)
{
	(void)state;
	assert_int_equal(setup_tmp(), 0);
	char mi[4 * PATH_MAX];
	/* A hybrid system: cgroup2 mounted, but the cpu controller is in a
	 * v1 hierarchy, which wins (as in Go). */
	snprintf(mi, sizeof mi,
		 "31 22 0:28 / %s/cg2 rw - cgroup2 cgroup2 rw\n"
		 "32 22 0:29 / %s/cpu,cpuacct rw,nosuid - cgroup cgroup "
		 "rw,cpu,cpuacct\n"
		 "33 22 0:30 / %s/memory rw - cgroup cgroup rw,memory\n",
		 tmp, tmp, tmp);
	const char *cgf = "5:memory:/m\n4:cpu,cpuacct:/docker/abc\n0::/y\n";
	put("cg2/y/cpu.max", "100000 100000\n");
	put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n");
	put("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
	put("cpu,cpuacct/docker/cpu.cfs_quota_us", "-1\n");
	put("cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
	assert_int_equal(limit_of(cgf, mi), 3);
	put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
	assert_int_equal(limit_of(cgf, mi), 0);
	put("cpu,cpuacct/docker/cpu.cfs_quota_us", "50000\n");
	assert_int_equal(limit_of(cgf, mi), 1);
	teardown_tmp();
}

GMP_TEST_MAIN(cmocka_unit_test(test_maxprocs_default),
	      cmocka_unit_test(test_maxprocs_affinity_at_init),
	      cmocka_unit_test(test_maxprocs_affinity_follows),
	      cmocka_unit_test(test_maxprocs_env_pins),
	      cmocka_unit_test(test_maxprocs_config_pins),
	      cmocka_unit_test(test_maxprocs_set_pins),
	      cmocka_unit_test(test_maxprocs_shrink_keeps_timers),
	      cmocka_unit_test(test_maxprocs_shrink_retiring_p_in_syscall),
	      cmocka_unit_test(test_maxprocs_shrink_retiring_p_long_slice),
	      cmocka_unit_test(test_maxprocs_cgroup_v2),
	      cmocka_unit_test(test_maxprocs_cgroup_v1),
	      cmocka_unit_test(test_maxprocs_cgroup_parse_v2),
	      cmocka_unit_test(test_maxprocs_cgroup_parse_ancestors),
	      cmocka_unit_test(test_maxprocs_cgroup_parse_mounts),
	      cmocka_unit_test(test_maxprocs_cgroup_parse_v1))
