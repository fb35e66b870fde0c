/* System calls and sysmon (design.md §4): a task blocked in a wrapped call
 * does not stop the others (retake, and the immediate handoff of
 * gmp_enter_syscall_block); quick calls stay on the fast path; errno
 * survives the slow path even across threads; sysmon follows Go's retake
 * rules and asks long time slices to yield; misuse aborts; the stats count
 * tasks in system calls.
 *
 * Time bounds here are generous (a deadlock fails a TU_WAIT_FOR, or the
 * CTest timeout). The tests that a P is NOT taken depend on the 10 ms
 * rules, which a loaded host can trigger legitimately by stalling a
 * thread; they time themselves and retry, or skip, rather than flake (see
 * judge()). */
#include <linux/futex.h>
#include <stdbool.h>

#include "export_test.h"
#include "gmp_test.h"

/* glibc declares __errno_location const, so a compiler may keep errno's
 * address across a call that, unknown to it, moved the task to another
 * thread. A noinline function reached through a volatile pointer reads the
 * errno of the thread we are on now. */
static __attribute__((noinline)) int errno_now_(void)
{
	return errno;
}
static __attribute__((noinline)) void errno_set_(int e)
{
	errno = e;
}
static int (*volatile errno_now)(void) = errno_now_;
static void (*volatile errno_set)(int) = errno_set_;

/* ---- a blocked read does not stop the writer that would unblock it ------- */

struct rw {
	int fd[2];
	bool block;              /* gmp_enter_syscall_block, not enter */
	atomic_int reader_in;    /* the reader is about to read */
	atomic_int reader_done;  /* its read returned */
	atomic_int writer_early; /* the writer ran while the read blocked */
	atomic_llong t_in, t_writer;
	atomic_int got;
};

static void blocked_reader(void *arg)
{
	struct rw *rw = arg;
	char c = 0;
	atomic_store(&rw->t_in, tu_now_ns());
	/* No switch point from here to the read: with one P, the writer can
	 * only run once this task has given up (or lost) the P. */
	atomic_store(&rw->reader_in, 1);
	if (rw->block)
		gmp_enter_syscall_block();
	else
		gmp_enter_syscall();
	ssize_t r = read(rw->fd[0], &c, 1);
	gmp_exit_syscall();
	T_ASSERT(r == 1);
	atomic_store(&rw->got, c);
	atomic_store(&rw->reader_done, 1);
}

static void unblocking_writer(void *arg)
{
	struct rw *rw = arg;
	while (!atomic_load(&rw->reader_in))
		gmp_yield(); /* whichever runs first, the reader gets to read */
	atomic_store(&rw->t_writer, tu_now_ns());
	atomic_store(&rw->writer_early, !atomic_load(&rw->reader_done));
	T_ASSERT(write(rw->fd[1], "x", 1) == 1);
}

static void blocked_read_at_maxprocs_1(bool block)
{
	struct rw rw = { .block = block };
	assert_int_equal(pipe(rw.fd), 0); /* blocking: no poller involved */
	tu_init(1);
	/* From outside a task both go to the global queue; with one P,
	 * whichever runs first, the writer can only run while the reader is
	 * stuck in read() if the P is taken from it. Without that this
	 * deadlocks, and the wait fails the case. */
	assert_true(gmp_go(blocked_reader, &rw) > 0);
	assert_true(gmp_go(unblocking_writer, &rw) > 0);
	TU_WAIT_FOR(atomic_load(&rw.reader_done));
	gmp_stats st;
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&rw.got), 'x');
	assert_int_equal(atomic_load(&rw.writer_early), 1);
	int64_t waited = atomic_load(&rw.t_writer) - atomic_load(&rw.t_in);
	assert_true(waited >= 0);
	assert_true(waited < 2000 * (int64_t)MS);
	/* The P moved to another M: by sysmon's retake for a plain enter,
	 * at once by handoffp for enter_block. */
	assert_true(st.handoffs >= 1);
	if (!block)
		assert_true(st.retakes >= 1);
	close(rw.fd[0]);
	close(rw.fd[1]);
}

