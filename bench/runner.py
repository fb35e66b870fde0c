"""bench/run: the benchmark suite, libgmp side by side with Go.

  bench/run [--quick] [--runs=N] [--build=DIR] [--no-build] [--only=a,b]

Builds the C programs (the CMake target bench_programs, configuring DIR
first if it has never been configured) and their Go twins in bench/go
(go build into DIR/bench/go, when `go` is installed), then runs every
pair alternately, C then Go, RUNS times after one warm-up pair, and
prints a table of medians and ratios. `cmake --build build --target
bench` runs this script in full mode with --no-build, after CMake has
built the C side itself.

  --quick      small sizes, one run, no warm-up: what CI runs so that no
               program rots (about 15 s once built); the table goes to
               DIR/bench/RESULTS-quick.md (and a chart beside it only if
               gnuplot is already installed)
  --runs=N     runs per side (default 5; 1 with --quick)
  --build=DIR  the CMake build tree (default: build, beside bench/)
  --no-build   use the programs already in DIR
  --only=a,b   only these benchmarks (names as in the table); the table
               goes to DIR/bench/RESULTS-only.md
  --chart-only run nothing: draw the chart again from the table of the
               last run (bench/RESULTS.md, or the quick/only one)

A full run writes bench/RESULTS.md (the table, the machine, load
averages) and bench/results.png (the C/Go ratios as bars, if gnuplot is
installed or can be installed with apt-get). The switch and yield rows
also get instruction counts from valgrind's callgrind (valgrind must be
installed), which do not drift with the machine's load.

Exit status: 0 if every program ran and printed its line, 1 if any
failed (a table is printed all the same), 2 for bad usage.

Every benchmark program takes --procs=N and --n=N and prints one line
  bench=<name> procs=<p> n=<n> key=value ...
The table takes its figures from the keys named in the suite
(bench/suite.py); bench/README.md says what each row measures.
"""

# bench/run is the entry point (it runs this file with python3); the suite
# is in suite.py and the table and the chart are made in report.py.

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import report
import suite
from report import note

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "http"))
import http_bench  # noqa: E402  (bench/http: wrk and the HTTP servers)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = len(os.sched_getaffinity(0))


def die(msg):
    note("bench/run: " + msg)
    sys.exit(2)


class Options:
    def __init__(self, argv):
        self.quick = False
        self.runs = None
        self.build = os.path.join(ROOT, "build")
        self.do_build = True
        self.chart_only = False
        self.only = None  # the set of names, with --only
        for arg in argv:
            if arg == "--quick":
                self.quick = True
            elif arg.startswith("--runs="):
                self.runs = arg[len("--runs="):]
            elif arg.startswith("--build="):
                self.build = arg[len("--build="):]
            elif arg == "--no-build":
                self.do_build = False
            elif arg == "--chart-only":
                self.chart_only = True
            elif arg.startswith("--only="):
                self.only = set(arg[len("--only="):].split(","))
            elif arg in ("-h", "--help"):
                sys.stdout.write(__doc__)
                sys.exit(0)
            else:
                die("unknown argument '%s' (see --help)" % arg)
        if not self.build.startswith("/"):
            self.build = os.path.join(os.getcwd(), self.build)
        if self.runs is None:
            self.runs = "1" if self.quick else "5"
        if not re.fullmatch(r"[1-9][0-9]*", self.runs):
            die("--runs wants a positive number")
        self.runs = int(self.runs)
        self.warmup = 0 if self.quick else 1
        self.timeout = 120 if self.quick else 600  # seconds for one run
        # Where the table and the chart go.
        if self.only is not None:
            out, suffix = self.build + "/bench", "-only"
        elif self.quick:
            out, suffix = self.build + "/bench", "-quick"
        else:
            out, suffix = ROOT + "/bench", ""
        self.md = "%s/RESULTS%s.md" % (out, suffix)
        self.png = "%s/results%s.png" % (out, suffix)

    def selected(self, name):
        return self.only is None or name in self.only


# ---- the machine -------------------------------------------------------------

def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def output(cmd, **kw):
    """The standard output of a command, or "" if it fails."""
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, **kw)
    except OSError:
        return ""
    return r.stdout if r.returncode == 0 else ""


def loadavg():
    return " ".join(read("/proc/loadavg").split()[:3]) or "?"


def cpu_steal():
    """(steal, total) clock ticks of all CPUs from /proc/stat: steal is the
    time a virtual machine's CPUs were runnable but the hypervisor ran
    something else, the noise no care on our side can remove."""
    for line in read("/proc/stat").splitlines():
        f = line.split()
        if f and f[0] == "cpu":
            return int(f[8]), sum(int(x) for x in f[1:])
    return None


