/* gmp_rwmutex: Go's sync.RWMutex on two runtime semaphores (sema.c) and a
 * gmp_mutex for writers, whose readers move off the shared word onto
 * per-P reader slots when they contend. design.md §9.2 is the contract;
 * §28.5 explains the design: Go's algorithm, the slots and the Dekker pair
 * between a reader's claim and a writer's scan, when a lock uses slots, why
 * a runlock need not be its rlock's task's, and how misuse and an
 * abandoned trylock are caught. sync.h says what each word holds
 * (reader_count's fields, reader_wait's HELD and ABANDONED states).
 *
 * Here: the lock and unlock paths, the slot table that every rwmutex
 * shares (described where it is defined, below), and the record through
 * which a task or thread finds its slot again.
 *
 * Memory order. A reader's way in reads the writer's unlock add (its check
 * of reader_count, acquire, or its add, full). A runlock publishes the
 * read section with its full CAS on the slot, which the writer's scan
 * reads (acquire) or its CAS on that slot fails against; or on the count,
 * as in Go, with its full RMWs and the release of writer_sem. Readers that
 * slept on reader_sem get the writer's section through that semaphore.
 */
#include "preempt.h"
#include "sema.h"
#include "sync.h"

#include "export_test.h"

#define NMASK GMP__RW_NMASK
#define HOT GMP__RW_HOT
#define HMASK GMP__RW_HMASK
#define SLOTS GMP__RW_SLOTS
#define WRITER GMP__RW_WRITER
#define HELD GMP__RW_HELD
#define ABANDONED GMP__RW_ABANDONED

/* ---- the reader slots ----------------------------------------------------
 *
 * 64 stripes of 8 slots, each stripe alone in 128 bytes (the pair of lines
 * the adjacent-line prefetcher moves together). A slot word holds the
 * rwmutex's address shifted left by 16 (addresses below 2^48, 8-aligned:
 * bits 19-63) and a version in bits 0-18 that every change bumps, so that a
 * snapshot can tell a slot that changed from one that did not. An empty
 * slot has zero address bits. A bit per stripe in stripes_used says that a
 * slot there was ever claimed; writers scan only those stripes. */
#define NSTRIPES 64
#define NSLOTS 8
#define VER_MASK ((UINT64_C(1) << 19) - 1)

typedef struct rw_stripe {
	volatile uint64_t slot[NSLOTS];
} __attribute__((aligned(128))) rw_stripe;

static rw_stripe stripes[NSTRIPES];
/* atomic: set bit by bit with a full OR before a stripe's first claim,
 * never cleared; read (sc) by a writer after its subtraction, so that its
 * scan covers every stripe a claim it must see could be in. */
static volatile uint64_t stripes_used;

/* The slot record of a thread while it runs no task (a task's is in its
 * G), and the stripe such a thread uses (+1; 0: not chosen yet). */
static __thread uint64_t thread_rec __attribute__((tls_model("initial-exec")));
static __thread uint32_t thread_stripe
	__attribute__((tls_model("initial-exec")));
static volatile uint32_t thread_stripe_next; /* atomic, relaxed: a counter */

/* Test switches (export_test.h), plain: set only while no writer runs.
 * The lock paths read them through these, constant false outside the
 * tests' copy of the library. */
#if GMP__TEST_HOOKS
bool gmp__rwmutex_prescan_off;
bool gmp__rwmutex_keep_slots;
#endif
#define PRESCAN_OFF (GMP__TEST_HOOKS && gmp__rwmutex_prescan_off)
#define KEEP_SLOTS (GMP__TEST_HOOKS && gmp__rwmutex_keep_slots)

static inline uintptr_t slot_rw(uint64_t v)
{
	return (uintptr_t)(v >> 16) & ~(uintptr_t)7;
}

/* v's successor holding rw (0: empty). */
static inline uint64_t slot_next(uint64_t v, uintptr_t rw)
{
	return ((uint64_t)rw << 16) | ((v + 1) & VER_MASK);
}

static inline bool slot_fits(const gmp_rwmutex *rw)
{
	uintptr_t a = (uintptr_t)rw;
	return (a >> 48) == 0 && (a & 7) == 0;
}

