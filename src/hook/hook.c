/* libgmp-hook: loading, libc's own functions, and what the hooks know of
 * each descriptor (hook.h, design.md §32). */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hook.h"

struct hk_state hk;
struct hk_real hk_real;

/* ---- errno ---------------------------------------------------------------------- */

#if defined(__clang__)
#define HK_OPAQUE __attribute__((noinline, optnone))
#else
#define HK_OPAQUE __attribute__((noinline, noipa))
#endif

HK_OPAQUE void hk_errno_set(int e)
{
	errno = e;
}

HK_OPAQUE int hk_errno_get(void)
{
	return errno;
}

/* ---- libc's own functions ----------------------------------------------------- */

/* The lookup of one thread, so that a hooked call made from inside dlsym
 * (a malloc that reads a file while dlsym allocates) is told apart from
 * the one that started it. */
static __thread bool resolving __attribute__((tls_model("initial-exec")));

static void die(const char *what)
{
	/* stderr through the kernel: nothing of libc's that may be hooked */
	static const char pre[] = "gmp: libgmp-hook: ";
	HK_SYS(SYS_write, 2, pre, sizeof pre - 1, 0, 0, 0);
	HK_SYS(SYS_write, 2, what, strlen(what), 0, 0, 0);
	HK_SYS(SYS_write, 2, "\n", 1, 0, 0, 0);
	abort();
}

