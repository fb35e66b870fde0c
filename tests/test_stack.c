/* Task stacks (design.md §6): the layout (stacks, and Gs beside them),
 * guard pages that really fault, GMP_STACK_GUARD=never, batches prepared
 * with process_madvise and without it, dead tasks' stacks reused, trimming
 * that spares the G, dead tasks' deep stacks given back (as they end, or
 * by a sweep) and shallow ones left alone, injected failures, and the
 * memory and mappings that 100,000 and 1,000,000 parked tasks cost. */
#include <limits.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "gmp_test.h"

#include "export_test.h"

/* ---- helpers ------------------------------------------------------------- */

/* Whether the kernel lets us read the byte at a: write(2) from it into a
 * pipe fails with EFAULT on a guard page (no signal, no fork needed). */
static int probe_fds[2] = { -1, -1 };

static bool readable(uintptr_t a)
{
	if (probe_fds[0] < 0)
		T_ASSERT(pipe(probe_fds) == 0);
	char c;
	ssize_t r = write(probe_fds[1], (const void *)a, 1);
	if (r == 1) {
		T_ASSERT(read(probe_fds[0], &c, 1) == 1);
		return true;
	}
	T_ASSERT(r < 0 && errno == EFAULT);
	return false;
}

static long long statm_field(int i)
{
	FILE *f = fopen("/proc/self/statm", "re");
	long long v[2] = { 0, 0 };
	T_ASSERT(f && fscanf(f, "%lld %lld", &v[0], &v[1]) == 2);
	fclose(f);
	return v[i] * sysconf(_SC_PAGESIZE);
}

/* Pages of [lo, hi) resident now (mincore). Unlike the process's RSS,
 * this does not move with other threads' allocations, nor with qemu-user's
 * own (its translation cache grows as new code runs). */
static size_t resident_pages(uintptr_t lo, uintptr_t hi)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	lo &= ~(uintptr_t)(ps - 1);
	hi = (hi + ps - 1) & ~(uintptr_t)(ps - 1);
	size_t n = (hi - lo) / ps, res = 0;
	unsigned char *vec = malloc(n);
	T_ASSERT(vec && mincore((void *)lo, hi - lo, vec) == 0);
	for (size_t i = 0; i < n; i++)
		res += vec[i] & 1;
	free(vec);
	return res;
}

