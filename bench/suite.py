"""The benchmark suite: what bench/run runs and what its table shows.

Every benchmark program takes --procs=N and --n=N (and flags of its own)
and prints one line

    bench=<name> procs=<p> n=<n> key=value ...

Each Config below is one configuration of one program: the same flags go
to the C program (DIR/bench/<name>) and to its twin, which is one of

    go     DIR/bench/go/<name>, built from bench/go/<name>
    boost  DIR/bench/boost/switch_boost (Boost.Context; Go has no raw switch)
    echo   both servers, driven by our client DIR/bench/echo: libgmp's
           examples/echo_server against Go's bench/go/echo
    floor  the echo pair again, with a yardstick in place of our server:
           DIR/bench/floor/echo_floor, a one-thread epoll server with no
           runtime (how far ahead of Go's server any server can get here)
    nginx  wrk (Debian's) against examples/http_server at 2 Ps and against
           nginx (2 workers, bench/http/nginx.conf, in a temporary prefix),
           through bench/http/http_bench.py's servers; flags --conns=C
           --duration=S --warmup=S. Figures: wrk's requests/s and p99, and
           the server's CPU time per request. The twin column is nginx's.
    gohttp the same against Go's net/http (DIR/bench/go/http)
    yard   a yardstick with no runtime in place of our program:
           DIR/bench/floor/<name> against the Go program DIR/bench/go/<go>
           (rwmutex_floor: the work Go's RWMutex algorithm gives a
           reader, two atomic adds on a shared line, vs Go's RWMutex)
    none   no twin: a C-only row, whose program compares two ways of doing
           the same thing itself (deadline_churn: with and without
           deadlines, alternating in one process) and reports the ratio

Each Figure is one row of the table: a key of the output line, whether a
low or a high value is better, and the target if there is one, written as
the table shows it: "C/Go <= X" or "C/Go >= X" (the ratio of the medians)
or "C <= X" (the C median itself).
"""

from typing import NamedTuple, Optional


class Figure(NamedTuple):
    key: str
    better: str  # "low" or "high"
    target: Optional[str] = None


class Config(NamedTuple):
    name: str
    configuration: str  # the table's words for it (the full run's sizes)
    full: str  # flags for a full run
    quick: str  # flags for --quick
    twin: str  # go, boost, echo, floor, nginx, gohttp, yard or none
    figures: tuple
    go: Optional[str] = None  # yard: the Go program the yardstick faces


LOW, HIGH = "low", "high"