/* A record: rw << 16 | (slot index + 1). */
static inline uintptr_t rec_rw(uint64_t rec)
{
	return (uintptr_t)(rec >> 16);
}

static inline volatile uint64_t *rec_slot(uint64_t rec)
{
	uint32_t idx = (uint32_t)(rec & 0xffff) - 1;
	return &stripes[idx / NSLOTS].slot[idx % NSLOTS];
}

static inline uint64_t *rec_of(gmp_g *g)
{
	return g ? &g->rwrec : &thread_rec;
}

/* Does rec hold a slot that still holds its rwmutex? */
static inline bool rec_holds(uint64_t rec)
{
	return rec != 0 &&
	       slot_rw(gmp__load64_rlx(rec_slot(rec))) == rec_rw(rec);
}

/* The caller's stripe: its P's, or one chosen once for a thread without
 * a P (counted down from the last, away from the first Ps'). */
static inline uint32_t my_stripe(gmp__m *m)
{
	gmp__p *p = m ? gmp__loadp_rlx(&m->p) : NULL;
	if (GMP__LIKELY(p != NULL))
		return (uint32_t)p->id % NSTRIPES;
	if (GMP__UNLIKELY(thread_stripe == 0))
		thread_stripe =
			NSTRIPES -
			gmp__add32_rlx(&thread_stripe_next, 1) % NSTRIPES;
	return thread_stripe - 1;
}

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

/* Walks the slots of the used stripes that hold rw: counts them into *n
 * and returns a hash of their positions and versions. */
static uint64_t collect(uintptr_t rw, uint64_t used, int32_t *n)
{
	uint64_t h = 0;
	*n = 0;
	for (uint32_t s = 0; s < NSTRIPES; s++) {
		if (!(used & (UINT64_C(1) << s)))
			continue;
		for (uint32_t i = 0; i < NSLOTS; i++) {
			uint64_t v = gmp__load64_sc(&stripes[s].slot[i]);
			if (slot_rw(v) != rw)
				continue;
			(*n)++;
			h ^= mix64(v ^ ((uint64_t)(s * NSLOTS + i) << 56));
		}
	}
	return h;
}

/* Empties up to `max` slots that hold rw, scanning the used stripes from
 * `first` on, and returns how many it emptied: the writer's scan after its
 * subtraction (all of them), or a runlock without a slot of its own (one,
 * from its own stripe first). */
static int32_t slot_take(uintptr_t rw, uint32_t first, int32_t max)
{
	/* sc loads: for the writer, the other half of the Dekker pair of
	 * slot_rlock (a reader's full CAS on its slot, then its load of
	 * reader_count; here the writer's full add on reader_count, then
	 * these). */
	uint64_t used = gmp__load64_sc(&stripes_used);
	int32_t taken = 0;
	for (uint32_t k = 0; k < NSTRIPES; k++) {
		uint32_t s = (first + k) % NSTRIPES;
		if (!(used & (UINT64_C(1) << s)))
			continue;
		for (uint32_t i = 0; i < NSLOTS; i++) {
			volatile uint64_t *sl = &stripes[s].slot[i];
			uint64_t v = gmp__load64_sc(sl);
			/* A failed CAS means the slot changed: read it again
			 * (it may have been emptied and claimed again). full:
			 * for a runlock, this publishes its read section as
			 * runlock's own CAS does. */
			while (slot_rw(v) == rw) {
				if (gmp__cas64_full(sl, v, slot_next(v, 0))) {
					if (++taken == max)
						return taken;
					break;
				}
				v = gmp__load64_sc(sl);
			}
		}
	}
	return taken;
}

/* Do readers hold rw? For messages only: one pass, no snapshot. */
static bool held_by_readers(gmp_rwmutex *rw)
{
	uint32_t c = gmp__load32_rlx(&gmp__rwmutex_words_of(rw)->reader_count);
	if ((int32_t)c >= 0 && (c & NMASK) != 0)
		return true;
	int32_t n;
	collect((uintptr_t)rw, gmp__load64_acq(&stripes_used), &n);
	return n > 0;
}

