#!/usr/bin/env python3
"""Summarise the runs of examples/bench.sh.

Reads raw.csv (one zcbench CSV row per run, prefixed with round and variant),
prints the tables (throughput per transport and size with ratios against the
first variant, 1-byte ping-pong, aligned versus unaligned, the goal check),
writes results.csv (medians) and throughput.svg (gnuplot).
"""
import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys


def size_label(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return "%dM" % (n >> 20)
    if n >= 1024 and n % 1024 == 0:
        return "%dK" % (n >> 10)
    return str(n)


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def group(rows, test, aligned, fresh, field):
    """{(transport, size, variant): {round: value}} for one test and buffer mode."""
    out = {}
    for r in rows:
        if r["test"] != test or r["aligned"] != aligned or r["fresh"] != fresh:
            continue
        key = (r["transport"], int(r["size"]), r["variant"])
        out.setdefault(key, {})[r["round"]] = float(r[field])
    return out


def med(values):
    values = list(values.values()) if isinstance(values, dict) else values
    return statistics.median(values) if values else float("nan")


def paired(d, key, base_key, op):
    """Median over rounds of op(variant, baseline) for runs of the same round,
    which ran next to each other: robust against slow drift of the machine."""
    a, b = d.get(key, {}), d.get(base_key, {})
    vals = [op(a[r], b[r]) for r in a if r in b and b[r] > 0]
    return statistics.median(vals) if vals else float("nan")


def ratio(x, y):
    return x / y


def diff(x, y):
    return x - y


def spread(values):
    """Median absolute deviation of the rounds relative to their median, in %."""
    m = med(values)
    values = list(values.values()) if isinstance(values, dict) else values
    if not values or not m > 0:
        return float("nan")
    return 100.0 * statistics.median(abs(v - m) for v in values) / m


GOAL_RATIO = 0.98


def throughput_table(mbps, variants, transports, res_rows):
    base = variants[0]
    others = variants[1:]
    print("Streaming throughput, MB/s (median over rounds; page-aligned, reused buffers)")
    head = "%-5s %6s" % ("tport", "size") + "".join(" %10s" % v for v in variants)
    head += "".join(" %14s" % ("%s/%s" % (v, base))[:14] for v in others)
    head += " %9s" % "noise"
    print(head)
    worst = {v: (float("inf"), None, 0.0, 0, 0) for v in others}
    for t in transports:
        sizes = sorted({k[1] for k in mbps if k[0] == t})
        for s in sizes:
            b = med(mbps.get((t, s, base), []))
            line = "%-5s %6s" % (t, size_label(s))
            for v in variants:
                vals = mbps.get((t, s, v), {})
                line += " %10.1f" % med(vals)
                rt = paired(mbps, (t, s, v), (t, s, base), ratio)
                res_rows.append(["stream", t, s, 1, 0, v, "%.2f" % med(vals), "", "", "",
                                 "%.4f" % rt, len(vals)])
            for v in others:
                r = paired(mbps, (t, s, v), (t, s, base), ratio)
                line += " %14.3f" % r
                w = worst[v]
                below, total = w[3] + (r < GOAL_RATIO), w[4] + 1
                if r < w[0]:
                    w = (r, "%s %s" % (t, size_label(s)), spread(mbps.get((t, s, base), {})))
                worst[v] = w[:3] + (below, total)
            line += " %8.1f%%" % spread(mbps.get((t, s, base), []))
            print(line)
    print("(ratio: median over rounds of the ratio of runs made side by side;"
          " noise: median absolute deviation of the %s rounds, relative)" % base)
    print()
    return worst


def latency_table(pp, variants, transports, res_rows):
    base = variants[0]
    print("Ping-pong, 1-byte round trip, us (median over rounds of each run's statistic)")
    print("%-5s %-14s %9s %9s %9s %12s %9s" % ("tport", "variant", "median", "p99", "mean",
                                               "d_median", "ratio"))
    diffs = {v: [] for v in variants[1:]}
    for t in transports:
        bmed = med(pp["median_us"].get((t, 1, base), []))
        for v in variants:
            m = med(pp["median_us"].get((t, 1, v), {}))
            p = med(pp["p99_us"].get((t, 1, v), {}))
            a = med(pp["mean_us"].get((t, 1, v), {}))
            d = paired(pp["median_us"], (t, 1, v), (t, 1, base), diff)
            rt = paired(pp["median_us"], (t, 1, v), (t, 1, base), ratio)
            print("%-5s %-14s %9.2f %9.2f %9.2f %+12.2f %9.3f" % (t, v, m, p, a, d, rt))
            res_rows.append(["pingpong", t, 1, 1, 0, v, "", "%.3f" % m, "%.3f" % p, "%.3f" % a,
                             "%.4f" % rt, len(pp["median_us"].get((t, 1, v), {}))])
            if v != base:
                noise_us = spread(pp["median_us"].get((t, 1, base), {})) * bmed / 100
                diffs[v].append((d, t, noise_us))
    print("(d_median and ratio: median over rounds against the %s run made side by side;"
          " %s noise of the median: %s)" % (base, base, ", ".join(
              "%s %.2f us" % (t, spread(pp["median_us"].get((t, 1, base), {}))
                              * med(pp["median_us"].get((t, 1, base), {})) / 100)
              for t in transports)))
    print()
    return diffs


def buffer_table(mbps, modes, variants, transports, res_rows):
    """Page-aligned reused buffers against the other buffer modes."""
    keys = sorted({(k[0], k[1]) for d in modes.values() for k in d},
                  key=lambda k: (transports.index(k[0]) if k[0] in transports else 9, k[1]))
    if not keys:
        return
    base = variants[0]
    names = list(modes)
    print("Buffer modes, MB/s (reused: page-aligned and reused; unaligned: 5 bytes past a page")
    print("start; fresh: malloc/free for every message)")
    print("%-5s %6s %-14s %10s" % ("tport", "size", "variant", "reused")
          + "".join(" %10s" % m for m in names)
          + "".join(" %17s" % ("%s/%s" % (m, base)) for m in names))
    for t, s in keys:
        for v in variants:
            line = "%-5s %6s %-14s %10.1f" % (t, size_label(s), v, med(mbps.get((t, s, v), {})))
            ratios = ""
            for m in names:
                d = modes[m]
                u = med(d.get((t, s, v), {}))
                rt = paired(d, (t, s, v), (t, s, base), ratio)
                line += " %10.1f" % u
                ratios += " %17.3f" % rt
                res_rows.append(["stream", t, s, 0 if m == "unaligned" else 1,
                                 1 if m == "fresh" else 0, v, "%.2f" % u, "", "", "",
                                 "%.4f" % rt, len(d.get((t, s, v), {}))])
            print(line + ratios)
    print("(mode/%s: median over rounds of the ratio of runs made side by side)" % base)
    print()


def parse_size(t):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(t[:-1]) * m[t[-1]] if t[-1] in m else int(t)


def goal_check(goals, mbps, modes, pp, variants, transports):
    """goals: "variant:spec,spec;variant:..." with specs
         tport/SIZE>=R   streaming ratio at SIZE (aligned, and unaligned when measured)
         all>=R          streaming ratio at every size and transport
         rtt<=Rx         1-byte round trip ratio, every transport
         rtt<=+Dus       1-byte round trip difference, every transport"""
    base = variants[0]
    print("Goal check (each variant against %s, same run; a MISS is reported, not fatal)" % base)
    for part in filter(None, goals.split(";")):
        v, specs = part.split(":", 1)
        if v not in variants:
            continue
        for spec in specs.split(","):
            lhs, rhs = spec.split(">=") if ">=" in spec else spec.split("<=")
            if lhs == "rtt":
                got = []
                for t in transports:
                    key, bkey = (t, 1, v), (t, 1, base)
                    if rhs.endswith("x"):
                        got.append((t, paired(pp["median_us"], key, bkey, ratio), "%.3fx"))
                    else:
                        got.append((t, paired(pp["median_us"], key, bkey, diff), "%+.2f us"))
                lim = float(rhs.rstrip("xus").lstrip("+"))
                ok = all(g <= lim for _, g, _ in got if g == g)
                noise = ", ".join("%s noise %.1f%%" % (t, spread(pp["median_us"].get((t, 1, base), {})))
                                  for t in transports)
                print("  %s  %s: 1-byte round trip <= %s: %s (%s)"
                      % ("PASS" if ok else "MISS", v, rhs,
                         ", ".join(("%s " + f) % (t, g) for t, g, f in got), noise))
                continue
            lim = float(rhs)
            if lhs == "all":
                cells = [(t, s, "aligned", paired(mbps, (t, s, v), (t, s, base), ratio))
                         for (t, s, vv) in mbps if vv == v]
            else:
                t, size = lhs.split("/")
                s_ = parse_size(size)
                cells = [(t, s_, "aligned", paired(mbps, (t, s_, v), (t, s_, base), ratio))]
                d = modes.get("unaligned", {})
                if (t, s_, v) in d:
                    cells.append((t, s_, "unaligned", paired(d, (t, s_, v), (t, s_, base), ratio)))
                other = [x for x in transports if x != t]
                for o in other:     # reported alongside, not judged
                    cells.append((o, s_, "aligned (info)", paired(mbps, (o, s_, v), (o, s_, base), ratio)))
            judged = [c for c in cells if "info" not in c[2] and c[3] == c[3]]
            ok = bool(judged) and all(c[3] >= lim for c in judged)
            worst = min(judged, key=lambda c: c[3]) if judged else None
            detail = ("worst %.3f at %s %s %s" % (worst[3], worst[0], size_label(worst[1]), worst[2])
                      if lhs == "all" and worst else
                      ", ".join("%s %s %.2fx" % (c[0], c[2], c[3]) for c in cells))
            print("  %s  %s: streaming %s >= %sx (%s)" % ("PASS" if ok else "MISS", v, lhs, rhs, detail))
    print()


def plot(mbps, variants, transports, out):
    gp = shutil.which("gnuplot")
    svg = os.path.join(out, "throughput.svg")
    series = []
    for t in transports:
        for v in variants:
            pts = sorted((k[1], med(vals)) for k, vals in mbps.items() if k[0] == t and k[2] == v)
            if not pts:
                continue
            dat = os.path.join(out, "throughput-%s-%s.dat" % (t, v))
            with open(dat, "w") as f:
                for s, m in pts:
                    f.write("%d %.3f\n" % (s, m))
            series.append((dat, "%s %s" % (t, v), "dashtype 2" if v == variants[0] else "dashtype 1"))
    all_sizes = sorted({k[1] for k in mbps})
    xtics = ", ".join('"%s" %d' % (size_label(s), s) for s in all_sizes)
    script = os.path.join(out, "throughput.gp")
    with open(script, "w") as f:
        f.write("set terminal svg size 900,560 dynamic font 'sans,12' background rgb 'white'\n")
        f.write("set output '%s'\n" % svg)
        f.write("set title 'zcbench streaming throughput (median over rounds)'\n")
        f.write("set logscale x 2\nset logscale y 10\nset grid\nset key top left\n")
        f.write("set xlabel 'message size (bytes)'\nset ylabel 'MB/s'\n")
        f.write("set xtics (%s)\n" % xtics)
        f.write("set xrange [%g:%g]\n" % (all_sizes[0] / 1.5, all_sizes[-1] * 1.5))
        f.write("plot " + ", \\\n     ".join(
            "'%s' using 1:2 with linespoints lw 2 %s title '%s'" % (d, dt, title)
            for d, title, dt in series) + "\n")
    if not gp:
        print("gnuplot not found: no SVG (the data and %s are there)" % script)
        return None
    r = subprocess.run([gp, script], capture_output=True, text=True)
    if r.returncode != 0:
        print("gnuplot failed: %s" % r.stderr.strip())
        return None
    return svg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", required=True)
    ap.add_argument("--goals", default="")
    ap.add_argument("--rounds", type=int, default=0)
    a = ap.parse_args()
    variants = a.variants.split(",")
    rows = load(a.raw)
    if not rows:
        sys.exit("bench: no runs in %s" % a.raw)
    transports = []
    for r in rows:
        if r["transport"] not in transports:
            transports.append(r["transport"])
    mbps = group(rows, "stream", "1", "0", "mbps")
    modes = {"unaligned": group(rows, "stream", "0", "0", "mbps"),
             "fresh": group(rows, "stream", "1", "1", "mbps")}
    modes = {m: d for m, d in modes.items() if d}
    pp = {f: group(rows, "pingpong", "1", "0", f) for f in ("median_us", "p99_us", "mean_us")}
    res_rows = []
    worst = throughput_table(mbps, variants, transports, res_rows)
    diffs = latency_table(pp, variants, transports, res_rows)
    buffer_table(mbps, modes, variants, transports, res_rows)
    goal_check(a.goals, mbps, modes, pp, variants, transports)
    res = os.path.join(a.out, "results.csv")
    with open(res, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "transport", "size", "aligned", "fresh", "variant", "mbps", "median_us",
                    "p99_us", "mean_us", "ratio_vs_" + variants[0], "rounds"])
        w.writerows(res_rows)
    svg = plot(mbps, variants, transports, a.out)
    print("results: %s (every run: %s)" % (res, a.raw))
    if svg:
        print("plot: %s" % svg)


if __name__ == "__main__":
    main()
