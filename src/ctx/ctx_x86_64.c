/* The new-stack bootstrap for x86-64. Only the switch itself needs
 * assembly; laying out a fresh context is plain C. */
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* The smallest stack gmp__ctx_make accepts: the two zeroed slots, the
 * alignment slack and the trampoline's call, with room to spare. No real
 * task gets by on this; the limit only catches nonsense sizes. */
#define MIN_STACK 64

void gmp__ctx_make(gmp__gobuf *b, void *stack_lo, size_t size,
		   void (*entry)(void *), void *arg)
{
	if (stack_lo == NULL || size < MIN_STACK)
		gmp__throw("ctx_make: stack %p of %zu bytes is unusable "
			   "(need at least %d)",
			   stack_lo, size, MIN_STACK);
	if (entry == NULL)
		gmp__throw("ctx_make: NULL entry function");

	/* Two zeroed slots sit above the starting rsp, where a caller's
	 * frame would be: anything that peeks past the trampoline (a
	 * debugger without CFI, a conservative scanner) reads zeros, and
	 * the trampoline starts with rsp % 16 == 0, so its call gives entry
	 * the ABI's (rsp + 8) % 16 == 0. */
	uintptr_t top = ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
	uintptr_t sp = top - 16;
	memset((void *)sp, 0, 16);

	*b = (gmp__gobuf){
		.sp = sp,
		.pc = (uintptr_t)gmp__ctx_trampoline,
		.rbx = (uintptr_t)entry,
		.r12 = (uintptr_t)arg,
		.rbp = 0,
		.mxcsr = GMP__MXCSR_DEFAULT,
		.x87cw = GMP__X87CW_DEFAULT,
	};
}