static void test_syscall_blocked_read_does_not_stop_writer(void **s)
{
	(void)s;
	blocked_read_at_maxprocs_1(false);
}

static void test_syscall_block_blocked_read_does_not_stop_writer(void **s)
{
	(void)s;
	blocked_read_at_maxprocs_1(true);
}

/* ---- the fast path ---------------------------------------------------------- */

/* Both tests below assert that sysmon does NOT take a P. sysmon may take
 * it rightly once a call, or the P's time slice, has lasted 10 ms; on a
 * loaded host the kernel can stall a thread that long anywhere, even
 * inside getpid(). So each test times every stretch between two of its
 * gmp_yield calls (each yield starts a new slice): a retake is a failure
 * when every stretch stayed under 5 ms, and makes the run inconclusive
 * (tried again, up to ATTEMPTS times, then skipped) when some stretch did
 * not. A stretch is timed from just before its yield, which bounds both
 * the slice (its schedtick changes inside the yield) and the calls in it
 * (each begins after the yield). The margin below 10 ms covers sysmon's
 * side: it reads the clock once per round, before it looks at the Ps, so
 * a sysmon stalled in between dates what it sees a little early.
 *
 * The other rule (Go's too) lets sysmon take the P of a call it has seen
 * twice when no P is idle and no thread spins: then nobody else could
 * take new work. One task on two Ps leaves the second idle, but not at
 * the start: the thread woken for the first spawn spins, may steal the
 * task at a yield and wake another to spin in turn, and a thread the
 * kernel stalls while it holds the other P, neither spinning nor idle,
 * makes that rule apply to a call of a few microseconds (CI saw it once:
 * a retake within a 3.9 ms stretch). So the measured part begins only
 * once the other P is idle and no thread spins (settle); from then on
 * nothing wakes a thread (a yield to an empty queue does not, nor does a
 * fast syscall), and only the 10 ms rules can take the P. */
enum { ATTEMPTS = 5 };
static const int64_t STALL_NS = 5 * (int64_t)MS;

enum verdict { PASS, INCONCLUSIVE, FAIL };

static enum verdict judge(bool took_p, int64_t longest_stretch, bool settled)
{
	if (!took_p)
		return PASS;
	return longest_stretch < STALL_NS && settled ? FAIL : INCONCLUSIVE;
}

/* Waits, with no switch point, until every P but the caller's is idle and
 * no thread spins (see above); false if that took over a second. */
static bool settle(void)
{
	int64_t end = tu_now_ns() + 1000 * (int64_t)MS;
	for (;;) {
		gmp_stats st = tu_stats();
		if (st.threads_spinning == 0 && st.procs_idle + 1 == st.procs)
			return true;
		if (tu_now_ns() > end)
			return false;
	}
}

enum { FAST_CALLS = 1000000, FAST_BATCH = 100 };

struct fast {
	bool settled;
	gmp_stats before, after;
	atomic_int moved; /* a batch without switch points changed thread */
	atomic_int wrong; /* getpid gave a wrong answer */
	int64_t longest;  /* longest stretch between yields, ns */
};