static int maps_lines(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	T_ASSERT(f != NULL);
	int n = 0, c;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void init_with(int procs, size_t stack_size)
{
	gmp_config c = { .maxprocs = procs, .stack_size = stack_size };
	assert_int_equal(gmp_init(&c), 0);
}

/* Slots handed out so far (guarded or not). */
static uint64_t slots_used(void)
{
	uint64_t g, u;
	bool install;
	gmp__stack_counts(&g, &u, &install);
	return g + u;
}

/* ---- tasks that park until released -------------------------------------- */

/* n tasks, each records its G in gs[i] and parks receiving from gate. */
static gmp_chan *gate;
static gmp_g **gs;
static atomic_long nparked;

static void parker(void *arg)
{
	gs[(uintptr_t)arg] = gmp_current();
	atomic_fetch_add(&nparked, 1);
	T_ASSERT(gmp_chan_recv(gate, NULL) == -EPIPE);
}

static void park_n(long n)
{
	atomic_store(&nparked, 0);
	for (long i = 0; i < n; i++) {
		T_ASSERT(gmp_go(parker, (void *)(uintptr_t)i) > 0);
		gmp_preempt_point();
	}
	while (atomic_load(&nparked) < n)
		gmp_yield();
}

/* Parks n tasks, runs check() from the main task while they wait, then
 * releases them and shuts down. */
static long park_count;
static void (*park_check)(void);

static int park_main(void *arg)
{
	(void)arg;
	park_n(park_count);
	park_check();
	gmp_chan_close(gate);
	return 0;
}

static void with_parked(long n, void (*check)(void))
{
	gs = calloc((size_t)n, sizeof *gs);
	assert_non_null(gs);
	gate = gmp_chan_new(0, 0);
	assert_non_null(gate);
	park_count = n;
	park_check = check;
	assert_int_equal(gmp_main(park_main, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(gate);
	free(gs);
	gs = NULL;
}

/* ---- layout ---------------------------------------------------------------- */

static void check_layout(void)
{
	size_t ps = gmp__pagesize();
	long near = 0;
	for (long i = 0; i < park_count; i++) {
		gmp_g *g = gs[i];
		/* Whole pages of the configured size, the G outside them
		 * (and outside the guard), on a cache line of its own. */
		T_ASSERT(g->stack.lo % ps == 0 && g->stack.hi % ps == 0);
		T_ASSERT(g->stack.hi - g->stack.lo == 64 * 1024);
		T_ASSERT((uintptr_t)g + sizeof *g <= g->stack.lo - ps ||
			 (uintptr_t)g >= g->stack.hi);
		T_ASSERT((uintptr_t)g % 64 == 0);
		/* Gs of tasks made one after the other are neighbours, but
		 * where a new region began. */
		uintptr_t step = (sizeof *g + 63) & ~(uintptr_t)63;
		if (i > 0)
			near += (uintptr_t)g - (uintptr_t)gs[i - 1] == step ||
				(uintptr_t)gs[i - 1] - (uintptr_t)g == step;
		T_ASSERT(gmp__readgstatus(g) == GMP__G_WAITING);
		T_ASSERT(g->keys == NULL && g->nkeys == 0);
	}
	T_ASSERT(near >= park_count - 10);
}

static void test_stack_layout(void **s)
{
	(void)s;
	init_with(1, 64 * 1024);
	with_parked(300, check_layout);
}

/* ---- guard pages ------------------------------------------------------------ */

static uintptr_t poke_at;

static void poke_child(void *arg)
{
	(void)arg;
	/* The default action, not a sanitizer's report-and-exit. */
	signal(SIGSEGV, SIG_DFL);
	*(volatile char *)poke_at = 1;
	_exit(0);
}

static int poke_status(uintptr_t a)
{
	char err[1024];
	poke_at = a;
	return tu_run_child(poke_child, NULL, err, sizeof err);
}

static void check_guards(void)
{
	/* Every stack of every batch: the page below lo is a guard, lo
	 * itself is stack. */
	for (long i = 0; i < park_count; i++) {
		T_ASSERT(gs[i]->stack.guarded);
		T_ASSERT(!readable(gs[i]->stack.lo - 1));
		T_ASSERT(readable(gs[i]->stack.lo));
	}
}

static void test_stack_guard_faults(void **s)
{
	(void)s;
	if (!gmp__guard_install_works()) {
		print_message("MADV_GUARD_INSTALL does not guard here "
			      "(qemu-user or a kernel before 6.13)\n");
		skip();
	}
	gs = calloc(300, sizeof *gs);
	gate = gmp_chan_new(0, 0);
	park_count = 300;
	park_check = check_guards;
	init_with(1, 0);
	assert_int_equal(gmp_main(park_main, NULL), 0);
	/* The tasks may have ended; their slots stay mapped until shutdown.
	 * A write just below a stack kills a child, a write to its lowest
	 * byte does not. */
	for (long i = 0; i < 300; i += 97) {
		int st = poke_status(gs[i]->stack.lo - 1);
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV)
			fail_msg("write below stack %ld: child status %#x", i,
				 st);
		st = poke_status(gs[i]->stack.lo);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(gate);
	free(gs);
}

static void check_no_guards(void)
{
	for (long i = 0; i < park_count; i++) {
		T_ASSERT(!gs[i]->stack.guarded);
		T_ASSERT(readable(gs[i]->stack.lo - 1));
	}
	uint64_t g, u;
	bool install;
	gmp__stack_counts(&g, &u, &install);
	T_ASSERT(g == 0 && u >= (uint64_t)park_count);
}

static void test_stack_guard_never_gives_none(void **s)
{
	(void)s;
	setenv("GMP_STACK_GUARD", "never", 1);
	init_with(2, 0);
	unsetenv("GMP_STACK_GUARD");
	with_parked(300, check_no_guards);
}

/* ---- batches ---------------------------------------------------------------- */

/* The OS wrapper: one call guards two pages out of three and populates a
 * fourth, where the kernel allows it. */
static void test_stack_madvise_self_one_call(void **s)
{
	(void)s;
	size_t ps = gmp__pagesize();
	char *p = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	struct iovec iov[2] = { { p, ps }, { p + 2 * ps, ps } };
	ssize_t r = gmp__madvise_self(iov, 2, GMP__MADV_GUARD_INSTALL);
	if (r == -EINVAL || r == -EPERM || r == -ENOSYS) {
		munmap(p, 4 * ps);
		print_message("process_madvise refuses MADV_GUARD_INSTALL "
			      "here (%zd)\n",
			      r);
		skip();
	}
	assert_int_equal(r, 2 * (ssize_t)ps);
	if (gmp__guard_install_works()) {
		assert_false(readable((uintptr_t)p));
		assert_true(readable((uintptr_t)p + ps));
		assert_false(readable((uintptr_t)p + 2 * ps));
	}
	unsigned char vec[4];
	assert_int_equal(mincore(p, 4 * ps, vec), 0);
	assert_false(vec[3] & 1);
	struct iovec pop = { p + 3 * ps, ps };
	r = gmp__madvise_self(&pop, 1, GMP__MADV_POPULATE_WRITE);
	assert_int_equal(r, (ssize_t)ps);
	assert_int_equal(mincore(p, 4 * ps, vec), 0);
	assert_true(vec[3] & 1);
	munmap(p, 4 * ps);
}

/* With process_madvise failing (an invalid pidfd), guards are installed
 * one by one and top pages are faulted in as tasks start: every task of
 * several batches still runs, guarded. */
static void check_fallback(void)
{
	if (gmp__guard_install_works())
		check_guards();
}

static void test_stack_batch_without_process_madvise(void **s)
{
	(void)s;
	gmp__madvise_self_pidfd_set(-1);
	struct iovec iov = { NULL, 0 };
	ssize_t r = gmp__madvise_self(&iov, 1, GMP__MADV_GUARD_INSTALL);
	assert_true(r == -EBADF || r == -ENOSYS); /* ENOSYS: qemu-user */
	init_with(2, 0);
	with_parked(500, check_fallback);
	gmp__madvise_self_pidfd_set(INT_MIN);
}

/* ---- reuse and trimming ------------------------------------------------------ */

static void nop(void *arg)
{
	(void)arg;
}

static void done(void *arg)
{
	gmp_wg_done(arg);
}

static int spawn_in_turn(void *arg)
{
	(void)arg;
	gmp_wg wg = GMP_WG_INIT;
	/* Warm up, then no new slot should be needed: each task ends
	 * before the next starts, and its G and stack come back from the
	 * free list. */
	for (int i = 0; i < 10; i++) {
		gmp_wg_add(&wg, 1);
		T_ASSERT(gmp_go(done, &wg) > 0);
		gmp_wg_wait(&wg);
		gmp_yield(); /* let it reach the free list */
	}
	uint64_t slots = slots_used();
	for (int i = 0; i < 10000; i++) {
		T_ASSERT(gmp_go(nop, NULL) > 0);
		gmp_yield();
	}
	/* (Almost) no new slot, hence no new region: the mappings the
	 * stacks take stay as they were. A slice that ends during a yield
	 * skips runnext (sysmon), so the spawner may run again before its
	 * last task has ended and need a second G. (Counting the lines of
	 * /proc/self/maps would also count malloc arenas of threads that
	 * happen to start.) */
	T_ASSERT(slots_used() <= slots + 4);
	return 0;
}

static void test_stack_reuse_dead_tasks(void **s)
{
	(void)s;
	init_with(1, 0);
	assert_int_equal(gmp_main(spawn_in_turn, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

static gmp_g *last_g;
static int64_t last_id;

/* Not instrumented by ASan: with detect_stack_use_after_return its
 * frames live on a heap "fake stack", and the task's own stack would stay
 * clean. */
__attribute__((no_sanitize_address)) static void remember(void *arg)
{
	(void)arg;
	last_g = gmp_current();
	last_id = gmp_self();
	/* Dirty some of the stack, so that trimming has work to do, but
	 * stay within what the runtime keeps of it (16 KiB). */
	volatile char big[12 * 1024];
	for (size_t i = 0; i < sizeof big; i += 512)
		big[i] = 1;
}

static int trim_main(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_go(remember, NULL) > 0);
	gmp_yield(); /* it runs and ends: its G goes to this P's free list */
	gmp_g *g = last_g;
	T_ASSERT(gmp__readgstatus(g) == GMP__G_DEAD);
	/* remember dirtied 12 KiB of it. */
	T_ASSERT(resident_pages(g->stack.lo, g->stack.hi) >= 3);
	gmp__stack_trim(&g->stack, 0);
	/* The stack went back to the kernel, the G did not. */
	T_ASSERT(resident_pages(g->stack.lo, g->stack.hi) == 0);
	T_ASSERT(gmp__readgstatus(g) == GMP__G_DEAD && g->id == last_id);
	/* And the G is reused, with a working stack, by a new task. */
	int64_t id1 = last_id;
	T_ASSERT(gmp_go(remember, NULL) > 0);
	gmp_yield();
	T_ASSERT(last_g == g && last_id > id1);
	return 0;
}

static void test_stack_trim_spares_the_g(void **s)
{
	(void)s;
	init_with(1, 0);
	assert_int_equal(gmp_main(trim_main, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- dead tasks' stacks given back ------------------------------------------ */

/* Whether MADV_DONTNEED gives pages back here (qemu-user may ignore it). */
static bool dontneed_works(void)
{
	size_t ps = gmp__pagesize();
	char *p = mmap(NULL, ps, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	p[0] = 1;
	bool works = madvise(p, ps, MADV_DONTNEED) == 0 && p[0] == 0;
	munmap(p, ps);
	return works;
}

static uint64_t trims_at_exit(void)
{
	uint64_t e, s;
	gmp__stack_trims(&e, &s);
	return e;
}

/* Pages of g's stack committed below the top that the runtime keeps. */
static size_t deep_pages(const gmp_g *g)
{
	return resident_pages(g->stack.lo, g->stack.hi - gmp__stack_keep);
}

enum { DEEP_TASKS = 50, DEEP_BYTES = 128 * 1024 };

static gmp_wg deep_wg;
static gmp_chan *deep_gate;

/* Three ways down, one frame each: a frame that writes all of itself, one
 * that blocks at a switch point while deep (seen as it ends), and one that
 * writes a byte every page, the auditor's probe. The first and the last
 * give no sign at a switch point: the sweep catches them. Not instrumented
 * by ASan, whose fake stacks would keep the frames off the task's stack. */
__attribute__((noinline, no_sanitize_address)) static void deep_dense(void)
{
	volatile char big[DEEP_BYTES];
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = 1;
}

__attribute__((noinline, no_sanitize_address)) static void deep_parked(void)
{
	volatile char big[DEEP_BYTES];
	big[0] = 1;
	gmp_yield();
	big[sizeof big - 1] = 1;
}

__attribute__((noinline, no_sanitize_address)) static void deep_sparse(void)
{
	volatile char big[DEEP_BYTES];
	for (size_t i = 0; i < sizeof big; i += 4096)
		big[i] = 1;
}

static void deep_task(void *arg)
{
	gs[(uintptr_t)arg >> 2] = gmp_current();
	switch ((uintptr_t)arg & 3) {
	case 0:
		deep_dense();
		break;
	case 1:
		deep_parked();
		break;
	case 2:
		deep_sparse();
		break;
	}
	/* All alive at once, so each has a stack of its own: back at the
	 * top of the stack, wait for the others. */
	T_ASSERT(gmp_chan_recv(deep_gate, NULL) == -EPIPE);
	gmp_wg_done(&deep_wg);
}

/* Starts DEEP_TASKS tasks of one kind and waits until they have ended. */
static void run_deep(uintptr_t kind)
{
	deep_gate = gmp_chan_new(0, 0);
	T_ASSERT(deep_gate != NULL);
	gmp_wg_add(&deep_wg, DEEP_TASKS);
	for (uintptr_t i = 0; i < DEEP_TASKS; i++)
		T_ASSERT(gmp_go(deep_task, (void *)(i << 2 | kind)) > 0);
	for (int i = 0; i < 100; i++)
		gmp_yield(); /* they go deep, then wait at the gate */
	gmp_chan_close(deep_gate);
	gmp_wg_wait(&deep_wg);
	gmp_yield(); /* the last one reaches the free list */
	gmp_chan_free(deep_gate);
}

static int deep_at_exit_main(void *arg)
{
	uintptr_t kind = (uintptr_t)arg;
	uint64_t before = trims_at_exit();
	run_deep(kind);
	/* Each one went below the kept top, and said so as it ended by
	 * the sp it parked with. Each stack has given back its pages at
	 * once (a sweep would take a second or more). */
	T_ASSERT(trims_at_exit() >= before + DEEP_TASKS);
	for (long i = 0; i < DEEP_TASKS; i++) {
		T_ASSERT(gmp__readgstatus(gs[i]) == GMP__G_DEAD);
		T_ASSERT(deep_pages(gs[i]) == 0);
	}
	return 0;
}

/* Runs fn(kind) as gmp_main's function at procs Ps, with gs[] for the
 * deep tasks' Gs. */
static void run_deep_test(int (*fn)(void *), uintptr_t kind, int procs)
{
	if (!dontneed_works()) {
		print_message("MADV_DONTNEED keeps the pages here\n");
		skip();
	}
	gs = calloc(DEEP_TASKS, sizeof *gs);
	init_with(procs, 0);
	assert_int_equal(gmp_main(fn, (void *)kind), 0);
	assert_int_equal(gmp_shutdown(), 0);
	free(gs);
	gs = NULL;
}

static void test_stack_trim_task_parked_deep_as_it_ends(void **s)
{
	(void)s;
	run_deep_test(deep_at_exit_main, 1, 1);
}

/* Tasks that went deep between switch points give no sign at exit; the
 * sweep finds their stacks aged in the free list, and the pages go back
 * within about three seconds: a rotation moves the idle P's cache to old,
 * and the next one, a second later, ages it out. Waits up to 60 s
 * (sanitizers and qemu-user are slow). */
static int deep_sweep_main(void *arg)
{
	run_deep((uintptr_t)arg);
	long committed = 0;
	for (long i = 0; i < DEEP_TASKS; i++)
		committed += (long)deep_pages(gs[i]);
	print_message("%ld pages below the kept tops after the tasks "
		      "ended\n",
		      committed);
	int64_t start = gmp_nanotime();
	for (int t = 0; t < 600; t++) {
		committed = 0;
		for (long i = 0; i < DEEP_TASKS; i++)
			committed += (long)deep_pages(gs[i]);
		if (committed == 0)
			break;
		gmp_sleep(100 * 1000 * 1000);
	}
	print_message("given back after %.1f s\n",
		      (double)(gmp_nanotime() - start) / 1e9);
	T_ASSERT(committed == 0);
	return 0;
}

static void test_stack_trim_sweep_catches_dense_deep_tasks(void **s)
{
	(void)s;
	run_deep_test(deep_sweep_main, 0, 2);
}

static void test_stack_trim_sweep_catches_sparse_deep_tasks(void **s)
{
	(void)s;
	run_deep_test(deep_sweep_main, 2, 2);
}

/* Tasks that stay on their top page cost no trim as they end: no system
 * call on the common path. */
static int shallow_main(void *arg)
{
	(void)arg;
	uint64_t before = trims_at_exit();
	for (int i = 0; i < 10000; i++) {
		T_ASSERT(gmp_go(nop, NULL) > 0);
		gmp_yield();
	}
	gmp_wg wg = GMP_WG_INIT;
	for (int i = 0; i < 1000; i++) {
		gmp_wg_add(&wg, 1);
		T_ASSERT(gmp_go(done, &wg) > 0);
	}
	gmp_wg_wait(&wg);
	T_ASSERT(trims_at_exit() == before);
	return 0;
}

static void test_stack_trim_spares_shallow_tasks(void **s)
{
	(void)s;
	init_with(1, 0);
	assert_int_equal(gmp_main(shallow_main, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- the sweep's cost ------------------------------------------------------- */

/* Fewer under the sanitizers (gmp_test.h says why). */
#define BURST_TASKS TU_SCALE(20000)
#define CHURN_WAVE TU_SCALE(4000)

static gmp_chan *burst_gate;
static gmp_wg burst_wg;

static void burst_task(void *arg)
{
	(void)arg;
	T_ASSERT(gmp_chan_recv(burst_gate, NULL) == -EPIPE);
	gmp_wg_done(&burst_wg);
}

/* n tasks alive at once (each parks at the gate), then all ended. */
static void burst(long n)
{
	burst_gate = gmp_chan_new(0, 0);
	T_ASSERT(burst_gate != NULL);
	gmp_wg_add(&burst_wg, n);
	for (long i = 0; i < n; i++)
		T_ASSERT(gmp_go(burst_task, NULL) > 0);
	gmp_chan_close(burst_gate);
	gmp_wg_wait(&burst_wg);
	gmp_chan_free(burst_gate);
}

static int64_t allg_count(void)
{
	gmp__lock(&gmp__allg_lock);
	int64_t n = gmp__allg_n;
	gmp__unlock(&gmp__allg_lock);
	return n;
}

static uint64_t trims_swept(void)
{
	uint64_t e, s;
	gmp__stack_trims(&e, &s);
	return s;
}

/* After a burst, an idle program's sweep ages every G out once and then
 * does nothing: no G aged, no trim, sysmon in its deep sleep, for 3 s
 * (three periods) in a row. A sweep that walked the lists every period,
 * or aged the same Gs over and over, never gets there. We watch from a
 * blocking call (our P handed off), so that every P is idle and sysmon
 * may sleep deeply: a task that woke to look would wake it. Waits up to
 * 60 s. */
static int burst_idle_main(void *arg)
{
	(void)arg;
	gmp__gfree_stats st;
	gmp__gfree_stats_get(&st);
	uint64_t aged0 = st.aged, trims0 = trims_swept();
	burst(BURST_TASKS);
	gmp_enter_syscall_block();
	int64_t start = tu_now_ns(), quiet_since = start;
	uint64_t last_aged = st.aged, last_trims = trims0;
	bool quiet = false;
	for (int t = 0; t < 600 && !quiet; t++) {
		usleep(100 * 1000);
		gmp__gfree_stats_get(&st);
		uint64_t trims = trims_swept();
		int64_t now = tu_now_ns();
		if (st.aged != last_aged || trims != last_trims || st.aging ||
		    st.old || st.young ||
		    !gmp__load32_rlx(&gmp__sched.sysmonwait)) {
			quiet_since = now;
			last_aged = st.aged;
			last_trims = trims;
		}
		quiet = now - quiet_since >= 3000 * 1000 * 1000LL;
	}
	gmp_exit_syscall();
	int64_t allg = allg_count();
	print_message("quiet %.1f s after the burst: %llu Gs aged out, "
		      "%llu trimmed, of %lld; %lld in clean\n",
		      (double)(quiet_since - start) / 1e9,
		      (unsigned long long)(st.aged - aged0),
		      (unsigned long long)(last_trims - trims0),
		      (long long)allg, (long long)st.clean);
	T_ASSERT(quiet);
	/* Each dead G aged out once, and all are in clean now (but ours,
	 * which runs). */
	T_ASSERT(st.aged - aged0 >= BURST_TASKS);
	T_ASSERT(st.aged - aged0 <= (uint64_t)allg);
	T_ASSERT(last_trims - trims0 <= (uint64_t)allg);
	T_ASSERT(st.clean == allg - 1);
	return 0;
}

static void test_stack_sweep_settles_when_idle(void **s)
{
	(void)s;
	init_with(2, 0);
	assert_int_equal(gmp_main(burst_idle_main, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* Waves of CHURN_WAVE tasks alive at once, for six sweep periods: every
 * wave finds the Gs of the last one in the free lists, whatever the
 * sweep is doing, and makes almost no new ones. Once the first wave has
 * made its Gs, the most that can be out of the spawner's reach is what
 * the other P caches (64) and its own cache's next batch (64), plus the
 * one batch (32) the sweep holds while it trims: 160. A sweep that took
 * the whole list while it walked it made spawners allocate hundreds more
 * at every pass. */
static int churn_main(void *arg)
{
	(void)arg;
	int64_t first = 0, most = 0, start = gmp_nanotime();
	int waves = 0;
	uint64_t trims0 = trims_swept();
	while (gmp_nanotime() - start < 6000 * 1000 * 1000LL) {
		burst(CHURN_WAVE);
		int64_t n = allg_count();
		if (waves++ == 0)
			first = n;
		if (n > most)
			most = n;
	}
	print_message("%d waves: %lld Gs after the first, at most %lld; "
		      "%llu trimmed by the sweep\n",
		      waves, (long long)first, (long long)most,
		      (unsigned long long)(trims_swept() - trims0));
	T_ASSERT(most <= first + 160);
	return 0;
}

static void test_stack_sweep_leaves_spawners_their_gs(void **s)
{
	(void)s;
	init_with(2, 0);
	assert_int_equal(gmp_main(churn_main, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
}

/* ---- injected failures ------------------------------------------------------- */

static int fault_main(void *arg)
{
	enum gmp__fault kind = (enum gmp__fault)(uintptr_t)arg;
	/* Park tasks so that no free G exists and every spawn needs a new
	 * slot; fail them in the middle of a batch. */
	park_n(5);
	gmp__fault_arm(kind, 0, 3);
	for (int i = 0; i < 3; i++)
		T_ASSERT(gmp_go(nop, NULL) == -ENOMEM);
	gmp__fault_arm(kind, 0, 0);
	long n0 = atomic_load(&nparked);
	for (long i = 0; i < 200; i++)
		T_ASSERT(gmp_go(parker, (void *)(uintptr_t)(5 + i)) > 0);
	while (atomic_load(&nparked) < n0 + 200)
		gmp_yield();
	gmp_chan_close(gate);
	return 0;
}

static void fault_at(enum gmp__fault kind)
{
	gs = calloc(205, sizeof *gs);
	gate = gmp_chan_new(0, 0);
	init_with(1, 0);
	assert_int_equal(gmp_main(fault_main, (void *)(uintptr_t)kind), 0);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(gate);
	free(gs);
}

static void test_stack_fault_stack_enomem(void **s)
{
	(void)s;
	fault_at(GMP__FAULT_STACK_ENOMEM);
}

static void test_stack_fault_alloc(void **s)
{
	(void)s;
	fault_at(GMP__FAULT_ALLOC);
}

/* ---- many parked tasks --------------------------------------------------------- */

static long long rss_base;
static int maps_base;

static int many_main(void *arg)
{
	(void)arg;
	rss_base = statm_field(1);
	maps_base = maps_lines();
	park_n(park_count);
	double per = (double)(statm_field(1) - rss_base) / (double)park_count;
	int maps = maps_lines();
	print_message("%ld parked tasks: %.0f bytes each, %d mappings "
		      "(%d before; vm.max_map_count %ld)\n",
		      park_count, per, maps, maps_base, gmp__max_map_count());
	/* One page of each stack is resident: the top one, holding the
	 * parked task's frames. (Sanitizers widen frames.) */
	size_t ps = gmp__pagesize();
	for (long i = 0; i < park_count && !TU_ASAN && !TU_TSAN; i += 7) {
		uintptr_t lo = gs[i]->stack.lo;
		uintptr_t end = (gs[i]->stack.hi + ps - 1) & ~(ps - 1);
		unsigned char vec[1024];
		T_ASSERT((end - lo) / ps <= sizeof vec);
		T_ASSERT(mincore((void *)lo, end - lo, vec) == 0);
		size_t n = 0;
		for (size_t k = 0; k < (end - lo) / ps; k++)
			n += vec[k] & 1;
		T_ASSERT(n == 1 && (vec[(end - lo) / ps - 1] & 1));
	}
	/* The same in the resident set (a page and a G), where it means
	 * something: not under a sanitizer (shadow memory), nor under
	 * qemu-user, whose own bookkeeping adds about 1.6 KB per task (the
	 * check above holds there too); the guard probe is how we tell
	 * qemu-user. */
	if (!TU_ASAN && !TU_TSAN && gmp__guard_install_works())
		T_ASSERT(per <= 4608);
	/* Guards cost no mappings with MADV_GUARD_INSTALL; with mprotect
	 * the budget leaves half the default limit to the program. TSan
	 * maps its own state for every fiber (about four mappings each),
	 * which says nothing about ours: not counted there. */
	if (TU_TSAN)
		print_message("mapping count not checked under TSan\n");
	else if (gmp__guard_install_works())
		T_ASSERT(maps < maps_base + 1000);
	else
		T_ASSERT(maps < maps_base + 65530 / 2 + 1000);
	gmp_chan_close(gate);
	return 0;
}

static void many_parked(long n)
{
	gs = calloc((size_t)n, sizeof *gs);
	gate = gmp_chan_new(0, 0);
	park_count = n;
	init_with(1, 0);
	assert_int_equal(gmp_main(many_main, NULL), 0);
	assert_int_equal(gmp_shutdown(), 0);
	gmp_chan_free(gate);
	free(gs);
}

static void test_stack_100k_parked(void **s)
{
	(void)s;
	many_parked(TU_SCALE(100000));
}

/* 4-8 s and 4.4 GB of memory natively, 14 s under qemu: too much for the
 * default set, which has the 100,000 above. */
static void test_stack_million_parked_long(void **s)
{
	(void)s;
	many_parked(TU_SCALE(1000000));
}

GMP_TEST_MAIN(cmocka_unit_test(test_stack_layout),
	      cmocka_unit_test(test_stack_guard_faults),
	      cmocka_unit_test(test_stack_guard_never_gives_none),
	      cmocka_unit_test(test_stack_madvise_self_one_call),
	      cmocka_unit_test(test_stack_batch_without_process_madvise),
	      cmocka_unit_test(test_stack_reuse_dead_tasks),
	      cmocka_unit_test(test_stack_trim_spares_the_g),
	      cmocka_unit_test(test_stack_trim_task_parked_deep_as_it_ends),
	      cmocka_unit_test(test_stack_trim_sweep_catches_dense_deep_tasks),
	      cmocka_unit_test(test_stack_trim_sweep_catches_sparse_deep_tasks),
	      cmocka_unit_test(test_stack_trim_spares_shallow_tasks),
	      cmocka_unit_test(test_stack_sweep_settles_when_idle),
	      cmocka_unit_test(test_stack_sweep_leaves_spawners_their_gs),
	      cmocka_unit_test(test_stack_fault_stack_enomem),
	      cmocka_unit_test(test_stack_fault_alloc),
	      cmocka_unit_test(test_stack_100k_parked),
	      cmocka_unit_test(test_stack_million_parked_long))
