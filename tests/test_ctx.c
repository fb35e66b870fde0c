/* The raw context switch (src/ctx), tested with no scheduler: only
 * gmp__ctx_make / swap / gogo / mcall and malloc'd stacks.
 *
 * What C cannot express (chosen values in callee-saved registers across a
 * call, rsp/sp at a function's first instruction, the FP control words) is
 * done by the helpers in test_ctx_<arch>.S; everything else is here.
 *
 * Under the sanitizers every switch is announced, as the runtime does:
 * to ASan with __sanitizer_start/finish_switch_fiber, so it always knows
 * which stack is live, and to TSan with __tsan_switch_to_fiber, so each
 * context keeps its own shadow call stack.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unwind.h>

#include "gmp_test.h"
#include "ctx.h"

#if defined(__SANITIZE_ADDRESS__)
#define CTX_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CTX_TEST_ASAN 1
#endif
#endif
#ifndef CTX_TEST_ASAN
#define CTX_TEST_ASAN 0
#endif
#if CTX_TEST_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__SANITIZE_THREAD__)
#define CTX_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CTX_TEST_TSAN 1
#endif
#endif
#ifndef CTX_TEST_TSAN
#define CTX_TEST_TSAN 0
#endif
#if CTX_TEST_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* splitmix64: distinct, well-mixed register patterns from a seed. */
static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

#define NFPCTL (sizeof fpctl_values / sizeof fpctl_values[0])

/* ---- the architecture-specific part --------------------------------------
 *
 * struct ctx_test_regs is the callee-saved state as the .S helpers load and
 * compare it; its layout is fixed by them. FPCTL values are what
 * ctx_test_fpctl_get() returns: on x86-64 MXCSR in bits 0-31 and the x87
 * control word in bits 32-47, on aarch64 FPCR.
 */
#if defined(__x86_64__)

struct ctx_test_regs {
	uint64_t gpr[6]; /* rbx, rbp, r12, r13, r14, r15 */
	uint32_t mxcsr;
	uint16_t x87cw;
	uint16_t pad_;
};

static const char *const slot_names[] = {
	"rbx", "rbp", "r12", "r13", "r14", "r15", "mxcsr", "x87cw",
};

#define FPCTL(mxcsr, cw) ((uint64_t)(cw) << 32 | (mxcsr))

/* Valid, pairwise different control settings: rounding modes, FTZ, x87
 * precision. An even count, so that two seeds of different parity never
 * pick the same one. */
static const uint64_t fpctl_values[] = {
	FPCTL(0x1F80, 0x037F), /* defaults */
	FPCTL(0x3F80, 0x077F), /* round down */
	FPCTL(0x5F80, 0x0B7F), /* round up */
	FPCTL(0x7F80, 0x0F7F), /* round toward zero */
	FPCTL(0x9F80, 0x027F), /* FTZ; x87 double precision */
	FPCTL(0xFF80, 0x007F), /* FTZ, toward zero; x87 single precision */
};

#define FPCTL_DEFAULT FPCTL(GMP__MXCSR_DEFAULT, GMP__X87CW_DEFAULT)
#define FPCTL_UP FPCTL(0x5F80, 0x0B7F)
#define FPCTL_ZERO_FTZ FPCTL(0xFF80, 0x0F7F)
/* MXCSR's low six bits are sticky exception flags, not control. */
#define FPCTL_CONTROL(v) ((v) & ~(uint64_t)0x3F)

/* At its first instruction a function sees (sp + 8) % 16 == 0: the call
 * pushed the return address onto an aligned stack. */
#define SP_ALIGNED_AT_ENTRY(sp) (((sp) + 8) % 16 == 0)
/* Where mcall's fn starts: mcall calls it from the given sp. */
#define MCALL_FN_SP(sp) ((sp)-8)

/* A pattern for every slot; seed's parity picks the FP control setting's
 * parity, so the two sides of a swap never load the same one. */
static void fill_regs(struct ctx_test_regs *r, uint64_t seed)
{
	uint64_t fp = fpctl_values[seed % NFPCTL];
	for (int i = 0; i < 6; i++)
		r->gpr[i] = mix(&seed);
	r->mxcsr = (uint32_t)fp;
	r->x87cw = (uint16_t)(fp >> 32);
	r->pad_ = 0;
}

