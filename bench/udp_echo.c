/* bench=udp_echo: C clients, each a task with a UDP socket of its own,
 * make round trips of S-byte datagrams (default 16 clients, 200,000 round
 * trips in all, 64 bytes) to a UDP echo server on 127.0.0.1: gmp_sendto,
 * gmp_recvfrom of the answer, check it, repeat. The server runs in a
 * process of its own (this program again, with --serve), as one task
 * doing gmp_recvfrom and gmp_sendto back to the sender's address, with
 * the same --procs. rt_per_s is the round trips per second of all clients
 * together; server_cpu_ns_per_rt the server process's CPU time (user and
 * system, from /proc) per round trip over the same interval. The Go twin
 * (bench/go/udp_echo) is the same program on package net.
 *
 *   udp_echo [--procs=P] [--n=N] [--conns=C] [--size=S]
 *
 * Each client sets one read deadline 60 s ahead, so that a datagram lost
 * on the way fails the run instead of hanging it.
 *
 * Output: bench=udp_echo procs=<p> n=<round trips> rt_per_s=<x>
 *         server_cpu_ns_per_rt=<y> conns=<c> size=<s>
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

static long long conns = 16, rounds, size = 64;
static struct sockaddr_in server;
static gmp_wg connected, finished;
static gmp_chan *go_signal;
static atomic_int failures;

static int udp_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		perror("udp_echo: socket");
		exit(1);
	}
	return fd;
}

/* ---- the server (--serve) ----------------------------------------------------- */

static void serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[65536];
	for (;;) {
		struct sockaddr_storage from;
		socklen_t len = sizeof from;
		ssize_t n = gmp_recvfrom(fd, buf, sizeof buf, 0,
					 (struct sockaddr *)&from, &len);
		if (n < 0) {
			fprintf(stderr, "udp_echo server: recvfrom %zd\n", n);
			exit(1);
		}
		gmp_sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from,
			   len);
	}
}

static int serve_main(void *arg)
{
	(void)arg;
	int fd = udp_socket();
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &len);
	printf("port=%d\n", ntohs(sa.sin_port));
	fflush(stdout);
	serve((void *)(intptr_t)fd); /* until killed */
	return 0;
}

/* ---- the client ---------------------------------------------------------------- */

static void client(void *arg)
{
	long long id = (long long)(intptr_t)arg;
	unsigned char *out = malloc((size_t)size), *in = malloc((size_t)size);
	int fd = udp_socket();
	gmp_set_deadline(fd, GMP_READ, gmp_nanotime() + 60LL * 1000000000);
	gmp_wg_done(&connected);
	gmp_chan_recv(go_signal, NULL); /* -EPIPE: the start signal */
	for (long long i = 0; i < rounds; i++) {
		memset(out, (int)((id + i) & 0xff), (size_t)size);
		out[0] = (unsigned char)i;
		ssize_t w = gmp_sendto(fd, out, (size_t)size, 0,
				       (struct sockaddr *)&server,
				       sizeof server);
		ssize_t r = w == size ? gmp_recvfrom(fd, in, (size_t)size, 0,
						     NULL, NULL)
				      : w;
		if (r != size || memcmp(in, out, (size_t)size) != 0) {
			fprintf(stderr, "udp_echo: round %lld: %zd\n", i, r);
			atomic_fetch_add(&failures, 1);
			break;
		}
	}
	gmp_close(fd);
	free(out);
	free(in);
	gmp_wg_done(&finished);
}

/* The CPU ticks (user + system) of process pid so far, or -1. */
static long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	if (!p ||
	    sscanf(p + 2,
		   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
		   &st) != 2)
		return -1;
	return (long long)(ut + st);
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 2, 200000);
	conns = bench_flag_ll(argc, argv, "conns", conns);
	size = bench_flag_ll(argc, argv, "size", size);
	gmp_config cfg = { .maxprocs = a.procs };
	if (bench_flag(argc, argv, "serve")) {
		gmp_init(&cfg);
		return gmp_main(serve_main, NULL);
	}
	if (conns < 1 || size < 1 || size > 65507) {
		fprintf(stderr, "udp_echo: bad --conns or --size\n");
		return 2;
	}
	rounds = a.n / conns > 0 ? a.n / conns : 1;

	/* The server: this program with --serve, its stdout a pipe. */
	int p[2];
	if (pipe(p) != 0)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		char procs[32];
		snprintf(procs, sizeof procs, "--procs=%d", a.procs);
		execl("/proc/self/exe", argv[0], "--serve=1", procs,
		      (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *pf = fdopen(p[0], "r");
	int port = 0;
	if (!pf || fscanf(pf, "port=%d", &port) != 1) {
		fprintf(stderr, "udp_echo: the server did not start\n");
		return 1;
	}
	server = (struct sockaddr_in){ .sin_family = AF_INET,
				       .sin_port = htons((uint16_t)port),
				       .sin_addr.s_addr =
					       htonl(INADDR_LOOPBACK) };

	gmp_init(&cfg);
	go_signal = gmp_chan_new(0, 0);
	gmp_wg_add(&connected, conns);
	gmp_wg_add(&finished, conns);
	for (long long i = 0; i < conns; i++)
		gmp_go(client, (void *)(intptr_t)i);
	gmp_wg_wait(&connected);
	long long c0 = cpu_ticks(pid);
	int64_t t0 = bench_now_ns();
	gmp_chan_close(go_signal);
	gmp_wg_wait(&finished);
	int64_t t1 = bench_now_ns();
	long long c1 = cpu_ticks(pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	gmp_shutdown();
	if (atomic_load(&failures))
		return 1;
	long long total = rounds * conns;
	double secs = (double)(t1 - t0) / 1e9;
	double cpu_ns = c0 < 0 || c1 < 0 ? -1
					 : (double)(c1 - c0) * 1e9 /
						   (double)sysconf(_SC_CLK_TCK);
	printf("bench=udp_echo procs=%d n=%lld rt_per_s=%.0f "
	       "server_cpu_ns_per_rt=%.0f conns=%lld size=%lld\n",
	       a.procs, total, (double)total / secs, cpu_ns / (double)total,
	       conns, size);
	return 0;
}
