#!/usr/bin/env python3
"""bench/http: examples/http_server beside nginx and Go's net/http, driven
by wrk on 127.0.0.1.

  bench/http/http_bench.py [--quick] [--rounds=N] [--duration=S]
                           [--conns=64,1024] [--servers=gmp,nginx,go]
                           [--build=DIR] [--no-build] [--warmup=S]
                           [--taskset-wrk=CPUS] [--taskset-server=CPUS]

The servers, each in its own process, each answering GET / with the same
14-byte body ("Hello, world!\\n", text/plain) on persistent connections:

  gmp    DIR/examples/http_server at GMP_MAXPROCS=2 (one task per
         connection)
  nginx  nginx with 2 worker processes, access_log off, `return 200`, from
         bench/http/nginx.conf, run in a temporary prefix in the foreground
         (never the system's service)
  go     DIR/bench/go/http (bench/go/http/main.go, net/http) at
         GOMAXPROCS=2

For every round, every connection count and every server in turn (gmp,
nginx, go, gmp, nginx, go, ...: the servers alternate, so that a change in
the machine's load falls on all of them), a fresh server process is
started, warmed up with an unmeasured wrk run of --warmup seconds, then
measured with

  wrk -t2 -c<C> -d<S>s --latency http://127.0.0.1:<port>/

The server's CPU time (utime + stime from /proc/<pid>/stat; for nginx the
master's and every worker's) is read before and after the measured run
and divided by the requests wrk reports. One line per measurement:

  bench=http server=<gmp|nginx|go> conns=<C> rps=<x> p50_ms=<x> p99_ms=<x>
  cpu_us_per_req=<x>

(on one line), then a table of medians with each server's ratio to
nginx's. wrk shares the machine's CPUs with the server: the same for every
server, which is why only ratios measured side by side in one run mean
anything. No CPU is pinned unless --taskset-wrk / --taskset-server say so
(taskset CPU lists, e.g. --taskset-wrk=1): on a 2-CPU machine each server
is meant to use both CPUs, and pinning wrk would not free either of them.

  --quick          1 s runs, one round, 64 connections, no warm-up (CI)
  --rounds=N       rounds (default 5)
  --duration=S     seconds per measured run (default 10)
  --warmup=S       seconds of unmeasured load first (default 2)
  --conns=LIST     connection counts (default 64,1024)
  --servers=LIST   which servers, in this order (default gmp,nginx,go)
  --build=DIR      the CMake build tree (default: build, beside bench/)
  --no-build       use the programs already built

Needs wrk, nginx (for its rows) and go (to build its twin), skipping a
server whose program is missing. Exit status: 0 if every measurement
produced its line, 1 if any failed, 2 for bad usage.
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BODY = b"Hello, world!\n"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def note(msg):
    print(f"http_bench: {msg}", file=sys.stderr, flush=True)


# ---- processes ---------------------------------------------------------------


def cpu_ticks(pid):
    """utime + stime of one process (all its threads), in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def children(pid):
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        pass
    return kids