#elif defined(__aarch64__)

struct ctx_test_regs {
	uint64_t x[11]; /* x19 .. x29 */
	uint64_t d[8];  /* d8 .. d15, raw bits */
	uint64_t fpcr;
};

static const char *const slot_names[] = {
	"x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",
	"x29", "d8",  "d9",  "d10", "d11", "d12", "d13", "d14", "d15", "fpcr",
};

#define FPCR_RP (1u << 22)
#define FPCR_RM (2u << 22)
#define FPCR_RZ (3u << 22)
#define FPCR_FZ (1u << 24)
#define FPCR_DN (1u << 25)

/* Valid, pairwise different control settings (bits every FPU implements:
 * rounding mode, flush-to-zero, default NaN). An even count, so that two
 * seeds of different parity never pick the same one. */
static const uint64_t fpctl_values[] = {
	0, FPCR_RP, FPCR_RM, FPCR_RZ, FPCR_FZ, FPCR_DN | FPCR_FZ | FPCR_RZ,
};

#define FPCTL_DEFAULT ((uint64_t)GMP__FPCR_DEFAULT)
#define FPCTL_UP ((uint64_t)FPCR_RP)
#define FPCTL_ZERO_FTZ ((uint64_t)(FPCR_RZ | FPCR_FZ))
#define FPCTL_CONTROL(v) (v)

/* AAPCS64 keeps sp 16-byte aligned at all times. */
#define SP_ALIGNED_AT_ENTRY(sp) ((sp) % 16 == 0)
/* mcall's blr leaves sp as given. */
#define MCALL_FN_SP(sp) (sp)

static void fill_regs(struct ctx_test_regs *r, uint64_t seed)
{
	r->fpcr = fpctl_values[seed % NFPCTL];
	for (int i = 0; i < 11; i++)
		r->x[i] = mix(&seed);
	for (int i = 0; i < 8; i++)
		r->d[i] = mix(&seed);
}

#else
#error "test_ctx: unsupported architecture"
#endif

#define NSLOTS (sizeof slot_names / sizeof slot_names[0])
_Static_assert(NFPCTL % 2 == 0, "fill_regs relies on an even count");

/* The .S helpers. */
unsigned ctx_test_swap_check(gmp__gobuf *save, const gmp__gobuf *load,
			     const struct ctx_test_regs *pat);
unsigned ctx_test_mcall_check(gmp__gobuf *save, uintptr_t sp,
			      void (*fn)(void *), void *arg,
			      const struct ctx_test_regs *pat);
_Noreturn void ctx_test_clobber_gogo(const gmp__gobuf *load,
				     const struct ctx_test_regs *pat);
void ctx_test_sp_probe(void *arg);
void ctx_test_sp_probe_continue(void *arg);
uint64_t ctx_test_fpctl_get(void);
void ctx_test_fpctl_set(uint64_t v);

/* ---- contexts with their stacks, announced to the sanitizers ------------- */

/* A context plus what the sanitizers must be told when switching to it:
 * for ASan the bounds of the stack it runs on and (while it is switched
 * out) its fake stack, for TSan its fiber. */
struct tctx {
	gmp__gobuf buf;
	const void *lo;
	size_t size;
	void *fake;
	void *tsan;
	void *mem; /* the malloc'd stack, if we own one */
};

/* The test's own thread stack. Its bounds (as ASan sees them) are learnt
 * by main_ctx_init. */
static struct tctx main_ctx;

/* Called just before switching from `from` to `to`. */
static void sw_leave(struct tctx *from, const struct tctx *to, bool dying)
{
	(void)from, (void)to, (void)dying;
#if CTX_TEST_ASAN
	__sanitizer_start_switch_fiber(dying ? NULL : &from->fake, to->lo,
				       to->size);
#endif
#if CTX_TEST_TSAN
	__tsan_switch_to_fiber(to->tsan, 0);
#endif
}

static void sw_arrive(struct tctx *self)
{
#if CTX_TEST_ASAN
	__sanitizer_finish_switch_fiber(self->fake, NULL, NULL);
#else
	(void)self;
#endif
}