static void getpid_loop(void *arg)
{
	struct fast *f = arg;
	pid_t pid = getpid();
	f->settled = settle();
	f->before = tu_stats();
	for (int i = 0; i < FAST_CALLS; i += FAST_BATCH) {
		/* Give up the time slice now and then. sysmon takes the P of
		 * a task in a syscall once the P's *slice* (its schedtick) has
		 * lasted 10 ms, however short each call is (Go's rule: a
		 * preemption request cannot reach a task in a syscall, so
		 * retaking is the only way to end its slice). A loop of
		 * quick calls that never yields is such a slice: sysmon
		 * would, rightly, catch it inside one of its calls. A batch
		 * of 100 calls takes well under a millisecond, even under
		 * qemu. */
		int64_t t0 = tu_now_ns();
		gmp_yield();
		pid_t tid = tu_gettid();
		/* An empty pair first: the first syscall a fresh P sees has
		 * a test of its own (first_syscall_on_p_not_retaken). */
		gmp_enter_syscall();
		gmp_exit_syscall();
		for (int j = 0; j < FAST_BATCH; j++) {
			gmp_enter_syscall();
			/* syscall(), not getpid(): no libc caching. */
			pid_t r = (pid_t)syscall(SYS_getpid);
			gmp_exit_syscall();
			if (r != pid)
				atomic_store(&f->wrong, 1);
		}
		if (tu_gettid() != tid)
			atomic_store(&f->moved, 1);
		int64_t d = tu_now_ns() - t0;
		if (d > f->longest)
			f->longest = d;
	}
	f->after = tu_stats();
}

static void test_syscall_fast_path_takes_no_handoff(void **s)
{
	(void)s;
	for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
		struct fast f = { 0 };
		/* Two Ps, one task: the idle P keeps the queue-empty rule in
		 * play (no retake under 10 ms while a P is idle). */
		tu_init(2);
		assert_true(gmp_go(getpid_loop, &f) > 0);
		assert_int_equal(gmp_shutdown(), 0);
		assert_int_equal(atomic_load(&f.wrong), 0);
		assert_int_equal(f.after.tasks_in_syscall, 0);
		bool took = f.after.retakes != f.before.retakes ||
			    f.after.handoffs != f.before.handoffs ||
			    atomic_load(&f.moved);
		enum verdict v = judge(took, f.longest, f.settled);
		if (v == PASS)
			return;
		print_message("attempt %d: retakes %llu, handoffs %llu, moved "
			      "%d; longest stretch %.3f ms; settled %d\n",
			      attempt,
			      (unsigned long long)(f.after.retakes -
						   f.before.retakes),
			      (unsigned long long)(f.after.handoffs -
						   f.before.handoffs),
			      atomic_load(&f.moved), (double)f.longest / MS,
			      f.settled);
		if (v == FAIL)
			fail_msg("a P was taken on the fast path");
	}
	skip(); /* the host stalled us past 10 ms every time */
}

/* ---- errno -------------------------------------------------------------------- */

struct errno_case {
	bool block;
	atomic_int done;
	long r;
	int err; /* errno right after gmp_exit_syscall */
	pid_t tid_before, tid_after;
	atomic_int poisoned; /* the spinner saw its own errno change */
	gmp_stats st;
};

/* Sets a different errno on whatever thread it runs on, and checks that
 * its own errno survives its switch points. */
static void errno_spinner(void *arg)
{
	struct errno_case *ec = arg;
	while (!atomic_load(&ec->done)) {
		errno_set(EBADF);
		gmp_yield();
		if (errno_now() != EBADF)
			atomic_store(&ec->poisoned, 1);
	}
}

static void errno_futex_waiter(void *arg)
{
	struct errno_case *ec = arg;
	static uint32_t word; /* never changes: the wait times out */
	/* A runnable task on our P: sysmon retakes the P while we wait
	 * (enter) or the P is handed to it at once (enter_block). */
	T_ASSERT(gmp_go(errno_spinner, ec) > 0);
	struct timespec ts = { 0, 50 * MS };
	ec->tid_before = tu_gettid();
	errno_set(0);
	if (ec->block)
		gmp_enter_syscall_block();
	else
		gmp_enter_syscall();
	ec->r = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
	gmp_exit_syscall();
	ec->err = errno_now();
	ec->tid_after = tu_gettid();
	ec->st = tu_stats();
	atomic_store(&ec->done, 1);
}