/* Claims a slot for a read lock, once the caller has seen SLOTS on. 1: in
 * (on the slot, recorded; or counted by a writer that took the slot at
 * once); 0: use the count (a second read lock, no free slot, or slots went
 * off); -1: a writer is pending. */
static int slot_rlock(gmp_rwmutex *rw, gmp__rwmutex_words *w)
{
	gmp__m *m;
	uint64_t *rec = rec_of(gmp__getg(&m));
	/* One slot record per task: a second read lock held at once uses
	 * the count. A record whose slot no longer holds its rwmutex is
	 * stale (another runlock or a writer took that slot). */
	if (GMP__UNLIKELY(rec_holds(*rec)))
		return 0;
	if (GMP__UNLIKELY(!slot_fits(rw)))
		return 0;
	uint32_t s = my_stripe(m);
	uint64_t bit = UINT64_C(1) << s;
	/* acquire, then full: the bit is set before any slot of the stripe
	 * is claimed, in the order the writers' scans read. */
	if (GMP__UNLIKELY(!(gmp__load64_acq(&stripes_used) & bit)))
		gmp__or64_full(&stripes_used, bit);
	volatile uint64_t *sl = stripes[s].slot;
	for (uint32_t i = 0; i < NSLOTS; i++) {
		uint64_t v = gmp__load64_rlx(&sl[i]);
		if (slot_rw(v) != 0)
			continue;
		uint64_t mine = slot_next(v, (uintptr_t)rw);
		/* full: the store half of the Dekker pair with the writer
		 * (slot_take); a lost race moves on to the next slot. */
		if (!gmp__cas64_full(&sl[i], v, mine))
			continue;
		uint32_t c = gmp__load32_sc(&w->reader_count);
		if (GMP__LIKELY((int32_t)c >= 0 && (c & SLOTS))) {
			*rec = ((uint64_t)(uintptr_t)rw << 16) |
			       (s * NSLOTS + i + 1);
			return 1;
		}
		/* A writer came (and may have gone, turning slots off): take
		 * the claim back, unless it already took the slot, and with
		 * it counted us in. */
		if (gmp__cas64_full(&sl[i], mine, slot_next(mine, 0)))
			return (int32_t)c < 0 ? -1 : 0;
		return 1;
	}
	return 0;
}

/* The first look of rlock and tryrlock: -1 a writer is pending, 0 slots
 * off (use the count), else slot_rlock's answer. */
static inline int rlock_look(gmp_rwmutex *rw, gmp__rwmutex_words *w)
{
	/* acquire: a value from the last writer's unlock add or later */
	uint32_t c = gmp__load32_acq(&w->reader_count);
	if ((int32_t)c < 0)
		return -1;
	if (!(c & SLOTS))
		return 0;
	return slot_rlock(rw, w);
}

static _Noreturn void throw_runlock(gmp_rwmutex *rw, const char *what)
{
	gmp__throw("runlock of %s rwmutex %p", what, (void *)rw);
}

/* Out of line: a writer is pending, we sleep until its unlock lets us in. */
static __attribute__((noinline)) void rlock_slow(gmp_rwmutex *rw)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__semacquire(&gmp__rwmutex_words_of(rw)->reader_sem, false,
			GMP__WAIT_RWMUTEX_RLOCK);
}

/* A read lock found another reader in the count while slots are off. One
 * in 64 of these (per thread, so that the note costs nothing most times)
 * takes a step towards turning slots on: the sixteenth step carries into
 * SLOTS, and every writer's unlock clears the steps, so slots come on only
 * where read locks contend far more often than writers come. One try; a
 * lost race only delays it. */
static __thread uint32_t thread_rwnote
	__attribute__((tls_model("initial-exec")));

static __attribute__((noinline)) void note_contention(gmp__rwmutex_words *w)
{
	gmp__m *m = gmp__getm_inline();
	uint32_t *note = m ? &m->rwnote : &thread_rwnote;
	if ((++*note & 63) != 0)
		return;
	uint32_t c = gmp__load32_rlx(&w->reader_count);
	/* acquire: no data rides on it; the weakest CAS atomic.h has. */
	if ((int32_t)c >= 0 && !(c & SLOTS))
		gmp__cas32_acq(&w->reader_count, c, c + HOT);
}

