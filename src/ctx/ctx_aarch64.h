/* The gobuf on aarch64 (AAPCS64), shared by ctx_aarch64.S and C.
 *
 * The offsets are plain numbers so the assembler can use them; the C block
 * below checks every one of them against the struct, so the two views
 * cannot drift apart. Neighbouring slots that the asm moves with one ldp/stp
 * are adjacent and 8-byte aligned.
 *
 *   off  size  slot
 *     0     8  sp      stack pointer to resume with
 *     8     8  pc      address to resume at; also loaded into x30, so the
 *                      resumed code sees lr == pc exactly as after a ret
 *    16    80  x19-x28 (x19: a fresh context's entry, x20: its argument)
 *    96     8  x29     frame pointer; 0 in a fresh context, ending
 *                      frame-record walks
 *   104    64  d8-d15  low halves of v8-v15, the only callee-saved FP state
 *   168     8  fpcr    rounding mode, flush-to-zero, default-NaN
 *   176        size
 */
#ifndef GMP_CTX_AARCH64_H
#define GMP_CTX_AARCH64_H

#define GMP__GOBUF_SP 0
#define GMP__GOBUF_PC 8
#define GMP__GOBUF_X19 16
#define GMP__GOBUF_X20 24
#define GMP__GOBUF_X21 32
#define GMP__GOBUF_X22 40
#define GMP__GOBUF_X23 48
#define GMP__GOBUF_X24 56
#define GMP__GOBUF_X25 64
#define GMP__GOBUF_X26 72
#define GMP__GOBUF_X27 80
#define GMP__GOBUF_X28 88
#define GMP__GOBUF_X29 96
#define GMP__GOBUF_D8 104
#define GMP__GOBUF_D9 112
#define GMP__GOBUF_D10 120
#define GMP__GOBUF_D11 128
#define GMP__GOBUF_D12 136
#define GMP__GOBUF_D13 144
#define GMP__GOBUF_D14 152
#define GMP__GOBUF_D15 160
#define GMP__GOBUF_FPCR 168
#define GMP__GOBUF_SIZE 176

/* FPCR at the ABI's process-start value: round to nearest, no flush-to-zero,
 * no default-NaN, no traps. A fresh context starts with it. */
#define GMP__FPCR_DEFAULT 0

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

struct gmp__gobuf {
	uintptr_t sp;
	uintptr_t pc;
	uint64_t x19;
	uint64_t x20;
	uint64_t x21;
	uint64_t x22;
	uint64_t x23;
	uint64_t x24;
	uint64_t x25;
	uint64_t x26;
	uint64_t x27;
	uint64_t x28;
	uint64_t x29;
	/* Raw bits: the ABI preserves only these low halves of v8-v15. */
	uint64_t d8;
	uint64_t d9;
	uint64_t d10;
	uint64_t d11;
	uint64_t d12;
	uint64_t d13;
	uint64_t d14;
	uint64_t d15;
	uint64_t fpcr;
};

_Static_assert(offsetof(struct gmp__gobuf, sp) == GMP__GOBUF_SP, "gobuf sp");
_Static_assert(offsetof(struct gmp__gobuf, pc) == GMP__GOBUF_PC, "gobuf pc");
_Static_assert(offsetof(struct gmp__gobuf, x19) == GMP__GOBUF_X19, "gobuf x19");
_Static_assert(offsetof(struct gmp__gobuf, x20) == GMP__GOBUF_X20, "gobuf x20");
_Static_assert(offsetof(struct gmp__gobuf, x21) == GMP__GOBUF_X21, "gobuf x21");
_Static_assert(offsetof(struct gmp__gobuf, x22) == GMP__GOBUF_X22, "gobuf x22");
_Static_assert(offsetof(struct gmp__gobuf, x23) == GMP__GOBUF_X23, "gobuf x23");
_Static_assert(offsetof(struct gmp__gobuf, x24) == GMP__GOBUF_X24, "gobuf x24");
_Static_assert(offsetof(struct gmp__gobuf, x25) == GMP__GOBUF_X25, "gobuf x25");
_Static_assert(offsetof(struct gmp__gobuf, x26) == GMP__GOBUF_X26, "gobuf x26");
_Static_assert(offsetof(struct gmp__gobuf, x27) == GMP__GOBUF_X27, "gobuf x27");
_Static_assert(offsetof(struct gmp__gobuf, x28) == GMP__GOBUF_X28, "gobuf x28");
_Static_assert(offsetof(struct gmp__gobuf, x29) == GMP__GOBUF_X29, "gobuf x29");
_Static_assert(offsetof(struct gmp__gobuf, d8) == GMP__GOBUF_D8, "gobuf d8");
_Static_assert(offsetof(struct gmp__gobuf, d9) == GMP__GOBUF_D9, "gobuf d9");
_Static_assert(offsetof(struct gmp__gobuf, d10) == GMP__GOBUF_D10, "gobuf d10");
_Static_assert(offsetof(struct gmp__gobuf, d11) == GMP__GOBUF_D11, "gobuf d11");
_Static_assert(offsetof(struct gmp__gobuf, d12) == GMP__GOBUF_D12, "gobuf d12");
_Static_assert(offsetof(struct gmp__gobuf, d13) == GMP__GOBUF_D13, "gobuf d13");
_Static_assert(offsetof(struct gmp__gobuf, d14) == GMP__GOBUF_D14, "gobuf d14");
_Static_assert(offsetof(struct gmp__gobuf, d15) == GMP__GOBUF_D15, "gobuf d15");
_Static_assert(offsetof(struct gmp__gobuf, fpcr) == GMP__GOBUF_FPCR,
	       "gobuf fpcr");
_Static_assert(sizeof(struct gmp__gobuf) == GMP__GOBUF_SIZE, "gobuf size");

/* The first frame of every fresh context (ctx_aarch64.S). It takes entry from
 * x19 and its argument from x20, so it has no C signature; ctx_make only
 * needs its address. */
__attribute__((visibility("hidden"))) void gmp__ctx_trampoline(void);

/* The stack pointer of the calling code (see ctx.h). */
static inline uintptr_t gmp__ctx_sp(void)
{
	uintptr_t sp;
	__asm__ volatile("mov %0, sp" : "=r"(sp));
	return sp;
}

/* A system call made with the instruction itself (see ctx.h): the kernel
 * takes the number in x8 and the arguments in x0-x5, returns in x0 and
 * preserves every other register. "memory": the kernel may read and write
 * any buffer we pass. */
static inline long gmp__ctx_syscall6(long nr, long a1, long a2, long a3,
				     long a4, long a5, long a6)
{
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a1;
	register long x1 __asm__("x1") = a2;
	register long x2 __asm__("x2") = a3;
	register long x3 __asm__("x3") = a4;
	register long x4 __asm__("x4") = a5;
	register long x5 __asm__("x5") = a6;
	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}
#endif

#endif