static void errno_after_slow_exit(bool block)
{
	struct errno_case ec = { .block = block };
	/* A slice longer than the case: on a slow host (TSan) the spinner
	 * could otherwise run past 10 ms between two switch points, and
	 * sysmon would detach its P and hand it to the idle waiter's thread,
	 * which would then resume the waiter where it left. */
	gmp__preempt_set_slice(10 * 1000 * MS);
	tu_init(1);
	assert_true(gmp_go(errno_futex_waiter, &ec) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	gmp__preempt_set_slice(0);
	assert_int_equal(ec.r, -1);
	assert_int_equal(ec.err, ETIMEDOUT);
	assert_int_equal(atomic_load(&ec.poisoned), 0);
	/* The slow path really ran: the spinner kept the only P busy, so
	 * the waiter's thread found no P, queued the waiter globally and
	 * parked; the spinner's thread picked it up. errno had to travel. */
	assert_true(ec.st.handoffs >= 1);
	if (!block)
		assert_true(ec.st.retakes >= 1);
	print_message("errno case (%s): came back on %s thread (%d -> %d)\n",
		      block ? "enter_block" : "enter",
		      ec.tid_before != ec.tid_after ? "another" : "the same",
		      (int)ec.tid_before, (int)ec.tid_after);
	assert_true(ec.tid_before != ec.tid_after);
}

static void test_syscall_errno_survives_slow_path(void **s)
{
	(void)s;
	errno_after_slow_exit(false);
}

static void test_syscall_errno_survives_slow_path_block(void **s)
{
	(void)s;
	errno_after_slow_exit(true);
}

/* No runtime code between two points of a task changes its errno: not a
 * switch, not a fast-path syscall exit, not sleeping. */
static atomic_int errno_bad;

static void errno_keeper(void *arg)
{
	int mine = (int)(intptr_t)arg;
	for (int i = 0; i < 200; i++) {
		errno_set(mine);
		gmp_yield();
		if (errno_now() != mine)
			atomic_store(&errno_bad, 1);
		if (i % 50 == 0) {
			gmp_sleep(100000);
			if (errno_now() != mine)
				atomic_store(&errno_bad, 2);
		}
		gmp_enter_syscall();
		errno_set(mine + 1000); /* what "the call" left */
		gmp_exit_syscall();
		if (errno_now() != mine + 1000)
			atomic_store(&errno_bad, 3);
	}
}

static void test_syscall_errno_untouched_by_switches(void **s)
{
	(void)s;
	atomic_store(&errno_bad, 0);
	tu_init(2);
	for (int i = 1; i <= 8; i++)
		assert_true(gmp_go(errno_keeper, (void *)(intptr_t)i) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&errno_bad), 0);
}

/* ---- retake rules ------------------------------------------------------------ */

struct retake_case {
	bool warm;
	bool settled;
	gmp_stats before, after;
	atomic_int moved;
	int64_t longest; /* longest stretch between yields, ns */
};

/* One task alone on two Ps: short sleeps in syscalls must not be retaken.
 * sysmon polls every 20 µs at first (it was just woken from its deep
 * sleep), so it sees each 3 ms call many times: first sight only notes it;
 * after that the P's queue is empty, a P is idle and the call is under
 * 10 ms old, so the P stays. A sysmon that retook on second sight alone
 * would fail this at once. (Stalls: see judge() above.)
 *
 * warm: before each sleep, an empty enter/exit pair on the same P (no
 * switch point in between), so that the sleep is never the first syscall
 * its P has seen; that case has its own test below. */
static void short_sleeps(void *arg)
{
	struct retake_case *rc = arg;
	rc->settled = settle();
	rc->before = tu_stats();
	for (int i = 0; i < 10; i++) {
		/* A new slice for each call, so the 10 ms slice rule (which
		 * retakes regardless) cannot apply. */
		int64_t t0 = tu_now_ns();
		gmp_yield();
		pid_t tid = tu_gettid();
		if (rc->warm) {
			gmp_enter_syscall();
			gmp_exit_syscall();
		}
		tu_syscall_sleep(3 * MS, false);
		if (tu_gettid() != tid)
			atomic_store(&rc->moved, 1);
		int64_t d = tu_now_ns() - t0;
		if (d > rc->longest)
			rc->longest = d;
	}
	rc->after = tu_stats();
}

