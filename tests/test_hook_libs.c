/* libgmp-hook under real libraries, unmodified (Debian's builds), driving
 * real servers that the tests start on free loopback ports and stop
 * (design.md §12, §32):
 *
 *   hiredis' synchronous API against redis-server, a connection per task;
 *   libcurl's easy API against examples/http_server;
 *   glibc's getaddrinfo (names from /etc/hosts), from many tasks at once.
 *
 * At maxprocs 2, while the clients run, the runtime's threads stay at
 * maxprocs + 3 at most (getaddrinfo, which runs in the blocking-syscall
 * bracket, may start more; they go idle and exit afterwards) and a
 * ticker task keeps its time. A library or server that is not installed
 * makes its case skip, saying which (cmocka's skip, never a pass). The
 * sanitizer builds run 200 clients instead of 1000: a FIFO run queue of a
 * thousand tasks, each many times slower there, keeps the ticker waiting
 * for its turn longer than any bound worth the name. */
#include "gmp_test.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#ifdef GMP_TEST_HIREDIS
#include <hiredis/hiredis.h>
#endif
#ifdef GMP_TEST_CURL
#include <curl/curl.h>
#endif

extern char **environ;

/* ---- servers ------------------------------------------------------------------- */

#if defined(GMP_TEST_HIREDIS) || defined(GMP_TEST_CURL)

/* A program in $PATH (or NULL). */
static const char *find_program(const char *name, char *buf, size_t size)
{
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
	while (*path) {
		const char *end = strchr(path, ':');
		size_t len = end ? (size_t)(end - path) : strlen(path);
		snprintf(buf, size, "%.*s/%s", (int)len, path, name);
		if (access(buf, X_OK) == 0)
			return buf;
		path += len + (end != NULL);
	}
	return NULL;
}

/* A loopback port that nothing listens on now. */
static int free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	T_ASSERT(bind(s, (struct sockaddr *)&sa, sizeof sa) == 0);
	socklen_t len = sizeof sa;
	T_ASSERT(getsockname(s, (struct sockaddr *)&sa, &len) == 0);
	close(s);
	return ntohs(sa.sin_port);
}

/* Whether something accepts connections on port, trying for up to 20 s. */
static bool wait_listening(int port)
{
	for (int i = 0; i < 2000; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_port = htons((uint16_t)port),
					  .sin_addr.s_addr =
						  htonl(INADDR_LOOPBACK) };
		int r = connect(s, (struct sockaddr *)&sa, sizeof sa);
		close(s);
		if (r == 0)
			return true;
		tu_sleep(10 * MS);
	}
	return false;
}

/* The server the case started, stopped when the case ends, whichever
 * way it ends (a failed assertion leaves through exit). */
static pid_t server = -1;

static void stop(void)
{
	if (server <= 0)
		return;
	kill(server, SIGTERM);
	int status;
	waitpid(server, &status, 0);
	server = -1;
}

/* Starts path with stdout to out_fd (or nowhere) and stderr nowhere (so
 * that it holds none of CTest's pipes); it dies with the test. Without
 * LD_PRELOAD (the TSan build preloads the hooks into the tests): the
 * servers are not under test, and one that carries libgmp.a would refuse
 * the hooks. */
static pid_t spawn(const char *path, char *const argv[], int out_fd)
{
	static char *env[256];
	int k = 0;
	for (char **e = environ; *e && k < 255; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) != 0)
			env[k++] = *e;
	env[k] = NULL;
	int null = open("/dev/null", O_RDWR);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(out_fd >= 0 ? out_fd : null, 1);
		dup2(null, 2);
		execve(path, argv, env);
		_exit(127);
	}
	close(null);
	server = pid;
	atexit(stop);
	return pid;
}
#endif

/* ---- the ticker and the thread count ------------------------------------------- */

static _Atomic int ticking;
static int64_t tick_last, tick_gap_max; /* the ticker's; read after it ends */
static gmp_wg ticker_wg;

static void ticker(void *arg)
{
	(void)arg;
	tick_last = tu_now_ns();
	while (atomic_load_explicit(&ticking, memory_order_acquire)) {
		usleep(10 * 1000); /* hooked: a timer */
		int64_t now = tu_now_ns();
		if (now - tick_last > tick_gap_max)
			tick_gap_max = now - tick_last;
		tick_last = now;
	}
	gmp_wg_done(&ticker_wg);
}

static int64_t threads_max;

/* The test's thread samples the runtime's thread count while the clients
 * run. */
