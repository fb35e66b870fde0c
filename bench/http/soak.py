#!/usr/bin/env python3
"""A soak of examples/http_server: does anything grow under steady load?

  bench/http/soak.py [--minutes=5] [--conns=1024] [--interval=10]
                     [--build=DIR] [--procs=2]

Starts DIR/examples/http_server (GMP_MAXPROCS=--procs) on 127.0.0.1 and
keeps wrk (-t2, --conns connections, keep-alive) on it for --minutes,
restarting wrk whenever a run ends so that the load never stops. Every
--interval seconds it samples the server from /proc: resident memory
(VmRSS), open descriptors (/proc/PID/fd) and threads (Threads), and prints
one line per sample:

  t=<s> rss_kib=<n> fds=<n> threads=<n> requests=<wrk's total so far>

The verdict: after the first minute (warm-up: the connections open, the
runtime grows its stacks, free lists and threads to the load) none of the
three may grow. A count that only moves up and down (the runtime starts
Ms for blocked system calls and retires them; free lists grow and are
trimmed) is not growth; a leak lifts the whole level. So a figure grew if
its smallest value in the last minute is above its largest in the second
minute (RSS: by more than 1 MiB or 2 %, for noise). Exits 0 if nothing
grew, 1 if something did, 2 if the run failed or was too short (under 2.5
minutes) for a verdict.
Not part of CI: it takes minutes and needs wrk.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def status(pid):
    """(VmRSS in KiB, Threads) from /proc/PID/status."""
    rss = threads = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Load(threading.Thread):
    """wrk, again and again, until stopped; counts the requests."""

    def __init__(self, port, conns, chunk):
        super().__init__(daemon=True)
        self.port, self.conns, self.chunk = port, conns, chunk
        self.requests = 0
        self.errors = 0
        self.stopping = False
        self.proc = None

    def run(self):
        while not self.stopping:
            self.proc = subprocess.Popen(
                ["wrk", "-t2", f"-c{self.conns}", f"-d{self.chunk}s",
                 f"http://127.0.0.1:{self.port}/"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out, _ = self.proc.communicate()
            m = re.search(r"^\s*([0-9]+) requests in", out, re.M)
            if m:
                self.requests += int(m.group(1))
            m = re.search(r"Socket errors: connect ([0-9]+), read ([0-9]+), "
                          r"write ([0-9]+), timeout ([0-9]+)", out)
            if m:
                self.errors += sum(int(x) for x in m.groups())

    def stop(self):
        self.stopping = True
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--conns", type=int, default=1024)
    ap.add_argument("--interval", type=float, default=10)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    if not shutil.which("wrk"):
        print("soak: wrk is not installed (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    exe = os.path.join(a.build, "examples", "http_server")
    if not os.access(exe, os.X_OK):
        print(f"soak: no {exe} (build the examples first)", file=sys.stderr)
        return 2
    env = dict(os.environ, GMP_MAXPROCS=str(a.procs))
    srv = subprocess.Popen([exe], env=env, stdout=subprocess.PIPE, text=True)
    line = srv.stdout.readline()
    if not line.startswith("port="):
        print(f"soak: the server did not start ({line!r})", file=sys.stderr)
        srv.kill()
        return 2
    port = int(line.strip()[5:])
    print(f"soak: examples/http_server pid={srv.pid} port={port}, "
          f"{a.conns} connections, {a.minutes:g} min, a sample every "
          f"{a.interval:g} s", flush=True)
    load = Load(port, a.conns, max(int(a.interval), 5))
    load.start()
    samples = []
    t0 = time.monotonic()
    end = t0 + a.minutes * 60
    failed = False
    try:
        while True:
            time.sleep(max(0.0, t0 + (len(samples) + 1) * a.interval - time.monotonic()))
            if srv.poll() is not None:
                print(f"soak: the server exited with {srv.returncode}", flush=True)
                failed = True
                break
            t = time.monotonic() - t0
            rss, threads = status(srv.pid)
            n = fds(srv.pid)
            samples.append((t, rss, n, threads))
            print(f"t={t:.0f} rss_kib={rss} fds={n} threads={threads} "
                  f"requests={load.requests}", flush=True)
            if time.monotonic() >= end:
                break
    finally:
        load.stop()
        load.join(30)
        if srv.poll() is None:
            srv.send_signal(signal.SIGTERM)
            try:
                srv.wait(30)
            except subprocess.TimeoutExpired:
                srv.kill()
                failed = True
    if failed:
        return 2
    if load.errors:
        print(f"soak: wrk counted {load.errors} socket errors")
    print(f"soak: {load.requests} requests; the server exited with {srv.returncode}")
    second = [s for s in samples if 60 <= s[0] < 120]
    last = [s for s in samples if s[0] >= samples[-1][0] - 60]
    if not second or samples[-1][0] < 150:
        print("soak: too short for a verdict (needs at least 2.5 minutes)")
        return 2
    grew = []
    for i, name in ((1, "rss_kib"), (2, "fds"), (3, "threads")):
        base = max(s[i] for s in second)
        low = min(s[i] for s in last)
        slack = max(1024, base // 50) if name == "rss_kib" else 0
        verdict = "grew" if low > base + slack else "flat"
        print(f"soak: {name}: second minute {min(s[i] for s in second)}-"
              f"{base}, last minute {low}-{max(s[i] for s in last)}: "
              f"{verdict}")
        if verdict == "grew":
            grew.append(name)
    print("soak: verdict: " + ("GREW: " + ", ".join(grew) if grew
                               else "nothing grew after the first minute"))
    return 1 if grew else 0


if __name__ == "__main__":
    sys.exit(main())