static void tswap(struct tctx *from, struct tctx *to)
{
	sw_leave(from, to, false);
	gmp__ctx_swap(&from->buf, &to->buf);
	sw_arrive(from);
}

/* Leaves `from` for good: ASan may drop its fake stack. */
static _Noreturn void tgogo_final(struct tctx *from, struct tctx *to)
{
	sw_leave(from, to, true);
	gmp__ctx_gogo(&to->buf);
}

static void tctx_alloc(struct tctx *c, size_t size)
{
	*c = (struct tctx){ 0 };
	c->mem = malloc(size);
	assert_non_null(c->mem);
	c->lo = c->mem;
	c->size = size;
#if CTX_TEST_TSAN
	c->tsan = __tsan_create_fiber(0);
#endif
}

static void tctx_make(struct tctx *c, size_t size, void (*entry)(void *),
		      void *arg)
{
	tctx_alloc(c, size);
	gmp__ctx_make(&c->buf, c->mem, size, entry, arg);
}

static void tctx_free(struct tctx *c)
{
#if CTX_TEST_TSAN
	__tsan_destroy_fiber(c->tsan);
#endif
	free(c->mem);
	c->mem = NULL;
}

/* The top of c's stack, 16-byte aligned: an mcall target. */
static uintptr_t tctx_top(const struct tctx *c)
{
	return ((uintptr_t)c->lo + c->size) & ~(uintptr_t)15;
}

static bool tctx_contains(const struct tctx *c, uintptr_t addr)
{
	return addr >= (uintptr_t)c->lo && addr < (uintptr_t)c->lo + c->size;
}

#if CTX_TEST_ASAN
static struct tctx init_ctx;

static void init_entry(void *arg)
{
	(void)arg;
	/* The stack we came from is the test thread's; ASan says where. */
	__sanitizer_finish_switch_fiber(NULL, &main_ctx.lo, &main_ctx.size);
	tgogo_final(&init_ctx, &main_ctx);
}
#endif

/* Learns what the sanitizers call the test thread's own context; every
 * test calls it before its first switch. */
static void main_ctx_init(void)
{
#if CTX_TEST_TSAN
	main_ctx.tsan = __tsan_get_current_fiber();
#endif
#if CTX_TEST_ASAN
	if (main_ctx.size != 0)
		return;
	tctx_make(&init_ctx, 64 * 1024, init_entry, NULL);
	tswap(&main_ctx, &init_ctx);
	tctx_free(&init_ctx);
#endif
}

/* Names the slots set in a mismatch mask (bit 31 is sp), for failure
 * messages. */
static const char *mask_names(unsigned mask, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < 32; i++) {
		if (!(mask & (1u << i)))
			continue;
		const char *name = i < NSLOTS ? slot_names[i]
				   : i == 31  ? "sp"
					      : "?";
		n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s ",
				      name);
	}
	return buf;
}

#define assert_regs_ok(mask, who)                                              \
	do {                                                                   \
		char names_[256];                                              \
		if ((mask) != 0)                                               \
			fail_msg("%s: not preserved: %s", (who),               \
				 mask_names((mask), names_, sizeof names_));   \
	} while (0)

/* ---- callee-saved registers ---------------------------------------------- */

#define REG_ROUNDS 1000

struct regs_test {
	struct tctx peer;
	unsigned peer_mask;
	int peer_rounds;
	bool done;
};

/* The other side of the swap test: it loads its own patterns (which are the
 * clobbering as far as the main side is concerned) and checks that it gets
 * them back each time main swaps in again. */
static void regs_peer(void *arg)
{
	struct regs_test *t = arg;
	sw_arrive(&t->peer);
	for (uint64_t r = 0; !t->done; r++) {
		struct ctx_test_regs p;
		fill_regs(&p, 2 * r + 1);
		sw_leave(&t->peer, &main_ctx, false);
		t->peer_mask |=
			ctx_test_swap_check(&t->peer.buf, &main_ctx.buf, &p);
		sw_arrive(&t->peer);
		t->peer_rounds++;
	}
	tgogo_final(&t->peer, &main_ctx);
}

/* Both sides fill every callee-saved register and FP control word with
 * their own pattern before each swap, so each side's swap is surrounded by
 * the other's clobbering; a pattern that does not come back intact names
 * the register that was lost. */
