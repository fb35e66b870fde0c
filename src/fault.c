/* Fault injection (fault.h). */
#include "atomic.h"
#include "export_test.h"
#include "fault.h"

static struct {
	volatile uint64_t skip;  /* atomic: operations still to let through */
	volatile uint64_t count; /* atomic: failures left; UINT64_MAX: all */
	volatile uint32_t armed; /* atomic: fast check */
} faults[GMP__FAULT_NKINDS];

void gmp__fault_arm(enum gmp__fault kind, int64_t skip, int64_t count)
{
	gmp__store32_rel(&faults[kind].armed, 0);
	gmp__store64_rlx(&faults[kind].skip, (uint64_t)(skip < 0 ? 0 : skip));
	gmp__store64_rlx(&faults[kind].count,
			 count < 0 ? UINT64_MAX : (uint64_t)count);
	/* release: the counters are set before anyone sees it armed */
	gmp__store32_rel(&faults[kind].armed, count != 0);
}

bool gmp__fault_hit(enum gmp__fault kind)
{
	if (__builtin_expect(gmp__load32_acq(&faults[kind].armed) == 0, 1))
		return false;
	/* Take one from skip if any is left, else one from count. */
	for (;;) {
		uint64_t s = gmp__load64_rlx(&faults[kind].skip);
		if (s == 0)
			break;
		if (gmp__cas64_full(&faults[kind].skip, s, s - 1))
			return false;
	}
	for (;;) {
		uint64_t c = gmp__load64_rlx(&faults[kind].count);
		if (c == 0)
			return false;
		if (c == UINT64_MAX)
			return true;
		if (gmp__cas64_full(&faults[kind].count, c, c - 1))
			return true;
	}
}
