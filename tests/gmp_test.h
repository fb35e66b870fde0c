/* Shared scaffolding for the cmocka suites.
 *
 * Each test program takes an optional case name as argv[1] and runs only
 * that case, so CTest can give every case its own process and timeout. */
#ifndef GMP_TEST_H
#define GMP_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define GMP_TEST_MAIN(...)                                                     \
	int main(int argc, char **argv)                                        \
	{                                                                      \
		const struct CMUnitTest gmp_tests_[] = { __VA_ARGS__ };        \
		if (argc > 1)                                                  \
			cmocka_set_test_filter(argv[1]);                       \
		return cmocka_run_group_tests(gmp_tests_, NULL, NULL);         \
	}

#endif
