/* Writing a recorded trace as Chrome trace-event JSON (tracejson.c), and
 * the chunks the recorder (trace.c) hands it.
 */
#ifndef GMP_TRACEJSON_H
#define GMP_TRACEJSON_H

#include "internal.h"

/* A chunk of one writer's events: a header the recorder fills when it
 * gives the chunk to a writer, and the event words. len is the words
 * written, stored with release by the writer after each event, so that a
 * reader that loads it with acquire reads only whole events. gen counts
 * the chunk's reuses (a flight recorder's oldest chunk goes to whichever
 * writer needs one). */
typedef struct gmp__trchunk {
	struct gmp__trchunk *next;    /* the full list, or the free pool;
					 under the recorder's lock */
	struct gmp__trchunk *allnext; /* every chunk; under that lock */
	uint64_t src;                 /* the writer (gmp__trsrc.id) */
	uint64_t seq;                 /* its chunks, counted from 0 */
	uint32_t epoch;               /* the trace it belongs to */
	uint32_t cap;                 /* words */
	volatile uint32_t len;
	volatile uint32_t gen;
	uint64_t w[];
} gmp__trchunk;

/* One writer's chunk as the converter reads it. */
typedef struct gmp__trview {
	uint64_t src, seq;
	const uint64_t *w;
	uint32_t n; /* words */
} gmp__trview;

/* A trace to write: the chunks (any order; a chunk seen twice, as a
 * writer's current chunk and later as a full one, is read once, the
 * longer), the clock anchors (ticks c and ns t at its start and end), and
 * the options. */
typedef struct gmp__trjob {
	int fd;
	const gmp__trview *v;
	size_t nv;
	uint64_t c0, c1;
	int64_t t0, t1;
	uint64_t lost;   /* events the writers could not record */
	bool window;     /* a flight recorder's window: start where every
			    writer's kept events begin */
	const char *why; /* what wrote it ("stop", "dump", ...) */
} gmp__trjob;

/* Writes job as JSON to job->fd. Uses only mmap'd memory and write(2), so
 * that it may run in a signal handler or as the process aborts. Returns 0
 * or -errno. */
int gmp__trjson_write(const gmp__trjob *job);

/* Memory for the converter and the recorder's emergency paths: mmap'd
 * blocks, freed all at once. */
typedef struct gmp__arena {
	char *cur, *end;
	void *blocks; /* the list of blocks */
} gmp__arena;
void *gmp__arena_alloc(gmp__arena *a, size_t n);
void gmp__arena_free(gmp__arena *a);

#endif