static void short_sleeps_not_retaken(bool warm)
{
	for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
		struct retake_case rc = { .warm = warm };
		tu_init(2);
		assert_true(gmp_go(short_sleeps, &rc) > 0);
		assert_int_equal(gmp_shutdown(), 0);
		bool took = rc.after.retakes != rc.before.retakes ||
			    rc.after.handoffs != rc.before.handoffs ||
			    atomic_load(&rc.moved);
		enum verdict v = judge(took, rc.longest, rc.settled);
		if (v == PASS)
			return;
		print_message("attempt %d: retakes %llu, handoffs %llu, moved "
			      "%d; longest stretch %.3f ms; settled %d\n",
			      attempt,
			      (unsigned long long)(rc.after.retakes -
						   rc.before.retakes),
			      (unsigned long long)(rc.after.handoffs -
						   rc.before.handoffs),
			      atomic_load(&rc.moved), (double)rc.longest / MS,
			      rc.settled);
		if (v == FAIL)
			fail_msg("a P in a 3 ms syscall was retaken while a P "
				 "was idle");
	}
	skip(); /* the host stalled us past 10 ms every time */
}

static void test_syscall_not_retaken_while_idle_p_exists(void **s)
{
	(void)s;
	short_sleeps_not_retaken(true);
}

/* The same with the very first syscall of a fresh runtime: the P's
 * syscalltick is still 0, which must not pass for "seen before" against
 * sysmon's zeroed record of it. */
static void test_syscall_first_syscall_on_p_not_retaken(void **s)
{
	(void)s;
	short_sleeps_not_retaken(false);
}

/* ... but not forever: after 10 ms sysmon takes it anyway (it would keep
 * sysmon from its deep sleep). */
static void long_sleep(void *arg)
{
	struct retake_case *rc = arg;
	rc->before = tu_stats();
	tu_syscall_sleep(60 * MS, false);
	rc->after = tu_stats();
}

