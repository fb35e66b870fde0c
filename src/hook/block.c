/* The calls that block with nothing to poll, run in a task inside
 * gmp_enter_syscall_block, so that the P moves to another thread at once
 * (hook.h, design.md §32): the resolver (getaddrinfo, getnameinfo, the
 * gethostby* family), fsync and its kin, waiting for children, file
 * locks, system and pclose.
 *
 * The resolver is the reason this bracket exists for whole calls: inside
 * glibc, getaddrinfo opens its sockets and polls, sends and receives on
 * them through glibc's internal aliases, which no interposition reaches;
 * so the whole call runs on the task's thread while the P runs other
 * tasks. Its errno travels with the task (gmp_exit_syscall carries it);
 * h_errno, which the gethostby* calls set, is carried here the same way.
 *
 * fork, posix_spawn, system and popen make a child that holds the
 * process's descriptors: every descriptor born before is shared from then
 * on (hook.c).
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "hook.h"

#if defined(__clang__)
#define HK_OPAQUE __attribute__((noinline, optnone))
#else
#define HK_OPAQUE __attribute__((noinline, noipa))
#endif

/* h_errno of the current thread (out of line: see hk_errno_set). */
HK_OPAQUE static int herr_get(void)
{
	return h_errno;
}

HK_OPAQUE static void herr_set(int e)
{
	h_errno = e;
}

#define BLOCK(expr) HK_BRACKET(true, expr)

/* A call that sets h_errno: h_errno as the call left it, on the thread
 * the task goes on with. */
#define BLOCK_HERR(type, expr)                                                 \
	({                                                                     \
		gmp_enter_syscall_block();                                     \
		type hk_v_ = (expr);                                           \
		int hk_he_ = herr_get();                                       \
		gmp_exit_syscall();                                            \
		herr_set(hk_he_);                                              \
		hk_v_;                                                         \
	})

/* ---- the resolver ----------------------------------------------------------------- */

/* Whether getaddrinfo will answer from the strings alone: an address
 * literal, a port number (or none), no AI_ADDRCONFIG (which asks the
 * kernel for the machine's addresses). Then it is a quick call, made in
 * gmp_enter_syscall (sysmon moves the P only if it lasts), not handed off:
 * a client that connects to "127.0.0.1" a thousand times starts no
 * threads. */
static bool literal(const char *node, const char *service,
		    const struct addrinfo *hints)
{
	if (hints && (hints->ai_flags & AI_ADDRCONFIG))
		return false;
	if (node) {
		unsigned char a[16];
		if (inet_pton(AF_INET, node, a) != 1 &&
		    inet_pton(AF_INET6, node, a) != 1)
			return false;
	}
	if (service && *service) {
		char *end;
		strtoul(service, &end, 10);
		if (*end)
			return false;
	}
	return true;
}

HK_EXPORT int getaddrinfo(const char *node, const char *service,
			  const struct addrinfo *hints, struct addrinfo **res)
{
	if (!hk_task())
		return HK_REAL(getaddrinfo)(node, service, hints, res);
	if (literal(node, service, hints))
		return HK_BRACKET(false, HK_REAL(getaddrinfo)(node, service,
							      hints, res));
	return BLOCK(HK_REAL(getaddrinfo)(node, service, hints, res));
}

HK_EXPORT int getnameinfo(const struct sockaddr *sa, socklen_t salen,
			  char *host, socklen_t hostlen, char *serv,
			  socklen_t servlen, int flags)
{
	if (!hk_task())
		return HK_REAL(getnameinfo)(sa, salen, host, hostlen, serv,
					    servlen, flags);
	return BLOCK(HK_REAL(getnameinfo)(sa, salen, host, hostlen, serv,
					  servlen, flags));
}

HK_EXPORT struct hostent *gethostbyname(const char *name)
{
	if (!hk_task())
		return HK_REAL(gethostbyname)(name);
	return BLOCK_HERR(struct hostent *, HK_REAL(gethostbyname)(name));
}

HK_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf,
			      size_t len, struct hostent **result, int *herr)
{
	if (!hk_task())
		return HK_REAL(gethostbyname_r)(name, ret, buf, len, result,
						herr);
	return BLOCK(
		HK_REAL(gethostbyname_r)(name, ret, buf, len, result, herr));
}

HK_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
	if (!hk_task())
		return HK_REAL(gethostbyname2)(name, af);
	return BLOCK_HERR(struct hostent *, HK_REAL(gethostbyname2)(name, af));
}

