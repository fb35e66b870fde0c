/* poll, ppoll, select, pselect, epoll_wait, epoll_pwait, epoll_pwait2
 * (hook.h, design.md §32).
 *
 * In a task, with a timeout other than zero, every one of them is the same
 * loop: ask the kernel with a zero timeout (the call itself, so that the
 * answer, the result sets and errno are the kernel's to the bit); if
 * nothing is ready and time is left, park until something may have
 * changed, and ask again. What the task parks on:
 *
 *   one descriptor        its poll descriptor in libgmp's poller, as a
 *                         read would (a close wakes it; it then looks
 *                         again and finds POLLNVAL)
 *   several               a temporary epoll instance holding them all,
 *                         level-triggered, which the poller watches as
 *                         one descriptor (epoll descriptors nest)
 *   the program's epoll   itself (epoll_wait): readable when its ready
 *                         list is not empty
 *   none (all negative)   a timer: poll(NULL, 0, ms) is a sleep
 *
 * A regular file is always ready to epoll (which refuses to watch it) and
 * to poll: in a set, it is either ready at the first look or never.
 * Should the temporary instance not be made (out of descriptors), or a
 * descriptor not be added to it (an epoll loop), the call runs as a plain
 * blocking call inside gmp_enter_syscall_block instead: right, but holding
 * a thread. The signal mask of ppoll, pselect and epoll_pwait is applied
 * to each look, not while the task is parked: its thread runs other tasks
 * meanwhile (docs/guide.md says so).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "hook.h"

/* ---- the wait --------------------------------------------------------------- */

struct look {
	int (*fn)(void *arg); /* the zero-timeout call: > 0, 0 or -errno */
	void *arg;
	/* The plain blocking call, for when the task cannot wait in the
	 * poller: deadline (gmp_nanotime's clock; < 0 none). */
	int (*blocking)(void *arg, int64_t deadline);
};

/* The descriptor a task waits on for a set. */
struct set {
	int fd;     /* the one descriptor, or the temporary epoll; -1: none */
	int events; /* poll bits to wait for on it */
	bool tmp;   /* fd is the temporary epoll instance (ours to close) */
};

/* Makes the set for the descriptors of want[0..n) that are >= 0: 0, or
 * -1 if the task cannot wait for them in the poller. */
static int set_make(struct set *s, const struct pollfd *want, nfds_t n)
{
	s->fd = -1;
	s->events = 0;
	s->tmp = false;
	nfds_t first = n;
	bool several = false;
	for (nfds_t i = 0; i < n; i++) {
		if (want[i].fd < 0)
			continue;
		if (first == n)
			first = i;
		else if (want[i].fd != want[first].fd)
			several = true;
	}
	if (first == n)
		return 0; /* nothing to wait on */
	if (!several) {
		s->fd = want[first].fd;
		for (nfds_t i = first; i < n; i++)
			if (want[i].fd == s->fd)
				s->events |= want[i].events;
		return 0;
	}
	long ep = HK_SYS(SYS_epoll_create1, EPOLL_CLOEXEC, 0, 0, 0, 0, 0);
	if (ep < 0)
		return -1;
	for (nfds_t i = 0; i < n; i++) {
		int fd = want[i].fd;
		if (fd < 0)
			continue;
		struct epoll_event ev = { .events = (uint32_t)want[i].events,
					  .data.fd = fd };
		long r =
			HK_SYS(SYS_epoll_ctl, ep, EPOLL_CTL_ADD, fd, &ev, 0, 0);
		if (r == -EEXIST) {
			/* The same descriptor again: one entry for both. */
			for (nfds_t k = 0; k < i; k++)
				if (want[k].fd == fd)
					ev.events |= (uint32_t)want[k].events;
			r = HK_SYS(SYS_epoll_ctl, ep, EPOLL_CTL_MOD, fd, &ev, 0,
				   0);
		}
		/* A regular file (EPERM) is ready at once or never; a closed
		 * descriptor (EBADF) is the next look's POLLNVAL. Anything
		 * else (an epoll loop, no memory) cannot be waited for. */
		if (r < 0 && r != -EPERM && r != -EBADF) {
			HK_SYS(SYS_close, ep, 0, 0, 0, 0, 0);
			return -1;
		}
	}
	s->fd = (int)ep;
	s->events = POLLIN;
	s->tmp = true;
	return 0;
}

