/* echo_client: many connections to a TCP echo server on 127.0.0.1, each
 * a task making round trips: write a message, read it back, check it.
 *
 *   echo_client port [connections] [round_trips] [message_size]
 *
 * Defaults: 64 connections, 10000 round trips each, 64-byte messages. At
 * the end it prints the round trips per second of all connections
 * together, so it doubles as a load generator (bench/echo is the same
 * client with the benchmark's output format and an in-process server).
 * Each connection's socket is non-blocking: gmp_connect parks its task
 * through the handshake, and gmp_read parks it until the echo arrives, so
 * the tasks share GMP_MAXPROCS threads however many connections there are.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <gmp.h>

static long conns = 64, rounds = 10000, size = 64;
static uint16_t port;
static gmp_wg done = GMP_WG_INIT;
static atomic_long failed;

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

static void connection(void *arg)
{
	long id = (long)(intptr_t)arg;
	unsigned char *out = malloc((size_t)size), *in = malloc((size_t)size);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int err = fd < 0 ? -errno
			 : gmp_connect(fd, (struct sockaddr *)&sa, sizeof sa);
	int one = 1;
	if (!err)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	for (long i = 0; !err && i < rounds; i++) {
		for (long k = 0; k < size; k++)
			out[k] = (unsigned char)(id * 131 + i * 7 + k);
		ssize_t w = gmp_write(fd, out, (size_t)size);
		if (w != size)
			err = w < 0 ? (int)w : -EIO;
		else if ((err = read_full(fd, in, (size_t)size)) == 0 &&
			 memcmp(in, out, (size_t)size) != 0)
			err = -EBADMSG;
	}
	if (err) {
		fprintf(stderr, "echo_client: connection %ld: %s\n", id,
			strerror(-err));
		atomic_fetch_add(&failed, 1);
	}
	if (fd >= 0)
		gmp_close(fd);
	free(out);
	free(in);
	gmp_wg_done(&done);
}

static int client(void *arg)
{
	(void)arg;
	int64_t t0 = gmp_nanotime();
	gmp_wg_add(&done, conns);
	for (long i = 0; i < conns; i++)
		if (gmp_go(connection, (void *)(intptr_t)i) < 0)
			return 1;
	gmp_wg_wait(&done);
	double secs = (double)(gmp_nanotime() - t0) / 1e9;
	long total = conns * rounds;
	printf("connections=%ld round_trips=%ld size=%ld seconds=%.3f "
	       "round_trips_per_s=%.0f failed=%ld\n",
	       conns, total, size, secs, (double)total / secs,
	       atomic_load(&failed));
	return atomic_load(&failed) != 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: echo_client port [connections] "
				"[round_trips] [message_size]\n");
		return 2;
	}
	long p = strtol(argv[1], NULL, 10);
	if (argc > 2)
		conns = strtol(argv[2], NULL, 10);
	if (argc > 3)
		rounds = strtol(argv[3], NULL, 10);
	if (argc > 4)
		size = strtol(argv[4], NULL, 10);
	if (p <= 0 || p > 65535 || conns < 1 || rounds < 0 || size < 1) {
		fprintf(stderr, "echo_client: bad arguments\n");
		return 2;
	}
	port = (uint16_t)p;
	return gmp_main(client, NULL);
}
