/* aarch64 helpers for tests/test_ctx.c. They exist because C cannot put
 * chosen values into callee-saved registers across a call, nor read sp at
 * a function's first instruction.
 *
 * struct ctx_test_regs (see test_ctx.c):
 *     0  x19 ... x29   (11 x u64)
 *    88  d8 ... d15    (8 x u64, raw bits)
 *   152  fpcr          (u64)
 *
 * Mismatch mask returned by the check helpers: bit i for the i-th slot
 * above (0-10 x19-x29, 11-18 d8-d15, 19 FPCR) and bit 31 for sp.
 */

#define R_X19 0
#define R_D8 88
#define R_FPCR 152

/* The check helpers' frame (sp stays 16-byte aligned throughout):
 *     0  caller's x29, x30     16-95  caller's x19-x28
 *    96  caller's d8-d15      160  caller's FPCR
 *   168  sp, to compare       176  pattern pointer */
#define F_D8 96
#define F_FPCR 160
#define F_SP 168
#define F_PAT 176
#define F_SIZE 192

/* Puts the pattern at \pat into every callee-saved register and FPCR. */
.macro LOAD_PATTERN pat
	ldp	x19, x20, [\pat, #R_X19 + 0]
	ldp	x21, x22, [\pat, #R_X19 + 16]
	ldp	x23, x24, [\pat, #R_X19 + 32]
	ldp	x25, x26, [\pat, #R_X19 + 48]
	ldp	x27, x28, [\pat, #R_X19 + 64]
	ldr	x29, [\pat, #R_X19 + 80]
	ldp	d8, d9, [\pat, #R_D8 + 0]
	ldp	d10, d11, [\pat, #R_D8 + 16]
	ldp	d12, d13, [\pat, #R_D8 + 32]
	ldp	d14, d15, [\pat, #R_D8 + 48]
	ldr	x9, [\pat, #R_FPCR]
	msr	fpcr, x9
.endm

.macro CHECK_ENTER pat
	.cfi_startproc
	stp	x29, x30, [sp, #-F_SIZE]!
	.cfi_def_cfa_offset F_SIZE
	.cfi_offset x29, -F_SIZE
	.cfi_offset x30, -F_SIZE + 8
	stp	x19, x20, [sp, #16]
	stp	x21, x22, [sp, #32]
	stp	x23, x24, [sp, #48]
	stp	x25, x26, [sp, #64]
	stp	x27, x28, [sp, #80]
	stp	d8, d9, [sp, #F_D8 + 0]
	stp	d10, d11, [sp, #F_D8 + 16]
	stp	d12, d13, [sp, #F_D8 + 32]
	stp	d14, d15, [sp, #F_D8 + 48]
	mrs	x9, fpcr
	str	x9, [sp, #F_FPCR]
	mov	x9, sp
	str	x9, [sp, #F_SP]
	str	\pat, [sp, #F_PAT]
	LOAD_PATTERN \pat
.endm

/* Sets bit \bit of w0 if \reg differs from the pattern slot at [x9, \off]. */
.macro CMP_SLOT reg, off, bit
	ldr	x10, [x9, #\off]
	cmp	\reg, x10
	cset	w11, ne
	orr	w0, w0, w11, lsl #\bit
.endm

.macro CMP_DSLOT dreg, off, bit
	fmov	x12, \dreg
	CMP_SLOT x12, \off, \bit
.endm

.macro CHECK_LEAVE
	ldr	x9, [sp, #F_PAT]
	mov	w0, #0
	CMP_SLOT x19, R_X19 + 0, 0
	CMP_SLOT x20, R_X19 + 8, 1
	CMP_SLOT x21, R_X19 + 16, 2
	CMP_SLOT x22, R_X19 + 24, 3
	CMP_SLOT x23, R_X19 + 32, 4
	CMP_SLOT x24, R_X19 + 40, 5
	CMP_SLOT x25, R_X19 + 48, 6
	CMP_SLOT x26, R_X19 + 56, 7
	CMP_SLOT x27, R_X19 + 64, 8
	CMP_SLOT x28, R_X19 + 72, 9
	CMP_SLOT x29, R_X19 + 80, 10
	CMP_DSLOT d8, R_D8 + 0, 11
	CMP_DSLOT d9, R_D8 + 8, 12
	CMP_DSLOT d10, R_D8 + 16, 13
	CMP_DSLOT d11, R_D8 + 24, 14
	CMP_DSLOT d12, R_D8 + 32, 15
	CMP_DSLOT d13, R_D8 + 40, 16
	CMP_DSLOT d14, R_D8 + 48, 17
	CMP_DSLOT d15, R_D8 + 56, 18
	mrs	x12, fpcr
	CMP_SLOT x12, R_FPCR, 19
	mov	x12, sp
	ldr	x10, [sp, #F_SP]
	cmp	x12, x10
	cset	w11, ne
	orr	w0, w0, w11, lsl #31
	ldr	x9, [sp, #F_FPCR]
	msr	fpcr, x9
	ldp	d8, d9, [sp, #F_D8 + 0]
	ldp	d10, d11, [sp, #F_D8 + 16]
	ldp	d12, d13, [sp, #F_D8 + 32]
	ldp	d14, d15, [sp, #F_D8 + 48]
	ldp	x19, x20, [sp, #16]
	ldp	x21, x22, [sp, #32]
	ldp	x23, x24, [sp, #48]
	ldp	x25, x26, [sp, #64]
	ldp	x27, x28, [sp, #80]
	ldp	x29, x30, [sp], #F_SIZE
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	ret
	.cfi_endproc
.endm

	.text

/* unsigned ctx_test_swap_check(gmp__gobuf *save, const gmp__gobuf *load,
 *				const struct ctx_test_regs *pat)
 * Loads *pat, swaps to *load, and once resumed reports which registers no
 * longer hold the pattern. */
	.p2align 4
	.globl	ctx_test_swap_check
	.type	ctx_test_swap_check, %function
ctx_test_swap_check:
	CHECK_ENTER x2
	bl	gmp__ctx_swap
	CHECK_LEAVE
	.size	ctx_test_swap_check, . - ctx_test_swap_check

/* unsigned ctx_test_mcall_check(gmp__gobuf *save, uintptr_t sp,
 *				 void (*fn)(void *), void *arg,
 *				 const struct ctx_test_regs *pat)
 * The same around gmp__ctx_mcall: fn must resume *save with gogo. */
	.p2align 4
	.globl	ctx_test_mcall_check
	.type	ctx_test_mcall_check, %function
ctx_test_mcall_check:
	CHECK_ENTER x4
	bl	gmp__ctx_mcall
	CHECK_LEAVE
	.size	ctx_test_mcall_check, . - ctx_test_mcall_check

/* _Noreturn void ctx_test_clobber_gogo(const gmp__gobuf *load,
 *					const struct ctx_test_regs *pat)
 * Fills every callee-saved register and FPCR from *pat, then resumes *load
 * with gmp__ctx_gogo: what gogo does not restore stays visibly wrong. */
	.p2align 4
	.globl	ctx_test_clobber_gogo
	.type	ctx_test_clobber_gogo, %function
ctx_test_clobber_gogo:
	.cfi_startproc
	LOAD_PATTERN x1
	b	gmp__ctx_gogo
	.cfi_endproc
	.size	ctx_test_clobber_gogo, . - ctx_test_clobber_gogo

/* void ctx_test_sp_probe(void *arg)
 * Used as a context's entry or an mcall fn: stores sp as it is at the
 * first instruction into *(uintptr_t *)arg, then tail-calls
 * ctx_test_sp_probe_continue(arg) with sp and lr untouched, so the C
 * function is entered exactly as the probe was. */
	.p2align 4
	.globl	ctx_test_sp_probe
	.type	ctx_test_sp_probe, %function
ctx_test_sp_probe:
	.cfi_startproc
	mov	x9, sp
	str	x9, [x0]
	b	ctx_test_sp_probe_continue
	.cfi_endproc
	.size	ctx_test_sp_probe, . - ctx_test_sp_probe

/* uint64_t ctx_test_fpctl_get(void): FPCR. */
	.p2align 4
	.globl	ctx_test_fpctl_get
	.type	ctx_test_fpctl_get, %function
ctx_test_fpctl_get:
	.cfi_startproc
	mrs	x0, fpcr
	ret
	.cfi_endproc
	.size	ctx_test_fpctl_get, . - ctx_test_fpctl_get

/* void ctx_test_fpctl_set(uint64_t v): writes FPCR. */
	.p2align 4
	.globl	ctx_test_fpctl_set
	.type	ctx_test_fpctl_set, %function
ctx_test_fpctl_set:
	.cfi_startproc
	msr	fpcr, x0
	ret
	.cfi_endproc
	.size	ctx_test_fpctl_set, . - ctx_test_fpctl_set

	.section .note.GNU-stack, "", %progbits
