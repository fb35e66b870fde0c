/* bench=deadline_churn: what a read deadline set before every read costs a
 * request-response server. C connections over loopback TCP (default 8),
 * each a client task making round trips of 64 bytes to a server task that
 * reads a request and writes it back. In "deadline" segments the server
 * calls gmp_set_deadline(fd, GMP_READ, now + 10 s) before every read (Go's
 * idiom: conn.SetReadDeadline before each Read); in "plain" segments it
 * does not. The segments alternate in one process (--segments, default
 * 10, half of each kind), so that both kinds see the same machine; each
 * figure is the median of its kind's segments, and ratio is deadline /
 * plain (a C-only comparison: lower is better, 1.0 means free).
 *
 *   deadline_churn [--procs=P] [--n=N] [--conns=C] [--segments=S]
 *                  [--only=0|1]   (every segment plain / with deadlines)
 *
 * Output: bench=deadline_churn procs=<p> n=<round trips in all>
 *         ns_per_rt_plain=<x> ns_per_rt_deadline=<y> ratio=<y/x> conns=<c>
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

#define MAXSEG 64

static long long conns = 8, segments = 10, per_seg;
static int listener;
static uint16_t port;
static atomic_int use_deadline;
static atomic_int failures;
static gmp_wg connected, seg_done;
static gmp_chan **tokens; /* one per client: a segment may start */

static void nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	bool had = false;
	for (;;) {
		if (atomic_load_explicit(&use_deadline, memory_order_relaxed)) {
			gmp_set_deadline(fd, GMP_READ,
					 gmp_nanotime() + 10LL * 1000000000);
			had = true;
		} else if (had) {
			gmp_set_deadline(fd, GMP_READ, 0);
			had = false;
		}
		ssize_t n = gmp_read(fd, buf, sizeof buf);
		if (n <= 0 || gmp_write(fd, buf, (size_t)n) != n)
			break;
	}
	gmp_close(fd);
}

static void acceptor(void *arg)
{
	(void)arg;
	for (long long i = 0; i < conns; i++) {
		int fd = gmp_accept(listener, NULL, NULL);
		if (fd < 0)
			break;
		nodelay(fd);
		gmp_go(serve, (void *)(intptr_t)fd);
	}
}

static void client(void *arg)
{
	long long id = (long long)(intptr_t)arg;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || gmp_connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		fprintf(stderr, "deadline_churn: connect failed\n");
		exit(1);
	}
	nodelay(fd);
	gmp_wg_done(&connected);
	unsigned char out[64], in[64];
	while (gmp_chan_recv(tokens[id], NULL) == 0) {
		for (long long i = 0; i < per_seg; i++) {
			memset(out, (int)((id + i) & 0xff), sizeof out);
			if (gmp_write(fd, out, sizeof out) != sizeof out) {
				atomic_fetch_add(&failures, 1);
				break;
			}
			size_t got = 0;
			while (got < sizeof in) {
				ssize_t r =
					gmp_read(fd, in + got, sizeof in - got);
				if (r <= 0) {
					atomic_fetch_add(&failures, 1);
					got = sizeof in;
					i = per_seg;
				} else {
					got += (size_t)r;
				}
			}
		}
		gmp_wg_done(&seg_done);
	}
	gmp_close(fd);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bench_args args;
static int only = -1; /* --only=0|1: every segment one kind (profiling) */

static int run(void *arg)
{
	(void)arg;
	listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	if (listener < 0 || bind(listener, (struct sockaddr *)&sa, len) != 0 ||
	    listen(listener, 1024) != 0 ||
	    getsockname(listener, (struct sockaddr *)&sa, &len) != 0)
		return 1;
	port = ntohs(sa.sin_port);
	tokens = calloc((size_t)conns, sizeof *tokens);
	for (long long i = 0; i < conns; i++)
		tokens[i] = gmp_chan_new(0, 1);
	gmp_go(acceptor, NULL);
	gmp_wg_add(&connected, conns);
	for (long long i = 0; i < conns; i++)
		gmp_go(client, (void *)(intptr_t)i);
	gmp_wg_wait(&connected);

	double plain[MAXSEG], dl[MAXSEG];
	int np = 0, nd = 0;
	/* A warm-up segment of each kind first, not counted. */
	for (long long s = -2; s < segments; s++) {
		bool with = only >= 0 ? only != 0 : (s & 1) != 0;
		atomic_store(&use_deadline, with);
		gmp_wg_add(&seg_done, conns);
		int64_t t0 = bench_now_ns();
		for (long long i = 0; i < conns; i++)
			gmp_chan_send(tokens[i], NULL);
		gmp_wg_wait(&seg_done);
		double ns = (double)(bench_now_ns() - t0) /
			    (double)(per_seg * conns);
		if (s < 0)
			continue;
		if (with)
			dl[nd++] = ns;
		else
			plain[np++] = ns;
	}
	for (long long i = 0; i < conns; i++)
		gmp_chan_close(tokens[i]);
	gmp_close(listener);
	if (atomic_load(&failures))
		return 1;
	if (!np)
		plain[np++] = dl[0];
	if (!nd)
		dl[nd++] = plain[0];
	double p = median(plain, np), d = median(dl, nd);
	printf("bench=deadline_churn procs=%d n=%lld ns_per_rt_plain=%.0f "
	       "ns_per_rt_deadline=%.0f ratio=%.3f conns=%lld\n",
	       args.procs, per_seg * conns * segments, p, d, d / p, conns);
	return 0;
}

int main(int argc, char **argv)
{
	args = bench_parse(argc, argv, 2, 200000);
	conns = bench_flag_ll(argc, argv, "conns", conns);
	segments = bench_flag_ll(argc, argv, "segments", segments);
	only = (int)bench_flag_ll(argc, argv, "only", -1);
	if (conns < 1 || segments < 2 || segments > MAXSEG) {
		fprintf(stderr, "deadline_churn: bad --conns or --segments\n");
		return 2;
	}
	per_seg = args.n / (conns * segments);
	if (per_seg < 1)
		per_seg = 1;
	gmp_config cfg = { .maxprocs = args.procs };
	gmp_init(&cfg);
	int r = gmp_main(run, NULL);
	gmp_shutdown();
	return r;
}