def cpu_model():
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    for line in output(["lscpu"]).splitlines():
        if line.startswith("Model name"):
            return line.partition(":")[2].strip()
    return ""


def cmake_cache(build, var):
    m = re.search(r"^%s:[A-Z]*=(.*)$" % var, read(build + "/CMakeCache.txt"),
                  re.M)
    return m.group(1) if m else ""


def facts(opts, go_version, load_start, load_end, elapsed, steal):
    """What RESULTS.md says about the run and the machine."""
    mem = re.search(r"^MemTotal:\s*([0-9]+)", read("/proc/meminfo"), re.M)
    cc = cmake_cache(opts.build, "CMAKE_C_COMPILER")
    if cc:
        cc = (output([cc, "--version"]).splitlines() or [""])[0]
    u = os.uname()
    return {
        "quick": opts.quick,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": "%s, %d CPUs online, %.0f GiB RAM"
                   % (cpu_model(), JOBS, int(mem.group(1)) / 1048576 if mem else 0),
        "kernel": "%s %s (%s)" % (u.sysname, u.release, u.machine),
        "go": go_version,
        "cc": cc,
        "build_type": cmake_cache(opts.build, "CMAKE_BUILD_TYPE"),
        "commit": output(["git", "-C", ROOT, "describe", "--always",
                          "--dirty"]).strip() or "unknown",
        "load_start": load_start,
        "load_end": load_end,
        "elapsed": elapsed,
        "steal": steal,
        "runs": opts.runs,
        "warmup": opts.warmup,
    }


# ---- building ----------------------------------------------------------------

def build_c(build):
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    if not os.path.isfile(build + "/CMakeCache.txt"):
        note("==> configuring " + build)
        if subprocess.run(["cmake", "-S", ROOT, "-B", build], **quiet).returncode:
            die("cmake configure failed")
    note("==> building the C programs (target bench_programs)")
    if subprocess.run(["cmake", "--build", build, "--target", "bench_programs",
                       "-j", str(JOBS)], **quiet).returncode:
        die("the C build failed (cmake --build %s --target bench_programs)"
            % build)


def build_go(build):
    """Builds the Go twins; returns (go version or "", whether all built)."""
    version = output(["go", "version"]).split()
    if len(version) < 3:
        note("==> Go is missing (Debian: apt-get install golang-go): "
             "running the C side only")
        return "", True
    version = version[2]
    # go needs a cache; CI may run without a home directory.
    if not os.environ.get("HOME") and not os.environ.get("GOCACHE"):
        os.environ["GOCACHE"] = build + "/bench/go/.cache"
        os.environ["GOPATH"] = build + "/bench/go/.path"
    os.environ["GOPROXY"] = "off"  # standard library only
    os.environ["GOFLAGS"] = "-buildvcs=false"
    note("==> building the Go twins with " + version)
    os.makedirs(build + "/bench/go", exist_ok=True)
    ok = True
    for main in sorted(glob.glob(ROOT + "/bench/go/*/main.go")):
        prog = os.path.basename(os.path.dirname(main))
        r = subprocess.run(["go", "build", "-o", build + "/bench/go/" + prog,
                            "./" + prog], cwd=ROOT + "/bench/go",
                           stdin=subprocess.DEVNULL)
        if r.returncode:
            note("  FAILED: go build ./" + prog)
            ok = False
    return version, ok


# ---- running -----------------------------------------------------------------

def tail(text, n=5):
    for line in text.splitlines()[-n:]:
        note("    " + line)


def exit_status(rc):
    return 128 - rc if rc < 0 else rc


def run_prog(cmd, timeout):
    """Runs one program with a time limit; returns its bench= line, or
    None if it failed (saying why)."""
    r = subprocess.run(["timeout", "--kill-after=10", str(timeout)] + cmd,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, errors="replace")
    if r.returncode:
        note("  FAILED (exit %d): %s" % (exit_status(r.returncode),
                                         " ".join(cmd)))
        tail(r.stderr)
        return None
    for line in r.stdout.splitlines():
        if line.startswith("bench="):
            return line
    note("  FAILED (no bench= line): " + " ".join(cmd))
    return None