static void test_ctx_swap_preserves_callee_saved(void **state)
{
	(void)state;
	main_ctx_init();
	struct regs_test t = { 0 };
	tctx_make(&t.peer, 64 * 1024, regs_peer, &t);

	unsigned mask = 0;
	for (uint64_t r = 0; r < REG_ROUNDS; r++) {
		struct ctx_test_regs p;
		fill_regs(&p, 2 * r);
		sw_leave(&main_ctx, &t.peer, false);
		mask |= ctx_test_swap_check(&main_ctx.buf, &t.peer.buf, &p);
		sw_arrive(&main_ctx);
	}
	t.done = true;
	tswap(&main_ctx, &t.peer);
	tctx_free(&t.peer);

	assert_regs_ok(mask, "main side");
	assert_regs_ok(t.peer_mask, "peer side");
	assert_int_equal(t.peer_rounds, REG_ROUNDS);
}

struct mcall_regs_test {
	struct tctx g0;
	struct ctx_test_regs clobber;
	void *arg_seen;
	uintptr_t frame_seen;
	int runs;
};

/* Runs on the g0 stack: records where it is, then resumes the saved
 * context through a gogo with every register and control word clobbered. */
static void mcall_clobber_fn(void *arg)
{
	struct mcall_regs_test *t = arg;
	sw_arrive(&t->g0);
	t->arg_seen = arg;
	t->frame_seen = (uintptr_t)__builtin_frame_address(0);
	t->runs++;
	sw_leave(&t->g0, &main_ctx, true);
	ctx_test_clobber_gogo(&main_ctx.buf, &t->clobber);
}

/* The runtime's own path: mcall saves, fn on the other stack gets its
 * argument, and a gogo with every register clobbered must still make mcall
 * return with the caller's registers, stack and locals intact. */
static void test_ctx_mcall_gogo_preserves_callee_saved(void **state)
{
	(void)state;
	main_ctx_init();
	struct mcall_regs_test t = { 0 };
	tctx_alloc(&t.g0, 64 * 1024);
	volatile uint64_t canary = 0x5A5A5A5AC0FFEEull;

	unsigned mask = 0;
	for (uint64_t r = 0; r < REG_ROUNDS; r++) {
		struct ctx_test_regs p;
		fill_regs(&p, 2 * r);
		fill_regs(&t.clobber, 2 * r + 1);
		sw_leave(&main_ctx, &t.g0, false);
		mask |= ctx_test_mcall_check(&main_ctx.buf, tctx_top(&t.g0),
					     mcall_clobber_fn, &t, &p);
		sw_arrive(&main_ctx);
	}
	tctx_free(&t.g0);

	assert_regs_ok(mask, "mcall/gogo");
	assert_int_equal(t.runs, REG_ROUNDS);
	assert_ptr_equal(t.arg_seen, &t);
	assert_true(tctx_contains(&t.g0, t.frame_seen));
	assert_true(canary == 0x5A5A5A5AC0FFEEull);
}

/* ---- stack alignment ----------------------------------------------------- */

/* ctx_test_sp_probe records sp at its first instruction into `sp`, then
 * enters ctx_test_sp_probe_continue with the same sp. */
struct probe {
	uintptr_t sp; /* must stay first: the .S helper writes it */
	struct tctx *self;
	struct tctx *back;
	int runs;
};

void ctx_test_sp_probe_continue(void *arg)
{
	struct probe *p = arg;
	sw_arrive(p->self);
	p->runs++;
	tgogo_final(p->self, p->back);
}

/* Whatever the alignment and size of the stack given to ctx_make, entry
 * starts with the ABI's alignment, near the top of that stack. */
