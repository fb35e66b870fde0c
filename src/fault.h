/* Fault injection (tests only; see tests/test_fault.c): make the next
 * operations of a kind fail as if the system had run out of something.
 * Tests arm it with gmp__fault_arm (export_test.h); the runtime asks
 * gmp__fault_hit at each operation that can fail that way.
 * Always compiled in: each check is one relaxed load of a counter that is
 * zero unless a test armed it, on paths that are slow anyway (thread
 * creation, stack mapping, allocation). */
#ifndef GMP_FAULT_H
#define GMP_FAULT_H

#include <stdbool.h>
#include <stdint.h>

enum gmp__fault {
	GMP__FAULT_THREAD_EAGAIN, /* pthread_create fails with EAGAIN */
	GMP__FAULT_STACK_ENOMEM,  /* mapping a stack region fails */
	GMP__FAULT_ALLOC,         /* gmp__malloc/calloc/realloc fail */
	GMP__FAULT_NKINDS,
};

/* True if this operation of `kind` must fail. */
bool gmp__fault_hit(enum gmp__fault kind);

#endif
