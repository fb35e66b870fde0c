/* bench=echo: C connections, each a task, make R round trips of S bytes
 * to a TCP echo server on 127.0.0.1 (default 64 × 10,000 × 64 bytes):
 * write S bytes, read the S bytes back, check them, repeat. rt_per_s is
 * the round trips per second of all connections together, timed from the
 * moment every connection is established until the last one finishes.
 *
 *   echo [--procs=P] [--conns=C] [--rounds=R] [--size=S] [--n=N]
 *        [--port=PORT]
 *
 * --procs defaults to the number of online CPUs.
 *
 * Without --port, our own echo server (a task per connection, as
 * examples/echo_server.c) runs in this process, on the same Ps as the
 * client. With --port=PORT the client drives an external server instead:
 * examples/echo_server, or the Go server bench/go/echo, so that both
 * servers meet the very same client. --n sets the total round trips
 * (R = N / C). Every socket sets TCP_NODELAY, as Go's net package does.
 *
 * Output: bench=echo procs=<p> n=<round trips total> rt_per_s=<x>
 *         conns=<c> size=<s> server=<in-process|external>
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

static long long conns = 64, rounds = 10000, size = 64;
static uint16_t port;
static bool in_process;
static int listener = -1;

static gmp_wg connected, finished;
static gmp_chan *go_signal; /* closed to start every client at once */
static int64_t t_start, t_end;
static atomic_int failures;

static void fail(const char *what, long long r)
{
	fprintf(stderr, "echo: %s: %lld\n", what, r);
	atomic_fetch_add(&failures, 1);
}

static void nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ---- the server (in-process mode) ------------------------------------------ */

static void serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	for (;;) {
		ssize_t n = gmp_read(fd, buf, sizeof buf);
		if (n <= 0 || gmp_write(fd, buf, (size_t)n) != n)
			break;
	}
	gmp_close(fd);
}

static void acceptor(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = gmp_accept(listener, NULL, NULL);
		if (fd < 0)
			break; /* -EBADF once main gmp_close()s the listener */
		nodelay(fd);
		gmp_go(serve, (void *)(intptr_t)fd);
	}
}

static int start_server(void)
{
	listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	if (listener < 0 || bind(listener, (struct sockaddr *)&sa, len) != 0 ||
	    listen(listener, 1024) != 0 ||
	    getsockname(listener, (struct sockaddr *)&sa, &len) != 0)
		return -1;
	port = ntohs(sa.sin_port);
	gmp_go(acceptor, NULL);
	return 0;
}

/* ---- the client ------------------------------------------------------------- */

static int read_full(int fd, unsigned char *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = gmp_read(fd, buf + got, n - got);
		if (r <= 0)
			return r == 0 ? -ECONNRESET : (int)r;
		got += (size_t)r;
	}
	return 0;
}

static void client(void *arg)
{
	long long id = (long long)(intptr_t)arg;
	unsigned char *out = malloc((size_t)size), *in = malloc((size_t)size);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int r = fd < 0 ? -1
		       : gmp_connect(fd, (struct sockaddr *)&sa, sizeof sa);
	if (r != 0)
		fail("connect", r);
	nodelay(fd);
	gmp_wg_done(&connected);
	gmp_chan_recv(go_signal, NULL); /* -EPIPE: the start signal */
	for (long long i = 0; r == 0 && i < rounds; i++) {
		memset(out, (int)((id + i) & 0xff), (size_t)size);
		out[0] = (unsigned char)i;
		ssize_t w = gmp_write(fd, out, (size_t)size);
		if (w != size) {
			fail("write", w);
			break;
		}
		if ((r = read_full(fd, in, (size_t)size)) != 0) {
			fail("read", r);
			break;
		}
		if (memcmp(in, out, (size_t)size) != 0) {
			fail("data differs at round", i);
			break;
		}
	}
	if (fd >= 0)
		gmp_close(fd);
	free(out);
	free(in);
	gmp_wg_done(&finished);
}

static int bench_main(void *arg)
{
	(void)arg;
	if (in_process && start_server() != 0) {
		perror("echo: server");
		return 1;
	}
	go_signal = gmp_chan_new(0, 0);
	gmp_wg_add(&connected, conns);
	gmp_wg_add(&finished, conns);
	for (long long i = 0; i < conns; i++)
		gmp_go(client, (void *)(intptr_t)i);
	gmp_wg_wait(&connected);
	t_start = bench_now_ns();
	gmp_chan_close(go_signal);
	gmp_wg_wait(&finished);
	t_end = bench_now_ns();
	if (in_process)
		gmp_close(listener); /* the acceptor leaves */
	return 0;
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	bench_args a =
		bench_parse(argc, argv, ncpu > 0 ? (int)ncpu : 1, 640000);
	conns = bench_flag_ll(argc, argv, "conns", 64);
	size = bench_flag_ll(argc, argv, "size", 64);
	rounds = bench_flag_ll(argc, argv, "rounds", 10000);
	if (bench_flag(argc, argv, "n"))
		rounds = a.n / (conns ? conns : 1);
	long long p = bench_flag_ll(argc, argv, "port", 0);
	in_process = p == 0;
	port = (uint16_t)p;
	if (conns < 1 || rounds < 1 || size < 1 || p > 65535) {
		fprintf(stderr, "echo: bad arguments\n");
		return 2;
	}
	gmp_config c = { .maxprocs = a.procs };
	if (gmp_init(&c) != 0 || gmp_main(bench_main, NULL) != 0)
		return 1;
	gmp_shutdown();
	gmp_chan_free(go_signal);
	if (atomic_load(&failures))
		return 1;
	long long n = conns * rounds;
	double secs = (double)(t_end - t_start) / 1e9;
	printf("bench=echo procs=%d n=%lld rt_per_s=%.0f conns=%lld size=%lld "
	       "server=%s\n",
	       a.procs, n, (double)n / secs, conns, size,
	       in_process ? "in-process" : "external");
	return 0;
}
