"""The figures of a bench/run run made into its table, RESULTS.md and chart.

A Row holds the values one figure took in each run, C side and twin side;
cells() makes it a line of the table (medians, ratio, spreads, target),
write_results() writes the Markdown file, and draw_chart() draws the C/Go
ratios of such a file with gnuplot.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import suite

COLUMNS = ("benchmark", "configuration", "figure", "C median", "Go median",
           "C/Go", "better", "C spread (min-max)", "Go spread (min-max)",
           "target", "met")


def note(msg):
    print(msg, file=sys.stderr, flush=True)


class Row:
    """One row of the table: one figure of one configuration."""

    def __init__(self, name, configuration, key, better, target, twin):
        self.name = name
        self.configuration = configuration
        self.key = key
        self.better = better
        self.target = target
        self.twin = twin
        self.c = []  # the values of the C side, one per run
        self.t = []  # the twin's


# ---- numbers -----------------------------------------------------------------

def number(text):
    """A number as the program printed it, or None."""
    try:
        return float(text)
    except ValueError:
        return None


def plain(x):
    """x to six significant digits (an integer stays whole). The median of
    an even count of runs and the ratio a target is checked against are
    rounded so: six digits are as many as any program prints, and a ratio
    equal to its bound to six digits (0.5000002 against 0.5) meets it."""
    if x == int(x) and abs(x) < 2 ** 53:
        return float(int(x))
    return float("%.6g" % x)


def stats(values):
    """(median, min, max) of a list of numbers, or None if it is empty."""
    v = sorted(values)
    if not v:
        return None
    n = len(v)
    median = v[n // 2] if n % 2 else plain((v[n // 2 - 1] + v[n // 2]) / 2)
    return median, v[0], v[-1]


def fmt(x):
    """A number with about four significant digits."""
    a = abs(x)
    if a >= 1000:
        return "%.0f" % x
    if a >= 100:
        return "%.1f" % x
    if a >= 10:
        return "%.2f" % x
    return "%.3f" % x


TARGET = re.compile(r"^(C/Go|C) (<=|>=) (\S+)$")


def cells(row, runs):
    """The row's cells, in the order of COLUMNS."""
    c, t = stats(row.c), stats(row.t)
    spread = runs > 1 and row.key != "ir_per_op"
    cm = c[0] if c else None
    tm = t[0] if t else None
    ratio = None
    if cm is not None and tm is not None and tm != 0:
        ratio = cm / tm
    target, met = "-", "-"
    if row.target:
        subject, op, limit = TARGET.match(row.target).groups()
        target = "%s %s %s" % (subject, {"<=": "≤", ">=": "≥"}[op], limit)
        if subject == "C":
            value = cm
        else:
            value = None if ratio is None else plain(ratio)
        if cm is not None and value is not None:
            ok = value <= float(limit) if op == "<=" else value >= float(limit)
            met = "yes" if ok else "NO"
    ccell = "FAILED"
    if cm is not None:
        ccell = fmt(cm) + (" (floor)" if row.twin in ("floor", "yard")
                           else "")
    tcell = "-"
    if tm is not None:
        tcell = fmt(tm) + {"boost": " (Boost)", "nginx": " (nginx)"}.get(
            row.twin, "")
    return (row.name, row.configuration, suite.words(row.name, row.key),
            ccell, tcell, "-" if ratio is None else "%.2f" % ratio,
            ">1" if row.better == "high" else "<1",
            "%s-%s" % (fmt(c[1]), fmt(c[2])) if c and spread else "-",
            "%s-%s" % (fmt(t[1]), fmt(t[2])) if t and spread else "-",
            target, met)


def table(lines):
    """A Markdown table with padded columns, readable as plain text too."""
    width = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for k, line in enumerate(lines):
        out.append("|" + "".join(" %s |" % s.ljust(w)
                                 for s, w in zip(line, width)))
        if k == 0:
            out.append("|" + "".join("-" * (w + 2) + "|" for w in width))
    return "\n".join(out) + "\n"


# ---- RESULTS.md --------------------------------------------------------------

EXPLANATION = """\
C/Go is the C median over the Go median: below 1 means libgmp is
faster for times, costs and counts (better <1); above 1 means it is
faster for throughputs and speedups (better >1). On the switch rows
the reference is Boost.Context's jump_fcontext, since Go has no raw
switch, and on the http rows marked (nginx) it is nginx (wrk against
both; bench/http); instruction counts are (Ir at the large n - Ir at the small n)
/ (ops difference) under valgrind --tool=callgrind (Go's runtime does
not run under valgrind). Targets are the project's goals for each row (bench/README.md).
"""


def write_results(path, text_table, facts):
    """Writes RESULTS.md: the header lines (facts: a dict of what the run
    saw), the explanation and the table."""
    f = facts
    lines = [
        "# Benchmark results",
        "",
        "Generated by `bench/run%s` (from `cmake --build build --target bench`);"
        % (" --quick" if f["quick"] else ""),
        "do not edit by hand.",
        "",
        "- date: " + f["date"],
        "- machine: " + f["machine"],
        "- kernel: " + f["kernel"],
        "- Go: " + (f["go"] or "not installed (C side only)"),
        "- C compiler: %s, build type %s" % (f["cc"] or "unknown",
                                              f["build_type"] or "unknown"),
        "- libgmp: " + f["commit"],
        "- load average (1, 5, 15 min): %s at start, %s at end; %d s in all"
        % (f["load_start"], f["load_end"], f["elapsed"]),
        "- CPU time stolen by the hypervisor during the run (steal in "
        "/proc/stat): " + f["steal"],
        "- %d run(s) per side%s; median and min-max"
        % (f["runs"], ", C and Go alternately, after one warm-up pair"
           if f["warmup"] else ""),
    ]
    if f["quick"]:
        lines.append("- quick mode: small sizes (the configuration column "
                     "names the full ones); the figures only show that "
                     "every program runs")
    text = "\n".join(lines) + "\n\n" + EXPLANATION + "\n" + text_table
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


