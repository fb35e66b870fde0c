/* Compiled by the gmp_header.* tests as C11, C17 and C++ (as a .cpp copy),
 * each with -Wall -Wextra -Werror -pedantic, and linked against libgmp:
 * gmp.h must be clean in every one of them, and its extern "C" must make
 * the C++ build link. It runs a task so the link is not an illusion. */
#include <gmp.h>

#include <stdio.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)

static int ran;

static void task(void *arg)
{
	*(int *)arg = 1;
}

static int main_task(void *arg)
{
	gmp_wg wg = GMP_WG_INIT;
	gmp_mutex mu = GMP_MUTEX_INIT;
	gmp_mutex_lock(&mu);
	gmp_mutex_unlock(&mu);
	gmp_wg_add(&wg, 0);
	gmp_wg_wait(&wg);
	(void)arg;
	return gmp_go(task, &ran) > 0 ? 0 : 1;
}

int main(void)
{
	const char *want = STR(GMP_VERSION_MAJOR) "." STR(
		GMP_VERSION_MINOR) "." STR(GMP_VERSION_PATCH);
	if (strcmp(gmp_version(), want) != 0) {
		fprintf(stderr, "gmp_version() %s, header %s\n", gmp_version(),
			want);
		return 1;
	}
	gmp_config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.maxprocs = 2;
	if (gmp_init(&cfg) != 0 || gmp_main(main_task, NULL) != 0 ||
	    gmp_shutdown() != 0 || !ran)
		return 1;
	printf("gmp.h %s: ok\n", gmp_version());
	return 0;
}