static void watch_threads_until(atomic_int *done)
{
	threads_max = 0;
	while (!atomic_load_explicit(done, memory_order_acquire)) {
		int64_t t = (int64_t)tu_stats().threads_total;
		if (t > threads_max)
			threads_max = t;
		tu_sleep(2 * MS);
	}
}

/* The hooked calls park their tasks: the clients run on the two Ps'
 * threads, sysmon and at most two more (a spinning M, one leaving the
 * poller), whatever their number. A detach is another matter: sysmon
 * takes the P of a task whose thread used its slice of CPU time without
 * a switch point, and that thread finishes the stretch beside the P's new
 * one. Under TSan, that is what the clients do: a 64 KiB memset or memcmp
 * on fresh memory write-faults TSan's shadow pages in, each fault a TLB
 * shootdown, over 10 ms of the thread's CPU. So each detach may add a
 * thread. So may each retake: a call the hooks make inside
 * gmp_enter_syscall (open(2) of a file, say) loses its P to sysmon when
 * the kernel keeps it, and its thread goes on beside the P's new one
 * (seen once under ASan with the suite running beside: 4 retakes, 7
 * threads; which call it was is not known). Nothing else may. */
static void check_threads(const char *who, int n)
{
	gmp_stats st = tu_stats();
	print_message("%s: %d clients, at most %lld threads (retakes %llu, "
		      "handoffs %llu, detaches %llu)\n",
		      who, n, (long long)threads_max,
		      (unsigned long long)st.retakes,
		      (unsigned long long)st.handoffs,
		      (unsigned long long)st.detaches);
	assert_true(threads_max <=
		    2 + 3 + (int64_t)st.detaches + (int64_t)st.retakes);
}

static void ticker_start(void)
{
	tick_gap_max = 0;
	ticking = 1;
	gmp_wg_add(&ticker_wg, 1);
	assert_true(gmp_go(ticker, NULL) > 0);
}

/* Stops the ticker and checks its time: a tick of 10 ms never late by
 * more than a generous margin (a loaded two-CPU host, sanitizers). */
static void ticker_check(void)
{
	atomic_store_explicit(&ticking, 0, memory_order_release);
	gmp_wg_wait(&ticker_wg);
	int64_t bound = 250 * MS * tu_host_slowdown() * (TU_ASAN ? 2 : 1);
	print_message("ticker: longest gap %lld ms\n",
		      (long long)(tick_gap_max / MS));
	assert_true(tick_gap_max < bound);
}

struct failure {
	_Atomic int n;
	char what[256];
};

static void failed(struct failure *f, const char *fmt, ...)
{
	if (atomic_fetch_add_explicit(&f->n, 1, memory_order_relaxed) == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(f->what, sizeof f->what, fmt, ap);
		va_end(ap);
	}
}

/* ---- hiredis ------------------------------------------------------------------- */

#ifdef GMP_TEST_HIREDIS
static int redis_port;
static struct failure redis_fail;
static gmp_wg clients_wg;
static _Atomic int clients_done;

static bool reply_is(redisReply *r, int type, long long integer,
		     const char *str)
{
	if (!r || r->type != type)
		return false;
	if (type == REDIS_REPLY_INTEGER)
		return r->integer == integer;
	if (str)
		return r->len == strlen(str) && !memcmp(r->str, str, r->len);
	return true;
}

#define CHECK(rep, ty, num, text, what)                                        \
	do {                                                                   \
		redisReply *r_ = (rep);                                        \
		if (!reply_is(r_, ty, num, text))                              \
			failed(&redis_fail, "client %d: %s: type %d", i, what, \
			       r_ ? r_->type : -1);                            \
		if (r_)                                                        \
			freeReplyObject(r_);                                   \
	} while (0)

