/* http_server: a small HTTP/1.1 server on 127.0.0.1, one task per
 * connection, written in plain blocking style.
 *
 *   http_server [--port=N] [--root=DIR] [--idle-timeout=S]
 *                                   (port 0 or none: any free port)
 *
 * It prints "port=<n>" once it listens, then serves:
 *
 *   GET /                 "Hello, world!\n" (text/plain), the body that
 *                         bench/http's nginx and Go servers answer with too
 *   GET /static/<path>    the file <path> under DIR (--root), if given
 *   HEAD of either        the same headers without the body
 *
 * Connections are persistent (HTTP/1.1's default; HTTP/1.0 only with
 * "Connection: keep-alive"), "Connection: close" is honoured, and
 * pipelined requests are answered in order: every complete request in
 * what one read returned is parsed and answered, and the answers go out
 * together in one write. A malformed request gets 400 and the connection
 * is closed. A connection that sends nothing for --idle-timeout seconds
 * (default 60; 0: never) while the server waits for its next request, or
 * for the rest of one, is closed: every read has a deadline
 * (gmp_set_deadline), and a read that would wait past it returns
 * -ETIMEDOUT. SIGINT or SIGTERM stops the server cleanly: it stops
 * accepting, lets every connection finish the request it is on (idle ones
 * are closed at once), and exits with status 0; connections that have not
 * finished after a grace period are cut off.
 *
 * Each connection is a task that reads a request with gmp_read, answers it
 * with gmp_write and reads again. The listening socket is non-blocking, so
 * the sockets gmp_accept returns are too, and whenever a socket is not
 * ready the call parks the task in the runtime's network poller instead of
 * blocking a thread: ten thousand idle connections cost ten thousand
 * parked tasks (a small stack and this program's 16 KiB buffers each) and
 * no threads. Set GMP_MAXPROCS to choose how many threads run tasks at
 * once (default: the CPUs this process may use).
 *
 * Try it:
 *   build/examples/http_server --port=8080 --root=. &
 *   curl -v http://127.0.0.1:8080/ http://127.0.0.1:8080/static/README.md
 *   wrk -t2 -c64 -d10s http://127.0.0.1:8080/     (bench/http does this)
 *
 * What this server does not do, to stay short: request bodies are read and
 * thrown away (so GET with a body and a POST answered 405 keep the
 * connection in step), chunked request bodies are refused (501), there is
 * no Range, no If-Modified-Since, no directory listing, and symbolic links
 * under DIR are followed (as nginx does by default).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gmp.h>

enum {
	/* The request buffer: a request head (request line and headers)
	 * longer than this is refused with 431. 8 KiB is what nginx and most
	 * servers accept by default. */
	IN_SIZE = 8192,
	/* The response buffer: the answers to one batch of pipelined
	 * requests gather here and go out in one write. */
	OUT_SIZE = 8192,
	/* A file larger than what is left of the response buffer is sent in
	 * chunks of this size, from a buffer taken for that response only. */
	FILE_CHUNK = 64 * 1024,
};

/* How long a stop waits for connections to finish before it cuts them. */
static const int64_t GRACE_NS = 5LL * 1000 * 1000 * 1000;
/* How long a connection we close after an error waits for the client to
 * stop sending (see linger_close). */
static const int64_t LINGER_NS = 1LL * 1000 * 1000 * 1000;

static const char HELLO[] = "Hello, world!\n";

/* One connection. Allocated by the acceptor, which registers it in the
 * list of live connections before its task starts, so that a stop finds
 * every connection, even one whose task has not run yet. */
struct conn {
	int fd;
	struct conn *prev, *next; /* the live list, under live_lock */
	size_t in_len;            /* bytes in in[] */
	size_t out_len;           /* bytes in out[] */
	uint64_t discard;         /* request body bytes still to skip */
	bool close;               /* close once the batch is written */
	time_t date_sec;          /* the second date[] shows */
	size_t date_len;
	char date[40]; /* "Date: ...\r\n" */
	char in[IN_SIZE];
	char out[OUT_SIZE];
};

/* What parse_request learns about one request. Pointers point into the
 * connection's input buffer, valid until the next read. */
struct request {
	const char *method, *target;
	size_t method_len, target_len;
	int minor;        /* HTTP/1.<minor> */
	bool keep_alive;  /* what the client asked for, or its default */
	bool has_host;    /* HTTP/1.1 requires exactly one Host */
	bool chunked;     /* Transfer-Encoding given: we cannot frame it */
	int64_t body_len; /* Content-Length, 0 if none */
};

