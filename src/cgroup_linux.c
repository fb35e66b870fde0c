/* Linux: the CPU bandwidth limit of this process's cgroup, which bounds the
 * default number of Ps (maxprocs.c).
 *
 * A container's CPU limit is usually a bandwidth quota: its cgroup may use
 * `quota` microseconds of CPU time in every `period`. On average it can
 * keep quota/period CPUs busy, however many the affinity mask allows; more
 * running threads than that only get throttled together at the end of each
 * period, which is the latency spike a container-aware runtime avoids.
 *
 * Where the numbers live:
 *
 *   cgroup v2   <mount>/<path>/cpu.max            "<quota> <period>\n" or
 *                                                 "max <period>\n"
 *   cgroup v1   <mount>/<path>/cpu.cfs_quota_us   "<quota>\n" (-1: none)
 *               <mount>/<path>/cpu.cfs_period_us  "<period>\n"
 *
 * <mount> is the cgroup2 mount (or the v1 mount carrying the cpu
 * controller, which takes precedence, as in Go) from /proc/self/mountinfo;
 * <path> is this process's cgroup from /proc/self/cgroup ("0::/path" for
 * v2, "N:...,cpu,...:/path" for v1), made relative to the mount's root.
 * A quota in any ancestor also binds us, so we walk from our cgroup up to
 * the mount and keep the tightest one (Go 1.25 reads only the leaf;
 * design.md §34 lists every difference from Go).
 *
 * Everything here runs on sysmon (once a second) or in gmp_init, on the
 * thread's own stack with no allocation but stdio's, and leaves errno as
 * it found it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export_test.h"
#include "internal.h"
#include "sys.h"

enum { CG_NONE = 0, CG_V1 = 1, CG_V2 = 2 };

/* Where the hierarchy that holds the cpu controller is mounted. */
struct cgmount {
	int version;         /* CG_V1, CG_V2, or CG_NONE: no usable mount */
	char mnt[PATH_MAX];  /* mount point, unescaped */
	char root[PATH_MAX]; /* the cgroup shown at the mount point */
};

/* Reads a whole small file into buf (NUL-terminated). Returns its length,
 * or -errno. */
static int read_small(const char *path, char *buf, size_t size)
{
	int fd = gmp__sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	size_t n = 0;
	while (n + 1 < size) {
		ssize_t r = gmp__sys_read(fd, buf + n, size - 1 - n);
		if (r == -EINTR)
			continue;
		if (r < 0) {
			gmp__sys_close(fd);
			return (int)r;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	gmp__sys_close(fd);
	buf[n] = 0;
	return (int)n;
}

/* mountinfo escapes ' ', '\t', '\n' and '\\' as \ooo (octal); undo it in
 * place. Returns false for a malformed escape. */
static bool unescape(char *s)
{
	char *o = s;
	while (*s) {
		if (*s != '\\') {
			*o++ = *s++;
			continue;
		}
		int v = 0;
		for (int i = 1; i <= 3; i++) {
			if (s[i] < '0' || s[i] > '7')
				return false;
			v = v * 8 + (s[i] - '0');
		}
		*o++ = (char)v;
		s += 4;
	}
	*o = 0;
	return true;
}

/* Whether the comma-separated list holds `word`. */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list; p;) {
		if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == 0))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

/* Splits s in place at single spaces into at most max fields. */
static int split(char *s, char **f, int max)
{
	int n = 0;
	while (*s && n < max) {
		f[n++] = s;
		s = strchr(s, ' ');
		if (!s)
			break;
		*s++ = 0;
	}
	return n;
}

/* The cgroup2 mount, or the v1 mount with the cpu controller if there is
 * one (a v1 cpu hierarchy owns the controller, so cgroup2 has no cpu.max
 * then). Format (proc_pid_mountinfo(5)):
 *
 *   36 35 0:29 /root /mnt rw,relatime shared:9 - cgroup2 cgroup2 rw
 *   (1)(2)(3)  (4)   (5)  (6)        (7...)  - (8)    (9)     (10)
 */
static int find_mount(const char *mountinfo, struct cgmount *out)
{
	out->version = CG_NONE;
	FILE *f = fopen(mountinfo, "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = 0;
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = 0;
		char *pre[5], *post[3];
		if (split(line, pre, 5) < 5 || split(sep + 3, post, 3) < 3)
			continue;
		int v;
		if (!strcmp(post[0], "cgroup2") && out->version == CG_NONE)
			v = CG_V2;
		else if (!strcmp(post[0], "cgroup") && has_word(post[2], "cpu"))
			v = CG_V1;
		else
			continue;
		if (strlen(pre[4]) >= sizeof out->mnt ||
		    strlen(pre[3]) >= sizeof out->root || !unescape(pre[3]) ||
		    !unescape(pre[4]))
			continue;
		strcpy(out->mnt, pre[4]);
		strcpy(out->root, pre[3]);
		out->version = v;
		if (v == CG_V1)
			break; /* the cpu controller's own hierarchy wins */
	}
	free(line);
	fclose(f);
	return out->version == CG_NONE ? -ENOENT : 0;
}

