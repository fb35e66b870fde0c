/* x86-64 helpers for tests/test_ctx.c. They exist because C cannot put
 * chosen values into callee-saved registers across a call, nor read rsp at
 * a function's first instruction.
 *
 * struct ctx_test_regs (see test_ctx.c):
 *     0  rbx, rbp, r12, r13, r14, r15   (6 x u64)
 *    48  mxcsr                          (u32)
 *    52  x87 control word               (u16)
 *
 * Mismatch mask returned by the check helpers: bit i for the i-th slot
 * above (0-5 the GPRs, 6 MXCSR, 7 x87 CW) and bit 31 for rsp.
 */

#define R_MXCSR 48
#define R_X87CW 52

/* The check helpers' frame below the six pushed registers (rsp stays 16-byte
 * aligned for the call into the switch):
 *     0  caller's MXCSR        4  caller's x87 CW
 *     8  rsp, to compare      16  pattern pointer
 *    24  MXCSR read back      28  x87 CW read back
 *    32  (padding) */
#define F_MXCSR 0
#define F_X87CW 4
#define F_RSP 8
#define F_PAT 16
#define F_MXCSR2 24
#define F_X87CW2 28
#define F_SIZE 40

/* Puts the pattern at \pat into every callee-saved register and the FP
 * control words. */
.macro LOAD_PATTERN pat
	movq	0(\pat), %rbx
	movq	8(\pat), %rbp
	movq	16(\pat), %r12
	movq	24(\pat), %r13
	movq	32(\pat), %r14
	movq	40(\pat), %r15
	ldmxcsr	R_MXCSR(\pat)
	fldcw	R_X87CW(\pat)
.endm

.macro CHECK_ENTER pat
	.cfi_startproc
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	pushq	%rbx
	.cfi_adjust_cfa_offset 8
	pushq	%r12
	.cfi_adjust_cfa_offset 8
	pushq	%r13
	.cfi_adjust_cfa_offset 8
	pushq	%r14
	.cfi_adjust_cfa_offset 8
	pushq	%r15
	.cfi_adjust_cfa_offset 8
	subq	$F_SIZE, %rsp
	.cfi_adjust_cfa_offset F_SIZE
	stmxcsr	F_MXCSR(%rsp)
	fnstcw	F_X87CW(%rsp)
	movq	%rsp, F_RSP(%rsp)
	movq	\pat, F_PAT(%rsp)
	LOAD_PATTERN \pat
.endm

/* Sets one bit of eax if \reg differs from the pattern slot at \off(%rdx). */
.macro CMP_SLOT reg, off, bit
	xorl	%ecx, %ecx
	cmpq	\off(%rdx), \reg
	setne	%cl
	shll	$\bit, %ecx
	orl	%ecx, %eax
.endm

.macro CHECK_LEAVE
	xorl	%eax, %eax
	movq	F_PAT(%rsp), %rdx
	CMP_SLOT %rbx, 0, 0
	CMP_SLOT %rbp, 8, 1
	CMP_SLOT %r12, 16, 2
	CMP_SLOT %r13, 24, 3
	CMP_SLOT %r14, 32, 4
	CMP_SLOT %r15, 40, 5
	stmxcsr	F_MXCSR2(%rsp)
	movl	F_MXCSR2(%rsp), %esi
	xorl	%ecx, %ecx
	cmpl	R_MXCSR(%rdx), %esi
	setne	%cl
	shll	$6, %ecx
	orl	%ecx, %eax
	fnstcw	F_X87CW2(%rsp)
	movzwl	F_X87CW2(%rsp), %esi
	xorl	%ecx, %ecx
	cmpw	R_X87CW(%rdx), %si
	setne	%cl
	shll	$7, %ecx
	orl	%ecx, %eax
	xorl	%ecx, %ecx
	cmpq	%rsp, F_RSP(%rsp)
	setne	%cl
	shll	$31, %ecx
	orl	%ecx, %eax
	ldmxcsr	F_MXCSR(%rsp)
	fldcw	F_X87CW(%rsp)
	addq	$F_SIZE, %rsp
	.cfi_adjust_cfa_offset -F_SIZE
	popq	%r15
	.cfi_adjust_cfa_offset -8
	popq	%r14
	.cfi_adjust_cfa_offset -8
	popq	%r13
	.cfi_adjust_cfa_offset -8
	popq	%r12
	.cfi_adjust_cfa_offset -8
	popq	%rbx
	.cfi_adjust_cfa_offset -8
	popq	%rbp
	.cfi_adjust_cfa_offset -8
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
	.type	ctx_test_swap_check, @function