static void set_free(struct set *s)
{
	if (!s->tmp)
		return;
	/* It is registered with the poller: close it with the books kept. */
	int r = hk.rt->fd_close(s->fd);
	if (r == GMP__HOOK_PLAIN)
		HK_SYS(SYS_close, s->fd, 0, 0, 0, 0, 0);
}

/* The loop of the top, for a task: the kernel's answer, or 0 when the
 * deadline (< 0 none) passed with nothing ready. */
static int wait_loop(const struct pollfd *want, nfds_t n, int64_t deadline,
		     const struct look *lk)
{
	int r = lk->fn(lk->arg);
	if (r != 0 || (deadline >= 0 && hk_now() >= deadline))
		return r;
	struct set s;
	if (set_make(&s, want, n) < 0)
		return lk->blocking(lk->arg, deadline);
	gmp__hook_fd h;
	bool held = false;
	for (;;) {
		if (s.fd >= 0 && !held) {
			int err = hk.rt->fd_begin(s.fd, &h);
			if (err == 0)
				held = true;
			else if (err != -EBADF) /* -EMFILE, -ENOMEM */
				s.fd = -1; /* sleeps, looking now and then */
		}
		if (held)
			hk.rt->fd_snapshot(&h);
		r = lk->fn(lk->arg);
		if (r != 0)
			break;
		int64_t now = hk_now();
		if (deadline >= 0 && now >= deadline)
			break;
		if (!held) {
			/* Nothing the poller can watch: a sleep (in slices,
			 * when the set holds something it could not watch). */
			int64_t d = deadline < 0 ? INT64_MAX : deadline - now;
			if (s.fd >= 0 && d > 10 * 1000 * 1000)
				d = 10 * 1000 * 1000;
			gmp_sleep(d);
			continue;
		}
		int w = hk.rt->fd_poll(&h, s.events, deadline);
		if (w >= 0)
			continue;
		if (w == -EBADF) {
			/* Closed under us: let the closer finish, and look
			 * (the kernel says POLLNVAL once it has). */
			hk.rt->fd_end(&h);
			held = false;
			continue;
		}
		hk.rt->fd_end(&h);
		held = false;
		if (w == GMP__HOOK_UNPOLLABLE && !s.tmp) {
			s.fd = -1; /* a regular file: ready now or never */
			continue;
		}
		/* epoll refused (a loop of epoll instances, no memory): the
		 * plain call, in the bracket. */
		set_free(&s);
		return lk->blocking(lk->arg, deadline);
	}
	if (held)
		hk.rt->fd_end(&h);
	set_free(&s);
	return r;
}

/* The timeout left until deadline (< 0: none) as a timespec, for the
 * plain blocking calls; NULL for none. */
static struct timespec *left(int64_t deadline, struct timespec *ts)
{
	if (deadline < 0)
		return NULL;
	int64_t d = deadline - hk_now();
	if (d < 0)
		d = 0;
	ts->tv_sec = (time_t)(d / 1000000000);
	ts->tv_nsec = (long)(d % 1000000000);
	return ts;
}

/* ---- poll, ppoll ----------------------------------------------------------------- */

struct poll_args {
	struct pollfd *fds;
	nfds_t n;
	const sigset_t *mask;
};

static int poll_look(void *p)
{
	struct poll_args *a = p;
	struct timespec zero = { 0, 0 };
	return (int)HK_SYS(SYS_ppoll, a->fds, a->n, &zero, a->mask,
			   HK_SIGSETSIZE, 0);
}

static int poll_blocking(void *p, int64_t deadline)
{
	struct poll_args *a = p;
	struct timespec ts;
	return (int)HK_BRACKET(true, HK_SYS(SYS_ppoll, a->fds, a->n,
					    left(deadline, &ts), a->mask,
					    HK_SIGSETSIZE, 0));
}

static int task_poll(struct pollfd *fds, nfds_t n, int64_t deadline,
		     const sigset_t *mask)
{
	hk_preempt_point();
	struct poll_args a = { fds, n, mask };
	struct look lk = { poll_look, &a, poll_blocking };
	return wait_loop(fds, n, deadline, &lk);
}

HK_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (timeout == 0 || !hk_task())
		return HK_REAL(poll)(fds, n, timeout);
	return (int)hk_ret(task_poll(
		fds, n, timeout < 0 ? -1 : hk_deadline(timeout * 1000000LL),
		NULL));
}

