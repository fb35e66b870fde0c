/* What the tests may reach inside the runtime (Go's export_test.go).
 *
 * Tests include this header, never the runtime's own headers one by one:
 * it brings the types and the internal calls they drive directly (run
 * queues on bare Ps, semaphores, fault injection, stack and free-list
 * counters), and declares the hooks that exist only for tests. Nothing in
 * src/ includes it. Every symbol here is hidden in libgmp.so; the tests
 * link the static library.
 */
#ifndef GMP_EXPORT_TEST_H
#define GMP_EXPORT_TEST_H

#include "internal.h"
#include "chan.h"
#include "fault.h"
#include "runq.h"
#include "sema.h"

#endif
