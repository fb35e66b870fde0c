/* The context switch for aarch64: AAPCS64, Linux, ELF.
 *
 * What is saved, and why exactly this
 *
 *   A context is saved only at a call (gmp__ctx_swap or gmp__ctx_mcall), so
 *   the caller has already given up every register AAPCS64 lets a callee
 *   clobber: x0-x18, x30 (lr), v0-v7 and v16-v31 entirely, the upper 64 bits
 *   of v8-v15, NZCV and FPSR. What the caller may rely on surviving the call
 *   is what we save:
 *
 *     sp, and the return address (the "pc" of the context)
 *     x19-x28 and x29 (the frame pointer)
 *     d8-d15, the low halves of v8-v15
 *     FPCR: rounding mode, flush-to-zero and default-NaN are modes that a
 *     called function must hand back as it found them. A task that changes
 *     them must not pass them on to whatever runs next on the same thread,
 *     and must get them back when resumed, possibly on another thread.
 *
 *   Not saved: x18 (the platform register; on Linux an ordinary temporary),
 *   tpidr_el0 (TLS belongs to the thread, not to the task), and FPSR's
 *   cumulative flags (caller-owned status, like NZCV).
 *
 * Layout
 *
 *   Everything lives in the gobuf (offsets in ctx_aarch64.h, checked against
 *   the C struct). The task's stack holds nothing of ours: a saved context
 *   looks like a call that is just about to return, so "sp" is the caller's
 *   sp and "pc" its lr. Resuming loads the registers, sets sp, puts pc into
 *   x30 (so the resumed code sees lr == pc, exactly as after a ret) and
 *   branches there with br.
 *
 * Cost
 *
 *   Why br and not ret: a ret would be predicted from the return stack,
 *   which holds the other context's callers, so it would always miss; br
 *   goes through the indirect predictor, which learns regular switching
 *   (and in the runtime nearly every parked task resumes at the same call
 *   site). Should the library ever be built for BTI (-mbranch-protection
 *   plus the GNU property note, which these files do not carry), this must
 *   become a ret: a return address is no BTI landing pad.
 *
 *   FPCR is written only when it differs from the current value: a write to
 *   FPCR can stall the pipeline on some cores, and nearly every switch
 *   moves between contexts with the same (default) value.
 *
 * Alignment
 *
 *   AAPCS64 wants sp % 16 == 0 at all times (Linux turns on the hardware
 *   check, so a misaligned sp faults at its next use as a base address). A
 *   fresh context starts in the trampoline with such an sp (gmp__ctx_make
 *   arranges it); gmp__ctx_mcall is given a 16-byte aligned sp; both call
 *   with blr, which leaves sp alone. A resumed context gets back exactly
 *   the sp it saved.
 *
 * Fresh contexts and their ends
 *
 *   gmp__ctx_make leaves entry in x19, its argument in x20, x29 = 0, and
 *   pc = gmp__ctx_trampoline. The trampoline passes x20 as the first
 *   argument and calls entry. entry must never return (a task leaves
 *   through the exit path, which switches away for good); if it does, the
 *   trampoline calls gmp__ctx_entry_returned, which aborts with a "gmp:"
 *   message. Likewise, if the function given to gmp__ctx_mcall returns,
 *   gmp__ctx_mcall_returned aborts.
 *
 * Unwinding
 *
 *   The CFI is exact at every instruction, so a debugger stepping through a
 *   switch, or a sampling profiler that stops in one, always sees a
 *   well-formed stack. In gmp__ctx_swap, once the old registers are stored,
 *   the CFI points the unwinder at their copies in *save, because the
 *   registers themselves are about to be overwritten; after the stack
 *   switch the frame is the resumed context's, at the moment its own call
 *   returns (CFA = sp, return address the new pc). gmp__ctx_gogo's caller
 *   is being abandoned, so its registers are marked undefined.
 *
 *   The trampoline is the outermost frame of a task: its CFI marks the
 *   return address (x30) undefined, so gdb's `bt` and _Unwind_Backtrace
 *   stop there, and x29 = 0 ends frame-record walks. gmp__ctx_mcall does the
 *   same once it is on the new stack, so a backtrace taken in fn ends at
 *   mcall instead of wandering onto the task's stack.
 */