HK_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout,
			 size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		__chk_fail();
	return poll(fds, n, timeout);
}

static bool ts_valid(const struct timespec *ts)
{
	return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}

static int64_t ts_ns(const struct timespec *ts)
{
	if (ts->tv_sec > INT64_MAX / 1000000000 - 1)
		return INT64_MAX;
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

HK_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		    const sigset_t *mask)
{
	if ((ts && ts->tv_sec == 0 && ts->tv_nsec == 0) || !hk_task())
		return HK_REAL(ppoll)(fds, n, ts, mask);
	if (ts && !ts_valid(ts))
		return (int)hk_ret(-EINVAL);
	return (int)hk_ret(
		task_poll(fds, n, ts ? hk_deadline(ts_ns(ts)) : -1, mask));
}

HK_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n,
			  const struct timespec *ts, const sigset_t *mask,
			  size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		__chk_fail();
	return ppoll(fds, n, ts, mask);
}

/* ---- select, pselect ---------------------------------------------------------- */

struct sel_args {
	int nfds;
	fd_set *sets[3];     /* the caller's (NULL allowed) */
	unsigned long *copy; /* 6 sets: the caller's as they came, and the
				ones each look hands the kernel */
	size_t words;        /* longs per set */
	const sigset_t *mask;
};

/* pselect6's sixth argument. */
struct sigmask_arg {
	const sigset_t *ss;
	size_t len;
};

static int sel_call(struct sel_args *a, struct timespec *ts)
{
	fd_set *s[3];
	for (int k = 0; k < 3; k++) {
		s[k] = NULL;
		if (a->sets[k]) {
			s[k] = (fd_set *)(a->copy + (size_t)(3 + k) * a->words);
			memcpy(s[k], a->copy + (size_t)k * a->words,
			       a->words * sizeof(long));
		}
	}
	struct sigmask_arg sm = { a->mask, HK_SIGSETSIZE };
	int r = (int)HK_SYS(SYS_pselect6, a->nfds, s[0], s[1], s[2], ts,
			    a->mask ? &sm : NULL);
	if (r > 0)
		for (int k = 0; k < 3; k++)
			if (a->sets[k])
				memcpy(a->sets[k], s[k],
				       a->words * sizeof(long));
	return r;
}

static int sel_look(void *p)
{
	struct timespec zero = { 0, 0 };
	return sel_call(p, &zero);
}

static int sel_blocking(void *p, int64_t deadline)
{
	struct timespec ts;
	return (int)HK_BRACKET(true, sel_call(p, left(deadline, &ts)));
}

static bool bit(const fd_set *s, int fd)
{
	const unsigned long *w = (const unsigned long *)s;
	return s &&
	       (w[fd / (8 * sizeof(long))] >> (fd % (8 * sizeof(long)))) & 1;
}