void hk_real_resolve(void)
{
	if (resolving)
		die("a hooked call was made while libc's functions were being "
		    "looked up");
	resolving = true;
	/* Each pointer is written with the same value by whichever thread
	 * gets here; a racing reader sees NULL (and resolves too) or that
	 * value. */
#define HK_RESOLVE(name, ret, args)                                            \
	if (!hk_real.name) {                                                   \
		void *p = dlsym(RTLD_NEXT, #name);                             \
		if (!p)                                                        \
			die("libc's " #name " not found (dlsym RTLD_NEXT)");   \
		gmp__storep_rlx(&hk_real.name, p);                             \
	}
	HK_REAL_FUNCS(HK_RESOLVE)
	resolving = false;
}

/* ---- loading ------------------------------------------------------------------ */

static void before_fork(void)
{
	/* A descriptor born before this is shared with the child. Relaxed:
	 * a count, compared only (is_private). */
	gmp__add32_rlx(&hk.forkgen, 1);
}

#if HK_TSAN
/* Under TSan the hooks must come before its runtime (design.md §32.3):
 * its interceptors of blocking calls stop recording synchronisation for as
 * long as the call runs, and all the runtime does inside a hooked call
 * that parks would look racy to it. Linked, they come after it (it is
 * first among the libraries); preloaded, before. */
static void check_order(void)
{
	Dl_info mine, first;
	void *p = dlsym(RTLD_DEFAULT, "poll");
	if (!p || !dladdr((void *)check_order, &mine) || !dladdr(p, &first) ||
	    strcmp(mine.dli_fname, first.dli_fname) != 0)
		die("ThreadSanitizer's runtime comes before the hooks: "
		    "preload libgmp-hook.so (LD_PRELOAD) under TSan");
}
#endif

/* Runs when the library is loaded (linked, or LD_PRELOADed), after
 * libgmp.so's own constructors (it is a dependency). */
__attribute__((constructor(101))) static void hk_init(void)
{
#if HK_TSAN
	check_order();
#endif
	hk_real_resolve();
	const gmp__hookrt *rt = gmp_hookrt_v1_();
	if (rt->version != GMP__HOOKRT_VERSION ||
	    rt->size != sizeof(gmp__hookrt))
		die("libgmp.so and libgmp-hook.so are from different builds "
		    "(their private interface differs)");
	/* GMP_HOOK: on (the default) or off; anything else is gmp_init's
	 * -EINVAL and leaves the hooks off. */
	const char *v = getenv("GMP_HOOK");
	bool on = !v || !*v || !strcmp(v, "on");
	if (rt->attach(on) != 0)
		die("attached twice (two libgmp-hook.so in one process?)");
	hk.rt = rt;
	hk.tls_m = rt->tls_m;
	hk.m_curg = rt->m_curg;
	hk.g_status = rt->g_status;
	hk.g_inrt = rt->g_inrt;
	hk.tls_preempt = rt->tls_preempt;
	hk.g_running = rt->g_running;
	pthread_atfork(before_fork, NULL, NULL);
	/* release: the fields above are in place before a call reads on */
	gmp__store8_rel(&hk.on, on);
}

/* ---- time -------------------------------------------------------------------- */

int64_t hk_now(void)
{
	return gmp_nanotime();
}

int64_t hk_deadline(int64_t ns)
{
	if (ns < 0)
		return -1;
	int64_t now = hk_now();
	return ns > INT64_MAX - now ? INT64_MAX : now + ns;
}

int hk_poll_now(int fd, int events)
{
	struct pollfd p = { .fd = fd, .events = (short)events };
	struct timespec zero = { 0, 0 };
	long r = HK_SYS(SYS_ppoll, &p, 1, &zero, NULL, HK_SIGSETSIZE, 0);
	return r <= 0 ? (int)r : p.revents;
}

/* ---- the descriptor table ----------------------------------------------------- */

/* One entry per descriptor number, in chunks of 1024 mapped on first use
 * and never freed (an entry's address may be held by a call at any time;
 * the memory is bounded by the highest number used, 40 bytes each), as
 * libgmp's poll descriptors are.
 *
 * Everything in an entry is a hint about the file behind the number,
 * written and read with relaxed atomics and corrected by the calls' own
 * results, except what the program's own calls through the hooks have
 * told us about a descriptor that is the process's alone (PRIVATE):
 *
 *   word      kind (4 bits), PRIVATE, NB_KNOWN, NB, INET, and an epoch in
 *             the top 24 bits, bumped by every new file and every change
 *             of the program's (F_SETFL, FIONBIO); a call that learns the
 *             kind stores it only with a CAS from the word it read
 *             before asking, so that a learner overtaken by a new file
 *             does not write the old file's kind over it
 *   forkgen   hk.forkgen when the file was born: after a fork (or a
 *             posix_spawn) the child holds it too, and PRIVATE no longer
 *             holds
 *   tmo[2]    SO_RCVTIMEO and SO_SNDTIMEO in microseconds + 1 (0:
 *             unknown), as the program set them through the hooks
 *
 * PRIVATE is what lets a task skip asking the kernel for O_NONBLOCK and
 * the socket timeouts before it parks: the file was made by a hooked call
 * (socket, accept, pipe, open...), no other number or process has it, so
 * its flags change only through our own fcntl and ioctl. Anything else is
 * asked of the kernel each time a call would wait (one fcntl, and for a
 * socket one getsockopt): a descriptor the process inherited, or shares,
 * may be changed by others at any time. */
#define HK_PRIVATE 0x10u
#define HK_NB_KNOWN 0x20u
#define HK_NB 0x40u
#define HK_INET 0x80u
#define HK_EPOCH_SHIFT 8
#define HK_EPOCH_ONE (1u << HK_EPOCH_SHIFT)
#define HK_TMO_MAX (1ull << 62) /* microseconds */

_Static_assert(sizeof(hk_fd) == 40, "40 bytes per descriptor");

hk_fd *volatile hk_chunks[HK_MAX_FD >> HK_CHUNK_SHIFT];

hk_fd *hk_chunk_new(int i)
{
	size_t size = HK_CHUNK * sizeof(hk_fd);
	long p = HK_SYS(SYS_mmap, NULL, size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p < 0 && p > -4096)
		return NULL;
	hk_fd *c = (hk_fd *)p;
	/* full (release): the zeroed chunk is published; pairs with
	 * hk_fd_get's acquire, as the acquire below does with another
	 * thread's publication */
	if (!gmp__casp_full(&hk_chunks[i], NULL, c)) {
		HK_SYS(SYS_munmap, c, size, 0, 0, 0, 0);
		c = gmp__loadp_acq(&hk_chunks[i]); /* another thread's */
	}
	return c;
}

/* The word is read with acquire and changed with a full CAS (or
 * hk_fd_born's release store): the fields stored before a change (forkgen,
 * tmo) go with it to whoever reads the new word. */
static inline uint32_t word_load(hk_fd *f)
{
	return gmp__load32_acq(&f->word);
}

static inline bool word_cas(hk_fd *f, uint32_t old, uint32_t new)
{
	return gmp__cas32_full(&f->word, old, new);
}

/* Replaces the word, bumping its epoch: a new file, or a change of the
 * program's. `keep` are the bits kept from the old word. */
static void word_renew(hk_fd *f, uint32_t keep, uint32_t set)
{
	uint32_t w = word_load(f);
	while (!word_cas(f, w,
			 ((w & ~(HK_EPOCH_ONE - 1)) + HK_EPOCH_ONE) |
				 (w & keep) | set))
		w = word_load(f);
}

static bool is_private(hk_fd *f, uint32_t w)
{
	/* Relaxed: hints, as the whole entry is (above) */
	return (w & HK_PRIVATE) &&
	       gmp__load32_rlx(&f->forkgen) == gmp__load32_rlx(&hk.forkgen);
}

int hk_kind_learn(int fd, hk_fd *f, bool *inet)
{
	uint32_t w = word_load(f);
	int kind = (int)(w & HK_KIND_MASK);
	if (HK_LIKELY(kind != HK_UNKNOWN)) {
		if (inet)
			*inet = (w & HK_INET) != 0;
		return kind;
	}
	struct stat st;
	if (HK_SYS(SYS_fstat, fd, &st, 0, 0, 0, 0) < 0)
		return HK_UNKNOWN;
	bool in = false;
	switch (st.st_mode & S_IFMT) {
	case S_IFSOCK: {
		int type = 0, dom = 0;
		socklen_t l = sizeof type;
		HK_SYS(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, &type, &l, 0);
		l = sizeof dom;
		HK_SYS(SYS_getsockopt, fd, SOL_SOCKET, SO_DOMAIN, &dom, &l, 0);
		kind = type == SOCK_STREAM ? HK_STREAM : HK_SOCK;
		in = dom == AF_INET || dom == AF_INET6;
		break;
	}
	case S_IFREG:
	case S_IFBLK:
		kind = HK_FILE;
		break;
	case S_IFDIR:
	case S_IFLNK:
		kind = HK_PLAIN;
		break;
	default:
		/* FIFOs, character devices, and the anonymous inodes of
		 * eventfd, timerfd, signalfd, inotify and epoll (no type
		 * bits): tried with RWF_NOWAIT first (rw.c), which those
		 * that cannot take it refuse. */
		kind = HK_NOWAIT;
		break;
	}
	word_cas(f, w,
		 (w & ~HK_KIND_MASK) | (uint32_t)kind | (in ? HK_INET : 0));
	if (inet)
		*inet = in;
	return kind;
}

void hk_kind_wrong(hk_fd *f)
{
	/* A new file behind the number that the hooks did not see made:
	 * nothing of the old one holds. */
	word_renew(f, 0, 0);
}

void hk_kind_set(hk_fd *f, int kind)
{
	uint32_t w = word_load(f);
	word_cas(f, w, (w & ~HK_KIND_MASK) | (uint32_t)kind);
}

void hk_fd_born(int fd, int kind, bool inet, bool nonblock)
{
	hk_fd *f = hk_fd_get(fd);
	if (!f)
		return;
	gmp__store32_rlx(&f->forkgen, gmp__load32_rlx(&hk.forkgen));
	uint32_t w = word_load(f);
	uint32_t epoch = (w & ~(HK_EPOCH_ONE - 1)) + HK_EPOCH_ONE;
	/* A new socket has no timeouts: known, as none. */
	gmp__store64_rlx(&f->tmo[0], 1);
	gmp__store64_rlx(&f->tmo[1], 1);
	/* release: the fields above go with the word; pairs with
	 * word_load's acquire */
	gmp__store32_rel(&f->word,
			 epoch | (uint32_t)kind | HK_PRIVATE | HK_NB_KNOWN |
				 (nonblock ? HK_NB : 0) | (inet ? HK_INET : 0));
}

/* The entry of fd if its chunk exists (closing a number never makes
 * one). */
static hk_fd *lookup(int fd)
{
	if (fd < 0 || fd >= HK_MAX_FD)
		return NULL;
	/* acquire: pairs with hk_chunk_new's publication */
	hk_fd *c = gmp__loadp_acq(&hk_chunks[fd >> HK_CHUNK_SHIFT]);
	return c ? &c[fd & (HK_CHUNK - 1)] : NULL;
}

void hk_fd_forget(int fd)
{
	hk_fd *f = lookup(fd);
	if (f)
		word_renew(f, 0, 0);
}

void hk_fd_forget_range(unsigned lo, unsigned hi)
{
	for (unsigned i = lo >> HK_CHUNK_SHIFT;
	     i < (HK_MAX_FD >> HK_CHUNK_SHIFT) && i <= (hi >> HK_CHUNK_SHIFT);
	     i++) {
		hk_fd *c = gmp__loadp_acq(&hk_chunks[i]); /* as lookup */
		if (!c)
			continue;
		for (unsigned k = 0; k < HK_CHUNK; k++) {
			unsigned fd = (i << HK_CHUNK_SHIFT) | k;
			if (fd >= lo && fd <= hi)
				word_renew(&c[k], 0, 0);
		}
	}
}

void hk_fd_shared(int fd)
{
	hk_fd *f = hk_fd_get(fd);
	if (!f)
		return;
	uint32_t w = word_load(f);
	while ((w & HK_PRIVATE) && !word_cas(f, w, w & ~HK_PRIVATE))
		w = word_load(f);
}

int hk_nonblock(int fd, hk_fd *f)
{
	uint32_t w = word_load(f);
	if (is_private(f, w) && (w & HK_NB_KNOWN))
		return (w & HK_NB) != 0;
	long fl = HK_SYS(SYS_fcntl, fd, F_GETFL, 0, 0, 0, 0);
	if (fl < 0)
		return (int)fl;
	return (fl & O_NONBLOCK) != 0;
}

int hk_nonblock_known(hk_fd *f)
{
	uint32_t w = word_load(f);
	if (is_private(f, w) && (w & HK_NB_KNOWN))
		return (w & HK_NB) != 0;
	return -1;
}

void hk_fd_setfl(int fd, int flags)
{
	hk_fd *f = hk_fd_get(fd);
	if (!f)
		return;
	bool nb = (flags & O_NONBLOCK) != 0;
	word_renew(f, HK_KIND_MASK | HK_PRIVATE | HK_INET,
		   HK_NB_KNOWN | (nb ? HK_NB : 0));
}

int64_t hk_timeout(int fd, hk_fd *f, int dir)
{
	uint32_t w = word_load(f);
	uint64_t t = gmp__load64_rlx(&f->tmo[dir]); /* a hint (above) */
	if (t && is_private(f, w))
		return (int64_t)(t - 1) * 1000;
	struct timeval tv = { 0, 0 };
	socklen_t l = sizeof tv;
	if (HK_SYS(SYS_getsockopt, fd, SOL_SOCKET,
		   dir ? SO_SNDTIMEO : SO_RCVTIMEO, &tv, &l, 0) < 0)
		return 0;
	return (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
}

void hk_fd_settimeout(int fd, int dir, const void *val, socklen_t len)
{
	hk_fd *f = hk_fd_get(fd);
	if (!f)
		return;
	/* setsockopt has accepted it: a struct timeval (the _NEW option's
	 * layout is the same on a 64-bit machine). One too long to keep is
	 * asked of the kernel when needed. */
	uint64_t t = 0;
	if (len >= (socklen_t)sizeof(struct timeval)) {
		const struct timeval *tv = val;
		if (tv->tv_sec >= 0 &&
		    (uint64_t)tv->tv_sec <= HK_TMO_MAX / 1000000) {
			uint64_t us = (uint64_t)tv->tv_sec * 1000000 +
				      (uint64_t)tv->tv_usec;
			if (us <= HK_TMO_MAX)
				t = us + 1;
		}
	}
	gmp__store64_rlx(&f->tmo[dir], t); /* a hint (above) */
}

gmp_mutex *hk_fd_accept_lock(hk_fd *f)
{
	return &f->accept_mu;
}