#include "ctx_aarch64.h"

/* Stores the callee-saved state of the running context into the gobuf at
 * \buf, as if the current function had just returned to its caller. Leaves
 * the current FPCR in x10 for LOAD_GOBUF_AND_GO; uses x9 as scratch. */
.macro SAVE_GOBUF buf
	mov	x9, sp
	stp	x9, x30, [\buf, #GMP__GOBUF_SP]
	stp	x19, x20, [\buf, #GMP__GOBUF_X19]
	stp	x21, x22, [\buf, #GMP__GOBUF_X21]
	stp	x23, x24, [\buf, #GMP__GOBUF_X23]
	stp	x25, x26, [\buf, #GMP__GOBUF_X25]
	stp	x27, x28, [\buf, #GMP__GOBUF_X27]
	str	x29, [\buf, #GMP__GOBUF_X29]
	stp	d8, d9, [\buf, #GMP__GOBUF_D8]
	stp	d10, d11, [\buf, #GMP__GOBUF_D10]
	stp	d12, d13, [\buf, #GMP__GOBUF_D12]
	stp	d14, d15, [\buf, #GMP__GOBUF_D14]
	mrs	x10, fpcr
	str	x10, [\buf, #GMP__GOBUF_FPCR]
.endm

/* Loads the context in the gobuf at \buf and branches to it; x10 must hold
 * the current FPCR. Once sp is the new one, the return address is the new
 * pc (first in x16, then also in x30) and every callee-saved register holds
 * the resumed context's own value: exactly the state of that context at the
 * moment its call returns. */
.macro LOAD_GOBUF_AND_GO buf
	ldp	x19, x20, [\buf, #GMP__GOBUF_X19]
	ldp	x21, x22, [\buf, #GMP__GOBUF_X21]
	ldp	x23, x24, [\buf, #GMP__GOBUF_X23]
	ldp	x25, x26, [\buf, #GMP__GOBUF_X25]
	ldp	x27, x28, [\buf, #GMP__GOBUF_X27]
	ldr	x29, [\buf, #GMP__GOBUF_X29]
	ldp	d8, d9, [\buf, #GMP__GOBUF_D8]
	ldp	d10, d11, [\buf, #GMP__GOBUF_D10]
	ldp	d12, d13, [\buf, #GMP__GOBUF_D12]
	ldp	d14, d15, [\buf, #GMP__GOBUF_D14]
	ldr	x11, [\buf, #GMP__GOBUF_FPCR]
	cmp	x10, x11
	b.eq	1f
	msr	fpcr, x11
1:
	ldp	x9, x16, [\buf, #GMP__GOBUF_SP]
	mov	sp, x9
	.cfi_register x30, x16
	CFI_ALL_CALLEE_SAVED .cfi_same_value
	mov	x30, x16
	.cfi_same_value x30
	br	x16
.endm

/* Applies \op (a one-operand CFI directive) to every callee-saved register
 * but x30. */
.macro CFI_ALL_CALLEE_SAVED op
	.irp r, x19, x20, x21, x22, x23, x24, x25, x26, x27, x28, x29
	\op \r
	.endr
	.irp r, 72, 73, 74, 75, 76, 77, 78, 79  /* DWARF numbers of d8-d15 */
	\op \r
	.endr
.endm

/* CFI: the caller's value of DWARF register \reg is the copy at [x0, \off]
 * (DW_CFA_expression, DW_OP_breg0, the offset as SLEB128). */
.macro CFI_SAVED_AT_X0 reg, off
	.if \off < 64
	.cfi_escape 0x10, \reg, 2, 0x70, \off
	.else
	.cfi_escape 0x10, \reg, 3, 0x70, (\off & 0x7f) | 0x80, \off >> 7
	.endif
.endm

	/* Defined in C (src/throw.c); hidden like everything internal, so the
	 * calls bind inside the library without a PLT. */
	.hidden	gmp__ctx_entry_returned
	.hidden	gmp__ctx_mcall_returned

	.text

/* void gmp__ctx_swap(gmp__gobuf *save = x0, const gmp__gobuf *load = x1)
 * Saves the running context into *save and resumes *load. Returns when
 * someone resumes *save. */
	.p2align 4
	.globl	gmp__ctx_swap
	.hidden	gmp__ctx_swap
	.type	gmp__ctx_swap, %function
gmp__ctx_swap:
	.cfi_startproc
	SAVE_GOBUF x0
	CFI_SAVED_AT_X0 19, GMP__GOBUF_X19
	CFI_SAVED_AT_X0 20, GMP__GOBUF_X20
	CFI_SAVED_AT_X0 21, GMP__GOBUF_X21
	CFI_SAVED_AT_X0 22, GMP__GOBUF_X22
	CFI_SAVED_AT_X0 23, GMP__GOBUF_X23
	CFI_SAVED_AT_X0 24, GMP__GOBUF_X24
	CFI_SAVED_AT_X0 25, GMP__GOBUF_X25
	CFI_SAVED_AT_X0 26, GMP__GOBUF_X26
	CFI_SAVED_AT_X0 27, GMP__GOBUF_X27
	CFI_SAVED_AT_X0 28, GMP__GOBUF_X28
	CFI_SAVED_AT_X0 29, GMP__GOBUF_X29
	CFI_SAVED_AT_X0 72, GMP__GOBUF_D8
	CFI_SAVED_AT_X0 73, GMP__GOBUF_D9
	CFI_SAVED_AT_X0 74, GMP__GOBUF_D10
	CFI_SAVED_AT_X0 75, GMP__GOBUF_D11
	CFI_SAVED_AT_X0 76, GMP__GOBUF_D12
	CFI_SAVED_AT_X0 77, GMP__GOBUF_D13
	CFI_SAVED_AT_X0 78, GMP__GOBUF_D14
	CFI_SAVED_AT_X0 79, GMP__GOBUF_D15
	LOAD_GOBUF_AND_GO x1
	.cfi_endproc
	.size	gmp__ctx_swap, . - gmp__ctx_swap

/* _Noreturn void gmp__ctx_gogo(const gmp__gobuf *load = x0)
 * Resumes *load, abandoning the running context. */
	.p2align 4
	.globl	gmp__ctx_gogo
	.hidden	gmp__ctx_gogo
	.type	gmp__ctx_gogo, %function
gmp__ctx_gogo:
	.cfi_startproc
	CFI_ALL_CALLEE_SAVED .cfi_undefined
	mrs	x10, fpcr
	LOAD_GOBUF_AND_GO x0
	.cfi_endproc
	.size	gmp__ctx_gogo, . - gmp__ctx_gogo

/* void gmp__ctx_mcall(gmp__gobuf *save = x0, uintptr_t sp = x1,
 *		       void (*fn)(void *) = x2, void *arg = x3)
 * Saves the running context into *save, moves to the stack at sp (16-byte
 * aligned) and calls fn(arg) there. Returns when someone resumes *save. */
	.p2align 4
	.globl	gmp__ctx_mcall
	.hidden	gmp__ctx_mcall
	.type	gmp__ctx_mcall, %function
gmp__ctx_mcall:
	.cfi_startproc
	SAVE_GOBUF x0
	mov	sp, x1
	/* From here on this frame belongs to no one: it has no caller to
	 * unwind to, and a frame-record walk must stop here too. */
	.cfi_undefined x30
	mov	x29, #0
	mov	x0, x3
	blr	x2
	bl	gmp__ctx_mcall_returned
	brk	#0x3e8
	.cfi_endproc
	.size	gmp__ctx_mcall, . - gmp__ctx_mcall

/* The first frame of a fresh context: entry(arg) with entry in x19 and arg
 * in x20 (see gmp__ctx_make). Entered by a branch with sp % 16 == 0. */
	.p2align 4
	.globl	gmp__ctx_trampoline
	.hidden	gmp__ctx_trampoline
	.type	gmp__ctx_trampoline, %function
gmp__ctx_trampoline:
	.cfi_startproc
	.cfi_undefined x30
	mov	x0, x20
	blr	x19
	bl	gmp__ctx_entry_returned
	brk	#0x3e8
	.cfi_endproc
	.size	gmp__ctx_trampoline, . - gmp__ctx_trampoline

	.section .note.GNU-stack, "", %progbits