GMP_EXTERN void gmp_rwmutex_rlock(gmp_rwmutex *rw)
{
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	if (rlock_look(rw, w) > 0)
		return;
	/* full (acquire is what it needs): pairs with the writer's unlock
	 * add. */
	uint32_t r = gmp__add32_full(&w->reader_count, 1) + 1;
	if (GMP__UNLIKELY((int32_t)r < 0))
		rlock_slow(rw);
	else if (GMP__UNLIKELY((r & NMASK) >= 2 && !(r & SLOTS)))
		note_contention(w);
}

GMP_EXTERN bool gmp_rwmutex_tryrlock(gmp_rwmutex *rw)
{
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	int got = rlock_look(rw, w);
	if (got != 0)
		return got > 0;
	for (;;) {
		uint32_t c = gmp__load32_rlx(&w->reader_count);
		if ((int32_t)c < 0)
			return false; /* a writer is pending or holds it */
		/* acquire: as rlock's add. Retried only when another reader
		 * changed the count, which is progress. */
		if (gmp__cas32_acq(&w->reader_count, c, c + 1))
			return true;
	}
}

/* A writer's way out (unlock, or the readers of an abandoned trylock):
 * adds WRITER back, takes out `fields` (the SLOTS and HOT fields as they
 * are: no reader changes them while a writer is pending or holds the
 * lock) and puts SLOTS back if `slots`, then lets in the readers that
 * queued, then drops w. */
static void writer_out(gmp_rwmutex *rw, gmp__rwmutex_words *w, uint32_t fields,
		       bool slots)
{
	uint32_t delta = (uint32_t)WRITER - fields + (slots ? SLOTS : 0);
	/* full (release is what it needs): publishes the write section to
	 * every reader's check or add; the result holds the readers queued
	 * behind us. */
	uint32_t r = gmp__add32_full(&w->reader_count, (int32_t)delta) + delta;
	if ((int32_t)r < 0 || (r & ~(uint32_t)(NMASK | SLOTS)) != 0)
		gmp__throw("rwmutex %p: reader count %#x as its writer leaves",
			   (void *)rw, r);
	/* After the add, so that the readers go first: from the add on,
	 * runlocks find no writer and leave reader_wait alone, and the next
	 * writer adds to it only once it has w. */
	gmp__store32_rlx(&w->reader_wait, 0);
	for (uint32_t i = 0; i < (r & NMASK); i++)
		gmp__semrelease(&w->reader_sem, false);
	gmp_mutex_unlock(&w->w);
}

/* A reader leaves through the count while a writer is pending (Go's
 * runlock with rUnlockSlow). */
static void runlock_counted(gmp_rwmutex *rw, gmp__rwmutex_words *w)
{
	/* full (release is what it needs): publishes the read section to
	 * the writer, with the semaphore. */
	gmp__add32_full(&w->reader_count, -1);
	int32_t left = (int32_t)gmp__add32_full(&w->reader_wait, -1) - 1;
	if (left < -(1 << 29))
		throw_runlock(rw, "write-locked");
	if (left == 0) {
		gmp__semrelease(&w->writer_sem, false);
	} else if (left == ABANDONED) {
		uint32_t c = gmp__load32_rlx(&w->reader_count);
		writer_out(rw, w, c & (SLOTS | HMASK), true);
	}
}

/* Is rw read-held? False only on a consistent snapshot that shows no
 * reader and no writer: two identical collections of rw's slots (and of
 * the used stripes) with the read of reader_count between them, so that
 * every value read was the slot's at the moment of that read. */
static bool maybe_held(gmp_rwmutex *rw, gmp__rwmutex_words *w)
{
	int32_t n1, n2;
	uint64_t used1 = gmp__load64_sc(&stripes_used);
	uint64_t h1 = collect((uintptr_t)rw, used1, &n1);
	uint32_t c = gmp__load32_sc(&w->reader_count);
	uint64_t used2 = gmp__load64_sc(&stripes_used);
	uint64_t h2 = collect((uintptr_t)rw, used2, &n2);
	if (used1 != used2 || h1 != h2 || n1 != n2 || (int32_t)c < 0)
		return true;
	return (c & NMASK) != 0 || n1 > 0;
}