def field(line, key):
    """The value of key in a bench= line, or None."""
    for word in line.split():
        if word.startswith(key + "="):
            return word[len(key) + 1:]
    return None


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (fields 14 and 15 of
    /proc/PID/stat, counted after the command name, which may hold
    spaces), or None."""
    stat = read("/proc/%d/stat" % pid)
    if ")" not in stat:
        return None
    f = stat[stat.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12])


class Server:
    """An echo server in the background. Once made, port is the port it
    printed ("port=N"), or None if it did not start (it is stopped then)."""
    running = None  # the one running, for cleanup()

    def __init__(self, cmd, env=None):
        # The server writes to these; they are read by name, through
        # files of their own (a shared offset would race with its writes).
        self.out = tempfile.NamedTemporaryFile("w", prefix="bench-server-out.")
        self.err = tempfile.NamedTemporaryFile("w", prefix="bench-server-err.")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=self.err, env=env)
        Server.running = self
        self.port = None
        for _ in range(100):
            m = re.search(r"^port=([0-9]+)", read(self.out.name), re.M)
            if m:
                self.port = m.group(1)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        note("  FAILED: the server did not start: " + " ".join(cmd))
        tail(read(self.err.name))
        self.stop()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()
        self.err.close()
        Server.running = None


def argparse_namespace(**kw):
    """The options http_bench's servers and wrk read."""
    import argparse
    return argparse.Namespace(**kw)


def cleanup():
    if Server.running:
        Server.running.stop()