static void redis_client(void *arg)
{
	int i = (int)(intptr_t)arg;
	redisContext *c = redisConnect("127.0.0.1", redis_port);
	if (!c || c->err) {
		failed(&redis_fail, "client %d: connect: %s", i,
		       c ? c->errstr : "no context");
		if (c)
			redisFree(c);
		gmp_wg_done(&clients_wg);
		return;
	}
	char key[32], val[32];
	snprintf(key, sizeof key, "k%d", i);
	snprintf(val, sizeof val, "value-%d", i * 7);
	for (int round = 0; round < 3; round++) {
		CHECK(redisCommand(c, "PING"), REDIS_REPLY_STATUS, 0, "PONG",
		      "PING");
		CHECK(redisCommand(c, "SET %s %s", key, val),
		      REDIS_REPLY_STATUS, 0, "OK", "SET");
		CHECK(redisCommand(c, "GET %s", key), REDIS_REPLY_STRING, 0,
		      val, "GET");
		CHECK(redisCommand(c, "INCR c%d", i), REDIS_REPLY_INTEGER,
		      round + 1, NULL, "INCR");
		CHECK(redisCommand(c, "HSET h%d f %d", i, round),
		      REDIS_REPLY_INTEGER, round == 0, NULL, "HSET");
		char r[8];
		snprintf(r, sizeof r, "%d", round);
		CHECK(redisCommand(c, "HGET h%d f", i), REDIS_REPLY_STRING, 0,
		      r, "HGET");
		CHECK(redisCommand(c, "RPUSH l%d a b c", i),
		      REDIS_REPLY_INTEGER, 3 * (round + 1), NULL, "RPUSH");
		redisReply *lr = redisCommand(c, "LRANGE l%d 0 2", i);
		if (!lr || lr->type != REDIS_REPLY_ARRAY || lr->elements != 3 ||
		    !reply_is(lr->element[0], REDIS_REPLY_STRING, 0, "a") ||
		    !reply_is(lr->element[2], REDIS_REPLY_STRING, 0, "c"))
			failed(&redis_fail, "client %d: LRANGE", i);
		if (lr)
			freeReplyObject(lr);
		/* A value large enough to take several reads. */
		size_t bn = 64 * 1024;
		char *big = malloc(bn);
		memset(big, 'a' + i % 26, bn);
		CHECK(redisCommand(c, "SET b%d %b", i, big, bn),
		      REDIS_REPLY_STATUS, 0, "OK", "SET big");
		redisReply *br = redisCommand(c, "GET b%d", i);
		if (!br || br->type != REDIS_REPLY_STRING || br->len != bn ||
		    memcmp(br->str, big, bn))
			failed(&redis_fail, "client %d: GET big", i);
		free(big);
		if (br)
			freeReplyObject(br);
	}
	CHECK(redisCommand(c, "DEL %s c%d h%d l%d b%d", key, i, i, i, i),
	      REDIS_REPLY_INTEGER, 5, NULL, "DEL");
	redisFree(c);
	gmp_wg_done(&clients_wg);
}

static void clients_wait(void *arg)
{
	(void)arg;
	gmp_wg_wait(&clients_wg);
	atomic_store_explicit(&clients_done, 1, memory_order_release);
}
#endif

/* 1,000 tasks, each with a redis connection through hiredis' synchronous
 * API (blocking connect, write, read, poll inside the library), mixed
 * commands, every reply checked. */
static void test_hook_libs_hiredis_1000_tasks(void **s)
{
	(void)s;
#ifndef GMP_TEST_HIREDIS
	print_message("libhiredis-dev was not found when this test was "
		      "built\n");
	skip();
#else
	char path[512];
	if (!find_program("redis-server", path, sizeof path)) {
		print_message("redis-server is not installed\n");
		skip();
	}
	redis_port = free_port();
	char port[16];
	snprintf(port, sizeof port, "%d", redis_port);
	char *argv[] = { "redis-server",
			 "--port",
			 port,
			 "--bind",
			 "127.0.0.1",
			 "--save",
			 "",
			 "--appendonly",
			 "no",
			 "--maxclients",
			 "4000",
			 "--loglevel",
			 "warning",
			 NULL };
	pid_t pid = spawn(path, argv, -1);
	assert_true(pid > 0);
	assert_true(wait_listening(redis_port));

	tu_init(2);
	int n = TU_ASAN || TU_TSAN ? 200 : 1000;
	ticker_start();
	redis_fail.n = 0;
	clients_done = 0;
	gmp_wg_add(&clients_wg, n);
	for (int i = 0; i < n; i++)
		assert_true(gmp_go(redis_client, (void *)(intptr_t)i) > 0);
	assert_true(gmp_go(clients_wait, NULL) > 0);
	watch_threads_until(&clients_done);
	if (redis_fail.n)
		fail_msg("%d failures; the first: %s", redis_fail.n,
			 redis_fail.what);
	check_threads("hiredis", n);
	ticker_check();
	assert_int_equal(gmp_shutdown(), 0);
	stop();
#endif
}

/* ---- libcurl ------------------------------------------------------------------- */

#ifdef GMP_TEST_CURL
enum { FILES = 16 };
static int http_port;
static char *bodies[FILES];
static size_t body_len[FILES];
static struct failure curl_fail;
static gmp_wg fetch_wg;
static _Atomic int fetch_done;

