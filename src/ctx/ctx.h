/* The architecture interface: the one place where libgmp touches machine
 * registers. Everything above this header is portable C.
 *
 * A gobuf holds exactly the state the C calling convention obliges a callee
 * to preserve (design.md §14.1), plus the resume address. Saving a context is
 * therefore the same as "being in the middle of a call": whoever resumes the
 * gobuf sees gmp__ctx_mcall (or gmp__ctx_swap) return normally, with every
 * callee-saved register as it was. Caller-saved registers need no saving,
 * because the compiler already assumes any call clobbers them.
 *
 *   gmp__ctx_make    C: prepare a fresh context on a new stack that will run
 *                    entry(arg) via the trampoline.
 *   gmp__ctx_gogo    asm: load a gobuf and continue there; never returns.
 *   gmp__ctx_mcall   asm: save the current context into *save, switch to the
 *                    stack pointer `sp` (the M's g0 stack) and call fn(arg)
 *                    there. fn must never return; the saved context resumes
 *                    when someone gogo()s it, and mcall then returns.
 *   gmp__ctx_swap    asm: save into *save and load *load (a symmetric switch;
 *                    used by the raw-switch tests and benchmark).
 *   gmp__ctx_sp      inline asm: the current stack pointer (how deep a task's
 *                    stack is at a switch point; stack.c).
 *   gmp__ctx_syscall6  inline asm: a system call made with the instruction
 *                    itself, not through libc: returns what the kernel
 *                    returns (-errno on failure), leaves errno alone, and
 *                    is no cancellation point. For the calls of the I/O
 *                    path that cannot block (io.c), where libc's wrapper
 *                    (cancellation bookkeeping, errno) costs more than the
 *                    instruction.
 *   trampoline       asm: the first frame of every new context. It calls
 *                    entry(arg); entry must not return (the task entry ends in
 *                    the exit path). If it does, the trampoline calls
 *                    gmp__ctx_entry_returned(), which aborts with a `gmp:`
 *                    message. The trampoline is the outermost frame: its CFI
 *                    marks the return address undefined, so debuggers stop
 *                    the backtrace there.
 *
 * Stack alignment: every function entered through this interface (entry,
 * fn) sees the ABI's alignment at its first instruction (x86-64: rsp+8 is a
 * multiple of 16; aarch64: sp is a multiple of 16). `sp` passed to mcall and
 * the top of a stack passed to ctx_make need only be 16-byte aligned.
 */
#ifndef GMP_CTX_H
#define GMP_CTX_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
#include "ctx_x86_64.h"
#elif defined(__aarch64__)
#include "ctx_aarch64.h"
#else
#error "libgmp supports x86-64 and aarch64 only"
#endif

typedef struct gmp__gobuf gmp__gobuf;

/* Prepares *b so that gmp__ctx_gogo(b) (or a swap into b) runs entry(arg) on
 * the stack [stack_lo, stack_lo + size). Needs at least 64 bytes of stack.
 * The floating-point control state starts at the ABI defaults. */
void gmp__ctx_make(gmp__gobuf *b, void *stack_lo, size_t size,
		   void (*entry)(void *), void *arg);

_Noreturn void gmp__ctx_gogo(const gmp__gobuf *load);
void gmp__ctx_mcall(gmp__gobuf *save, uintptr_t sp, void (*fn)(void *),
		    void *arg);
void gmp__ctx_swap(gmp__gobuf *save, const gmp__gobuf *load);

/* Called (only) from the asm when a contract is broken; both abort. */
_Noreturn void gmp__ctx_entry_returned(void);
_Noreturn void gmp__ctx_mcall_returned(void);

#endif