SUITE = (
    Config("switch", "1 thread, raw gobuf switch vs Boost jump_fcontext",
           "--n=10000000", "--n=1000000", "boost",
           (Figure("ns_per_op", LOW, "C/Go <= 1.2"),)),
    Config("yield", "procs=1, 2 tasks yielding",
           "--procs=1 --n=5000000", "--procs=1 --n=200000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.33"),)),
    Config("spawn_join", "procs=1, 1M tasks",
           "--procs=1 --n=1000000", "--procs=1 --n=100000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.5"),)),
    Config("spawn_join", "procs=2, 1M tasks",
           "--procs=2 --n=1000000", "--procs=2 --n=100000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.5"),)),
    Config("syscall_overhead", "procs=1, getpid wrapped - raw",
           "--procs=1 --n=10000000", "--procs=1 --n=500000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.5"),)),
    Config("handoff", "procs=1, 200 trials",
           "--procs=1 --n=200", "--procs=1 --n=50", "go",
           (Figure("median_us", LOW, "C/Go <= 0.5"),
            Figure("p90_us", LOW, "C <= 1000"))),
    Config("blocked_syscall", "procs=2, 64 x fib(30), 10 blocked readers",
           "--procs=2 --n=64", "--procs=2 --n=8", "go",
           (Figure("ratio", LOW, "C <= 1.05"),
            Figure("threads_after", LOW))),
    Config("chan_pingpong", "procs=1, 1M round trips",
           "--procs=1 --n=1000000", "--procs=1 --n=100000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.5"),)),
    Config("chan_pingpong", "procs=2, 1M round trips",
           "--procs=2 --n=1000000", "--procs=2 --n=100000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.5"),)),
    # The same with the execution trace recording (GMP_TRACE, written
    # when the run ends; runtime/trace on the Go side): what tracing
    # costs is each side's ratio to its untraced row above (bench/
    # README.md).
    Config("chan_pingpong", "procs=1, 1M round trips, traced",
           "--procs=1 --n=1000000 --trace=1", "--procs=1 --n=100000 --trace=1",
           "go", (Figure("ns_per_op", LOW),)),
    Config("skynet", "procs=1, 1M leaves",
           "--procs=1 --n=1000000", "--procs=1 --n=10000", "go",
           (Figure("total_ms", LOW, "C/Go <= 0.5"),)),
    Config("skynet", "procs=2, 1M leaves",
           "--procs=2 --n=1000000", "--procs=2 --n=10000", "go",
           (Figure("total_ms", LOW, "C/Go <= 0.5"),)),
    Config("mutex_contention", "procs=2, 4 tasks x 1M",
           "--procs=2 --n=1000000", "--procs=2 --n=100000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 1.0"),)),
    Config("rwmutex_read", "procs=2, 4 tasks x 1M read locks",
           "--procs=2 --n=1000000", "--procs=2 --n=100000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.8"),)),
    # What the two adds alone cost while both CPUs take them all the time
    # (the count's line moves at every add): Go's RWMutex is within a few
    # per cent of it. libgmp's read locks get under it by not sharing a
    # line once they contend (reader slots on each P, src/rwmutex.c).
    Config("rwmutex_floor", "the same, two atomic adds a pass, no lock",
           "--procs=2 --n=1000000", "--procs=2 --n=100000", "yard",
           (Figure("ns_per_op", LOW),), go="rwmutex_read"),
    Config("rwmutex_mixed", "procs=2, 4 tasks x 1M, 10% writes",
           "--procs=2 --n=1000000", "--procs=2 --n=100000", "go",
           (Figure("ns_per_op", LOW),)),
    Config("cond_pingpong", "procs=1, 1M round trips",
           "--procs=1 --n=1000000", "--procs=1 --n=100000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.6"),)),
    Config("cond_pingpong", "procs=2, 1M round trips",
           "--procs=2 --n=1000000", "--procs=2 --n=100000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.6"),)),
    Config("timer_churn", "procs=2, 4 tasks, 1M timers made and stopped",
           "--procs=2 --n=1000000", "--procs=2 --n=100000", "go",
           (Figure("ns_per_op", LOW, "C/Go <= 0.7"),)),
    Config("ticker_many", "procs=2, 10k tickers of 1 ms for 2 s",
           "--procs=2 --n=10000 --ms=2000", "--procs=2 --n=1000 --ms=300",
           "go",
           (Figure("cpu_ms", LOW, "C/Go <= 0.8"),
            Figure("ticks", HIGH),
            Figure("cpu_ns_per_tick", LOW))),
    # Those 10k tickers keep both CPUs busy on either side here, so their
    # CPU time says little; 1k of 1 ms (a million ticks a second) leave
    # both sides room to deliver nearly every tick, and the CPU time then
    # compares them.
    Config("ticker_many", "procs=2, 1k tickers of 1 ms for 2 s",
           "--procs=2 --n=1000 --ms=2000", "--procs=2 --n=1000 --ms=300",
           "go",
           (Figure("cpu_ms", LOW, "C/Go <= 0.8"),
            Figure("ticks", HIGH),
            Figure("cpu_ns_per_tick", LOW))),
    Config("echo", "procs=2 servers, 64 conns x 10k x 64 B, our client",
           "--procs=2 --conns=64 --n=640000 --size=64",
           "--procs=2 --conns=64 --n=32000 --size=64", "echo",
           (Figure("rt_per_s", HIGH, "C/Go >= 1.3"),
            Figure("server_cpu_ns_per_rt", LOW))),
    Config("echo_floor", "the same, a no-runtime epoll server vs Go",
           "--procs=2 --conns=64 --n=640000 --size=64",
           "--procs=2 --conns=64 --n=32000 --size=64", "floor",
           (Figure("rt_per_s", HIGH),
            Figure("server_cpu_ns_per_rt", LOW))),
    Config("http", "wrk, 64 conns, 10 s, vs nginx (2 workers)",
           "--conns=64 --duration=10 --warmup=2",
           "--conns=64 --duration=1 --warmup=0", "nginx",
           (Figure("rps", HIGH, "C/Go >= 1.0"),
            Figure("p99_ms", LOW, "C/Go <= 1.0"),
            Figure("cpu_us_per_req", LOW, "C/Go <= 1.0"))),
    Config("http", "wrk, 1024 conns, 10 s, vs nginx (2 workers)",
           "--conns=1024 --duration=10 --warmup=2",
           "--conns=1024 --duration=1 --warmup=0", "nginx",
           (Figure("rps", HIGH, "C/Go >= 1.0"),
            Figure("p99_ms", LOW, "C/Go <= 1.0"),
            Figure("cpu_us_per_req", LOW, "C/Go <= 1.0"))),
    Config("http", "wrk, 64 conns, 10 s, vs Go's net/http",
           "--conns=64 --duration=10 --warmup=2",
           "--conns=64 --duration=1 --warmup=0", "gohttp",
           (Figure("rps", HIGH),
            Figure("cpu_us_per_req", LOW))),
    Config("http", "the same, both servers tracing as they serve",
           "--conns=64 --duration=10 --warmup=2 --trace=1",
           "--conns=64 --duration=1 --warmup=0 --trace=1", "gohttp",
           (Figure("rps", HIGH),
            Figure("cpu_us_per_req", LOW))),
    Config("udp_echo", "procs=2, 16 clients x 64 B datagrams, server apart",
           "--procs=2 --n=200000 --conns=16 --size=64",
           "--procs=2 --n=20000 --conns=16 --size=64", "go",
           (Figure("rt_per_s", HIGH, "C/Go >= 1.0"),
            Figure("server_cpu_ns_per_rt", LOW, "C/Go <= 1.0"))),
    Config("deadline_churn", "procs=2, 8 conns, read deadline per read / none",
           "--procs=2 --n=400000 --conns=8 --segments=20",
           "--procs=2 --n=40000 --conns=8 --segments=10", "none",
           (Figure("ratio", LOW, "C <= 1.05"),
            Figure("ns_per_rt_plain", LOW),
            Figure("ns_per_rt_deadline", LOW))),
    Config("parked_memory", "procs=1, 1M tasks parked on a channel",
           "--procs=1 --n=1000000", "--procs=1 --n=50000", "go",
           (Figure("bytes_per_task", LOW, "C <= 4608"),
            Figure("total_ms", LOW, "C/Go <= 0.5"))),
    Config("parallel_fib", "1000 x fib(27), procs 1 then 2",
           "--procs=2 --n=1000", "--procs=2 --n=100 --fib=22", "go",
           (Figure("p1_ms", LOW),
            Figure("total_ms", LOW, "C/Go <= 1.0"),
            Figure("speedup", HIGH, "C/Go >= 1.0"))),
    Config("preempt_latency", "procs=1, 2 hogs, 200 sleeps of 10 ms",
           "--procs=1 --hogs=2 --n=200", "--procs=1 --hogs=2 --n=10", "go",
           (Figure("median_ms", LOW, "C/Go <= 1.2"),
            Figure("p99_ms", LOW, "C/Go <= 1.2"),
            Figure("max_ms", LOW, "C/Go <= 1.2"))),
    Config("preempt_latency", "procs=2, 3 hogs, 200 sleeps of 10 ms",
           "--procs=2 --hogs=3 --n=200", "--procs=2 --hogs=3 --n=10", "go",
           (Figure("median_ms", LOW, "C/Go <= 1.2"),
            Figure("p99_ms", LOW, "C/Go <= 1.2"),
            Figure("max_ms", LOW, "C/Go <= 1.2"))),
    Config("preempt_latency", "procs=2, 2 hogs, 200 sleeps of 10 ms",
           "--procs=2 --hogs=2 --n=200", "--procs=2 --hogs=2 --n=10", "go",
           (Figure("median_ms", LOW, "C/Go <= 1.2"),
            Figure("p99_ms", LOW, "C/Go <= 1.2"),
            Figure("max_ms", LOW, "C/Go <= 1.2"))),
    # Tasks that reach a switch point often, at maxprocs = CPUs beside as
    # many spinning processes as CPUs (the program forks them): a process
    # that adds threads when the CPUs are scarce would outgrow maxprocs.
    # Go's count of tasks running at once includes a goroutine its signal
    # stopped mid-stretch, so only libgmp's figure has a target.
    Config("preempt_contention",
           "procs=CPUs, 4 tasks x 30 µs stretches, CPUs busy beside",
           "--n=4 --work_us=30 --ms=2000", "--n=4 --work_us=30 --ms=300",
           "go",
           (Figure("most_running", LOW),
            Figure("over_procs", LOW, "C <= 0"),
            Figure("detaches", LOW, "C <= 0"),
            Figure("threads_peak", LOW, "C/Go <= 1.0"),
            Figure("cpu_share", LOW, "C/Go <= 1.05"),
            Figure("work_ms", LOW, "C/Go <= 1.0"))),
    Config("preempt_contention",
           "the same, 2000 x fib(27) with switch points",
           "--mode=fib --n=2000 --fib=27", "--mode=fib --n=200 --fib=24",
           "go",
           (Figure("most_running", LOW),
            Figure("over_procs", LOW, "C <= 0"),
            Figure("detaches", LOW, "C <= 0"),
            Figure("threads_peak", LOW, "C/Go <= 1.0"),
            Figure("cpu_share", LOW, "C/Go <= 1.05"),
            Figure("work_ms", LOW, "C/Go <= 1.0"))),
    Config("file_read", "procs=2, 64 tasks, 4 KiB O_DIRECT reads, io_uring",
           "--procs=2 --n=200000", "--procs=2 --n=20000", "go",
           (Figure("reads_per_s", HIGH, "C/Go >= 1.5"),
            Figure("threads_peak", LOW, "C <= 6"))),
    Config("file_read", "the same, GMP_IO_URING=off (syscall path)",
           "--procs=2 --n=200000 --uring=off",
           "--procs=2 --n=20000 --uring=off", "go",
           (Figure("reads_per_s", HIGH),
            Figure("threads_peak", LOW))),
    Config("spawn_idle", "procs=2, 1M tasks parked at once",
           "--procs=2 --n=1000000", "--procs=2 --n=50000", "go",
           (Figure("total_ms", LOW),)),
    # libgmp-hook (these two link it; no other row does). The programs
    # compare their sides themselves, alternating in one process.
    Config("hook_overhead", "1 task, 64 B write+read on a ready socket",
           "--procs=1 --n=4000000", "--procs=1 --n=200000", "none",
           (Figure("over_gmp_ns", LOW, "C <= 20"),
            Figure("ns_hook", LOW),
            Figure("ns_gmp", LOW),
            Figure("ns_raw", LOW),
            Figure("ns_thread", LOW))),
    Config("hook_redis", "100 conns, sync hiredis in tasks, procs=1",
           "--procs=1 --conns=100 --n=200000 --rounds=3",
           "--procs=1 --conns=100 --n=10000 --rounds=1", "none",
           (Figure("vs_rb", HIGH, "C >= 1.0"),
            Figure("vs_threads", HIGH, "C >= 1.2"),
            Figure("threads", LOW, "C <= 4"),
            Figure("rps_tasks", HIGH),
            Figure("rps_rb", HIGH),
            Figure("rps_threads", HIGH))),
    Config("hook_redis", "1000 conns, sync hiredis in tasks, procs=1",
           "--procs=1 --conns=1000 --n=200000 --rounds=3",
           "--procs=1 --conns=1000 --n=10000 --rounds=1", "none",
           (Figure("vs_rb", HIGH, "C >= 1.0"),
            Figure("vs_threads", HIGH, "C >= 1.2"),
            Figure("threads", LOW, "C <= 4"),
            Figure("rps_tasks", HIGH),
            Figure("rps_rb", HIGH),
            Figure("rps_threads", HIGH))),
)