static void test_syscall_retaken_after_10ms_even_with_idle_p(void **s)
{
	(void)s;
	struct retake_case rc = { 0 };
	tu_init(2);
	assert_true(gmp_go(long_sleep, &rc) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_true(rc.after.retakes >= rc.before.retakes + 1);
}

/* The slice rule retakes a P once per slice, not at every look. sysmon
 * ends a 10 ms slice of a task that sits in syscalls by taking its P (and
 * asking it to yield); the task's next switch point, here the slow path of
 * gmp_exit_syscall, must honour that, so a new slice begins. (Go gets this
 * from the preemption request, which its exitsyscall keeps armed.) Calls of
 * 100 µs with a P idle are never retaken for themselves, so over 300 ms
 * about 30 slice retakes are expected; a task whose slice never ends again
 * loses its P on nearly every call (thousands). */
struct slice_loop {
	gmp_stats before, after;
	long calls;
};

static void sleeps_without_switch_points(void *arg)
{
	struct slice_loop *sl = arg;
	sl->before = tu_stats();
	int64_t end = tu_now_ns() + 300 * (int64_t)MS;
	while (tu_now_ns() < end) {
		tu_syscall_sleep(100000, false);
		sl->calls++;
	}
	sl->after = tu_stats();
}

static void test_syscall_slice_retake_ends_the_slice(void **s)
{
	(void)s;
	struct slice_loop sl = { 0 };
	tu_init(2);
	assert_true(gmp_go(sleeps_without_switch_points, &sl) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	uint64_t retakes = sl.after.retakes - sl.before.retakes;
	print_message("%ld calls of 100 us in 300 ms: %llu retakes\n", sl.calls,
		      (unsigned long long)retakes);
	/* 30 slices, with room for stalls of a loaded host. */
	assert_true(retakes <= 100);
}

struct queued {
	atomic_llong t_enter, t_ran;
	atomic_int sleeper_done, ran_during;
	gmp_stats st;
};

static void queued_task(void *arg)
{
	struct queued *q = arg;
	atomic_store(&q->t_ran, tu_now_ns());
	atomic_store(&q->ran_during, !atomic_load(&q->sleeper_done));
}

static void sleeper_with_work_queued(void *arg)
{
	struct queued *q = arg;
	/* Into this P's runnext: the only P, held by us in the syscall. */
	T_ASSERT(gmp_go(queued_task, q) > 0);
	atomic_store(&q->t_enter, tu_now_ns());
	tu_syscall_sleep(200 * MS, false);
	atomic_store(&q->sleeper_done, 1);
	q->st = tu_stats();
}

static void test_syscall_retaken_when_queue_has_work(void **s)
{
	(void)s;
	struct queued q = { 0 };
	tu_init(1);
	assert_true(gmp_go(sleeper_with_work_queued, &q) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&q.ran_during), 1);
	int64_t lag = atomic_load(&q.t_ran) - atomic_load(&q.t_enter);
	print_message("queued task ran %.3f ms after the syscall began\n",
		      (double)lag / MS);
	/* Two sysmon looks (≥ 20 µs) and a thread wakeup; 100 ms is slack
	 * for sanitizers and qemu. */
	assert_true(lag < 100 * (int64_t)MS);
	assert_true(q.st.retakes >= 1);
	assert_true(q.st.handoffs >= 1);
}

/* ---- sysmon's other duty: long time slices ------------------------------------ */

struct slice {
	atomic_int other_ran;
	atomic_llong t0, t_other;
};

static void note_other(void *arg)
{
	struct slice *sl = arg;
	atomic_store(&sl->t_other, tu_now_ns());
	atomic_store(&sl->other_ran, 1);
}

static void spin_with_preempt_points(void *arg)
{
	struct slice *sl = arg;
	atomic_store(&sl->t0, tu_now_ns());
	T_ASSERT(gmp_go(note_other, sl) > 0); /* runnable behind us */
	int64_t give_up = tu_now_ns() + 5000 * (int64_t)MS;
	while (!atomic_load(&sl->other_ran) && tu_now_ns() < give_up)
		gmp_preempt_point();
}

static void test_syscall_sysmon_preempts_long_slice(void **s)
{
	(void)s;
	struct slice sl = { 0 };
	tu_init(1);
	assert_true(gmp_go(spin_with_preempt_points, &sl) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&sl.other_ran), 1);
	int64_t slice = atomic_load(&sl.t_other) - atomic_load(&sl.t0);
	print_message("spinner yielded after %.3f ms\n", (double)slice / MS);
	/* Not before the slice is (nearly) over; well before our 5 s. */
	assert_true(slice >= 5 * (int64_t)MS);
	assert_true(slice < 1000 * (int64_t)MS);
}

/* Two tasks readying each other through runnext share one slice: sysmon
 * ends it after 10 ms, or a third task on the P would starve. */
struct pingpong {
	_Atomic(gmp_g *) slot[2]; /* the parked party of each side */
	atomic_int stop, third_ran;
	atomic_long rounds;
	atomic_llong t0, t_third;
};

static bool publish_in_slot(gmp_g *g, void *slot)
{
	atomic_store((_Atomic(gmp_g *) *)slot, g);
	return true;
}

static void third(void *arg)
{
	struct pingpong *pp = arg;
	atomic_store(&pp->t_third, tu_now_ns());
	atomic_store(&pp->third_ran, 1);
}

static void pong(void *arg)
{
	struct pingpong *pp = arg;
	for (;;) {
		gmp_park(publish_in_slot, &pp->slot[1]);
		if (atomic_load(&pp->stop))
			return;
		gmp_g *g = atomic_exchange(&pp->slot[0], NULL);
		T_ASSERT(g != NULL); /* one P: ping parked before we ran */
		gmp_ready(g);
	}
}