class Runner:
    """Runs the configurations and the callgrind rows of the suite against
    the programs in one build tree."""

    def __init__(self, opts, go_version):
        self.opts = opts
        self.build = opts.build
        self.go = go_version

    def exe(self, path):
        return os.access(self.build + "/" + path, os.X_OK)

    def has_side(self, side, cfg):
        """Whether side "c" or "twin" of a configuration can run at all."""
        if cfg.twin in ("nginx", "gohttp"):
            if not shutil.which("wrk"):
                return False
            if side == "c":
                return self.exe("examples/http_server")
            if cfg.twin == "nginx":
                return shutil.which("nginx") is not None
            return self.exe("bench/go/http")
        if side == "c":
            if cfg.twin == "echo":
                return self.exe("bench/echo") and self.exe("examples/echo_server")
            if cfg.twin == "floor":
                return self.exe("bench/echo") and self.exe("bench/floor/echo_floor")
            if cfg.twin == "yard":
                return self.exe("bench/floor/" + cfg.name)
            if cfg.name == "hook_redis" and not (
                    shutil.which("redis-server")
                    and shutil.which("redis-benchmark")):
                return False
            return self.exe("bench/" + cfg.name)
        if cfg.twin in ("echo", "floor"):
            return (bool(self.go) and self.exe("bench/echo")
                    and self.exe("bench/go/echo"))
        if cfg.twin == "go":
            return bool(self.go) and self.exe("bench/go/" + cfg.name)
        if cfg.twin == "yard":
            return bool(self.go) and self.exe("bench/go/" + cfg.go)
        if cfg.twin == "boost":
            return self.exe("bench/boost/switch_boost")
        return False

    def run_side(self, side, cfg, flags):
        """Runs side "c" or "twin" of a configuration; its bench= line."""
        if cfg.twin in ("echo", "floor"):
            server = "floor" if side == "c" and cfg.twin == "floor" else side
            return self.run_echo(server, flags)
        if cfg.twin in ("nginx", "gohttp"):
            server = "gmp" if side == "c" else (
                "nginx" if cfg.twin == "nginx" else "go")
            return self.run_http(server, flags)
        if side == "c":
            prog = ("bench/floor/" if cfg.twin == "yard" else "bench/") + \
                cfg.name
        elif cfg.twin == "go":
            prog = "bench/go/" + cfg.name
        elif cfg.twin == "yard":
            prog = "bench/go/" + cfg.go
        else:
            prog = "bench/boost/switch_boost"
        return run_prog([self.build + "/" + prog] + flags, self.opts.timeout)

    def run_echo(self, server, flags):
        """The echo pair: one client, ours (bench/echo), against our server
        (examples/echo_server, server "c"), the floor's ("floor") or Go's
        (bench/go/echo, "twin"), each server in its own process with the
        same --procs as the client."""
        m = re.search(r"--procs=([0-9]+)", " ".join(flags))
        procs = m.group(1) if m else "2"
        env = None
        if server == "c":
            cmd = [self.build + "/examples/echo_server", "0"]
            env = dict(os.environ, GMP_MAXPROCS=procs)
        elif server == "floor":
            cmd = [self.build + "/bench/floor/echo_floor", "0"]
        else:
            cmd = [self.build + "/bench/go/echo", "--procs=" + procs]
        s = Server(cmd, env)
        if s.port is None:
            return None
        t0 = cpu_ticks(s.proc.pid)
        line = run_prog([self.build + "/bench/echo"] + flags
                        + ["--port=" + s.port], self.opts.timeout)
        t1 = cpu_ticks(s.proc.pid)
        s.stop()
        if line is None:
            return None
        # The server's own CPU time (user + system, the kernel's TCP work
        # included) per round trip: client and server share the machine's
        # cores, so this says how much of them each server needs.
        n = re.search(r" n=([0-9]+)", line)
        if t0 is not None and t1 is not None and n and int(n.group(1)) > 0:
            line += " server_cpu_ns_per_rt=%.0f" % (
                (t1 - t0) * 1e9 / os.sysconf("SC_CLK_TCK") / int(n.group(1)))
        return line

    def run_http(self, server, flags):
        """One HTTP measurement: a fresh server (examples/http_server at 2
        Ps, nginx with 2 workers, or Go's net/http at GOMAXPROCS=2), an
        unmeasured wrk run of --warmup seconds, then wrk for --duration
        seconds at --conns connections (bench/http/http_bench.py)."""
        opt = dict(re.findall(r"--([a-z_]+)=([0-9]+)", " ".join(flags)))
        args = argparse_namespace(
            conns=int(opt.get("conns", 64)),
            duration=int(opt.get("duration", 10)),
            warmup=int(opt.get("warmup", 2)),
            wrk_threads=2, taskset_wrk=None, taskset_server=None)
        # --trace=1: the server records its execution trace while it
        # serves (into a directory removed afterwards).
        tracedir = tempfile.mkdtemp(prefix="bench_trace.") \
            if opt.get("trace") == "1" else None
        srv = http_bench.Server(server, args, self.build,
                                tracedir and os.path.join(tracedir, "trace"))
        try:
            res = http_bench.measure(args, srv, args.conns)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            note("  FAILED: %s: %s" % (server, e))
            srv.stop()
            return None
        finally:
            if tracedir:
                shutil.rmtree(tracedir, ignore_errors=True)
        return ("bench=http server=%s conns=%d rps=%.0f p50_ms=%.3f "
                "p99_ms=%.3f cpu_us_per_req=%.3f" % (
                    server, args.conns, res["rps"], res["p50"], res["p99"],
                    res["cpu_us_per_req"]))

    def run_config(self, cfg, rows):
        """Runs one configuration, C and twin alternately after the
        warm-up pair; appends its rows. Returns whether all went well."""
        ok = True
        flags = (cfg.quick if self.opts.quick else cfg.full).split()
        note("==> %s (%s): %s" % (cfg.name, cfg.configuration, " ".join(flags)))
        sides = []
        if self.has_side("c", cfg):
            sides.append("c")
        elif cfg.twin == "echo" and self.exe("bench/echo"):
            note("  skipped: no %s/examples/echo_server (GMP_BUILD_EXAMPLES=OFF?)"
                 % self.build)
            return True
        elif cfg.twin in ("nginx", "gohttp"):
            if not shutil.which("wrk"):
                note("  skipped: wrk is not installed (Debian: apt-get "
                     "install wrk)")
            else:
                note("  skipped: no %s/examples/http_server "
                     "(GMP_BUILD_EXAMPLES=OFF?)" % self.build)
            return True
        elif cfg.name == "hook_redis":
            if not self.exe("bench/hook_redis"):
                note("  skipped: no %s/bench/hook_redis (built only where "
                     "libhiredis-dev is installed)" % self.build)
            else:
                note("  skipped: redis-server or redis-benchmark is not "
                     "installed (Debian: apt-get install redis-server)")
            return True
        else:
            note("  FAILED: no C program for %s in %s" % (cfg.name, self.build))
            ok = False
        mine = [report.Row(cfg.name, cfg.configuration, fig.key, fig.better,
                           fig.target, cfg.twin) for fig in cfg.figures]
        rows.extend(mine)
        if self.has_side("twin", cfg):
            sides.append("twin")
        elif cfg.twin == "nginx":
            note("  skipped the twin: nginx is not installed (Debian: "
                 "apt-get install nginx-light); C side only")
        elif cfg.twin != "none" and (self.go or cfg.twin == "boost"):
            note("  no %s twin for %s; C side only" % (cfg.twin, cfg.name))
        for run in range(1 - self.opts.warmup, self.opts.runs + 1):
            for side in sides:
                line = self.run_side(side, cfg, flags)
                if line is None:
                    if side == "c" or cfg.twin != "boost":
                        ok = False
                    continue
                if run < 1:
                    continue  # the warm-up
                note("  %s: %s" % (side, line[len("bench="):]))
                for row in mine:
                    v = field(line, row.key)
                    v = None if v is None else report.number(v)
                    if v is not None:
                        (row.c if side == "c" else row.t).append(v)
        return ok

    def callgrind_ir(self, cmd):
        """The total Ir of a whole run, from callgrind's summary."""
        r = subprocess.run(["timeout", "--kill-after=10",
                            str(2 * self.opts.timeout), "valgrind",
                            "--tool=callgrind", "--callgrind-out-file=/dev/null"]
                           + cmd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, errors="replace")
        m = re.search(r"^==[0-9]*== Collected : ([0-9]+)", r.stderr, re.M)
        if r.returncode or not m:
            note("  FAILED under callgrind: " + " ".join(cmd))
            tail(r.stderr)
            return None
        return int(m.group(1))

    def ir_per_op(self, prog, cg, small, large):
        flags = cg.flags.split()
        a = self.callgrind_ir([prog, "--n=%d" % small] + flags)
        if a is None:
            return None
        b = self.callgrind_ir([prog, "--n=%d" % large] + flags)
        if b is None:
            return None
        return "%.1f" % ((b - a) / ((large - small) * cg.ops_per_n))

    def run_callgrind(self, cg, rows):
        """The instruction-count row of one program (and its Boost twin)."""
        pick = 1 if self.opts.quick else 0
        small, large = cg.small[pick], cg.large[pick]
        row = report.Row(cg.name, "callgrind, --n=%d and --n=%d" % (small, large),
                         "ir_per_op", "low", None, cg.twin)
        rows.append(row)
        note("==> %s under callgrind: --n=%d and --n=%d" % (cg.name, small, large))
        ok = True
        v = self.ir_per_op(self.build + "/bench/" + cg.name, cg, small, large)
        if v is None:
            ok = False
        else:
            row.c.append(float(v))
            note("  c: %s instructions/op" % v)
        boost = self.build + "/bench/boost/switch_boost"
        if cg.twin == "boost" and os.access(boost, os.X_OK):
            v = self.ir_per_op(boost, cg, small, large)
            if v is not None:
                row.t.append(float(v))
                note("  boost: %s instructions/op" % v)
        return ok