static void test_ctx_entry_stack_alignment(void **state)
{
	(void)state;
	main_ctx_init();
	static const size_t sizes[] = { 64, 65, 71, 79, 100, 4096, 4103, 8191 };
	/* The probe's C continuation needs more than 64 bytes, so each
	 * context's region sits at the top of a larger block: the code runs
	 * below stack_lo but inside memory we own, and ASan is told about
	 * the whole block. */
	enum { BLOCK = 64 * 1024 };
	struct tctx c;
	tctx_alloc(&c, BLOCK);

	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		for (size_t off = 0; off < 32; off++) {
			size_t size = sizes[s];
			char *lo = (char *)c.mem + BLOCK - 32 - size + off;
			struct probe p = { .self = &c, .back = &main_ctx };
			gmp__ctx_make(&c.buf, lo, size, ctx_test_sp_probe, &p);
			tswap(&main_ctx, &c);

			uintptr_t top = (uintptr_t)lo + size;
			assert_int_equal(p.runs, 1);
			if (!SP_ALIGNED_AT_ENTRY(p.sp))
				fail_msg("entry sp %#lx misaligned (stack %p + "
					 "%zu)",
					 (unsigned long)p.sp, lo, size);
			assert_true(p.sp >= (uintptr_t)lo && p.sp < top);
			/* Nothing but the zeroed slots, the alignment slack
			 * and a return address lies above entry's sp. */
			assert_true(top - p.sp <= 48);
		}
	}
	tctx_free(&c);
}

/* fn starts exactly on the stack mcall was given, with the ABI's
 * alignment, and mcall returns once fn resumes the saved context. */
static void test_ctx_mcall_stack_alignment(void **state)
{
	(void)state;
	main_ctx_init();
	struct tctx g0;
	tctx_alloc(&g0, 64 * 1024);

	for (uintptr_t k = 0; k < 16; k++) {
		uintptr_t sp = tctx_top(&g0) - 16 * k;
		struct probe p = { .self = &g0, .back = &main_ctx };
		sw_leave(&main_ctx, &g0, false);
		gmp__ctx_mcall(&main_ctx.buf, sp, ctx_test_sp_probe, &p);
		sw_arrive(&main_ctx);

		assert_int_equal(p.runs, 1);
		assert_true(SP_ALIGNED_AT_ENTRY(p.sp));
		assert_int_equal(p.sp, MCALL_FN_SP(sp));
	}
	tctx_free(&g0);
}

/* ---- chains of contexts -------------------------------------------------- */

#define RING_N 100
#define RING_ROUNDS 1000

struct ring {
	struct tctx ctx[RING_N];
	struct ring_member {
		struct ring *ring;
		int idx;
	} member[RING_N];
	uint64_t token;
	int bad_token;
	int bad_local;
};

/* Member i of the ring checks the token it receives, passes it on to
 * member i+1, and leaves for good after the last round. The last member of
 * the last round hands back to main. */
static void ring_entry(void *arg)
{
	struct ring_member *m = arg;
	struct ring *r = m->ring;
	int i = m->idx;
	struct tctx *self = &r->ctx[i];
	volatile uint64_t local = 0x1000 + (uint64_t)i; /* on this stack */

	sw_arrive(self);
	for (int round = 0; round < RING_ROUNDS; round++) {
		if (r->token != (uint64_t)round * RING_N + (uint64_t)i)
			r->bad_token++;
		if (local != 0x1000 + (uint64_t)i + (uint64_t)round)
			r->bad_local++;
		local = local + 1;
		r->token++;
		bool last = round + 1 == RING_ROUNDS;
		struct tctx *next;
		if (i + 1 < RING_N)
			next = &r->ctx[i + 1];
		else if (last)
			next = &main_ctx;
		else
			next = &r->ctx[0];
		if (last)
			tgogo_final(self, next);
		tswap(self, next);
	}
}

/* A ring of contexts, each switching to the next for many rounds: the
 * token must visit them in order, and each context's locals must survive
 * all the switches in between. */
static void test_ctx_ring_passes_values(void **state)
{
	(void)state;
	main_ctx_init();
	struct ring *r = calloc(1, sizeof *r);
	assert_non_null(r);
	for (int i = 0; i < RING_N; i++) {
		r->member[i] = (struct ring_member){ .ring = r, .idx = i };
		tctx_make(&r->ctx[i], 64 * 1024, ring_entry, &r->member[i]);
	}

	tswap(&main_ctx, &r->ctx[0]);

	uint64_t token = r->token;
	int bad_token = r->bad_token, bad_local = r->bad_local;
	for (int i = 0; i < RING_N; i++)
		tctx_free(&r->ctx[i]);
	free(r);
	assert_int_equal(token, (uint64_t)RING_N * RING_ROUNDS);
	assert_int_equal(bad_token, 0);
	assert_int_equal(bad_local, 0);
}

