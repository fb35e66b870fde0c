/* echo_server: a TCP echo server on 127.0.0.1, one task per connection.
 *
 *   echo_server [port]        (port 0 or none: any free port)
 *
 * It prints "port=<n>" once it listens and serves until killed. The
 * listening socket is non-blocking, so gmp_accept parks the acceptor task
 * in the network poller, and the sockets it returns are non-blocking too
 * (they inherit the listener's O_NONBLOCK): every gmp_read and gmp_write
 * on them parks its task while the socket is not ready, so ten thousand
 * idle connections hold ten thousand small stacks and no threads.
 * Set GMP_MAXPROCS to choose how many threads run tasks at once.
 *
 * Try it with examples/echo_client, or drive it with the benchmark:
 *   build/examples/echo_server 9000 &
 *   build/bench/echo --port=9000
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmp.h>

/* One connection: read what comes, write it back, until EOF. */
static void serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	for (;;) {
		ssize_t n = gmp_read(fd, buf, sizeof buf);
		if (n <= 0)
			break; /* 0: the client hung up; < 0: -errno */
		if (gmp_write(fd, buf, (size_t)n) != n)
			break; /* gmp_write writes all of it, or fails */
	}
	gmp_close(fd);
}

static int server(void *arg)
{
	int port = (int)(intptr_t)arg;
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, len) != 0 ||
	    listen(lfd, 1024) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len) != 0) {
		perror("echo_server");
		return 1;
	}
	printf("port=%d\n", ntohs(sa.sin_port));
	fflush(stdout);
	for (;;) {
		int fd = gmp_accept(lfd, NULL, NULL);
		if (fd < 0) {
			fprintf(stderr, "echo_server: accept: %s\n",
				strerror(-fd));
			if (fd == -EMFILE || fd == -ENFILE) {
				/* Out of descriptors: let some connections end. */
				gmp_sleep(10 * 1000 * 1000);
				continue;
			}
			return 1;
		}
		/* Small messages go out at once, as Go's net does. */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (gmp_go(serve, (void *)(intptr_t)fd) < 0)
			gmp_close(fd);
	}
}

int main(int argc, char **argv)
{
	int port = argc > 1 ? atoi(argv[1]) : 0;
	if (port < 0 || port > 65535) {
		fprintf(stderr, "usage: echo_server [port]\n");
		return 2;
	}
	return gmp_main(server, (void *)(intptr_t)port);
}
