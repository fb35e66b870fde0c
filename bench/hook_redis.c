/* bench=hook_redis: unmodified blocking code in tasks, against the event
 * loop it competes with and the threads it replaces. One redis-server is
 * started on a free loopback port, with one key to GET, and three clients
 * take turns at it, each with --conns connections and --n GETs in all:
 *
 *   tasks    --conns tasks, each with its own hiredis connection through
 *            the synchronous API (redisConnect, redisCommand), as a
 *            thread would use it; libgmp-hook parks them in the poller
 *   rb       redis-benchmark -c conns -n n -t get (an event loop in C)
 *   threads  --conns pthreads doing what the tasks do
 *
 * CPUs: with two or more in the affinity mask, the server runs on the
 * second and every client (this process, its tasks' --procs Ps and its
 * threads, and redis-benchmark) on the first, so that each client has
 * one CPU to the server's one; with one, all share it (cpus= says which).
 *
 * Each of --rounds rounds runs the three clients in an order that turns
 * from round to round; the figures are the medians of the rounds:
 * requests per second of each, tasks over rb and over threads (targets:
 * at least 1.0 and 1.2), and threads, the most threads the runtime had
 * while the tasks ran (target: at most --procs + 3), with the Ps that
 * sysmon moved meanwhile (retakes=, detaches=: each may have started a
 * thread). Every reply is checked. Linked with libgmp-hook.so and libgmp.so.
 *
 * --sides=tasks,rb,threads (the default) runs only those named, for a
 * profile of one (the figures of the others are then 0). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmp.h>

#include "benchutil.h"

extern char **environ;

static int port, conns, procs;
static long long total;
static int cpu_client = -1, cpu_server = -1;
static pid_t server = -1;

static void die(const char *what)
{
	fprintf(stderr, "hook_redis: %s\n", what);
	if (server > 0)
		kill(server, SIGTERM);
	exit(1);
}

/* ---- processes --------------------------------------------------------------- */

static const char *program(const char *name)
{
	static char buf[2][512];
	static int k;
	char *b = buf[k++ & 1];
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		const char *end = strchr(path, ':');
		size_t len = end ? (size_t)(end - path) : strlen(path);
		snprintf(b, sizeof buf[0], "%.*s/%s", (int)len, path, name);
		if (access(b, X_OK) == 0)
			return b;
		path += len + (end != NULL);
	}
	return NULL;
}

static void pin(pid_t pid, int cpu)
{
	if (cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(pid, sizeof set, &set);
}

/* Runs path with argv on cpu, stdout to out (or /dev/null). */
static pid_t spawn(const char *path, char *const argv[], int cpu, int out)
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pin(0, cpu);
		int null = open("/dev/null", O_RDWR);
		dup2(out >= 0 ? out : null, 1);
		dup2(null, 2);
		execve(path, argv, environ);
		_exit(127);
	}
	return pid;
}

static int free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(s, (struct sockaddr *)&sa, sizeof sa) != 0)
		die("bind");
	socklen_t len = sizeof sa;
	getsockname(s, (struct sockaddr *)&sa, &len);
	close(s);
	return ntohs(sa.sin_port);
}

/* ---- one client's requests ---------------------------------------------------- */

static atomic_long failures;

/* One connection's share of the GETs; 0 or -1. */
static int client_run(redisContext *c, long long n)
{
	for (long long i = 0; i < n; i++) {
		redisReply *r = redisCommand(c, "GET key:__rand_int__");
		bool ok = r && r->type == REDIS_REPLY_STRING && r->len == 3 &&
			  !memcmp(r->str, "xxx", 3);
		if (r)
			freeReplyObject(r);
		if (!ok) {
			atomic_fetch_add(&failures, 1);
			return -1;
		}
	}
	return 0;
}

static redisContext *client_connect(void)
{
	redisContext *c = redisConnect("127.0.0.1", port);
	if (!c || c->err) {
		atomic_fetch_add(&failures, 1);
		if (c)
			redisFree(c);
		return NULL;
	}
	return c;
}

static long long share(int i)
{
	return total / conns + (i < total % conns);
}

/* ---- tasks --------------------------------------------------------------------- */

static gmp_wg ready_wg, start_wg, done_wg;
static int64_t t_start, t_end;
static atomic_int run_done;

