/* The context switch for x86-64: System V AMD64 psABI, Linux, ELF.
 *
 * What is saved, and why exactly this
 *
 *   A context is saved only at a call (gmp__ctx_swap or gmp__ctx_mcall), so
 *   the caller has already given up every register the ABI lets a callee
 *   clobber: rax, rcx, rdx, rsi, rdi, r8-r11, all of xmm/ymm/zmm, the x87
 *   register stack (empty at every call), the arithmetic flags and the status
 *   words. What the caller may rely on surviving the call is what we save:
 *
 *     rsp, and the return address (the "pc" of the context)
 *     rbx, rbp, r12, r13, r14, r15
 *     MXCSR and the x87 control word: the psABI makes their control bits
 *     callee-saved. A task that sets a rounding mode must not hand it to
 *     whatever runs next on the same thread, and must get it back when it is
 *     resumed, possibly on another thread.
 *
 *   Not saved: DF (clear at every call by the ABI), the fs base (TLS belongs
 *   to the thread, not to the task), and the AVX upper halves (caller-saved).
 *   stmxcsr also captures the MXCSR exception flags; restoring them with the
 *   control bits keeps every context's sticky flags its own, at no cost.
 *
 * Layout
 *
 *   Everything lives in the gobuf (offsets in ctx_x86_64.h, checked against
 *   the C struct). The task's stack holds nothing of ours: a saved context
 *   looks like a call that is just about to return, so "sp" is the caller's
 *   rsp after the return (one slot above the return address) and "pc" is
 *   the return address. Resuming is: load the registers, set rsp, jump to pc.
 *
 * Cost
 *
 *   We resume with an indirect jmp rather than ret: a ret would always be
 *   mispredicted (the return stack buffer holds the other context's callers),
 *   while the indirect-branch predictor learns a regular switching pattern.
 *
 *   ldmxcsr and fldcw are slow (microcoded, and they order later FP
 *   instructions); loading both unconditionally made up about a third of
 *   bench/switch's time. Yet nearly every switch goes between contexts
 *   with the same (default) control words. So each word is compared with the
 *   current one (just stored, or read into the red zone by gogo) and loaded
 *   only if it differs; a well-predicted branch is far cheaper. Skipping the
 *   load leaves the register bit-for-bit as a load would have.
 *
 * Alignment
 *
 *   The ABI wants (rsp + 8) % 16 == 0 at the first instruction of a
 *   function. A fresh context starts in the trampoline with rsp % 16 == 0
 *   (gmp__ctx_make arranges it), and the trampoline's call to entry pushes 8
 *   bytes. gmp__ctx_mcall is given a 16-byte aligned sp and calls fn the same
 *   way. A resumed context gets back exactly the rsp it saved.
 *
 * Fresh contexts and their ends
 *
 *   gmp__ctx_make leaves entry in rbx, its argument in r12, rbp = 0, and pc =
 *   gmp__ctx_trampoline. The trampoline passes r12 as the first argument and
 *   calls entry. entry must never return (a task leaves through the exit
 *   path, which switches away for good); if it does, the trampoline calls
 *   gmp__ctx_entry_returned, which aborts with a "gmp:" message. Likewise,
 *   if the function given to gmp__ctx_mcall returns, gmp__ctx_mcall_returned
 *   aborts.
 *
 * Unwinding
 *
 *   The CFI is exact at every instruction, so a debugger stepping through a
 *   switch, or a sampling profiler that stops in one, always sees a
 *   well-formed stack. In gmp__ctx_swap, once the old registers are stored,
 *   the CFI points the unwinder at their copies in *save, because the
 *   registers themselves are about to be overwritten; after the stack
 *   switch the frame is the resumed context's, at the moment its own call
 *   returns (CFA = rsp, return address in rax). gmp__ctx_gogo's caller is
 *   being abandoned, so its registers are marked undefined.
 *
 *   The trampoline is the outermost frame of a task: its CFI marks the
 *   return address undefined, so gdb's `bt` and _Unwind_Backtrace stop
 *   there, and rbp = 0 ends frame-pointer walks. gmp__ctx_mcall does the
 *   same once it is on the new stack, so a backtrace taken in fn ends at
 *   mcall instead of wandering onto the task's stack.
 */
#include "ctx_x86_64.h"

/* Stores the callee-saved state of the running context into the gobuf at
 * \buf, as if the current function had just returned to its caller. Uses
 * rax and r8 as scratch. */
.macro SAVE_GOBUF buf
	movq	(%rsp), %rax
	leaq	8(%rsp), %r8
	movq	%rax, GMP__GOBUF_PC(\buf)
	movq	%r8, GMP__GOBUF_SP(\buf)
	movq	%rbx, GMP__GOBUF_RBX(\buf)
	movq	%rbp, GMP__GOBUF_RBP(\buf)
	movq	%r12, GMP__GOBUF_R12(\buf)
	movq	%r13, GMP__GOBUF_R13(\buf)
	movq	%r14, GMP__GOBUF_R14(\buf)
	movq	%r15, GMP__GOBUF_R15(\buf)
	stmxcsr	GMP__GOBUF_MXCSR(\buf)
	fnstcw	GMP__GOBUF_X87CW(\buf)
.endm

/* Loads the context in the gobuf at \buf and jumps to it. \mxcsr and \x87cw
 * are memory operands holding the running context's current values: a
 * control word is loaded only if it differs from them (see "Cost" above).
 * After the stack switch the CFA is the new rsp, the return address is in
 * rax and every callee-saved register holds the resumed context's own
 * value: exactly the state of that context at the moment its call returns.
 * Uses rcx as scratch. */