class Callgrind(NamedTuple):
    """Instruction counts under valgrind's callgrind. The program runs at a
    small and a large --n and (Ir_large - Ir_small) / (ops_large -
    ops_small) is reported, so start-up and tear-down cancel. Go's runtime
    does not run under valgrind, so yield has no twin here."""
    name: str
    twin: Optional[str]  # "boost" or None
    ops_per_n: int  # operations per unit of --n
    small: tuple  # --n for (a full run, --quick)
    large: tuple
    flags: str


CALLGRIND = (
    Callgrind("switch", "boost", 1, (1000000, 200000), (3000000, 600000),
              "--procs=1"),
    Callgrind("yield", None, 2, (100000, 20000), (300000, 60000), "--procs=1"),
    Callgrind("chan_pingpong", None, 1, (100000, 20000), (300000, 60000),
              "--procs=1"),
)

# The table's words for an output key; (benchmark, key) first, then key.
WORDS = {
    ("http", "rps"): "requests/s (wrk)",
    ("http", "p99_ms"): "p99 latency ms (wrk)",
    ("http", "cpu_us_per_req"): "server CPU us/request",
    ("parallel_fib", "total_ms"): "ms at procs=2",
    ("deadline_churn", "ratio"): "with / without deadlines",
    ("parked_memory", "total_ms"): "ms to spawn them all",
    ("spawn_idle", "total_ms"): "ms until all parked",
    ("preempt_contention", "most_running"): "most tasks running at once",
    ("preempt_contention", "over_procs"): "of them beyond maxprocs",
    ("preempt_contention", "detaches"): "detaches",
    ("preempt_contention", "threads_peak"): "most threads",
    ("preempt_contention", "cpu_share"): "process CPU share (CPUs)",
    ("preempt_contention", "work_ms"): "ms of work",
    ("hook_overhead", "over_gmp_ns"): "hooked - gmp_read/write ns/call",
    ("hook_overhead", "ns_hook"): "hooked read/write ns/call",
    ("hook_overhead", "ns_gmp"): "gmp_read/gmp_write ns/call",
    ("hook_overhead", "ns_raw"): "system calls ns/call",
    ("hook_overhead", "ns_thread"): "hooked, plain thread ns/call",
    ("hook_redis", "vs_rb"): "tasks / redis-benchmark (requests/s)",
    ("hook_redis", "vs_threads"): "tasks / pthreads (requests/s)",
    ("hook_redis", "threads"): "runtime threads (most)",
    ("hook_redis", "rps_tasks"): "requests/s, tasks",
    ("hook_redis", "rps_rb"): "requests/s, redis-benchmark",
    ("hook_redis", "rps_threads"): "requests/s, pthreads",
    "ns_per_op": "ns/op",
    "total_ms": "ms",
    "p1_ms": "ms at procs=1",
    "speedup": "speedup procs 1 to 2",
    "median_us": "median µs",
    "p90_us": "p90 µs",
    "ratio": "blocked / idle time",
    "threads_after": "threads while blocked",
    "bytes_per_task": "resident bytes/task",
    "rt_per_s": "round trips/s",
    "ns_per_rt_plain": "ns/round trip, no deadlines",
    "ns_per_rt_deadline": "ns/round trip, a deadline per read",
    "server_cpu_ns_per_rt": "server CPU ns/round trip",
    "ir_per_op": "instructions/op (callgrind)",
    "median_ms": "median ms a sleep took",
    "p99_ms": "p99 ms a sleep took",
    "max_ms": "worst ms a sleep took",
}


def words(name, key):
    """What the figure `key` of benchmark `name` is called in the table."""
    return WORDS.get((name, key), WORDS.get(key, key))


NAMES = frozenset(c.name for c in SUITE) | frozenset(c.name for c in CALLGRIND)
