#!/usr/bin/env python3
"""Per-request costs of one server under wrk: the measurements behind
bench/http/FINDINGS.md.

  bench/http/profile.py SERVER [--conns=C] [--duration=S] [--mode=MODE]
                        [--build=DIR] [--out=FILE]

SERVER is gmp, nginx or go (as in http_bench.py: a fresh process, warmed
up for 2 s). While wrk loads it for S seconds (default 10) at C
connections (default 64):

Or SERVER is echo-gmp (examples/echo_server), echo-go (bench/go/echo) or
echo-floor (bench/floor/echo_floor), at 2 Ps / GOMAXPROCS=2 where that
applies, driven by bench/echo --port (C connections, 64-byte messages,
--requests round trips in all, default 640000, as bench/run's echo row);
then "request" means round trip.


  --mode=stat    (default) perf stat on the server's processes: task-clock,
                 context switches, migrations, and a count of every system
                 call of interest from the syscalls tracepoints (cheap: no
                 ptrace), plus epoll_ctl by operation and reads, recvfroms
                 and epoll_waits by outcome; each divided by wrk's requests
  --mode=strace  strace -f -c (ptrace: it slows every system call, so the
                 server batches differently; counts only, as a check)
  --mode=record  perf record -e cpu-clock -g into FILE (default
                 /tmp/profile-SERVER-C.data), for perf report

Prints `<name> <per request>` lines, sorted. Needs perf with access to
tracepoints (root, or perf_event_paranoid <= -1) and wrk.
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_bench  # noqa: E402

SYSCALLS = [
    "read", "write", "readv", "writev", "recvfrom", "sendto", "sendmsg",
    "recvmsg", "epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl",
    "futex", "sched_yield", "nanosleep", "clock_nanosleep", "accept4",
    "getsockopt", "setsockopt", "fcntl", "close", "rt_sigprocmask",
    "tgkill", "madvise", "mmap", "munmap", "getpid", "poll", "ppoll",
]
# Filtered tracepoints: (label, event, filter)
FILTERED = [
    ("epoll_ctl(ADD)", "syscalls:sys_enter_epoll_ctl", "op == 1"),
    ("epoll_ctl(DEL)", "syscalls:sys_enter_epoll_ctl", "op == 2"),
    ("epoll_ctl(MOD)", "syscalls:sys_enter_epoll_ctl", "op == 3"),
    ("read=EAGAIN", "syscalls:sys_exit_read", "ret == -11"),
    ("recvfrom=EAGAIN", "syscalls:sys_exit_recvfrom", "ret == -11"),
    ("epoll_wait=0", "syscalls:sys_exit_epoll_wait", "ret == 0"),
    ("epoll_pwait=0", "syscalls:sys_exit_epoll_pwait", "ret == 0"),
    ("epoll_pwait2=0", "syscalls:sys_exit_epoll_pwait2", "ret == 0"),
    ("futex(WAKE)", "syscalls:sys_enter_futex", "op == 1 || op == 129"),
    ("futex(WAIT)", "syscalls:sys_enter_futex", "op == 0 || op == 128"),
]


def perf_stat_cmd(pids, seconds, out):
    cmd = ["perf", "stat", "-x", ";", "-o", out, "-p", ",".join(map(str, pids)),
           "-e", "task-clock,context-switches,cpu-migrations"]
    for s in SYSCALLS:
        cmd += ["-e", f"syscalls:sys_enter_{s}"]
    for _, ev, flt in FILTERED:
        cmd += ["-e", ev, "--filter", flt]
    return cmd + ["--", "sleep", str(seconds)]


def parse_perf(path):
    counts = []
    for line in open(path):
        f = line.strip().split(";")
        if len(f) < 3 or line.startswith("#"):
            continue
        try:
            v = float(f[0])
        except ValueError:
            continue
        counts.append((f[2], v))
    # Label the filtered events in the order they were given.
    out, k = {}, 0
    plain = {f"syscalls:sys_enter_{s}": s for s in SYSCALLS}
    for ev, v in counts:
        if ev in plain and plain[ev] not in out:
            out[plain[ev]] = v
        elif ev.startswith("syscalls:") and k < len(FILTERED):
            out[FILTERED[k][0]] = v
            k += 1
        else:
            out[ev] = v
    return out


class EchoServer:
    """An echo server for bench/echo --port, in its own process."""

    def __init__(self, name, build):
        self.name, self.build, self.proc = name, build, None

    def start(self):
        env = dict(os.environ, GMP_MAXPROCS="2", GOMAXPROCS="2")
        cmd = {"echo-gmp": [os.path.join(self.build, "examples", "echo_server"), "0"],
               "echo-go": [os.path.join(self.build, "bench", "go", "echo"), "-procs", "2"],
               "echo-floor": [os.path.join(self.build, "bench", "floor", "echo_floor"), "0"],
               }[self.name]
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline().strip()[5:])

    def load(self, conns, n):
        """Runs the echo client; the round trips and their rate."""
        out = subprocess.run(
            [os.path.join(self.build, "bench", "echo"), "--procs=2", f"--conns={conns}",
             f"--n={n}", "--size=64", f"--port={self.port}"],
            capture_output=True, text=True, check=True).stdout
        kv = dict(w.split("=", 1) for w in out.split() if "=" in w)
        return {"requests": int(kv["n"]), "rps": float(kv["rt_per_s"])}

    def pids(self):
        return [self.proc.pid]

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


def http_bench_syscalls():
    return set(SYSCALLS)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server", choices=["gmp", "nginx", "go", "echo-gmp",
                                       "echo-go", "echo-floor"])
    ap.add_argument("--requests", type=int, default=640000)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--mode", choices=["stat", "strace", "record"], default="stat")
    ap.add_argument("--build", default=os.path.join(http_bench.ROOT, "build"))
    ap.add_argument("--out")
    a = ap.parse_args()
    args = argparse.Namespace(taskset_server=None, taskset_wrk=None, wrk_threads=2)
    build = os.path.abspath(a.build)
    echo = a.server.startswith("echo-")
    srv = EchoServer(a.server, build) if echo else \
        http_bench.Server(a.server, args, build)
    srv.start()
    try:
        if echo:
            srv.load(a.conns, a.requests // 10)  # warm-up
        else:
            http_bench.wrk(args, srv.port, a.conns, 2)  # warm-up
        pids = srv.pids()
        tmp = tempfile.mktemp(prefix="profile.")
        if a.mode == "stat":
            cmd = perf_stat_cmd(pids, a.duration, tmp)
        elif a.mode == "strace":
            cmd = ["timeout", "-s", "INT", str(a.duration), "strace", "-f", "-c",
                   "-o", tmp] + sum((["-p", str(p)] for p in pids), [])
        else:
            tmp = a.out or f"/tmp/profile-{a.server}-{a.conns}.data"
            cmd = ["perf", "record", "-q", "-e", "cpu-clock", "-g", "-o", tmp,
                   "-p", ",".join(map(str, pids)), "--", "sleep", str(a.duration)]
        if echo:  # the tool runs until the client is done
            cmd = [c for c in cmd if c not in ("--", "sleep", str(a.duration))]
            if a.mode == "strace":
                cmd = cmd[3:]  # no timeout
        tool = subprocess.Popen(cmd)
        if echo:
            import time
            time.sleep(0.5)  # perf/strace attached
            res = srv.load(a.conns, a.requests)
            tool.send_signal(2)  # SIGINT: perf and strace print and exit
        else:
            res = http_bench.wrk(args, srv.port, a.conns, a.duration)
        tool.wait()
    finally:
        srv.stop()
    n = res["requests"]
    print(f"server={a.server} conns={a.conns} requests={n} rps={res['rps']:.0f} "
          f"p50_ms={res.get('p50', 0):.3f} p99_ms={res.get('p99', 0):.3f}")
    if a.mode == "stat":
        counts = parse_perf(tmp)
        # task-clock is in ms: per request in µs
        print(f"  task-clock_us {counts.pop('task-clock', 0) * 1e3 / n:.3f}")
        total = sum(v for k, v in counts.items()
                    if k in http_bench_syscalls() and "(" not in k)
        print(f"  syscalls_total {total / n:.4f}")
        for name, v in sorted(counts.items(), key=lambda kv: -kv[1]):
            if v:
                print(f"  {name} {v / n:.4f}")
        os.unlink(tmp)
    elif a.mode == "strace":
        print(open(tmp).read())
        os.unlink(tmp)
    else:
        print(f"  perf data in {tmp}")


if __name__ == "__main__":
    sys.exit(main())
