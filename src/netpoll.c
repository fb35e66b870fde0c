/* The epoll side of the network poller (netpoll.h; design.md §30.1). */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "netpoll.h"
#include "pollfd.h"
#include "sys.h"
#include "uring.h"

static struct {
	gmp__mutex lock;          /* init and shutdown */
	volatile uint32_t inited; /* atomic: epfd and evfd are valid */
	int epfd, evfd;
	volatile uint32_t waiters;  /* atomic: tasks parked on I/O */
	volatile uint32_t breaking; /* atomic: a break is in flight */
	volatile uint32_t pwait2;   /* 0 unknown, 1 usable, 2 ENOSYS */
	volatile uint32_t gen;      /* atomic: bumped by every init (under
				      lock, before inited is published) */
} np;

/* The eventfd's cookie: an address no poll descriptor can have. */
static char break_cookie;

bool gmp__netpoll_inited(void)
{
	return gmp__load32_acq(&np.inited) != 0;
}

int gmp__netpoll_init(void)
{
	if (gmp__netpoll_inited())
		return 0;
	int saved = errno, err = 0;
	gmp__lock(&np.lock);
	if (!np.inited) {
		np.epfd = gmp__sys_epoll_create1(EPOLL_CLOEXEC);
		np.evfd = gmp__sys_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLET,
					  .data.ptr = &break_cookie };
		if (np.epfd < 0 || np.evfd < 0 ||
		    epoll_ctl(np.epfd, EPOLL_CTL_ADD, np.evfd, &ev) != 0) {
			err = np.epfd < 0   ? np.epfd
			      : np.evfd < 0 ? np.evfd
					    : -errno;
			if (np.epfd >= 0)
				gmp__sys_close(np.epfd);
			if (np.evfd >= 0)
				gmp__sys_close(np.evfd);
		} else {
			/* A new epoll instance: registrations made with an
			 * earlier one (before a gmp_shutdown) are void, and
			 * pollfd.c tells them apart by this number. */
			gmp__store32_rlx(&np.gen, np.gen + 1 ? np.gen + 1 : 1);
			/* The hook library's close must not reach them. */
			gmp__pd_own(np.epfd, true);
			gmp__pd_own(np.evfd, true);
			gmp__store32_rel(&np.inited, 1); /* publishes the fds */
		}
	}
	gmp__unlock(&np.lock);
	errno = saved;
	return err;
}

void gmp__netpoll_shutdown(void)
{
	gmp__lock(&np.lock);
	if (np.inited) {
		gmp__pd_own(np.epfd, false);
		gmp__pd_own(np.evfd, false);
		gmp__sys_close(np.epfd);
		gmp__sys_close(np.evfd);
		gmp__store32_rel(&np.inited, 0);
		gmp__store32_rel(&np.waiters, 0);
		gmp__store32_rel(&np.breaking, 0);
	}
	gmp__unlock(&np.lock);
}

uint32_t gmp__netpoll_generation(void)
{
	/* acquire: pairs with init's release of inited, which follows the
	 * store to gen */
	if (!gmp__netpoll_inited())
		return 0;
	return gmp__load32_rlx(&np.gen);
}

bool gmp__netpoll_any_waiters(void)
{
	return gmp__load32_rlx(&np.waiters) != 0;
}

void gmp__netpoll_adjust_waiters(int delta)
{
	if (delta)
		gmp__add32_full(&np.waiters, delta);
}

void gmp__netpoll_break(void)
{
	if (!gmp__netpoll_inited())
		return;
	/* One write is enough until the poller consumes it. */
	if (!gmp__cas32_full(&np.breaking, 0, 1))
		return;
	uint64_t one = 1;
	while (gmp__sys_write(np.evfd, &one, sizeof one) == -EINTR)
		;
}

/* One epoll_ctl on fd, for pd (NULL for a delete): 0 or -errno, with the
 * caller's errno left alone. Every registration is edge-triggered for both
 * directions and hang-ups. */
static int ctl(int op, int fd, void *pd)
{
	struct epoll_event ev = {
		.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
		.data.ptr = pd,
	};
	int saved = errno;
	int r = epoll_ctl(np.epfd, op, fd, &ev) == 0 ? 0 : -errno;
	errno = saved;
	return r;
}