static void task_client(void *arg)
{
	int i = (int)(intptr_t)arg;
	redisContext *c = client_connect();
	gmp_wg_done(&ready_wg);
	gmp_wg_wait(&start_wg);
	if (c) {
		client_run(c, share(i));
		redisFree(c);
	}
	gmp_wg_done(&done_wg);
}

static int tasks_main(void *arg)
{
	(void)arg;
	gmp_wg_add(&ready_wg, conns);
	gmp_wg_add(&start_wg, 1);
	gmp_wg_add(&done_wg, conns);
	for (int i = 0; i < conns; i++)
		if (gmp_go(task_client, (void *)(intptr_t)i) <= 0)
			die("gmp_go");
	gmp_wg_wait(&ready_wg);
	t_start = bench_now_ns();
	gmp_wg_done(&start_wg);
	gmp_wg_wait(&done_wg);
	t_end = bench_now_ns();
	atomic_store(&run_done, 1);
	return 0;
}

static int64_t threads_max;

/* The runtime's threads, sampled while the tasks run. */
static void *sampler(void *arg)
{
	(void)arg;
	while (!atomic_load(&run_done)) {
		gmp_stats st;
		gmp_stats_read(&st);
		if ((int64_t)st.threads_total > threads_max)
			threads_max = (int64_t)st.threads_total;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* What moved Ps between threads while the tasks ran, summed over the
 * rounds: each such move may have started a thread. */
static uint64_t retakes, detaches;

static double run_tasks(void)
{
	atomic_store(&run_done, 0);
	gmp_stats before, after;
	gmp_stats_read(&before);
	pthread_t s;
	pthread_create(&s, NULL, sampler, NULL);
	if (gmp_main(tasks_main, NULL) != 0)
		die("gmp_main");
	pthread_join(s, NULL);
	gmp_stats_read(&after);
	retakes += after.retakes - before.retakes;
	detaches += after.detaches - before.detaches;
	return total * 1e9 / (double)(t_end - t_start);
}

/* ---- threads ------------------------------------------------------------------- */

static pthread_barrier_t barrier;

static void *thread_client(void *arg)
{
	int i = (int)(intptr_t)arg;
	redisContext *c = client_connect();
	pthread_barrier_wait(&barrier);
	if (c) {
		client_run(c, share(i));
		redisFree(c);
	}
	return NULL;
}

static double run_threads(void)
{
	pthread_t *t = calloc((size_t)conns, sizeof *t);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_barrier_init(&barrier, NULL, (unsigned)conns + 1);
	for (int i = 0; i < conns; i++)
		if (pthread_create(&t[i], &attr, thread_client,
				   (void *)(intptr_t)i) != 0)
			die("pthread_create");
	pthread_barrier_wait(&barrier);
	int64_t t0 = bench_now_ns();
	for (int i = 0; i < conns; i++)
		pthread_join(t[i], NULL);
	int64_t t1 = bench_now_ns();
	pthread_barrier_destroy(&barrier);
	free(t);
	return total * 1e9 / (double)(t1 - t0);
}

/* ---- redis-benchmark ------------------------------------------------------------ */

static double run_rb(const char *rb)
{
	char p[16], c[16], n[32];
	snprintf(p, sizeof p, "%d", port);
	snprintf(c, sizeof c, "%d", conns);
	snprintf(n, sizeof n, "%lld", total);
	char *argv[] = { "redis-benchmark",
			 "-h",
			 "127.0.0.1",
			 "-p",
			 p,
			 "-c",
			 c,
			 "-n",
			 n,
			 "-t",
			 "get",
			 "--csv",
			 NULL };
	int out[2];
	if (pipe(out) != 0)
		die("pipe");
	pid_t pid = spawn(rb, argv, cpu_client, out[1]);
	close(out[1]);
	char buf[4096];
	size_t got = 0;
	ssize_t r;
	while (got < sizeof buf - 1 &&
	       (r = read(out[0], buf + got, sizeof buf - 1 - got)) > 0)
		got += (size_t)r;
	buf[got] = 0;
	close(out[0]);
	int status;
	waitpid(pid, &status, 0);
	/* "GET","123456.78",... */
	char *g = strstr(buf, "\"GET\",\"");
	if (!g || !WIFEXITED(status) || WEXITSTATUS(status))
		die("redis-benchmark failed");
	return strtod(g + 7, NULL);
}

/* ---- main ------------------------------------------------------------------------ */

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

static void set_key(void)
{
	redisContext *c = redisConnect("127.0.0.1", port);
	if (!c || c->err)
		die("connect to redis-server");
	redisReply *r = redisCommand(c, "SET key:__rand_int__ xxx");
	if (!r || r->type != REDIS_REPLY_STATUS)
		die("SET");
	freeReplyObject(r);
	redisFree(c);
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 200000);
	procs = a.procs;
	total = a.n;
	conns = (int)bench_flag_ll(argc, argv, "conns", 100);
	int rounds = (int)bench_flag_ll(argc, argv, "rounds", 3);
	if (conns < 1 || rounds < 1 || rounds > 64)
		die("--conns and --rounds must be at least 1 (rounds <= 64)");
	signal(SIGPIPE, SIG_IGN);
	const char *rs = program("redis-server");
	const char *rb = program("redis-benchmark");
	if (!rs || !rb)
		die("redis-server and redis-benchmark must be installed "
		    "(Debian: redis-server, redis-tools)");
	if (!gmp_hook_active())
		die("libgmp-hook is not active");

	/* The CPUs: the server on the second of the mask, clients on the
	 * first. */
	cpu_set_t mask;
	sched_getaffinity(0, sizeof mask, &mask);
	for (int i = 0; i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, &mask))
			continue;
		if (cpu_client < 0)
			cpu_client = i;
		else if (cpu_server < 0)
			cpu_server = i;
	}
	if (cpu_server < 0)
		cpu_client = -1; /* one CPU: all share it */
	pin(0, cpu_client);

	port = free_port();
	char p[16], mc[16];
	snprintf(p, sizeof p, "%d", port);
	snprintf(mc, sizeof mc, "%d", conns + 100);
	char *sargv[] = { "redis-server",
			  "--port",
			  p,
			  "--bind",
			  "127.0.0.1",
			  "--save",
			  "",
			  "--appendonly",
			  "no",
			  "--maxclients",
			  mc,
			  "--loglevel",
			  "warning",
			  NULL };
	server = spawn(rs, sargv, cpu_server, -1);
	for (int i = 0;; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_port = htons((uint16_t)port),
					  .sin_addr.s_addr =
						  htonl(INADDR_LOOPBACK) };
		int r = connect(s, (struct sockaddr *)&sa, sizeof sa);
		close(s);
		if (r == 0)
			break;
		if (i > 500)
			die("redis-server did not start");
		usleep(10000);
	}
	set_key();

	gmp_config cfg = { .maxprocs = procs };
	if (gmp_init(&cfg) != 0)
		die("gmp_init");
	const char *sides = bench_flag(argc, argv, "sides");
	if (!sides)
		sides = "tasks,rb,threads";
	double rt[64] = { 0 }, rr[64] = { 0 }, rth[64] = { 0 };
	double vs_rb[64] = { 0 }, vs_th[64] = { 0 };
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < 3; k++) {
			switch ((k + r) % 3) {
			case 0:
				if (strstr(sides, "tasks"))
					rt[r] = run_tasks();
				break;
			case 1:
				if (strstr(sides, "rb"))
					rr[r] = run_rb(rb);
				break;
			case 2:
				if (strstr(sides, "threads"))
					rth[r] = run_threads();
				break;
			}
		}
		vs_rb[r] = rr[r] > 0 ? rt[r] / rr[r] : 0;
		vs_th[r] = rth[r] > 0 ? rt[r] / rth[r] : 0;
	}
	gmp_shutdown();
	kill(server, SIGTERM);
	waitpid(server, NULL, 0);
	if (atomic_load(&failures))
		die("some replies were wrong");
	char cpus[32];
	if (cpu_client >= 0)
		snprintf(cpus, sizeof cpus, "%d/%d", cpu_client, cpu_server);
	else
		snprintf(cpus, sizeof cpus, "shared");
	printf("bench=hook_redis procs=%d n=%lld conns=%d cpus=%s "
	       "rps_tasks=%.0f rps_rb=%.0f rps_threads=%.0f vs_rb=%.3f "
	       "vs_threads=%.3f threads=%lld retakes=%llu detaches=%llu\n",
	       procs, total, conns, cpus, median(rt, rounds),
	       median(rr, rounds), median(rth, rounds), median(vs_rb, rounds),
	       median(vs_th, rounds), (long long)threads_max,
	       (unsigned long long)retakes, (unsigned long long)detaches);
	return 0;
}