static void ping(void *arg)
{
	struct pingpong *pp = arg;
	T_ASSERT(gmp_go(pong, pp) > 0);
	while (atomic_load(&pp->slot[1]) == NULL)
		gmp_yield(); /* until pong has parked */
	atomic_store(&pp->t0, tu_now_ns());
	/* Queued behind the pair; from here on every switch is a runnext
	 * handoff that keeps the slice going. */
	T_ASSERT(gmp_go(third, pp) > 0);
	int64_t give_up = tu_now_ns() + 5000 * (int64_t)MS;
	for (;;) {
		gmp_g *g = atomic_exchange(&pp->slot[1], NULL);
		T_ASSERT(g != NULL);
		bool stop = atomic_load(&pp->third_ran) ||
			    tu_now_ns() > give_up;
		if (stop)
			atomic_store(&pp->stop, 1);
		gmp_ready(g);
		if (stop)
			return;
		atomic_fetch_add(&pp->rounds, 1);
		gmp_park(publish_in_slot, &pp->slot[0]);
	}
}

static void test_syscall_sysmon_runnext_pair_cannot_starve(void **s)
{
	(void)s;
	struct pingpong pp = { 0 };
	tu_init(1);
	assert_true(gmp_go(ping, &pp) > 0);
	assert_int_equal(gmp_shutdown(), 0);
	assert_int_equal(atomic_load(&pp.third_ran), 1);
	int64_t lag = atomic_load(&pp.t_third) - atomic_load(&pp.t0);
	print_message("third task ran after %.3f ms, %ld rounds\n",
		      (double)lag / MS, atomic_load(&pp.rounds));
	assert_true(atomic_load(&pp.rounds) > 0);
	assert_true(lag < 1000 * (int64_t)MS);
}

/* ---- stats --------------------------------------------------------------------- */

enum { NREADERS = 10 };

struct readers {
	int fd[2];
	atomic_int done;
};

static void pipe_reader(void *arg)
{
	struct readers *rd = arg;
	char c;
	gmp_enter_syscall();
	ssize_t r = read(rd->fd[0], &c, 1);
	gmp_exit_syscall();
	T_ASSERT(r == 1);
	atomic_fetch_add(&rd->done, 1);
}

static void test_syscall_stats_count_tasks_in_syscall(void **s)
{
	(void)s;
	struct readers rd = { 0 };
	assert_int_equal(pipe(rd.fd), 0);
	tu_init(2);
	gmp_stats st;
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(st.tasks_in_syscall, 0);
	for (int i = 0; i < NREADERS; i++)
		assert_true(gmp_go(pipe_reader, &rd) > 0);
	TU_WAIT_FOR((st = tu_stats()).tasks_in_syscall >= NREADERS);
	assert_int_equal(st.tasks_in_syscall, NREADERS);
	/* Each blocked reader holds a thread, and sysmon is one more. */
	assert_true(st.threads_total >= NREADERS + 1);
	assert_int_equal(st.tasks_live, NREADERS);
	char buf[NREADERS];
	memset(buf, 'x', sizeof buf);
	assert_int_equal(write(rd.fd[1], buf, sizeof buf), NREADERS);
	TU_WAIT_FOR(atomic_load(&rd.done) >= NREADERS);
	TU_WAIT_FOR((st = tu_stats()).tasks_in_syscall == 0);
	assert_int_equal(st.tasks_in_syscall, 0);
	assert_int_equal(gmp_shutdown(), 0);
	close(rd.fd[0]);
	close(rd.fd[1]);
}

/* ---- outside a task, and misuse ----------------------------------------------- */

static void test_syscall_outside_task_is_noop(void **s)
{
	(void)s;
	/* Not running, then running: a thread that is not a task. */
	gmp_enter_syscall();
	gmp_exit_syscall();
	gmp_enter_syscall_block();
	gmp_exit_syscall();
	gmp_exit_syscall();
	tu_init(1);
	errno = EXDEV;
	gmp_enter_syscall();
	gmp_enter_syscall(); /* twice: still nothing */
	gmp_exit_syscall();
	gmp_exit_syscall();
	assert_int_equal(errno, EXDEV);
	gmp_stats st;
	assert_int_equal(gmp_stats_read(&st), 0);
	assert_int_equal(st.tasks_in_syscall, 0);
	assert_int_equal(gmp_shutdown(), 0);
}