ctx_test_swap_check:
	CHECK_ENTER %rdx
	call	gmp__ctx_swap
	CHECK_LEAVE
	.size	ctx_test_swap_check, . - ctx_test_swap_check

/* unsigned ctx_test_mcall_check(gmp__gobuf *save, uintptr_t sp,
 *				 void (*fn)(void *), void *arg,
 *				 const struct ctx_test_regs *pat)
 * The same around gmp__ctx_mcall: fn must resume *save with gogo. */
	.p2align 4
	.globl	ctx_test_mcall_check
	.type	ctx_test_mcall_check, @function
ctx_test_mcall_check:
	CHECK_ENTER %r8
	call	gmp__ctx_mcall
	CHECK_LEAVE
	.size	ctx_test_mcall_check, . - ctx_test_mcall_check

/* _Noreturn void ctx_test_clobber_gogo(const gmp__gobuf *load,
 *					const struct ctx_test_regs *pat)
 * Fills every callee-saved register and control word from *pat, then
 * resumes *load with gmp__ctx_gogo: what gogo does not restore stays
 * visibly wrong. */
	.p2align 4
	.globl	ctx_test_clobber_gogo
	.type	ctx_test_clobber_gogo, @function
ctx_test_clobber_gogo:
	.cfi_startproc
	LOAD_PATTERN %rsi
	jmp	gmp__ctx_gogo
	.cfi_endproc
	.size	ctx_test_clobber_gogo, . - ctx_test_clobber_gogo

/* void ctx_test_sp_probe(void *arg)
 * Used as a context's entry or an mcall fn: stores rsp as it is at the
 * first instruction into *(uintptr_t *)arg, then tail-calls
 * ctx_test_sp_probe_continue(arg) with rsp untouched, so the C function is
 * entered exactly as the probe was. */
	.p2align 4
	.globl	ctx_test_sp_probe
	.type	ctx_test_sp_probe, @function
ctx_test_sp_probe:
	.cfi_startproc
	movq	%rsp, (%rdi)
	jmp	ctx_test_sp_probe_continue
	.cfi_endproc
	.size	ctx_test_sp_probe, . - ctx_test_sp_probe

/* uint64_t ctx_test_fpctl_get(void): MXCSR in bits 0-31, x87 CW in 32-47. */
	.p2align 4
	.globl	ctx_test_fpctl_get
	.type	ctx_test_fpctl_get, @function
ctx_test_fpctl_get:
	.cfi_startproc
	stmxcsr	-8(%rsp)
	fnstcw	-4(%rsp)
	movl	-8(%rsp), %eax
	movzwl	-4(%rsp), %ecx
	shlq	$32, %rcx
	orq	%rcx, %rax
	ret
	.cfi_endproc
	.size	ctx_test_fpctl_get, . - ctx_test_fpctl_get

/* void ctx_test_fpctl_set(uint64_t v): the inverse of ctx_test_fpctl_get. */
	.p2align 4
	.globl	ctx_test_fpctl_set
	.type	ctx_test_fpctl_set, @function
ctx_test_fpctl_set:
	.cfi_startproc
	movl	%edi, -8(%rsp)
	shrq	$32, %rdi
	movw	%di, -4(%rsp)
	ldmxcsr	-8(%rsp)
	fldcw	-4(%rsp)
	ret
	.cfi_endproc
	.size	ctx_test_fpctl_set, . - ctx_test_fpctl_set

	.section .note.GNU-stack, "", @progbits