static int root_fd = -1; /* the --root directory, or -1 */
/* --idle-timeout: how long a read waits for the client, 0: for ever. */
static int64_t idle_ns = 60LL * 1000 * 1000 * 1000;
static int listen_fd = -1;
static atomic_bool stopping;

static gmp_mutex live_lock = GMP_MUTEX_INIT;
static struct conn *live; /* every connection not yet closed */
static gmp_wg live_wg = GMP_WG_INIT;

/* ---- parsing ----------------------------------------------------------- */

/* RFC 9110's tchar: the characters of methods and header names. */
static bool is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Whether [s, s+n) is the token t, ignoring case. */
static bool token_is(const char *s, size_t n, const char *t)
{
	return n == strlen(t) && strncasecmp(s, t, n) == 0;
}

/* The line at [p, end): its length without the line ending in *len, and
 * the start of the next line as the result; NULL if no '\n' is there yet.
 * A bare LF ends a line as CRLF does (RFC 9112 §2.2 allows that). */
static const char *next_line(const char *p, const char *end, size_t *len)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	if (!nl)
		return NULL;
	*len = (size_t)(nl - p);
	if (*len > 0 && nl[-1] == '\r')
		(*len)--;
	return nl + 1;
}

/* Reads the comma-separated options of a Connection header. */
static void parse_connection(const char *v, size_t n, struct request *rq)
{
	while (n > 0) {
		const char *comma = memchr(v, ',', n);
		size_t len = comma ? (size_t)(comma - v) : n;
		size_t a = 0, b = len;
		while (a < b && (v[a] == ' ' || v[a] == '\t'))
			a++;
		while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
			b--;
		if (token_is(v + a, b - a, "close"))
			rq->keep_alive = false;
		else if (token_is(v + a, b - a, "keep-alive"))
			rq->keep_alive = true;
		if (!comma)
			break;
		n -= len + 1;
		v = comma + 1;
	}
}

/* One header line (not empty). Returns false if it is malformed. */
static bool parse_header(const char *line, size_t len, struct request *rq)
{
	/* A line that starts with white space continues the previous one
	 * (obsolete folding): RFC 9112 lets a server reject it. */
	const char *colon = memchr(line, ':', len);
	if (!colon || colon == line)
		return false;
	for (const char *p = line; p < colon; p++)
		if (!is_tchar((unsigned char)*p))
			return false; /* also "Name :", which is forbidden */
	size_t name_len = (size_t)(colon - line);
	const char *v = colon + 1, *end = line + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	size_t vlen = (size_t)(end - v);

	if (token_is(line, name_len, "Host")) {
		if (rq->has_host)
			return false; /* two Hosts: RFC 9112 §3.2 says 400 */
		rq->has_host = true;
	} else if (token_is(line, name_len, "Connection")) {
		parse_connection(v, vlen, rq);
	} else if (token_is(line, name_len, "Content-Length")) {
		/* Digits only; two different lengths would leave us unable
		 * to tell where the next request starts. */
		if (vlen == 0 || vlen > 18)
			return false;
		int64_t n = 0;
		for (size_t i = 0; i < vlen; i++) {
			if (v[i] < '0' || v[i] > '9')
				return false;
			n = n * 10 + (v[i] - '0');
		}
		if (rq->body_len >= 0 && rq->body_len != n)
			return false;
		rq->body_len = n;
	} else if (token_is(line, name_len, "Transfer-Encoding")) {
		rq->chunked = true;
	}
	return true;
}

/* Parses the request at the start of [buf, buf+len). Returns the length
 * of its head (request line, headers and the empty line) when it is
 * complete, 0 when more bytes are needed, -1 when it is malformed. */