static __attribute__((noinline)) void runlock_slow(gmp_rwmutex *rw, gmp__m *m)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	for (;;) {
		uint32_t c = gmp__load32_acq(&w->reader_count);
		if ((int32_t)c < 0) {
			runlock_counted(rw, w);
			return;
		}
		if (c & NMASK) {
			/* full: publishes the read section to a later
			 * writer's subtraction. */
			if (gmp__cas32_full(&w->reader_count, c, c - 1))
				return;
			continue;
		}
		if (slot_take((uintptr_t)rw, my_stripe(m), 1) == 1)
			return;
		if (!maybe_held(rw, w))
			throw_runlock(rw, "unlocked");
		gmp__cpu_relax();
	}
}

GMP_EXTERN void gmp_rwmutex_runlock(gmp_rwmutex *rw)
{
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	uint32_t c = gmp__load32_rlx(&w->reader_count);
	/* Slots off: every reader is in the count (the writer that turned
	 * them off emptied the slots, and claims check after their CAS). Go's
	 * runlock, but a CAS, which never takes the count below zero into
	 * the fields above it; one that finds SLOTS on leaves the loop. */
	while ((int32_t)c >= 0 && !(c & SLOTS) && (c & NMASK) != 0) {
		/* full (release is what it needs): publishes the read section
		 * to a later writer's subtraction. */
		uint32_t seen = gmp__fcas32_full(&w->reader_count, c, c - 1);
		if (seen == c)
			return;
		c = seen;
	}
	gmp__m *m;
	uint64_t *rec = rec_of(gmp__getg(&m));
	uint64_t rc = *rec;
	if (GMP__LIKELY(rc != 0 && rec_rw(rc) == (uintptr_t)rw)) {
		*rec = 0;
		volatile uint64_t *sl = rec_slot(rc);
		uint64_t v = gmp__load64_rlx(sl);
		/* full (release is what it needs): publishes the read
		 * section to the writer whose scan reads the empty slot. A
		 * failed CAS: a writer or another runlock emptied it. */
		if (GMP__LIKELY(slot_rw(v) == (uintptr_t)rw) &&
		    gmp__cas64_full(sl, v, slot_next(v, 0)))
			return;
	}
	runlock_slow(rw, m);
}

/* reader_wait while a writer holds the lock: HELD plus what its unlock
 * needs, so that it does not read reader_count first (which would move
 * that line twice): bit 0 keep slots on, bit 1 SLOTS was on, bits 2-5 the
 * HOT field, all as the writer's subtraction found them (r). */
static inline uint32_t held_word(uint32_t r, bool keep_slots)
{
	uint32_t info = (keep_slots ? 1u : 0u) | ((r & SLOTS) ? 2u : 0u) |
			((r & HMASK) >> 24 << 2);
	return (uint32_t)HELD + info;
}

GMP_EXTERN void gmp_rwmutex_lock(gmp_rwmutex *rw)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	gmp_mutex_lock(&w->w); /* first among writers */
	/* Announce ourselves to readers; learn how many are in. full: the
	 * acquire of what the departed readers published, and the store
	 * half of the Dekker pair with slot_rlock. */
	uint32_t r = gmp__add32_full(&w->reader_count, -WRITER);
	if ((int32_t)r < 0)
		gmp__throw("rwmutex %p: reader count %#x with the writers' "
			   "mutex just taken",
			   (void *)rw, r);
	int32_t taken = (r & SLOTS) ? slot_take((uintptr_t)rw, 0, INT32_MAX)
				    : 0;
	if (taken > 0)
		gmp__add32_full(&w->reader_count, taken);
	int32_t in = (int32_t)(r & NMASK) + taken;
	if (in > 0) {
		int32_t left =
			(int32_t)gmp__add32_full(&w->reader_wait, in) + in;
		if (left < 0)
			throw_runlock(rw, "unlocked");
		if (left != 0)
			gmp__semacquire(&w->writer_sem, false,
					GMP__WAIT_RWMUTEX_LOCK);
	}
	/* From here any runlock is a misuse, caught at once. Slots stay on
	 * only if readers were on them. A plain store: every reader we
	 * counted has left, so nobody else writes the word now but a
	 * misused runlock, which a racing one could at worst not be
	 * caught. */
	gmp__store32_rlx(&w->reader_wait,
			 held_word(r, taken > 0 || KEEP_SLOTS));
}

