/* gmp__throw: the runtime's answer to a broken invariant, as Go's throw
 * (design.md, "Conventions"). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "sys.h"
#include "trace.h"

/* Formats into a stack buffer and writes with one write(2), so a throw from
 * a thread in trouble (or a signal handler) does not need stdio's locks. */
_Noreturn void gmp__throw(const char *fmt, ...)
{
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "gmp: ");
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	gmp__sys_write(2, buf, (size_t)n);
	/* What led here, if a trace records it (the flight recorder). */
	gmp__trace_dump_emergency();
	abort();
}

_Noreturn void gmp__ctx_entry_returned(void)
{
	gmp__throw("task entry function returned past the trampoline "
		   "(the exit path was skipped)");
}

_Noreturn void gmp__ctx_mcall_returned(void)
{
	gmp__throw("mcall: function on the scheduler stack returned");
}