static void exit_without_enter(void *arg)
{
	(void)arg;
	gmp_exit_syscall();
}

static void enter_twice(void *arg)
{
	(void)arg;
	gmp_enter_syscall();
	gmp_enter_syscall();
}

static void enter_block_then_enter(void *arg)
{
	(void)arg;
	gmp_enter_syscall_block();
	gmp_enter_syscall();
}

/* Forked child: runs one task, *(gmp_fn *)arg, at maxprocs 1. */
static void child_run_task(void *arg)
{
	tu_init(1);
	gmp_go(*(gmp_fn *)arg, NULL);
	gmp_shutdown();
}

static void test_syscall_exit_without_enter_aborts(void **s)
{
	(void)s;
	gmp_fn fn = exit_without_enter;
	tu_expect_abort(child_run_task, &fn,
			"gmp_exit_syscall without gmp_enter_syscall");
}

static void test_syscall_enter_twice_aborts(void **s)
{
	(void)s;
	gmp_fn fn = enter_twice;
	tu_expect_abort(child_run_task, &fn, "already in a system call");
	fn = enter_block_then_enter;
	tu_expect_abort(child_run_task, &fn, "already in a system call");
}

/* ---- schedtrace ------------------------------------------------------------------ */

static void child_schedtrace(void *arg)
{
	(void)arg;
	setenv("GMP_DEBUG", "schedtrace=10", 1);
	tu_init(2);
	usleep(100 * 1000);
	gmp_shutdown();
}

static void test_syscall_sysmon_schedtrace_prints(void **s)
{
	(void)s;
	char err[8192];
	int status = tu_run_child(child_schedtrace, NULL, err, sizeof err);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* One line every 10 ms for 100 ms: a few, whatever the load. */
	int lines = 0;
	for (const char *p = err; (p = strstr(p, "SCHED ")) != NULL; p++)
		lines++;
	if (lines < 3)
		fprintf(stderr, "schedtrace output:\n%s\n", err);
	assert_true(lines >= 3);
	assert_non_null(strstr(err, "gomaxprocs=2"));
	assert_non_null(strstr(err, "threads="));
}

GMP_TEST_MAIN(
	cmocka_unit_test(test_syscall_blocked_read_does_not_stop_writer),
	cmocka_unit_test(test_syscall_block_blocked_read_does_not_stop_writer),
	cmocka_unit_test(test_syscall_fast_path_takes_no_handoff),
	cmocka_unit_test(test_syscall_errno_survives_slow_path),
	cmocka_unit_test(test_syscall_errno_survives_slow_path_block),
	cmocka_unit_test(test_syscall_errno_untouched_by_switches),
	cmocka_unit_test(test_syscall_not_retaken_while_idle_p_exists),
	cmocka_unit_test(test_syscall_first_syscall_on_p_not_retaken),
	cmocka_unit_test(test_syscall_retaken_after_10ms_even_with_idle_p),
	cmocka_unit_test(test_syscall_retaken_when_queue_has_work),
	cmocka_unit_test(test_syscall_slice_retake_ends_the_slice),
	cmocka_unit_test(test_syscall_sysmon_preempts_long_slice),
	cmocka_unit_test(test_syscall_sysmon_runnext_pair_cannot_starve),
	cmocka_unit_test(test_syscall_stats_count_tasks_in_syscall),
	cmocka_unit_test(test_syscall_outside_task_is_noop),
	cmocka_unit_test(test_syscall_exit_without_enter_aborts),
	cmocka_unit_test(test_syscall_enter_twice_aborts),
	cmocka_unit_test(test_syscall_sysmon_schedtrace_prints))