static int task_select(int nfds, fd_set *r, fd_set *w, fd_set *e,
		       int64_t deadline, const sigset_t *mask)
{
	hk_preempt_point();
	if (nfds < 0)
		return -EINVAL;
	size_t words =
		((size_t)nfds + 8 * sizeof(long) - 1) / (8 * sizeof(long));
	/* The kernel takes nfds up to the descriptor limit, and the sets
	 * as long as nfds says, FD_SETSIZE or not. */
	unsigned long small[6 * (FD_SETSIZE / (8 * sizeof(long)))];
	struct pollfd wsmall[64];
	unsigned long *copy = small;
	struct pollfd *want = wsmall;
	nfds_t n = 0;
	for (int fd = 0; fd < nfds; fd++)
		n += bit(r, fd) || bit(w, fd) || bit(e, fd);
	if (words > FD_SETSIZE / (8 * sizeof(long)) &&
	    !(copy = malloc(6 * words * sizeof(long))))
		return -ENOMEM;
	if (n > 64 && !(want = malloc(n * sizeof *want))) {
		if (copy != small)
			free(copy);
		return -ENOMEM;
	}
	nfds_t k = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = (short)((bit(r, fd) ? POLLIN : 0) |
				   (bit(w, fd) ? POLLOUT : 0) |
				   (bit(e, fd) ? POLLPRI : 0));
		if (ev)
			want[k++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	fd_set *sets[3] = { r, w, e };
	for (int i = 0; i < 3; i++)
		if (sets[i])
			memcpy(copy + (size_t)i * words, sets[i],
			       words * sizeof(long));
	struct sel_args a = { nfds, { r, w, e }, copy, words, mask };
	struct look lk = { sel_look, &a, sel_blocking };
	int res = wait_loop(want, n, deadline, &lk);
	if (res == 0) /* timed out: the kernel leaves the sets empty */
		for (int i = 0; i < 3; i++)
			if (sets[i])
				memset(sets[i], 0, words * sizeof(long));
	if (copy != small)
		free(copy);
	if (want != wsmall)
		free(want);
	return res;
}

HK_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e,
		     struct timeval *tv)
{
	if ((tv && tv->tv_sec == 0 && tv->tv_usec == 0) || !hk_task())
		return HK_REAL(select)(nfds, r, w, e, tv);
	if (tv && (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000))
		return (int)hk_ret(-EINVAL);
	int64_t deadline = -1;
	if (tv)
		deadline = hk_deadline(
			tv->tv_sec > INT64_MAX / 1000000000 - 1
				? INT64_MAX
				: (int64_t)tv->tv_sec * 1000000000 +
					  (int64_t)tv->tv_usec * 1000);
	int res = task_select(nfds, r, w, e, deadline, NULL);
	/* Linux's select leaves the time not slept in *tv. */
	if (tv && res >= 0) {
		int64_t d = deadline - hk_now();
		if (d < 0)
			d = 0;
		tv->tv_sec = (time_t)(d / 1000000000);
		tv->tv_usec = (suseconds_t)(d % 1000000000 / 1000);
	}
	return (int)hk_ret(res);
}

HK_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
		      const struct timespec *ts, const sigset_t *mask)
{
	if ((ts && ts->tv_sec == 0 && ts->tv_nsec == 0) || !hk_task())
		return HK_REAL(pselect)(nfds, r, w, e, ts, mask);
	if (ts && !ts_valid(ts))
		return (int)hk_ret(-EINVAL);
	return (int)hk_ret(task_select(nfds, r, w, e,
				       ts ? hk_deadline(ts_ns(ts)) : -1, mask));
}

/* ---- epoll_wait, epoll_pwait, epoll_pwait2 ---------------------------------- */

struct ep_args {
	int epfd;
	struct epoll_event *evs;
	int max;
	const sigset_t *mask;
};

static int ep_look(void *p)
{
	struct ep_args *a = p;
	return (int)HK_SYS(SYS_epoll_pwait, a->epfd, a->evs, a->max, 0, a->mask,
			   HK_SIGSETSIZE);
}

static int ep_blocking(void *p, int64_t deadline)
{
	struct ep_args *a = p;
	int ms = -1;
	if (deadline >= 0) {
		int64_t d = deadline - hk_now();
		ms = d <= 0 ? 0
		     : d >= (int64_t)INT32_MAX * 1000000
			     ? INT32_MAX
			     : (int)((d + 999999) / 1000000);
	}
	return (int)HK_BRACKET(true,
			       HK_SYS(SYS_epoll_pwait, a->epfd, a->evs, a->max,
				      ms, a->mask, HK_SIGSETSIZE));
}

static int task_epoll(int epfd, struct epoll_event *evs, int max,
		      int64_t deadline, const sigset_t *mask)
{
	hk_preempt_point();
	struct ep_args a = { epfd, evs, max, mask };
	struct look lk = { ep_look, &a, ep_blocking };
	struct pollfd want = { .fd = epfd, .events = POLLIN };
	return wait_loop(&want, 1, deadline, &lk);
}

HK_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max,
			 int timeout)
{
	if (timeout == 0 || !hk_task())
		return HK_REAL(epoll_wait)(epfd, evs, max, timeout);
	return (int)hk_ret(task_epoll(
		epfd, evs, max,
		timeout < 0 ? -1 : hk_deadline(timeout * 1000000LL), NULL));
}

HK_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max,
			  int timeout, const sigset_t *mask)
{
	if (timeout == 0 || !hk_task())
		return HK_REAL(epoll_pwait)(epfd, evs, max, timeout, mask);
	return (int)hk_ret(task_epoll(
		epfd, evs, max,
		timeout < 0 ? -1 : hk_deadline(timeout * 1000000LL), mask));
}