struct sink {
	char *buf;
	size_t n, cap;
};

static size_t collect(char *p, size_t size, size_t nmemb, void *arg)
{
	struct sink *k = arg;
	size_t len = size * nmemb;
	if (k->n + len > k->cap)
		return 0; /* more than the file: curl reports an error */
	memcpy(k->buf + k->n, p, len);
	k->n += len;
	return len;
}

static void fetcher(void *arg)
{
	int i = (int)(intptr_t)arg;
	CURL *h = curl_easy_init();
	if (!h) {
		failed(&curl_fail, "fetcher %d: curl_easy_init", i);
		gmp_wg_done(&fetch_wg);
		return;
	}
	struct sink k = { malloc(256 * 1024), 0, 256 * 1024 };
	for (int req = 0; req < 2; req++) {
		int f = (i + req) % FILES;
		char url[128];
		snprintf(url, sizeof url, "http://127.0.0.1:%d/static/f%d",
			 http_port, f);
		k.n = 0;
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &k);
		CURLcode rc = curl_easy_perform(h);
		long code = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
		if (rc != CURLE_OK || code != 200)
			failed(&curl_fail, "fetcher %d: %s: %s, status %ld", i,
			       url, curl_easy_strerror(rc), code);
		else if (k.n != body_len[f] || memcmp(k.buf, bodies[f], k.n))
			failed(&curl_fail,
			       "fetcher %d: %s: wrong body (%zu "
			       "bytes)",
			       i, url, k.n);
	}
	free(k.buf);
	curl_easy_cleanup(h);
	gmp_wg_done(&fetch_wg);
}

static void fetch_wait(void *arg)
{
	(void)arg;
	gmp_wg_wait(&fetch_wg);
	atomic_store_explicit(&fetch_done, 1, memory_order_release);
}
#endif

/* 1,000 tasks fetching through libcurl's easy API (curl_easy_perform:
 * its multi handle's poll, non-blocking connect, send and recv) from the
 * project's own http_server, every body checked. */
static void test_hook_libs_curl_1000_tasks(void **s)
{
	(void)s;
#ifndef GMP_TEST_CURL
	print_message("libcurl4-openssl-dev was not found when this test "
		      "was built\n");
	skip();
#else
#ifndef GMP_HTTP_SERVER
	print_message("examples/http_server is not built (GMP_BUILD_EXAMPLES "
		      "off)\n");
	skip();
#else
	/* The files: sizes from a few bytes to 200 KiB, distinct bytes. */
	char dir[] = "/tmp/gmp-hook-http-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sub[64];
	snprintf(sub, sizeof sub, "%s", dir);
	for (int f = 0; f < FILES; f++) {
		body_len[f] = (size_t)(7 + f * f * 800);
		bodies[f] = malloc(body_len[f]);
		for (size_t k = 0; k < body_len[f]; k++)
			bodies[f][k] = (char)('A' + (k * 31 + (size_t)f) % 57);
		char p[128];
		snprintf(p, sizeof p, "%s/f%d", dir, f);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, bodies[f], body_len[f]),
				 (ssize_t)body_len[f]);
		close(fd);
	}
	int out[2];
	assert_int_equal(pipe(out), 0);
	char root[96];
	snprintf(root, sizeof root, "--root=%s", dir);
	char *argv[] = { "http_server", "--port=0", root, NULL };
	pid_t pid = spawn(GMP_HTTP_SERVER, argv, out[1]);
	close(out[1]);
	assert_true(pid > 0);
	char line[64] = { 0 };
	size_t got = 0;
	while (got < sizeof line - 1 && !strchr(line, '\n')) {
		ssize_t r = read(out[0], line + got, sizeof line - 1 - got);
		assert_true(r > 0);
		got += (size_t)r;
	}
	assert_int_equal(sscanf(line, "port=%d", &http_port), 1);
	assert_true(wait_listening(http_port));

	assert_int_equal(curl_global_init(CURL_GLOBAL_DEFAULT), 0);
	tu_init(2);
	int n = TU_ASAN || TU_TSAN ? 200 : 1000;
	ticker_start();
	curl_fail.n = 0;
	fetch_done = 0;
	gmp_wg_add(&fetch_wg, n);
	for (int i = 0; i < n; i++)
		assert_true(gmp_go(fetcher, (void *)(intptr_t)i) > 0);
	assert_true(gmp_go(fetch_wait, NULL) > 0);
	watch_threads_until(&fetch_done);
	if (curl_fail.n)
		fail_msg("%d failures; the first: %s", curl_fail.n,
			 curl_fail.what);
	check_threads("curl", n);
	ticker_check();
	assert_int_equal(gmp_shutdown(), 0);
	curl_global_cleanup();
	stop();
	close(out[0]);
	for (int f = 0; f < FILES; f++) {
		char p[128];
		snprintf(p, sizeof p, "%s/f%d", dir, f);
		unlink(p);
		free(bodies[f]);
	}
	rmdir(dir);