def main(argv):
    opts = Options(argv)
    if opts.chart_only:
        if not os.path.isfile(opts.md):
            die("no %s to draw" % opts.md)
        report.draw_chart(opts.md, opts.png, not opts.quick)
        return 0
    if opts.only is not None:
        for name in sorted(opts.only - suite.NAMES):
            note("bench/run: --only: no benchmark is called '%s'" % name)

    if opts.do_build:
        build_c(opts.build)
    go_version, ok = build_go(opts.build)

    load_start = loadavg()
    steal_start = cpu_steal()
    t_start = int(time.time())
    note("==> load average at start: " + load_start)
    note("==> %d run(s) per side%s" % (opts.runs, ", after a warm-up pair"
                                       if opts.warmup else ""))
    runner = Runner(opts, go_version)
    rows = []
    for cfg in suite.SUITE:
        if opts.selected(cfg.name):
            ok = runner.run_config(cfg, rows) and ok
    if not shutil.which("valgrind"):
        note("==> valgrind is missing (Debian: apt-get install valgrind): "
             "no instruction counts")
    else:
        for cg in suite.CALLGRIND:
            if opts.selected(cg.name):
                ok = runner.run_callgrind(cg, rows) and ok

    load_end = loadavg()
    elapsed = int(time.time()) - t_start
    note("==> load average at end: %s (%d s)" % (load_end, elapsed))
    steal_end = cpu_steal()
    steal = "?"
    if steal_start and steal_end and steal_end[1] > steal_start[1]:
        steal = "%.1f%%" % (100 * (steal_end[0] - steal_start[0])
                            / (steal_end[1] - steal_start[1]))
    note("==> CPU time stolen by the hypervisor meanwhile: " + steal)

    text = report.table([report.COLUMNS]
                        + [report.cells(row, opts.runs) for row in rows])
    report.write_results(opts.md, text,
                         facts(opts, go_version, load_start, load_end, elapsed,
                               steal))
    sys.stdout.write("\n" + text + "\n")
    sys.stdout.flush()
    note("==> wrote " + opts.md)
    report.draw_chart(opts.md, opts.png, not opts.quick)
    if not ok:
        note("==> some programs FAILED (see above)")
        return 1
    return 0


def interrupted(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, interrupted)
    try:
        status = main(sys.argv[1:])
    except KeyboardInterrupt:
        status = 130
    finally:
        cleanup()
    sys.exit(status)
