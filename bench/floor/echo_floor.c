/* echo_floor: the yardstick for the echo benchmark. A TCP echo server on
 * 127.0.0.1 with no runtime at all: one thread, one level-triggered epoll
 * set, and for each request one read and one write.
 *
 *   echo_floor [port]         (port 0 or none: any free port)
 *
 * It prints "port=<n>" once it listens and serves until killed, like
 * examples/echo_server and bench/go/echo, so bench/run drives it with the
 * same client (bench/echo) and sets it beside Go's server. No server
 * that answers each request with its own write can make fewer system calls
 * per request than this one; so its throughput against Go's shows how far
 * any server, with or without a runtime, can get ahead of Go's on this
 * machine and kernel with this client.
 *
 * Not a model server: a write that would block (a client that does not
 * read) blocks the whole loop in poll(2) until the client reads, and a
 * request larger than the buffer is echoed in pieces, one per wakeup.
 * Neither happens in the benchmark (64-byte messages, answered at once).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "echo_floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Writes all n bytes to non-blocking fd; false if the client is gone. */
static int write_all(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w > 0) {
			buf += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return 0;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else {
			return 0;
		}
	}
	return 1;
}

/* Takes every pending connection into the epoll set. */
static void accept_all(int lfd, int ep)
{
	int one = 1, c;
	while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >=
	       0) {
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct epoll_event e = { .events = EPOLLIN, .data.fd = c };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &e) != 0)
			close(c);
	}
	if (errno != EAGAIN && errno != ECONNABORTED && errno != EINTR)
		fprintf(stderr, "echo_floor: accept: %s\n", strerror(errno));
}

int main(int argc, char **argv)
{
	int port = argc > 1 ? atoi(argv[1]) : 0;
	int one = 1;
	int lfd =
		socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	if (bind(lfd, (struct sockaddr *)&sa, len) != 0 ||
	    listen(lfd, 1024) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len) != 0)
		die("listen");
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0)
		die("epoll");
	printf("port=%d\n", ntohs(sa.sin_port));
	fflush(stdout);

	static char buf[65536];
	struct epoll_event evs[256];
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == lfd) {
				accept_all(lfd, ep);
				continue;
			}
			ssize_t r = read(fd, buf, sizeof buf);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r <= 0 || !write_all(fd, buf, (size_t)r))
				close(fd); /* also leaves the epoll set */
		}
	}
}