#endif
#endif
}

/* ---- getaddrinfo ------------------------------------------------------------------ */

static uint32_t want_addr;
static struct failure gai_fail;
static gmp_wg gai_wg;
static _Atomic int gai_done;

static void resolver(void *arg)
{
	int i = (int)(intptr_t)arg;
	for (int k = 0; k < 5; k++) {
		struct addrinfo hints = { .ai_family = AF_INET,
					  .ai_socktype = SOCK_STREAM };
		struct addrinfo *res = NULL;
		char port[16];
		snprintf(port, sizeof port, "%d", 1000 + i);
		int r = getaddrinfo("localhost", port, &hints, &res);
		if (r != 0) {
			failed(&gai_fail, "resolver %d: %s", i,
			       gai_strerror(r));
			continue;
		}
		struct sockaddr_in *sa = (struct sockaddr_in *)res->ai_addr;
		if (sa->sin_addr.s_addr != want_addr ||
		    ntohs(sa->sin_port) != 1000 + i)
			failed(&gai_fail, "resolver %d: wrong address", i);
		freeaddrinfo(res);
		char host[NI_MAXHOST];
		struct sockaddr_in lo = { .sin_family = AF_INET,
					  .sin_addr.s_addr = want_addr };
		r = getnameinfo((struct sockaddr *)&lo, sizeof lo, host,
				sizeof host, NULL, 0, NI_NAMEREQD);
		if (r != 0)
			failed(&gai_fail, "resolver %d: getnameinfo: %s", i,
			       gai_strerror(r));
		struct hostent he, *out = NULL;
		char buf[1024];
		int herr = 0;
		if (gethostbyname_r("localhost", &he, buf, sizeof buf, &out,
				    &herr) != 0 ||
		    !out || he.h_addrtype != AF_INET)
			failed(&gai_fail, "resolver %d: gethostbyname_r", i);
	}
	gmp_wg_done(&gai_wg);
}

static void gai_wait(void *arg)
{
	(void)arg;
	gmp_wg_wait(&gai_wg);
	atomic_store_explicit(&gai_done, 1, memory_order_release);
}

/* 100 tasks resolving at once: glibc's resolver runs in the blocking
 * bracket, so threads may come and go; they go idle and exit afterwards. */
static void test_hook_libs_getaddrinfo_100_tasks(void **s)
{
	(void)s;
	struct addrinfo hints = { .ai_family = AF_INET };
	struct addrinfo *res;
	if (getaddrinfo("localhost", NULL, &hints, &res) != 0) {
		print_message("localhost does not resolve here\n");
		skip();
	}
	want_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
	freeaddrinfo(res);
	/* Threads the bracket started exit after half a second idle. */
	setenv("GMP_IDLE_THREAD_TIMEOUT", "0.5", 1);
	tu_init(2);
	ticker_start();
	gai_fail.n = 0;
	gai_done = 0;
	gmp_wg_add(&gai_wg, 100);
	for (int i = 0; i < 100; i++)
		assert_true(gmp_go(resolver, (void *)(intptr_t)i) > 0);
	assert_true(gmp_go(gai_wait, NULL) > 0);
	watch_threads_until(&gai_done);
	if (gai_fail.n)
		fail_msg("%d failures; the first: %s", gai_fail.n,
			 gai_fail.what);
	print_message("getaddrinfo: 100 tasks, at most %lld threads\n",
		      (long long)threads_max);
	ticker_check();
	/* The threads the bracket started go idle, then exit. */
	TU_WAIT_FOR(tu_stats().threads_total <= 2 + 3);
	assert_int_equal(gmp_shutdown(), 0);
	unsetenv("GMP_IDLE_THREAD_TIMEOUT");
}

GMP_TEST_MAIN(cmocka_unit_test(test_hook_libs_hiredis_1000_tasks),
	      cmocka_unit_test(test_hook_libs_curl_1000_tasks),
	      cmocka_unit_test(test_hook_libs_getaddrinfo_100_tasks))