.macro LOAD_GOBUF_AND_GO buf, mxcsr, x87cw
	movq	GMP__GOBUF_PC(\buf), %rax
	movq	GMP__GOBUF_RBX(\buf), %rbx
	movq	GMP__GOBUF_RBP(\buf), %rbp
	movq	GMP__GOBUF_R12(\buf), %r12
	movq	GMP__GOBUF_R13(\buf), %r13
	movq	GMP__GOBUF_R14(\buf), %r14
	movq	GMP__GOBUF_R15(\buf), %r15
	movl	\mxcsr, %ecx
	cmpl	GMP__GOBUF_MXCSR(\buf), %ecx
	je	1f
	ldmxcsr	GMP__GOBUF_MXCSR(\buf)
1:
	movzwl	\x87cw, %ecx
	cmpw	GMP__GOBUF_X87CW(\buf), %cx
	je	2f
	fldcw	GMP__GOBUF_X87CW(\buf)
2:
	movq	GMP__GOBUF_SP(\buf), %rsp
	.cfi_def_cfa %rsp, 0
	.cfi_register %rip, %rax
	.cfi_same_value %rbx
	.cfi_same_value %rbp
	.cfi_same_value %r12
	.cfi_same_value %r13
	.cfi_same_value %r14
	.cfi_same_value %r15
	jmpq	*%rax
.endm

/* CFI: the caller's value of DWARF register \reg is the copy at \off(%rdi)
 * (DW_CFA_expression, DW_OP_breg5; every gobuf offset fits one SLEB128
 * byte). */
.macro CFI_SAVED_AT_RDI reg, off
	.cfi_escape 0x10, \reg, 2, 0x75, \off
.endm

	/* Defined in C (src/throw.c); hidden like everything internal, so the
	 * calls bind inside the library without a PLT. */
	.hidden	gmp__ctx_entry_returned
	.hidden	gmp__ctx_mcall_returned

	.text

/* void gmp__ctx_swap(gmp__gobuf *save = rdi, const gmp__gobuf *load = rsi)
 * Saves the running context into *save and resumes *load. Returns when
 * someone resumes *save. */
	.p2align 4
	.globl	gmp__ctx_swap
	.hidden	gmp__ctx_swap
	.type	gmp__ctx_swap, @function
gmp__ctx_swap:
	.cfi_startproc
	SAVE_GOBUF %rdi
	CFI_SAVED_AT_RDI 3, GMP__GOBUF_RBX
	CFI_SAVED_AT_RDI 6, GMP__GOBUF_RBP
	CFI_SAVED_AT_RDI 12, GMP__GOBUF_R12
	CFI_SAVED_AT_RDI 13, GMP__GOBUF_R13
	CFI_SAVED_AT_RDI 14, GMP__GOBUF_R14
	CFI_SAVED_AT_RDI 15, GMP__GOBUF_R15
	LOAD_GOBUF_AND_GO %rsi, GMP__GOBUF_MXCSR(%rdi), GMP__GOBUF_X87CW(%rdi)
	.cfi_endproc
	.size	gmp__ctx_swap, . - gmp__ctx_swap

/* _Noreturn void gmp__ctx_gogo(const gmp__gobuf *load = rdi)
 * Resumes *load, abandoning the running context. */
	.p2align 4
	.globl	gmp__ctx_gogo
	.hidden	gmp__ctx_gogo
	.type	gmp__ctx_gogo, @function
gmp__ctx_gogo:
	.cfi_startproc
	.cfi_undefined %rbx
	.cfi_undefined %rbp
	.cfi_undefined %r12
	.cfi_undefined %r13
	.cfi_undefined %r14
	.cfi_undefined %r15
	/* The current control words go to the red zone, for the compare. */
	stmxcsr	-8(%rsp)
	fnstcw	-4(%rsp)
	LOAD_GOBUF_AND_GO %rdi, -8(%rsp), -4(%rsp)
	.cfi_endproc
	.size	gmp__ctx_gogo, . - gmp__ctx_gogo

/* void gmp__ctx_mcall(gmp__gobuf *save = rdi, uintptr_t sp = rsi,
 *		       void (*fn)(void *) = rdx, void *arg = rcx)
 * Saves the running context into *save, moves to the stack at sp (16-byte
 * aligned) and calls fn(arg) there. Returns when someone resumes *save. */
	.p2align 4
	.globl	gmp__ctx_mcall
	.hidden	gmp__ctx_mcall
	.type	gmp__ctx_mcall, @function
gmp__ctx_mcall:
	.cfi_startproc
	SAVE_GOBUF %rdi
	movq	%rsi, %rsp
	/* From here on this frame belongs to no one: it has no caller to
	 * unwind to, and a frame-pointer walk must stop here too. */
	.cfi_def_cfa %rsp, 0
	.cfi_undefined %rip
	xorl	%ebp, %ebp
	movq	%rcx, %rdi
	callq	*%rdx
	callq	gmp__ctx_mcall_returned
	ud2
	.cfi_endproc
	.size	gmp__ctx_mcall, . - gmp__ctx_mcall

/* The first frame of a fresh context: entry(arg) with entry in rbx and arg
 * in r12 (see gmp__ctx_make). Entered by a jump with rsp % 16 == 0. */
	.p2align 4
	.globl	gmp__ctx_trampoline
	.hidden	gmp__ctx_trampoline
	.type	gmp__ctx_trampoline, @function
gmp__ctx_trampoline:
	.cfi_startproc
	.cfi_undefined %rip
	movq	%r12, %rdi
	callq	*%rbx
	callq	gmp__ctx_entry_returned
	ud2
	.cfi_endproc
	.size	gmp__ctx_trampoline, . - gmp__ctx_trampoline

	.section .note.GNU-stack, "", @progbits