int gmp__netpoll_open(int fd, void *pd)
{
	return ctl(EPOLL_CTL_ADD, fd, pd);
}

int gmp__netpoll_modify(int fd, void *pd)
{
	return ctl(EPOLL_CTL_MOD, fd, pd);
}

int gmp__netpoll_close(int fd)
{
	return ctl(EPOLL_CTL_DEL, fd, NULL);
}

/* The modes of netpoll.h for the bits epoll reported. Our registrations
 * ask for EPOLLIN, EPOLLOUT and EPOLLRDHUP, and epoll adds EPOLLHUP and
 * EPOLLERR to every one: these five are all it can report. */
static uint32_t modes_of(uint32_t ev)
{
	uint32_t modes = 0;
	if (ev & EPOLLIN)
		modes |= GMP__POLL_READ;
	if (ev & EPOLLOUT)
		modes |= GMP__POLL_WRITE;
	if (ev & EPOLLRDHUP)
		modes |= GMP__POLL_RDHUP;
	if (ev & EPOLLHUP)
		modes |= GMP__POLL_HUP;
	if (ev & EPOLLERR)
		modes |= GMP__POLL_ERR;
	return modes;
}

/* epoll_pwait2 (Linux 5.11) takes a nanosecond timeout; qemu-user and old
 * kernels lack it, and then epoll_wait's milliseconds are rounded up. The
 * count, or -errno. */
static int epoll_wait_ns(struct epoll_event *evs, int n, int64_t delay)
{
#ifdef SYS_epoll_pwait2
	if (gmp__load32_rlx(&np.pwait2) != 2) {
		struct timespec ts, *tsp = NULL;
		if (delay >= 0) {
			ts.tv_sec = delay / 1000000000;
			ts.tv_nsec = delay % 1000000000;
			tsp = &ts;
		}
		long r = syscall(SYS_epoll_pwait2, np.epfd, evs, n, tsp, NULL,
				 (size_t)8);
		if (r >= 0)
			return (int)r;
		if (errno != ENOSYS)
			return -errno;
		gmp__store32_rlx(&np.pwait2, 2);
	}
#endif
	int ms = -1;
	if (delay == 0)
		ms = 0;
	else if (delay > 0)
		ms = delay >= (int64_t)1e15 ? 1000000000
					    : (int)((delay + 999999) / 1000000);
	return gmp__sys_epoll_wait(np.epfd, evs, n, ms);
}

int gmp__netpoll(int64_t delay, gmp__gqueue *q)
{
	if (!gmp__netpoll_inited())
		return 0;
	struct epoll_event evs[128];
	int saved = errno, count = 0;
	int n = epoll_wait_ns(evs, 128, delay);
	if (n < 0) {
		if (n != -EINTR)
			gmp__throw("netpoll: epoll_wait failed (errno %d)", -n);
		n = 0;
	}
	for (int i = 0; i < n; i++) {
		if (evs[i].data.ptr == &break_cookie) {
			uint64_t v;
			while (gmp__sys_read(np.evfd, &v, sizeof v) == -EINTR)
				;
			gmp__store32_rel(&np.breaking, 0);
			continue;
		}
		if (evs[i].data.ptr == &gmp__uring_cookie) {
			count += gmp__uring_evfd_ready(q);
			continue;
		}
		int64_t before = q->n;
		gmp__pd_ready(evs[i].data.ptr, modes_of(evs[i].events), q);
		count += (int)(q->n - before);
	}
	errno = saved;
	return count;
}

/* In the child of fork (fork.c): the epoll instance and eventfd are the
 * parent's, shared through the copied descriptors. Close our copies (the
 * parent keeps its own) and forget them, so a gmp_init in the child makes
 * its own; waiters and locks start afresh. */
void gmp__netpoll_forked(void)
{
	np.lock = (gmp__mutex)GMP__MUTEX_INIT;
	if (np.inited) {
		gmp__sys_close(np.epfd);
		gmp__sys_close(np.evfd);
	}
	np.inited = 0;
	np.waiters = 0;
	np.breaking = 0;
}
