/* The new-stack bootstrap for aarch64. Only the switch itself needs
 * assembly; laying out a fresh context is plain C. */
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* The smallest stack gmp__ctx_make accepts: the zeroed frame record, the
 * alignment slack and the trampoline, with room to spare. No real task gets
 * by on this; the limit only catches nonsense sizes. */
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

	/* A zeroed frame record (fp, lr) sits at the starting sp, where the
	 * trampoline's caller would have left one: anything that peeks past
	 * the trampoline reads a terminating {0, 0}. sp stays 16-byte
	 * aligned, as AAPCS64 requires at all times. */
	uintptr_t top = ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
	uintptr_t sp = top - 16;
	memset((void *)sp, 0, 16);

	*b = (gmp__gobuf){
		.sp = sp,
		.pc = (uintptr_t)gmp__ctx_trampoline,
		.x19 = (uintptr_t)entry,
		.x20 = (uintptr_t)arg,
		.x29 = 0,
		.fpcr = GMP__FPCR_DEFAULT,
	};
}