static ssize_t parse_request(const char *buf, size_t len, struct request *rq)
{
	const char *p = buf, *end = buf + len, *line;
	size_t n;
	/* Empty lines before a request are skipped (RFC 9112 §2.2): some
	 * clients send a CRLF after a request's body. */
	for (;;) {
		line = p;
		if (!(p = next_line(p, end, &n)))
			return 0;
		if (n > 0)
			break;
	}

	/* The request line: method SP request-target SP HTTP-version. */
	const char *sp1 = memchr(line, ' ', n);
	const char *sp2 =
		sp1 ? memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - line)) : NULL;
	if (!sp1 || !sp2 || sp1 == line || sp2 == sp1 + 1)
		return -1;
	rq->method = line;
	rq->method_len = (size_t)(sp1 - line);
	for (size_t i = 0; i < rq->method_len; i++)
		if (!is_tchar((unsigned char)line[i]))
			return -1;
	rq->target = sp1 + 1;
	rq->target_len = (size_t)(sp2 - rq->target);
	for (size_t i = 0; i < rq->target_len; i++)
		if ((unsigned char)rq->target[i] <= ' ' ||
		    rq->target[i] == 0x7f)
			return -1;
	const char *ver = sp2 + 1;
	size_t ver_len = n - (size_t)(ver - line);
	if (ver_len != 8 || memcmp(ver, "HTTP/1.", 7) != 0 || ver[7] < '0' ||
	    ver[7] > '9')
		return -1; /* HTTP/2 and later do not look like this */
	rq->minor = ver[7] - '0';
	rq->keep_alive = rq->minor >= 1; /* the version's default */
	rq->has_host = false;
	rq->chunked = false;
	rq->body_len = -1;

	/* Header lines, up to the empty line that ends the head. */
	for (;;) {
		line = p;
		if (!(p = next_line(p, end, &n)))
			return 0;
		if (n == 0)
			break;
		if (!parse_header(line, n, rq))
			return -1;
	}
	if (rq->minor >= 1 && !rq->has_host)
		return -1;
	if (rq->body_len < 0)
		rq->body_len = 0;
	return p - buf;
}

/* ---- responses ----------------------------------------------------------- */

/* Sends what the response buffer holds: one write for the whole batch.
 * Returns false if the client is gone. */
static bool flush(struct conn *c)
{
	if (c->out_len == 0)
		return true;
	ssize_t n = gmp_write(c->fd, c->out, c->out_len);
	bool ok = n == (ssize_t)c->out_len; /* all of it, or an error */
	c->out_len = 0;
	return ok;
}

/* Appends n bytes to the response buffer, flushing it first if they do
 * not fit. The pieces of a response head are far smaller than the
 * buffer. Returns false if the client is gone. */
static bool put(struct conn *c, const void *s, size_t n)
{
	if (c->out_len + n > OUT_SIZE && !flush(c))
		return false;
	memcpy(c->out + c->out_len, s, n);
	c->out_len += n;
	return true;
}