GMP_EXTERN bool gmp_rwmutex_trylock(gmp_rwmutex *rw)
{
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	if (!gmp_mutex_trylock(&w->w))
		return false;
	uint32_t c = gmp__load32_rlx(&w->reader_count);
	for (;;) {
		int32_t n = 0;
		if ((c & SLOTS) && !PRESCAN_OFF)
			collect((uintptr_t)rw, gmp__load64_acq(&stripes_used),
				&n);
		if ((int32_t)c < 0 || (c & NMASK) != 0 || n != 0) {
			gmp_mutex_unlock(&w->w);
			return false;
		}
		/* full: as lock's add. Retried when only a contended
		 * reader's HOT step changed the word. */
		uint32_t seen =
			gmp__fcas32_full(&w->reader_count, c, c - WRITER);
		if (seen == c)
			break;
		c = seen;
	}
	int32_t taken = (c & SLOTS) ? slot_take((uintptr_t)rw, 0, INT32_MAX)
				    : 0;
	if (GMP__LIKELY(taken == 0)) {
		if (!gmp__cas32_full(&w->reader_wait, 0,
				     held_word(c, KEEP_SLOTS)))
			throw_runlock(rw, "unlocked");
		return true;
	}
	/* Readers claimed slots after our look: they are in, and counted
	 * now. We cannot wait for them; the last one out unlocks for us
	 * (runlock_counted), unless they have all left already. */
	gmp__add32_full(&w->reader_count, taken);
	int32_t left =
		(int32_t)gmp__add32_full(&w->reader_wait, taken + ABANDONED) +
		taken + ABANDONED;
	if (left < ABANDONED)
		throw_runlock(rw, "unlocked");
	if (left == ABANDONED) {
		if (!gmp__cas32_full(&w->reader_wait, (uint32_t)ABANDONED,
				     held_word(c, true)))
			throw_runlock(rw, "unlocked");
		return true;
	}
	return false;
}

GMP_EXTERN void gmp_rwmutex_unlock(gmp_rwmutex *rw)
{
	gmp__stay stay
		__attribute__((cleanup(gmp__stay_end))) = gmp__stay_begin();
	gmp__rwmutex_words *w = gmp__rwmutex_words_of(rw);
	uint32_t info = gmp__load32_rlx(&w->reader_wait) - (uint32_t)HELD;
	if (info >= 64) {
		if ((int32_t)gmp__load32_rlx(&w->reader_count) < 0)
			gmp__throw("unlock of rwmutex %p whose writer still "
				   "waits for readers",
				   (void *)rw);
		gmp__throw("unlock of %s rwmutex %p",
			   held_by_readers(rw) ? "read-locked" : "unlocked",
			   (void *)rw);
	}
	writer_out(rw, w, ((info & 2) ? SLOTS : 0) | (info >> 2 << 24),
		   info & 1);
}

#if GMP__TEST_HOOKS
int32_t gmp__rwmutex_slot_readers(gmp_rwmutex *rw)
{
	int32_t n;
	collect((uintptr_t)rw, gmp__load64_acq(&stripes_used), &n);
	return n;
}

void gmp__rwmutex_slots_on(gmp_rwmutex *rw)
{
	volatile uint32_t *p = &gmp__rwmutex_words_of(rw)->reader_count;
	uint32_t c = gmp__load32_rlx(p);
	while ((int32_t)c >= 0 && !(c & SLOTS)) {
		uint32_t seen = gmp__fcas32_full(p, c, c | SLOTS);
		if (seen == c)
			return;
		c = seen;
	}
}
#endif