/* ---- floating-point control ---------------------------------------------- */

/* Arithmetic whose result depends on the FP control of the context that
 * runs it. The operands are volatile so nothing is folded at compile time
 * or moved across a switch. */
static uint64_t third_bits(void)
{
	volatile double one = 1.0, three = 3.0;
	double q = one / three;
	uint64_t bits;
	memcpy(&bits, &q, sizeof bits);
	return bits;
}

static bool flushes_to_zero(void)
{
	volatile double tiny = 2.2250738585072014e-308, four = 4.0;
	return tiny / four == 0.0;
}

/* 1/3 rounded to nearest (which truncates here) and rounded up. */
#define THIRD_NEAREST 0x3FD5555555555555ull
#define THIRD_UP 0x3FD5555555555556ull

#define FP_ROUNDS 200

struct fp_test {
	struct tctx peer;
	uint64_t peer_initial;
	int peer_bad;
	int peer_rounds;
	bool done;
};

/* Runs toward zero with flush-to-zero, while main runs rounding up. */
static void fp_peer(void *arg)
{
	struct fp_test *t = arg;
	sw_arrive(&t->peer);
	t->peer_initial = ctx_test_fpctl_get();
	ctx_test_fpctl_set(FPCTL_ZERO_FTZ);
	while (!t->done) {
		if (FPCTL_CONTROL(ctx_test_fpctl_get()) !=
		    FPCTL_CONTROL(FPCTL_ZERO_FTZ))
			t->peer_bad++;
		if (third_bits() != THIRD_NEAREST || !flushes_to_zero())
			t->peer_bad++;
		t->peer_rounds++;
		tswap(&t->peer, &main_ctx);
	}
	tgogo_final(&t->peer, &main_ctx);
}

/* Two contexts with different rounding and flush-to-zero settings keep
 * their own across switches, in the control words and in the arithmetic. */
static void test_ctx_fp_control_per_context(void **state)
{
	(void)state;
	main_ctx_init();
	struct fp_test t = { 0 };
	tctx_make(&t.peer, 64 * 1024, fp_peer, &t);

	uint64_t saved = ctx_test_fpctl_get();
	ctx_test_fpctl_set(FPCTL_UP);
	int bad = 0;
	for (int r = 0; r < FP_ROUNDS; r++) {
		tswap(&main_ctx, &t.peer);
		if (FPCTL_CONTROL(ctx_test_fpctl_get()) !=
		    FPCTL_CONTROL(FPCTL_UP))
			bad++;
		if (third_bits() != THIRD_UP || flushes_to_zero())
			bad++;
	}
	t.done = true;
	tswap(&main_ctx, &t.peer);
	ctx_test_fpctl_set(saved);
	tctx_free(&t.peer);

	assert_int_equal(bad, 0);
	assert_int_equal(t.peer_bad, 0);
	assert_int_equal(t.peer_rounds, FP_ROUNDS);
	assert_int_equal(FPCTL_CONTROL(t.peer_initial),
			 FPCTL_CONTROL(FPCTL_DEFAULT));
}

struct fp_fresh_test {
	struct tctx ctx;
	uint64_t seen;
	uint64_t third;
	bool ftz;
};

static void fp_fresh_entry(void *arg)
{
	struct fp_fresh_test *t = arg;
	sw_arrive(&t->ctx);
	t->seen = ctx_test_fpctl_get();
	t->third = third_bits();
	t->ftz = flushes_to_zero();
	tgogo_final(&t->ctx, &main_ctx);
}

/* A fresh context starts at the ABI defaults whatever its creator runs
 * with, and the creator's settings are untouched by it. */