/* Appends n bytes at p, returning the end. */
static char *append(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

/* append() of a string literal, its length known at compile time. */
#define APPEND_LIT(p, lit) append(p, lit, sizeof lit - 1)

/* The decimal digits of v at p, returning the end. */
static char *append_uint(char *p, uint64_t v)
{
	char digits[24], *d = digits + sizeof digits;
	do
		*--d = (char)('0' + v % 10);
	while (v /= 10);
	return append(p, d, (size_t)(digits + sizeof digits - d));
}

/* The Date header every response carries (RFC 9110 §6.6.1), formatted
 * once a second per connection rather than per request. */
static void update_date(struct conn *c)
{
	time_t now = time(NULL);
	if (now != c->date_sec) {
		struct tm tm;
		gmtime_r(&now, &tm);
		c->date_len = strftime(c->date, sizeof c->date,
				       "Date: %a, %d %b %Y %H:%M:%S GMT\r\n",
				       &tm);
		c->date_sec = now;
	}
}

/* Appends a response head: the status line and the headers, written in
 * place into the response buffer (after making room for all of it at
 * once). A Connection header is sent when it differs from the version's
 * default: "close" on HTTP/1.1, "keep-alive" on a persistent HTTP/1.0
 * connection. */
static bool put_head(struct conn *c, const struct request *rq,
		     const char *status, const char *type, uint64_t len,
		     const char *extra)
{
	size_t status_len = strlen(status), type_len = strlen(type);
	size_t extra_len = extra ? strlen(extra) : 0;
	/* 200: more than the fixed text, the date and the length take */
	size_t need = status_len + type_len + extra_len + 200;
	if (OUT_SIZE - c->out_len < need && !flush(c))
		return false;
	update_date(c);
	char *p = c->out + c->out_len;
	p = APPEND_LIT(p, "HTTP/1.1 ");
	p = append(p, status, status_len);
	p = APPEND_LIT(p, "\r\nServer: libgmp-example\r\n");
	p = append(p, c->date, c->date_len);
	p = APPEND_LIT(p, "Content-Type: ");
	p = append(p, type, type_len);
	p = APPEND_LIT(p, "\r\nContent-Length: ");
	p = append_uint(p, len);
	p = APPEND_LIT(p, "\r\n");
	if (extra)
		p = append(p, extra, extra_len);
	if (c->close)
		p = APPEND_LIT(p, "Connection: close\r\n");
	else if (rq && rq->minor == 0)
		p = APPEND_LIT(p, "Connection: keep-alive\r\n");
	p = APPEND_LIT(p, "\r\n");
	c->out_len = (size_t)(p - c->out);
	return true;
}

/* A short response with a text body: the hello page and the errors. */
static bool respond(struct conn *c, const struct request *rq,
		    const char *status, const char *body, const char *extra)
{
	size_t len = strlen(body);
	bool head = rq && token_is(rq->method, rq->method_len, "HEAD");
	return put_head(c, rq, status, "text/plain", len, extra) &&
	       (head || put(c, body, len));
}

/* An error that leaves us unsure where the next request starts: answer,
 * then close. */
static bool respond_fatal(struct conn *c, const char *status, const char *body)
{
	c->close = true;
	return respond(c, NULL, status, body, NULL);
}

/* ---- files ----------------------------------------------------------- */

static const char *content_type(const char *path)
{
	static const char *const types[][2] = {
		{ ".html", "text/html" },        { ".txt", "text/plain" },
		{ ".css", "text/css" },          { ".js", "text/javascript" },
		{ ".json", "application/json" }, { ".png", "image/png" },
		{ ".jpg", "image/jpeg" },        { ".svg", "image/svg+xml" },
		{ ".md", "text/markdown" },
	};
	const char *dot = strrchr(path, '.');
	if (dot && !strchr(dot, '/'))
		for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
			if (strcmp(dot, types[i][0]) == 0)
				return types[i][1];
	return "application/octet-stream";
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Turns the part of the target after "/static/" into a path relative to
 * the root: percent-decoded, the query dropped. Returns the HTTP status
 * that refuses it (400, 403, 404), or 0 with the path in out. Every ".."
 * segment and every absolute path is refused, after decoding, so "%2e%2e"
 * cannot climb out of the root either. */
static int relative_path(const char *s, size_t n, char *out, size_t size)
{
	size_t len = 0;
	for (size_t i = 0; i < n && s[i] != '?' && s[i] != '#'; i++) {
		char ch = s[i];
		if (ch == '%') {
			int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
			int lo = hi >= 0 ? hexval(s[i + 2]) : -1;
			if (lo < 0)
				return 400;
			ch = (char)(hi * 16 + lo);
			i += 2;
			if (ch == '\0')
				return 400;
		}
		if (len + 1 >= size)
			return 404; /* longer than any path we could open */
		out[len++] = ch;
	}
	out[len] = '\0';
	if (len == 0)
		return 404; /* no directory listings */
	if (out[0] == '/')
		return 403;
	for (const char *seg = out; seg; seg = strchr(seg, '/')) {
		if (*seg == '/')
			seg++;
		if (strncmp(seg, "..", 2) == 0 && (seg[2] == '/' || !seg[2]))
			return 403;
	}
	return 0;
}

static const char *status_line(int status)
{
	switch (status) {
	case 400:
		return "400 Bad Request";
	case 403:
		return "403 Forbidden";
	case 404:
		return "404 Not Found";
	default:
		return "500 Internal Server Error";
	}
}

/* GET or HEAD of a file under the root. The file is read with gmp_read:
 * a regular file is never "not ready", so the read runs as a short system
 * call that keeps the task on its thread (inside gmp_enter_syscall, so a
 * slow disk would not hold up the other tasks). Small files go out with
 * the head in the batch's single write; large ones in FILE_CHUNK pieces.
 * Returns false if the connection must close. */
static bool serve_file(struct conn *c, const struct request *rq)
{
	char path[PATH_MAX];
	size_t skip = strlen("/static/");
	int status = root_fd < 0 ? 404
				 : relative_path(rq->target + skip,
						 rq->target_len - skip, path,
						 sizeof path);
	int fd = -1;
	struct stat st;
	if (status == 0) {
		fd = openat(root_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		/* errno right away: a task may move to another thread at any
		 * libgmp call, and the compiler may keep errno's (per-thread)
		 * address across one (see gmp.h, section 4). */
		int err = fd < 0 ? errno : 0;
		if (fd < 0)
			status = err == EACCES                     ? 403
				 : err == ENOENT || err == ENOTDIR ? 404
								   : 500;
		else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
			status = 404;
	}
	if (status != 0) {
		if (fd >= 0)
			gmp_close(fd);
		char body[64];
		snprintf(body, sizeof body, "%s\n", status_line(status) + 4);
		return respond(c, rq, status_line(status), body, NULL);
	}

	uint64_t left = (uint64_t)st.st_size;
	bool ok = put_head(c, rq, "200 OK", content_type(path), left, NULL);
	if (token_is(rq->method, rq->method_len, "HEAD"))
		left = 0;
	char *chunk = NULL;
	while (ok && left > 0) {
		/* Read into the response buffer while it has room (the
		 * common small file goes out with its head); a large file
		 * through a chunk buffer of its own. */
		char *dst;
		size_t room;
		if (!chunk && OUT_SIZE - c->out_len >= left) {
			dst = c->out + c->out_len;
			room = OUT_SIZE - c->out_len;
		} else {
			if (!chunk &&
			    (!flush(c) || !(chunk = malloc(FILE_CHUNK)))) {
				ok = false;
				break;
			}
			dst = chunk;
			room = FILE_CHUNK;
		}
		size_t want = left < room ? (size_t)left : room;
		ssize_t n = gmp_read(fd, dst, want);
		if (n <= 0) {
			/* The file shrank or failed under us: the length we
			 * promised cannot be kept, so the connection ends. */
			ok = false;
			break;
		}
		left -= (uint64_t)n;
		if (chunk)
			ok = gmp_write(c->fd, chunk, (size_t)n) == n;
		else
			c->out_len += (size_t)n;
	}
	free(chunk);
	/* gmp_close, not close: it also forgets what the runtime cached
	 * about the number (that it is not a socket), which the next socket
	 * given this number would otherwise inherit. */
	gmp_close(fd);
	return ok;
}

/* ---- one request ----------------------------------------------------------- */

/* Answers one parsed request into the response buffer. Returns false if
 * the connection must close at once. */
static bool handle(struct conn *c, const struct request *rq)
{
	if (!rq->keep_alive ||
	    atomic_load_explicit(&stopping, memory_order_relaxed))
		c->close = true;
	if (rq->chunked)
		return respond_fatal(c, "501 Not Implemented",
				     "chunked request bodies are not "
				     "supported\n");

	/* The target: origin-form ("/path"), or absolute-form
	 * ("http://host/path"), which servers must accept too. */
	struct request r = *rq;
	if (r.target_len > 7 && strncasecmp(r.target, "http://", 7) == 0) {
		const char *slash = memchr(r.target + 7, '/', r.target_len - 7);
		size_t cut = slash ? (size_t)(slash - r.target) : r.target_len;
		r.target += cut;
		r.target_len -= cut;
		if (r.target_len == 0) {
			r.target = "/";
			r.target_len = 1;
		}
	}
	if (r.target_len == 0 || r.target[0] != '/')
		return respond_fatal(c, "400 Bad Request", "Bad Request\n");

	bool get = token_is(r.method, r.method_len, "GET") ||
		   token_is(r.method, r.method_len, "HEAD");
	size_t path_len = r.target_len;
	const char *q = memchr(r.target, '?', r.target_len);
	if (q)
		path_len = (size_t)(q - r.target);
	if (path_len == 1) {
		if (!get)
			return respond(c, &r, "405 Method Not Allowed",
				       "Method Not Allowed\n",
				       "Allow: GET, HEAD\r\n");
		return respond(c, &r, "200 OK", HELLO, NULL);
	}
	if (path_len > 8 && memcmp(r.target, "/static/", 8) == 0) {
		if (!get)
			return respond(c, &r, "405 Method Not Allowed",
				       "Method Not Allowed\n",
				       "Allow: GET, HEAD\r\n");
		return serve_file(c, &r);
	}
	return respond(c, &r, "404 Not Found", "Not Found\n", NULL);
}

/* ---- one connection ------------------------------------------------------------ */

/* We close first: stop sending, then read and drop what the client still
 * sends, for a moment, before closing. Closing a socket with unread data
 * makes the kernel reset the connection, and a reset can destroy our last
 * response before the client has read it (the "lingering close" nginx
 * and Apache do). gmp_poll_fd's timeout bounds the wait. */
static void linger_close(struct conn *c)
{
	shutdown(c->fd, SHUT_WR);
	int64_t deadline = gmp_nanotime() + LINGER_NS;
	for (;;) {
		int64_t left = deadline - gmp_nanotime();
		if (left <= 0 || gmp_poll_fd(c->fd, POLLIN, left) <= 0)
			break;
		if (gmp_read(c->fd, c->in, sizeof c->in) <= 0)
			break; /* the client closed its side too */
	}
}

/* Parses and answers every complete request in the input buffer (a batch
 * of pipelined requests), keeping what is left of an incomplete one.
 * Returns false if the connection must close at once. */
static bool serve_batch(struct conn *c)
{
	size_t off = 0;
	while (off < c->in_len && !c->close) {
		if (c->discard) { /* the previous request's body */
			size_t n = c->in_len - off;
			if (n > c->discard)
				n = (size_t)c->discard;
			off += n;
			c->discard -= n;
			continue;
		}
		struct request rq;
		ssize_t head = parse_request(c->in + off, c->in_len - off, &rq);
		if (head < 0)
			return respond_fatal(c, "400 Bad Request",
					     "Bad Request\n");
		if (head == 0)
			break; /* incomplete: read more */
		off += (size_t)head;
		c->discard = (uint64_t)rq.body_len;
		if (!handle(c, &rq))
			return false;
	}
	/* Keep the incomplete rest at the front of the buffer. */
	c->in_len -= off;
	memmove(c->in, c->in + off, c->in_len);
	if (c->in_len == IN_SIZE && !c->close)
		return respond_fatal(c, "431 Request Header Fields Too Large",
				     "Request Header Fields Too Large\n");
	return true;
}

static void unregister(struct conn *c)
{
	gmp_mutex_lock(&live_lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		live = c->next;
	if (c->next)
		c->next->prev = c->prev;
	gmp_mutex_unlock(&live_lock);
}

/* The task of one connection: read, answer, repeat. Each gmp_read parks
 * the task until the client sends; each batch of answers is one
 * gmp_write. */
static void serve(void *arg)
{
	struct conn *c = arg;
	bool linger = false;
	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
		/* A client that connects and says nothing must not hold its
		 * task and buffers for ever: the read fails with -ETIMEDOUT
		 * once it has waited idle_ns, and we close. Setting a
		 * deadline costs no system call. */
		if (idle_ns > 0)
			gmp_set_deadline(c->fd, GMP_READ,
					 gmp_nanotime() + idle_ns);
		ssize_t n =
			gmp_read(c->fd, c->in + c->in_len, IN_SIZE - c->in_len);
		if (n <= 0)
			break; /* 0: the client closed; < 0: -errno, or
				  -ETIMEDOUT: idle too long */
		c->in_len += (size_t)n;
		bool ok = serve_batch(c);
		if (!flush(c) || !ok)
			break;
		if (c->close) {
			linger = true;
			break;
		}
	}
	unregister(c);
	if (linger)
		linger_close(c);
	gmp_close(c->fd);
	free(c);
	gmp_wg_done(&live_wg);
}

/* ---- starting and stopping -------------------------------------------------------- */

/* Waits for SIGINT or SIGTERM on a signalfd (the signals are blocked in
 * every thread, see main), then starts the stop: new requests are
 * answered with "Connection: close", the listener is closed (which wakes
 * the acceptor with -EBADF), and connections idle in a read are woken by
 * shutting their reading side, so they see the end of input and close. */
static void watch_signals(void *arg)
{
	int sfd = (int)(intptr_t)arg;
	struct signalfd_siginfo si;
	ssize_t n = gmp_read(sfd, &si, sizeof si);
	if (n < 0)
		fprintf(stderr, "http_server: signalfd: %s\n",
			strerror((int)-n));
	gmp_close(sfd);
	atomic_store(&stopping, true);
	gmp_close(listen_fd);
	gmp_mutex_lock(&live_lock);
	for (struct conn *c = live; c; c = c->next)
		shutdown(c->fd, SHUT_RD);
	gmp_mutex_unlock(&live_lock);
}

static void wait_live(void *done)
{
	gmp_wg_wait(&live_wg);
	gmp_chan_close(done);
}

/* After the listener closed: wait for the connections, and cut off those
 * still going after the grace period (a client that does not read its
 * response, say): shutting both sides makes their writes fail. */
static void drain(void)
{
	gmp_chan *done = gmp_chan_new(0, 0);
	if (!done || gmp_go(wait_live, done) < 0) {
		gmp_wg_wait(&live_wg);
		return;
	}
	gmp_select_case cs = { .chan = done, .op = GMP_SELECT_RECV };
	if (gmp_select(&cs, 1, GRACE_NS) == -ETIMEDOUT) {
		gmp_mutex_lock(&live_lock);
		for (struct conn *c = live; c; c = c->next)
			shutdown(c->fd, SHUT_RDWR);
		gmp_mutex_unlock(&live_lock);
		gmp_chan_recv(done, NULL);
	}
	gmp_chan_free(done);
}

static int server(void *arg)
{
	int port = (int)(intptr_t)arg;

	/* SIGINT and SIGTERM are blocked (main did it before the runtime
	 * started, so its threads inherit the mask) and arrive here instead,
	 * readable by a task. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);

	listen_fd =
		socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	if (sfd < 0 || listen_fd < 0 ||
	    bind(listen_fd, (struct sockaddr *)&sa, len) != 0 ||
	    listen(listen_fd, 4096) != 0 ||
	    getsockname(listen_fd, (struct sockaddr *)&sa, &len) != 0) {
		perror("http_server");
		return 1;
	}
	if (gmp_go(watch_signals, (void *)(intptr_t)sfd) < 0) {
		fprintf(stderr, "http_server: cannot start a task\n");
		return 1;
	}
	printf("port=%d\n", ntohs(sa.sin_port));
	fflush(stdout);

	for (;;) {
		int fd = gmp_accept(listen_fd, NULL, NULL);
		if (fd < 0) {
			if (atomic_load(&stopping))
				break; /* watch_signals closed the listener */
			fprintf(stderr, "http_server: accept: %s\n",
				strerror(-fd));
			if (fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM ||
			    fd == -ENOBUFS) {
				/* Out of descriptors or memory: let some
				 * connections end, then go on. */
				gmp_sleep(10 * 1000 * 1000);
				continue;
			}
			return 1;
		}
		/* Small responses go out at once (Go and nginx do this
		 * too); we never write a response in pieces anyway. */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct conn *c = malloc(sizeof *c);
		if (!c) {
			gmp_close(fd);
			continue;
		}
		c->fd = fd;
		c->in_len = c->out_len = 0;
		c->discard = 0;
		c->close = false;
		c->date_sec = 0;
		gmp_wg_add(&live_wg, 1);
		gmp_mutex_lock(&live_lock);
		c->prev = NULL;
		c->next = live;
		if (live)
			live->prev = c;
		live = c;
		gmp_mutex_unlock(&live_lock);
		if (gmp_go(serve, c) < 0) {
			unregister(c);
			gmp_close(fd);
			free(c);
			gmp_wg_done(&live_wg);
		}
	}
	drain();
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: http_server [--port=N] [--root=DIR] "
			"[--idle-timeout=SECONDS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int port = 0;
	for (int i = 1; i < argc; i++) {
		char *end;
		if (strncmp(argv[i], "--port=", 7) == 0) {
			long v = strtol(argv[i] + 7, &end, 10);
			if (*end || end == argv[i] + 7 || v < 0 || v > 65535)
				usage();
			port = (int)v;
		} else if (strncmp(argv[i], "--idle-timeout=", 15) == 0) {
			double v = strtod(argv[i] + 15, &end);
			if (*end || end == argv[i] + 15 || !(v >= 0) || v > 1e6)
				usage();
			idle_ns = (int64_t)(v * 1e9);
		} else if (strncmp(argv[i], "--root=", 7) == 0) {
			root_fd = open(argv[i] + 7,
				       O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (root_fd < 0) {
				perror(argv[i] + 7);
				return 1;
			}
		} else {
			usage();
		}
	}
	/* Block the stop signals before the runtime starts: its threads take
	 * this thread's mask, so the signals stay pending for the signalfd
	 * instead of killing the process. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	/* A client that goes away mid-response must not kill us: gmp_write
	 * never raises SIGPIPE on a socket, so nothing more is needed. */
	int r = gmp_main(server, (void *)(intptr_t)port);
	return r < 0 ? 1 : r;
}
