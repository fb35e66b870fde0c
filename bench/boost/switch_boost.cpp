// The yardstick for bench/switch.c: the same two-context ping-pong on one
// thread, switched with Boost.Context's jump_fcontext (the primitive under
// boost::context::fiber). One op is one switch in one direction.
//
//   switch_boost [--n=N] [--procs=P]
//
// Same flags and output format as bench/switch.c (--procs is ignored):
//
//   bench=switch_boost procs=1 n=<n> ns_per_op=<x>
//
// Built only when Boost.Context is found (Debian: libboost-context-dev);
// see bench/boost/CMakeLists.txt.
#include <cstdio>
#include <cstdlib>

#include <boost/context/detail/fcontext.hpp>

#include "benchutil.h"

namespace fc = boost::context::detail;

static const std::size_t stack_size = 64 * 1024;
static const long long warmup_rounds = 100000;

// Each jump hands over the context to come back to; the peer just bounces
// every transfer straight back.
static void peer(fc::transfer_t t)
{
	for (;;)
		t = fc::jump_fcontext(t.fctx, nullptr);
}

int main(int argc, char **argv)
{
	bench_args a = bench_parse(argc, argv, 1, 10000000);
	long long rounds = (a.n + 1) / 2;

	char *stack = static_cast<char *>(std::malloc(stack_size));
	if (stack == nullptr) {
		std::perror("malloc");
		return 1;
	}
	fc::fcontext_t c = fc::make_fcontext(stack + stack_size, stack_size,
					     peer);

	for (long long i = 0; i < warmup_rounds; i++)
		c = fc::jump_fcontext(c, nullptr).fctx;

	int64_t t0 = bench_now_ns();
	for (long long i = 0; i < rounds; i++)
		c = fc::jump_fcontext(c, nullptr).fctx;
	int64_t t1 = bench_now_ns();

	std::printf("bench=switch_boost procs=1 n=%lld ns_per_op=%.3f\n",
		    2 * rounds, (double)(t1 - t0) / (double)(2 * rounds));
	return 0;
}
