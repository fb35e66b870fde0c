/* The gobuf on x86-64 (System V ABI), shared by ctx_x86_64.S and C.
 *
 * The offsets are plain numbers so the assembler can use them; the C block
 * below checks every one of them against the struct, so the two views
 * cannot drift apart.
 *
 *   off  size  slot
 *     0     8  sp      stack pointer to resume with (the caller's rsp after
 *                      the saving call returned)
 *     8     8  pc      address to resume at (the saving call's return
 *                      address, or the trampoline for a fresh context)
 *    16     8  rbx     a fresh context keeps its entry function here
 *    24     8  rbp     0 in a fresh context, ending frame-pointer walks
 *    32     8  r12     a fresh context keeps entry's argument here
 *    40     8  r13
 *    48     8  r14
 *    56     8  r15
 *    64     4  mxcsr   SSE control/status word
 *    68     2  x87cw   x87 control word
 *    70     2  (padding)
 *    72        size
 */
#ifndef GMP_CTX_X86_64_H
#define GMP_CTX_X86_64_H

#define GMP__GOBUF_SP 0
#define GMP__GOBUF_PC 8
#define GMP__GOBUF_RBX 16
#define GMP__GOBUF_RBP 24
#define GMP__GOBUF_R12 32
#define GMP__GOBUF_R13 40
#define GMP__GOBUF_R14 48
#define GMP__GOBUF_R15 56
#define GMP__GOBUF_MXCSR 64
#define GMP__GOBUF_X87CW 68
#define GMP__GOBUF_SIZE 72

/* Floating-point control at the ABI's process-start values: all exceptions
 * masked, round to nearest, no flush-to-zero (MXCSR); extended precision
 * (x87 CW). A fresh context starts with these. */
#define GMP__MXCSR_DEFAULT 0x1F80
#define GMP__X87CW_DEFAULT 0x037F

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

struct gmp__gobuf {
	uintptr_t sp;
	uintptr_t pc;
	uint64_t rbx;
	uint64_t rbp;
	uint64_t r12;
	uint64_t r13;
	uint64_t r14;
	uint64_t r15;
	uint32_t mxcsr;
	uint16_t x87cw;
	uint16_t pad_;
};

_Static_assert(offsetof(struct gmp__gobuf, sp) == GMP__GOBUF_SP, "gobuf sp");
_Static_assert(offsetof(struct gmp__gobuf, pc) == GMP__GOBUF_PC, "gobuf pc");
_Static_assert(offsetof(struct gmp__gobuf, rbx) == GMP__GOBUF_RBX, "gobuf rbx");
_Static_assert(offsetof(struct gmp__gobuf, rbp) == GMP__GOBUF_RBP, "gobuf rbp");
_Static_assert(offsetof(struct gmp__gobuf, r12) == GMP__GOBUF_R12, "gobuf r12");
_Static_assert(offsetof(struct gmp__gobuf, r13) == GMP__GOBUF_R13, "gobuf r13");
_Static_assert(offsetof(struct gmp__gobuf, r14) == GMP__GOBUF_R14, "gobuf r14");
_Static_assert(offsetof(struct gmp__gobuf, r15) == GMP__GOBUF_R15, "gobuf r15");
_Static_assert(offsetof(struct gmp__gobuf, mxcsr) == GMP__GOBUF_MXCSR,
	       "gobuf mxcsr");
_Static_assert(offsetof(struct gmp__gobuf, x87cw) == GMP__GOBUF_X87CW,
	       "gobuf x87cw");
_Static_assert(sizeof(struct gmp__gobuf) == GMP__GOBUF_SIZE, "gobuf size");

/* The first frame of every fresh context (ctx_x86_64.S). It takes entry from
 * rbx and its argument from r12, so it has no C signature; ctx_make only
 * needs its address. */
__attribute__((visibility("hidden"))) void gmp__ctx_trampoline(void);

/* The stack pointer of the calling code (see ctx.h). */
static inline uintptr_t gmp__ctx_sp(void)
{
	uintptr_t sp;
	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	return sp;
}

/* A system call made with the instruction itself (see ctx.h): the kernel
 * takes the number in rax and the arguments in rdi, rsi, rdx, r10, r8, r9,
 * returns in rax, and clobbers rcx (the return address) and r11 (the
 * flags). "memory": the kernel may read and write any buffer we pass. */
static inline long gmp__ctx_syscall6(long nr, long a1, long a2, long a3,
				     long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10),
			   "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#endif

#endif