class Server:
    """One server process: started, measured, stopped."""

    def __init__(self, name, args, build, trace_to=None):
        """trace_to: a path for the server's execution trace (GMP_TRACE
        for ours, -trace for Go's), recorded while it serves."""
        self.name, self.args, self.build = name, args, build
        self.trace_to = trace_to
        self.proc = None
        self.port = None
        self.prefix = None

    def available(self):
        if self.name == "gmp":
            return os.access(self.gmp_path(), os.X_OK)
        if self.name == "go":
            return os.access(self.go_path(), os.X_OK)
        return shutil.which("nginx") is not None

    def gmp_path(self):
        return os.path.join(self.build, "examples", "http_server")

    def go_path(self):
        return os.path.join(self.build, "bench", "go", "http")

    def prefixed(self, cmd):
        cpus = self.args.taskset_server
        return ["taskset", "-c", cpus] + cmd if cpus else cmd

    def start(self):
        if self.name == "nginx":
            self._start_nginx()
        else:
            env = dict(os.environ)
            if self.name == "gmp":
                env["GMP_MAXPROCS"] = "2"
                cmd = [self.gmp_path()]
                if self.trace_to:
                    env["GMP_TRACE"] = self.trace_to
            else:
                env["GOMAXPROCS"] = "2"
                cmd = [self.go_path(), "-procs", "2"]
                if self.trace_to:
                    cmd += ["-trace", self.trace_to]
            self.proc = subprocess.Popen(
                self.prefixed(cmd), env=env, stdout=subprocess.PIPE, text=True
            )
            line = self.proc.stdout.readline()  # "port=<n>", once it listens
            if not line.startswith("port="):
                self.stop()
                raise RuntimeError(f"{self.name}: no port line (got {line!r})")
            self.port = int(line.strip()[5:])
        self._check()

    def _start_nginx(self):
        conf = open(os.path.join(ROOT, "bench", "http", "nginx.conf")).read()
        for attempt in range(5):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            self.prefix = tempfile.mkdtemp(prefix="http_bench_nginx.")
            path = os.path.join(self.prefix, "nginx.conf")
            with open(path, "w") as f:
                f.write(conf.replace("@PORT@", str(port)))
            self.proc = subprocess.Popen(
                self.prefixed(
                    ["nginx", "-p", self.prefix, "-c", path, "-e", "stderr"]
                )
            )
            self.port = port
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    # both workers up, so that their CPU is counted
                    if len(children(self.proc.pid)) >= 2:
                        return
                except OSError:
                    pass
                time.sleep(0.05)
            self.stop()  # the port was taken meanwhile, or nginx failed
        raise RuntimeError("nginx did not start")

    def _check(self):
        url = f"http://127.0.0.1:{self.port}/"
        with urllib.request.urlopen(url, timeout=10) as r:
            body = r.read()
        if body != BODY:
            self.stop()
            raise RuntimeError(f"{self.name}: GET / answered {body!r}")

    def pids(self):
        """The processes whose CPU time is the server's."""
        if self.name == "nginx":
            return [self.proc.pid] + children(self.proc.pid)
        return [self.proc.pid]

    def cpu(self):
        return {pid: cpu_ticks(pid) for pid in self.pids()}

    def stop(self):
        if self.proc and self.proc.poll() is None:
            # gmp stops cleanly on SIGTERM (a feature of the example);
            # nginx and Go's server just exit.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                note(f"{self.name} ignored SIGTERM for 10 s: killing it")
                self.proc.kill()
                self.proc.wait()
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        if self.prefix:
            shutil.rmtree(self.prefix, ignore_errors=True)
            self.prefix = None
        self.proc = None


# ---- wrk ---------------------------------------------------------------------


def to_ms(text):
    for unit, scale in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(text)


def wrk(args, port, conns, seconds):
    cmd = ["wrk", f"-t{args.wrk_threads}", f"-c{conns}", f"-d{seconds}s", "--latency",
           f"http://127.0.0.1:{port}/"]
    if args.taskset_wrk:
        cmd = ["taskset", "-c", args.taskset_wrk] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed: {out.stderr.strip()}")
    res = {"errors": 0}
    for line in out.stdout.splitlines():
        w = line.split()
        if line.startswith("Requests/sec:"):
            res["rps"] = float(w[1])
        elif len(w) >= 3 and w[1] == "requests" and w[2] == "in":
            res["requests"] = int(w[0])
        elif len(w) == 2 and w[0] in ("50%", "99%"):
            res["p" + w[0][:-1]] = to_ms(w[1])
        elif line.strip().startswith("Socket errors:"):
            res["errors"] += sum(int(x.strip(",")) for x in w[3::2])
        elif line.strip().startswith("Non-2xx"):
            res["errors"] += int(w[-1])
    if not {"rps", "requests", "p50", "p99"} <= res.keys():
        raise RuntimeError(f"cannot read wrk's output:\n{out.stdout}")
    return res


def measure(args, server, conns):
    server.start()
    try:
        if args.warmup > 0:
            wrk(args, server.port, conns, args.warmup)
        before = server.cpu()
        res = wrk(args, server.port, conns, args.duration)
        after = server.cpu()
    finally:
        server.stop()
    # A worker that appeared after `before` started from zero.
    ticks = sum(t - before.get(pid, 0) for pid, t in after.items())
    res["cpu_us_per_req"] = ticks * 1e6 / CLK_TCK / max(res["requests"], 1)
    if res["errors"]:
        note(f"{server.name} conns={conns}: wrk counted {res['errors']} errors")
    return res


# ---- building ------------------------------------------------------------------