static void test_ctx_fp_control_fresh_default(void **state)
{
	(void)state;
	main_ctx_init();
	uint64_t saved = ctx_test_fpctl_get();
	uint64_t mine[] = { FPCTL_UP, FPCTL_ZERO_FTZ };
	uint64_t seen[2], after[2], third[2];
	bool ftz[2];

	for (int i = 0; i < 2; i++) {
		struct fp_fresh_test t = { 0 };
		ctx_test_fpctl_set(mine[i]);
		tctx_make(&t.ctx, 64 * 1024, fp_fresh_entry, &t);
		tswap(&main_ctx, &t.ctx);
		after[i] = ctx_test_fpctl_get();
		seen[i] = t.seen;
		third[i] = t.third;
		ftz[i] = t.ftz;
		tctx_free(&t.ctx);
	}
	ctx_test_fpctl_set(saved);

	for (int i = 0; i < 2; i++) {
		assert_int_equal(FPCTL_CONTROL(seen[i]),
				 FPCTL_CONTROL(FPCTL_DEFAULT));
		assert_int_equal(FPCTL_CONTROL(after[i]),
				 FPCTL_CONTROL(mine[i]));
		assert_int_equal(third[i], THIRD_NEAREST);
		assert_false(ftz[i]);
	}
}

/* ---- contract violations abort with a "gmp: " message -------------------- */

/* Runs fn in a child process whose stderr goes into a pipe. Returns the
 * child's wait status; out receives what it wrote. */
static int run_in_child(void (*fn)(void), char *out, size_t cap)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		close(pfd[0]);
		dup2(pfd[1], 2);
		close(pfd[1]);
		main_ctx_init();
		fn();
		_exit(0); /* fn was supposed to abort */
	}
	close(pfd[1]);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(pfd[0], out + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == cap - 1)
			break;
	}
	out[len] = '\0';
	close(pfd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	return status;
}

static void assert_gmp_abort(void (*fn)(void))
{
	char out[4096];
	int status = run_in_child(fn, out, sizeof out);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("child did not abort (status %#x); stderr: %s", status,
			 out);
	if (strncmp(out, "gmp: ", 5) != 0)
		fail_msg("abort message does not start with \"gmp: \": %s",
			 out);
}

static struct tctx child_ctx;

static void returning_fn(void *arg)
{
	(void)arg;
	sw_arrive(&child_ctx);
}

static void child_entry_returns(void)
{
	tctx_make(&child_ctx, 64 * 1024, returning_fn, NULL);
	tswap(&main_ctx, &child_ctx);
}

static void child_mcall_fn_returns(void)
{
	tctx_alloc(&child_ctx, 64 * 1024);
	sw_leave(&main_ctx, &child_ctx, false);
	gmp__ctx_mcall(&main_ctx.buf, tctx_top(&child_ctx), returning_fn, NULL);
}

static void child_make_null_stack(void)
{
	gmp__gobuf b;
	gmp__ctx_make(&b, NULL, 64 * 1024, returning_fn, NULL);
}

static void child_make_tiny_stack(void)
{
	static char mem[128];
	gmp__gobuf b;
	gmp__ctx_make(&b, mem, 63, returning_fn, NULL);
}

static void test_ctx_entry_return_aborts(void **state)
{
	(void)state;
	assert_gmp_abort(child_entry_returns);
}

static void test_ctx_mcall_fn_return_aborts(void **state)
{
	(void)state;
	assert_gmp_abort(child_mcall_fn_returns);
}

static void test_ctx_make_rejects_bad_stack(void **state)
{
	(void)state;
	assert_gmp_abort(child_make_null_stack);
	assert_gmp_abort(child_make_tiny_stack);
}

/* ---- unwinding stops at the outermost frames -----------------------------
 *
 * The unwinder is driven directly (glibc's backtrace() hides a looping
 * unwind by stopping when it makes no progress), so the tests see whether
 * it ended cleanly and every frame it reported. */

#define BT_MAX 32

struct bt_test {
	struct tctx ctx;
	uintptr_t pcs[BT_MAX];
	int n;
	_Unwind_Reason_Code rc;
	void *parent_fp;
};

static _Unwind_Reason_Code bt_frame(struct _Unwind_Context *uc, void *arg)
{
	struct bt_test *t = arg;
	if (t->n == BT_MAX)
		return _URC_NORMAL_STOP;
	t->pcs[t->n++] = _Unwind_GetIP(uc);
	return _URC_NO_REASON;
}

static void bt_here(void *arg)
{
	struct bt_test *t = arg;
	sw_arrive(&t->ctx);
	/* The caller's frame pointer, as saved by this frame's prologue
	 * (rbp on x86-64; the frame record's fp slot on aarch64). */
	t->parent_fp = *(void **)__builtin_frame_address(0);
	t->rc = _Unwind_Backtrace(bt_frame, t);
	tgogo_final(&t->ctx, &main_ctx);
}

