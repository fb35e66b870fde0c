/* Task-local keys (key.c). */
#ifndef GMP_KEY_H
#define GMP_KEY_H

#include "internal.h"

/* On the ending task g: runs each non-NULL value's destructor once. The
 * destructors may switch, so the caller's M is stale afterwards. */
void gmp__keys_destroy(gmp_g *g);

#endif