HK_EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret,
			       char *buf, size_t len, struct hostent **result,
			       int *herr)
{
	if (!hk_task())
		return HK_REAL(gethostbyname2_r)(name, af, ret, buf, len,
						 result, herr);
	return BLOCK(HK_REAL(gethostbyname2_r)(name, af, ret, buf, len, result,
					       herr));
}

HK_EXPORT struct hostent *gethostbyaddr(const void *addr, socklen_t len,
					int type)
{
	if (!hk_task())
		return HK_REAL(gethostbyaddr)(addr, len, type);
	return BLOCK_HERR(struct hostent *,
			  HK_REAL(gethostbyaddr)(addr, len, type));
}

HK_EXPORT int gethostbyaddr_r(const void *addr, socklen_t alen, int type,
			      struct hostent *ret, char *buf, size_t len,
			      struct hostent **result, int *herr)
{
	if (!hk_task())
		return HK_REAL(gethostbyaddr_r)(addr, alen, type, ret, buf, len,
						result, herr);
	return BLOCK(HK_REAL(gethostbyaddr_r)(addr, alen, type, ret, buf, len,
					      result, herr));
}

/* ---- the disk ------------------------------------------------------------------ */

HK_EXPORT int fsync(int fd)
{
	if (!hk_task())
		return HK_REAL(fsync)(fd);
	return BLOCK(HK_REAL(fsync)(fd));
}

HK_EXPORT int fdatasync(int fd)
{
	if (!hk_task())
		return HK_REAL(fdatasync)(fd);
	return BLOCK(HK_REAL(fdatasync)(fd));
}

HK_EXPORT int syncfs(int fd)
{
	if (!hk_task())
		return HK_REAL(syncfs)(fd);
	return BLOCK(HK_REAL(syncfs)(fd));
}

/* ---- locks ---------------------------------------------------------------------- */

HK_EXPORT int flock(int fd, int op)
{
	if ((op & LOCK_NB) || !hk_task())
		return HK_REAL(flock)(fd, op);
	return BLOCK(HK_REAL(flock)(fd, op));
}

HK_EXPORT int lockf(int fd, int cmd, off_t len)
{
	if (cmd != F_LOCK || !hk_task())
		return HK_REAL(lockf)(fd, cmd, len);
	return BLOCK(HK_REAL(lockf)(fd, cmd, len));
}

HK_EXPORT int lockf64(int fd, int cmd, off_t len)
	__attribute__((alias("lockf")));

/* ---- children ------------------------------------------------------------------- */

HK_EXPORT pid_t wait(int *status)
{
	if (!hk_task())
		return HK_REAL(wait)(status);
	return BLOCK(HK_REAL(wait)(status));
}

HK_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
	if ((options & WNOHANG) || !hk_task())
		return HK_REAL(waitpid)(pid, status, options);
	return BLOCK(HK_REAL(waitpid)(pid, status, options));
}

HK_EXPORT pid_t wait3(int *status, int options, struct rusage *ru)
{
	if ((options & WNOHANG) || !hk_task())
		return HK_REAL(wait3)(status, options, ru);
	return BLOCK(HK_REAL(wait3)(status, options, ru));
}

HK_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	if ((options & WNOHANG) || !hk_task())
		return HK_REAL(wait4)(pid, status, options, ru);
	return BLOCK(HK_REAL(wait4)(pid, status, options, ru));
}

HK_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
	if ((options & WNOHANG) || !hk_task())
		return HK_REAL(waitid)(idtype, id, info, options);
	return BLOCK(HK_REAL(waitid)(idtype, id, info, options));
}

/* A child that shares the descriptors: see hook.c's PRIVATE. */
static void spawning(void)
{
	gmp__add32_rlx(&hk.forkgen, 1); /* as before_fork (hook.c) */
}

HK_EXPORT int system(const char *cmd)
{
	spawning();
	if (!hk_task())
		return HK_REAL(system)(cmd);
	return BLOCK(HK_REAL(system)(cmd));
}

HK_EXPORT FILE *popen(const char *cmd, const char *mode)
{
	spawning();
	return HK_REAL(popen)(cmd, mode);
}

HK_EXPORT int pclose(FILE *f)
{
	if (!hk_task())
		return HK_REAL(pclose)(f);
	return BLOCK(HK_REAL(pclose)(f));
}

HK_EXPORT int posix_spawn(pid_t *pid, const char *path,
			  const posix_spawn_file_actions_t *fa,
			  const posix_spawnattr_t *attr, char *const argv[],
			  char *const envp[])
{
	spawning();
	return HK_REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}

HK_EXPORT int posix_spawnp(pid_t *pid, const char *file,
			   const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[],
			   char *const envp[])
{
	spawning();
	return HK_REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
}