/* Checks that the walk ended cleanly, with a return address inside fn as
 * its last frame and nowhere else. libgcc reports one more frame with pc 0
 * past a frame whose return address is marked undefined; that one is
 * allowed. */
static void assert_bt_ends_in(const struct bt_test *t, uintptr_t fn)
{
	if (t->rc != _URC_END_OF_STACK)
		fail_msg("unwind ended with %d after %d frames", (int)t->rc,
			 t->n);
	int n = t->n;
	if (n > 0 && t->pcs[n - 1] == 0)
		n--;
	assert_true(n >= 2);
	for (int i = 0; i < n; i++) {
		/* A return address follows its call, hence the -1. */
		void *f =
			_Unwind_FindEnclosingFunction((void *)(t->pcs[i] - 1));
		if (((uintptr_t)f == fn) == (i == n - 1))
			continue;
		for (int j = 0; j < t->n; j++)
			print_message("frame %d: pc %#lx\n", j,
				      (unsigned long)t->pcs[j]);
		fail_msg("frame %d of %d is not the one expected to be "
			 "outermost (at %#lx)",
			 i, n, (unsigned long)fn);
	}
}

/* A backtrace taken inside a task ends at the trampoline, instead of
 * running off the top of the task's stack. */
static void test_ctx_backtrace_stops_at_trampoline(void **state)
{
	(void)state;
	main_ctx_init();
	struct bt_test *t = calloc(1, sizeof *t);
	assert_non_null(t);
	tctx_make(&t->ctx, 256 * 1024, bt_here, t);
	/* Garbage everywhere on the stack, even in the slots ctx_make
	 * zeroed: only the CFI may stop the unwinder at the trampoline. */
	memset(t->ctx.mem, 0xA5, 256 * 1024);
	tswap(&main_ctx, &t->ctx);

	struct bt_test copy = *t;
	tctx_free(&t->ctx);
	free(t);
	assert_bt_ends_in(&copy, (uintptr_t)gmp__ctx_trampoline);
	/* And a frame-pointer walk ends there too. */
	assert_null(copy.parent_fp);
}

/* A backtrace taken on the mcall stack ends at gmp__ctx_mcall, instead of
 * walking from the g0 stack back into the task's. */
static void test_ctx_backtrace_in_mcall_stops_at_mcall(void **state)
{
	(void)state;
	main_ctx_init();
	struct bt_test *t = calloc(1, sizeof *t);
	assert_non_null(t);
	tctx_alloc(&t->ctx, 256 * 1024);
	memset(t->ctx.mem, 0xA5, 256 * 1024);
	sw_leave(&main_ctx, &t->ctx, false);
	gmp__ctx_mcall(&main_ctx.buf, tctx_top(&t->ctx), bt_here, t);
	sw_arrive(&main_ctx);

	struct bt_test copy = *t;
	tctx_free(&t->ctx);
	free(t);
	assert_bt_ends_in(&copy, (uintptr_t)gmp__ctx_mcall);
	assert_null(copy.parent_fp);
}

GMP_TEST_MAIN(cmocka_unit_test(test_ctx_swap_preserves_callee_saved),
	      cmocka_unit_test(test_ctx_mcall_gogo_preserves_callee_saved),
	      cmocka_unit_test(test_ctx_entry_stack_alignment),
	      cmocka_unit_test(test_ctx_mcall_stack_alignment),
	      cmocka_unit_test(test_ctx_ring_passes_values),
	      cmocka_unit_test(test_ctx_fp_control_per_context),
	      cmocka_unit_test(test_ctx_fp_control_fresh_default),
	      cmocka_unit_test(test_ctx_entry_return_aborts),
	      cmocka_unit_test(test_ctx_mcall_fn_return_aborts),
	      cmocka_unit_test(test_ctx_make_rejects_bad_stack),
	      cmocka_unit_test(test_ctx_backtrace_stops_at_trampoline),
	      cmocka_unit_test(test_ctx_backtrace_in_mcall_stops_at_mcall))