/* This process's cgroup in the hierarchy of the given version, from
 * /proc/self/cgroup ("hierarchy-ID:controller-list:path"). */
static int find_path(const char *cgroupfile, int version, char *out,
		     size_t size)
{
	FILE *f = fopen(cgroupfile, "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	int err = -ENOENT;
	while (getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c1 = *c2 = 0;
		bool match = version == CG_V2 ? !strcmp(line, "0") && !c1[1]
					      : has_word(c1 + 1, "cpu");
		if (!match)
			continue;
		if (strlen(c2 + 1) < size) {
			strcpy(out, c2 + 1);
			err = 0;
		}
		break;
	}
	free(line);
	fclose(f);
	return err;
}

static bool parse_i64(const char *s, char **end, long long *v)
{
	errno = 0;
	*v = strtoll(s, end, 10);
	return !errno && *end != s;
}

/* One cgroup's limit in whole CPUs, rounded up: > 0, 0 when it sets none
 * (or has no files: the root cgroup, or the cpu controller not enabled
 * for it). */
static int level_limit(const char *dir, int version)
{
	char path[2 * PATH_MAX + 32], buf[128], *end;
	long long quota, period;
	if (version == CG_V2) {
		snprintf(path, sizeof path, "%s/cpu.max", dir);
		if (read_small(path, buf, sizeof buf) <= 0 ||
		    !strncmp(buf, "max", 3) || !parse_i64(buf, &end, &quota) ||
		    *end != ' ' || !parse_i64(end + 1, &end, &period))
			return 0;
	} else {
		snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
		if (read_small(path, buf, sizeof buf) <= 0 ||
		    !parse_i64(buf, &end, &quota) || quota < 0)
			return 0;
		snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
		if (read_small(path, buf, sizeof buf) <= 0 ||
		    !parse_i64(buf, &end, &period))
			return 0;
	}
	if (period <= 0 || quota < 0)
		return 0;
	/* The kernel bounds quota by 2^44 µs and period by 1 s, so this
	 * cannot overflow; a zero quota still allows a sliver of one CPU. */
	long long cpus = (quota + period - 1) / period;
	if (cpus < 1)
		cpus = 1;
	return cpus > INT_MAX ? INT_MAX : (int)cpus;
}

/* The tightest limit from our cgroup up to the mount's root. */
static int limit_along(const struct cgmount *m, const char *cgroupfile)
{
	char rel[PATH_MAX], dir[2 * PATH_MAX];
	if (find_path(cgroupfile, m->version, rel, sizeof rel))
		return 0;
	/* A v2 path outside our cgroup namespace reads "/../x"; v1 paths
	 * after a migration away from a removed cgroup end " (deleted)". We
	 * cannot place either under the mount. */
	if (strstr(rel, "/..") || strstr(rel, " (deleted)"))
		return 0;
	/* The mount shows the hierarchy from `root` down (a bind mount of a
	 * sub-tree, as some container runtimes make): strip it. */
	const char *sub = rel;
	size_t rl = strlen(m->root);
	if (strcmp(m->root, "/") != 0) {
		if (strncmp(rel, m->root, rl) != 0 ||
		    (rel[rl] != '/' && rel[rl] != 0))
			return 0;
		sub = rel + rl;
	}
	int n = snprintf(dir, sizeof dir, "%s%s", m->mnt, sub);
	if (n < 0 || (size_t)n >= sizeof dir)
		return 0;
	size_t len = (size_t)n, mntlen = strlen(m->mnt);
	while (len > mntlen && dir[len - 1] == '/')
		dir[--len] = 0;

	int best = 0;
	for (;;) {
		int l = level_limit(dir, m->version);
		if (l > 0 && (best == 0 || l < best))
			best = l;
		if (len <= mntlen)
			break;
		while (len > mntlen && dir[len - 1] != '/')
			len--; /* back to the parent's slash */
		if (len > mntlen)
			len--;
		dir[len] = 0;
	}
	return best;
}

#if GMP__TEST_HOOKS
int gmp__cgroup_cpu_limit_from(const char *cgroupfile, const char *mountinfo)
{
	int saved = errno;
	struct cgmount m;
	int l = find_mount(mountinfo, &m) ? 0 : limit_along(&m, cgroupfile);
	errno = saved;
	return l;
}
#endif

/* The mount is found once per process: mounts do not move under a running
 * program in practice, and mountinfo can be long. Our cgroup is read
 * afresh every time, so a process moved to another cgroup notices. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cgmount cache;
static bool cache_valid;

int gmp__cgroup_cpu_limit(void)
{
	int saved = errno;
	pthread_mutex_lock(&cache_lock);
	if (!cache_valid) {
		find_mount("/proc/self/mountinfo", &cache);
		cache_valid = true;
	}
	int l = cache.version == CG_NONE
			? 0
			: limit_along(&cache, "/proc/self/cgroup");
	pthread_mutex_unlock(&cache_lock);
	errno = saved;
	return l;
}

/* In the child of fork(): sysmon may have been re-reading the quota (it
 * does once a second) with cache_lock held, and that thread is gone. The
 * cache may be half-written too: read the mounts afresh. */
void gmp__cgroup_forked(void)
{
	cache_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	cache_valid = false;
}