def build(args):
    if not os.path.exists(os.path.join(args.build, "CMakeCache.txt")):
        subprocess.run(["cmake", "-S", ROOT, "-B", args.build], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", args.build, "--target", "http_server"],
                   check=True, stdout=subprocess.DEVNULL)
    if "go" in args.servers and shutil.which("go"):
        env = dict(os.environ, GOPROXY="off", GOFLAGS="-buildvcs=false")
        if not env.get("HOME") and not env.get("GOCACHE"):
            env["GOCACHE"] = os.path.join(args.build, "bench", "go", ".cache")
            env["GOPATH"] = os.path.join(args.build, "bench", "go", ".path")
        out = os.path.join(args.build, "bench", "go", "http")
        subprocess.run(["go", "build", "-o", out, "./http"],
                       cwd=os.path.join(ROOT, "bench", "go"), env=env, check=True)


# ---- the report ------------------------------------------------------------------


def fmt(x):
    if x >= 1000:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.3f}"


def report(results, args):
    """Medians per server and connection count, with ratios to nginx."""
    print()
    print(f"medians of {args.rounds} round(s), {args.duration} s each "
          f"(wrk -t{args.wrk_threads}); r = ratio to nginx's median")
    print()
    print("| server | conns | requests/s | r | p50 ms | p99 ms | r p99 | "
          "CPU µs/request | r CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for conns in args.conns:
        med = {}
        for name in args.servers:
            runs = results.get((name, conns), [])
            if runs:
                med[name] = {k: statistics.median(r[k] for r in runs)
                             for k in ("rps", "p50", "p99", "cpu_us_per_req")}
        base = med.get("nginx")
        for name, m in med.items():
            def ratio(k):
                return f"{m[k] / base[k]:.2f}" if base and base[k] else "-"
            print(f"| {name} | {conns} | {m['rps']:.0f} | {ratio('rps')} | "
                  f"{fmt(m['p50'])} | {fmt(m['p99'])} | {ratio('p99')} | "
                  f"{fmt(m['cpu_us_per_req'])} | {ratio('cpu_us_per_req')} |")


def main():
    ap = argparse.ArgumentParser(
        description="examples/http_server vs nginx vs Go's net/http under wrk",
        usage=__doc__.split("\n\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--duration", type=int)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--conns")
    ap.add_argument("--servers", default="gmp,nginx,go")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--taskset-wrk")
    ap.add_argument("--taskset-server")
    args = ap.parse_args()
    q = args.quick
    args.rounds = args.rounds or (1 if q else 5)
    args.duration = args.duration or (1 if q else 10)
    args.warmup = args.warmup if args.warmup is not None else (0 if q else 2)
    args.conns = [int(c) for c in (args.conns or ("64" if q else "64,1024")).split(",")]
    args.servers = args.servers.split(",")
    args.build = os.path.abspath(args.build)
    if any(s not in ("gmp", "nginx", "go") for s in args.servers) or \
            args.rounds < 1 or args.duration < 1 or min(args.conns) < 1:
        ap.print_usage(sys.stderr)
        return 2
    if not shutil.which("wrk"):
        note("wrk is not installed")
        return 1
    if not args.no_build:
        build(args)

    servers = []
    for name in args.servers:
        s = Server(name, args, args.build)
        if s.available():
            servers.append(s)
        else:
            note(f"skipping {name}: its program is missing")
    args.servers = [s.name for s in servers]

    with open("/proc/loadavg") as f:
        note(f"load average before: {' '.join(f.read().split()[:3])}")
    results, failed = {}, 0
    for rnd in range(args.rounds):
        for conns in args.conns:
            for s in servers:
                try:
                    r = measure(args, s, conns)
                except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                    note(f"{s.name} conns={conns} round {rnd + 1}: {e}")
                    failed += 1
                    continue
                results.setdefault((s.name, conns), []).append(r)
                print(f"bench=http server={s.name} conns={conns} "
                      f"rps={r['rps']:.0f} p50_ms={r['p50']:.3f} "
                      f"p99_ms={r['p99']:.3f} "
                      f"cpu_us_per_req={r['cpu_us_per_req']:.2f}", flush=True)
    report(results, args)
    with open("/proc/loadavg") as f:
        note(f"load average after: {' '.join(f.read().split()[:3])}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
