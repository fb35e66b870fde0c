/* The network poller's interface to the scheduler (Go's netpoll).
 *
 * netpoll.c owns the epoll instance and an eventfd that breaks a blocking
 * poll; pollfd.c owns the poll descriptors (one per fd in use, with the
 * reader and writer wait slots) and turns readiness into runnable tasks.
 * The scheduler polls without blocking before it steals, and the last M to
 * go idle polls with a timeout (the next timer), so tasks waiting on I/O
 * hold no thread and a program idle on sockets uses no CPU. design.md §30
 * explains the poller.
 */
#ifndef GMP_NETPOLL_H
#define GMP_NETPOLL_H

#include "internal.h"

/* Creates the epoll instance on first use; idempotent and thread-safe.
 * Returns 0 or -errno. */
int gmp__netpoll_init(void);
bool gmp__netpoll_inited(void);

/* Which epoll instance is live: a number > 0 that changes with every
 * gmp__netpoll_init that creates one (after a gmp_shutdown, say); 0 when
 * none is. A registration made under another number is gone. */
uint32_t gmp__netpoll_generation(void);

/* Waits for readiness: delay < 0 blocks until an event or a break, 0 does
 * not block, > 0 waits at most delay ns. The tasks that became ready are
 * appended to q, still WAITING (the caller makes them runnable, e.g. with
 * gmp__injectglist). Returns how many. Any thread, no locks held. */
int gmp__netpoll(int64_t delay, gmp__gqueue *q);

/* Makes a concurrent (or the next) blocking gmp__netpoll return early. */
void gmp__netpoll_break(void);

/* Whether any task is parked on I/O (a hint: polling is pointless if not). */
bool gmp__netpoll_any_waiters(void);
void gmp__netpoll_adjust_waiters(int delta);

/* Registers fd (edge-triggered, read and write) with pd as its cookie;
 * changes the cookie of a registered fd (which also re-arms it: the kernel
 * reports its current readiness as a new edge); unregisters it. Return 0
 * or -errno (open: -EEXIST when this file is registered under fd already,
 * -EPERM for files epoll cannot watch, such as regular files). The cookie
 * is opaque here, except that it is never the address of netpoll.c's own
 * break cookie (pollfd.c's have the top bit set). */
int gmp__netpoll_open(int fd, void *pd);
int gmp__netpoll_modify(int fd, void *pd);
int gmp__netpoll_close(int fd);

/* Closes the epoll instance (gmp_shutdown, after every task ended). */
void gmp__netpoll_shutdown(void);

/* In the child of fork() (fork.c): forgets the parent's instance. */
void gmp__netpoll_forked(void);

/* What the poller saw of a descriptor, in the poller's own terms (as Go's
 * netpoll speaks of modes 'r' and 'w', not of epoll's bits): a set of
 * these. READ and WRITE wake the reader and the writer; the other three
 * are facts about the file's end that readers act on, and that
 * gmp_poll_fd reports (as POLLRDHUP, POLLHUP and POLLERR). */
enum {
	GMP__POLL_READ = 1u << 0,  /* readable (or a pending accept) */
	GMP__POLL_WRITE = 1u << 1, /* writable */
	GMP__POLL_RDHUP = 1u << 2, /* the peer shut down its writing side */
	GMP__POLL_HUP = 1u << 3,   /* hung up: both directions are done */
	GMP__POLL_ERR = 1u << 4,   /* an error is pending on the file */
};

/* Provided by pollfd.c: the poller saw `modes` (GMP__POLL_*) for the
 * descriptor whose cookie is pd; append the tasks this readies to q. */
void gmp__pd_ready(void *pd, uint32_t modes, gmp__gqueue *q);

#endif