# ---- the chart ---------------------------------------------------------------

def chart_points(md_text):
    """(label, ratio, good, goal) for every row of a RESULTS.md table with
    a C/Go ratio, the echo_floor yardstick left out."""
    points = []
    in_table = False
    for line in md_text.splitlines():
        if re.match(r"^\| *benchmark *\|", line):
            in_table = True
            continue
        if not in_table or not line.startswith("|") or line.startswith("|-"):
            continue
        f = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(f) < len(COLUMNS):
            continue
        name, cfg, fig, cmed, twin, ratio, better = f[:7]
        target = f[9]
        if not re.fullmatch(r"[0-9.]+", ratio) or "floor" in cmed:
            continue
        label = "%s: %s" % (name, fig)
        m = re.search(r"procs=[0-9]+", cfg)
        if m:
            label += ", " + m.group(0)
        if "Boost" in twin:
            label += " (vs Boost)"
        if "nginx" in twin:
            label += " (vs nginx)"
        m = re.search(r"[0-9]+ conns", cfg)
        if m:
            label += ", " + m.group(0)
        r = float(ratio)
        good = r <= 1 if better == "<1" else r >= 1
        goal = target.split()[-1] if target.startswith("C/Go") else "?"
        points.append((label.replace('"', ""), ratio, int(good), goal))
    return points


def header_value(md_text, prefix):
    for line in md_text.splitlines():
        if line.startswith(prefix):
            return line[len(prefix):]
    return ""


GNUPLOT = """\
set terminal {term}
set output '{png}'
set title "{title}"
set ylabel 'C / Go (log scale)'
set logscale y 2
set yrange [0.0625:16]
set ytics ('1/16' 0.0625, '1/8' 0.125, '1/4' 0.25, '1/2' 0.5, '1' 1, '2' 2, '4' 4, '8' 8, '16' 16)
set grid ytics
set datafile missing '?'
set style fill solid 0.8 noborder
set xtics rotate by 90 right noenhanced font ',9'
set bmargin 22
set rmargin 3
set key top right
set xrange [-0.6:{last}.6]
set palette defined (0 '#c0392b', 1 '#27ae60')
unset colorbox
set cbrange [0:1]
clamp(y) = y < 0.0625 ? 0.0625 : y > 16 ? 16 : y
set label 1 'bars run from 1 to C/Go; green: libgmp better (lower time, higher throughput); red: Go better' at graph 0.01, graph 0.96 left
plot '{data}' using 0:(1):($0 - 0.35):($0 + 0.35):($2 < 1 ? clamp($2) : 1):($2 < 1 ? 1 : clamp($2)):3:xtic(1) \\
       with boxxyerror palette notitle, \\
     '' using ($0 - 0.45):(clamp($4)):(0.9):(0) with vectors nohead lw 2 lc rgb 'black' title 'target', \\
     1 with lines lc rgb 'black' dt 2 notitle
"""


def draw_chart(md, png, may_install):
    """Draws the C/Go ratios of table md (a RESULTS.md) as bars into png:
    log scale, bars from 1, green where libgmp is better, the targets as
    black marks. Installs gnuplot-nox with apt-get if it is missing and
    may_install (a full run) as root; otherwise says why there is no
    chart."""
    if (not shutil.which("gnuplot") and may_install and os.geteuid() == 0
            and shutil.which("apt-get")):
        note("==> installing gnuplot-nox for the chart")
        r = subprocess.run(
            ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y",
             "-qq", "--no-install-recommends", "gnuplot-nox"],
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            note("  apt-get install gnuplot-nox failed")
    if not shutil.which("gnuplot"):
        note("==> gnuplot is missing (Debian: apt-get install gnuplot-nox): "
             "no chart")
        return
    with open(md, encoding="utf-8") as f:
        text = f.read()
    points = chart_points(text)
    if not points:
        note("==> no C/Go ratios to draw (is Go installed?): no chart")
        return
    runs = re.search(r"^- ([0-9]*) run\(s\)", text, re.M)
    # "\n" stays two characters: gnuplot makes it a line break.
    title = ("libgmp against Go (%s): C median / Go median, %s run(s) each"
             "\\n%s; %s" % (header_value(text, "- Go: "),
                            runs.group(1) if runs else "",
                            header_value(text, "- machine: "),
                            header_value(text, "- date: ")))
    term = "pngcairo size 1300,820 font 'sans,10'"
    probe = subprocess.run(["gnuplot", "-e", "set terminal pngcairo"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        term = "png size 1300,820"
    with tempfile.NamedTemporaryFile("w", suffix=".dat",
                                     encoding="utf-8") as data:
        for label, ratio, good, goal in points:
            data.write('"%s" %s %d %s\n' % (label, ratio, good, goal))
        data.flush()
        script = GNUPLOT.format(term=term, png=png, title=title,
                                last=len(points) - 1, data=data.name)
        r = subprocess.run(["gnuplot"], input=script, text=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        note("  gnuplot failed: " + "\n".join(r.stderr.splitlines()[:3]))
    elif os.path.isfile(png) and os.path.getsize(png) > 0:
        note("==> wrote " + png)
