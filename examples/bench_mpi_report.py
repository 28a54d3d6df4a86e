#!/usr/bin/env python3
"""Summarise a make bench-mpi run (examples/bench_mpi.sh): the NetPIPE and
collectives tables with ratios against the MPI library's own shared memory
and against the kernel, whether every rank's bytes took the local path, and
netpipe.svg (gnuplot, ping-pong MB/s by size).

    bench_mpi_report.py OUTDIR      (reads raw.csv, coll.csv, pairs.csv)"""
import csv
import os
import shutil
import statistics
import subprocess
import sys

SIZES = [8, 4096, 65536, 1 << 20, 8 << 20, 32 << 20]
SHM = {"openmpi": "vader", "mpich": "shm"}
LABEL = {"tcp": "TCP (kernel)", "zcsock": "TCP under zcsock", "vader": "vader (own shm)",
         "ucx": "pml ucx (UCX shm)", "shm": "ucx/shm (own shm)"}


def size_label(n):
    if n >= 1 << 20:
        return "%d MiB" % (n >> 20)
    if n >= 1024:
        return "%d KiB" % (n >> 10)
    return "%d B" % n


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def medians(rows, key, val):
    acc = {}
    for r in rows:
        acc.setdefault(key(r), []).append(float(r[val]))
    return {k: statistics.median(v) for k, v in acc.items()}


def ratio(a, b):
    return "%.2fx" % (a / b) if a and b else "-"


def netpipe(raw, impls):
    lat = medians(raw, lambda r: (r["impl"], r["kind"], r["mode"], int(r["bytes"])), "usec")
    bw = medians(raw, lambda r: (r["impl"], r["kind"], r["mode"], int(r["bytes"])), "mbps")
    sizes = [s for s in SIZES if any(k[3] == s for k in lat)]
    for mode in ("pingpong", "stream"):
        print("\nNetPIPE %s: %s (us) at 8 B; MB/s at each size" % (
            mode, "half round trip" if mode == "pingpong" else "time per message"))
        print("| %s | %s |" % ("variant", " | ".join(["8 B us"] + [size_label(s) for s in sizes[1:]])))
        print("|---" * (len(sizes) + 1) + "|")
        for impl in impls:
            kinds = sorted({k[1] for k in lat if k[0] == impl},
                           key=lambda k: list(LABEL).index(k))
            for kind in kinds:
                cells = ["%.2f" % lat.get((impl, kind, mode, 8), 0)]
                cells += ["%.0f" % (bw.get((impl, kind, mode, s), 0) / 8) for s in sizes[1:]]
                print("| %s %s | %s |" % (impl, LABEL[kind], " | ".join(cells)))
            for base in (SHM[impl], "tcp"):
                if (impl, base, mode, 8) not in lat or (impl, "zcsock", mode, 8) not in lat:
                    continue
                cells = [ratio(lat[(impl, "zcsock", mode, 8)], lat[(impl, base, mode, 8)]) + " time"]
                cells += [ratio(bw.get((impl, "zcsock", mode, s)), bw.get((impl, base, mode, s)))
                          for s in sizes[1:]]
                print("| %s zcsock / %s | %s |" % (impl, base, " | ".join(cells)))
    return bw


def collectives(coll, impls):
    if not coll:
        return
    t = medians(coll, lambda r: (r["impl"], r["kind"], r["np"], r["op"], int(r["bytes"])), "usec")
    print("\nCollectives (examples/mpi_coll.c): us per call; zcsock / own shm and / kernel "
          "(below 1 is faster)")
    print("| impl ranks | op | bytes | kernel TCP | zcsock | own shm | zcsock/shm | zcsock/kernel |")
    print("|---|---|---|---|---|---|---|---|")
    for impl in impls:
        shm = SHM[impl]
        for key in sorted({(k[2], k[3], k[4]) for k in t if k[0] == impl}):
            np_, op, n = key
            k = t.get((impl, "tcp") + key)
            z = t.get((impl, "zcsock") + key)
            m = t.get((impl, shm) + key)
            print("| %s %s | %s | %s | %s | %s | %s | %s | %s |" % (
                impl, np_, op, size_label(n), "%.1f" % k if k else "-", "%.1f" % z if z else "-",
                "%.1f" % m if m else "-", ratio(z, m), ratio(z, k)))


def paired(pairs, impls):
    print("\nPairing (ranks under zcsock: bytes sent through the local path):")
    for impl in impls:
        rows = [r for r in pairs if r["impl"] == impl]
        if not rows:
            print("  %s: no rank statistics" % impl)
            continue
        bad = [r for r in rows
               if not float(r["local_bytes"]) or
               float(r["local_bytes"]) < 0.99 * (float(r["local_bytes"]) + float(r["copy_bytes"]))]
        jobs = {r["job"] for r in rows}
        if bad:
            print("  %s: NOT every rank paired: %d of %d rank runs sent less than 99%% locally "
                  "(%s)" % (impl, len(bad), len(rows),
                            ", ".join("%s %s: %s local / %s kernel" % (r["job"], r["log"],
                                      r["local_bytes"], r["copy_bytes"]) for r in bad[:4])))
        else:
            print("  %s: every rank paired in all %d jobs (%d rank runs, >= 99%% of bytes sent "
                  "locally)" % (impl, len(jobs), len(rows)))


def plot(out, bw, impls):
    gp = shutil.which("gnuplot")
    data = os.path.join(out, "netpipe.dat")
    series = []
    with open(data, "w") as f:
        for impl in impls:
            for kind in LABEL:
                pts = sorted((k[3], v / 8) for k, v in bw.items()
                             if k[0] == impl and k[1] == kind and k[2] == "pingpong")
                if not pts:
                    continue
                f.write("# %s %s\n" % (impl, LABEL[kind]))
                for s, v in pts:
                    f.write("%d %.1f\n" % (s, v))
                f.write("\n\n")
                series.append("%s %s" % (impl, LABEL[kind]))
    if not gp or not series:
        print("\nno gnuplot: no netpipe.svg (the data is in %s)" % data)
        return
    script = os.path.join(out, "netpipe.gp")
    with open(script, "w") as f:
        f.write('set terminal svg size 900,540\nset output "%s"\n' % os.path.join(out, "netpipe.svg"))
        f.write('set logscale x 2\nset xlabel "message bytes"\nset ylabel "MB/s (NetPIPE ping-pong)"\n')
        f.write('set key left top\nset grid\nplot ' + ", ".join(
            '"%s" index %d with linespoints title "%s"' % (data, i, t) for i, t in enumerate(series)) + "\n")
    r = subprocess.run([gp, script], capture_output=True, text=True)
    print("\nplot: %s" % os.path.join(out, "netpipe.svg") if r.returncode == 0
          else "\ngnuplot failed: %s" % r.stderr.strip())


def main():
    out = sys.argv[1]
    raw = load(os.path.join(out, "raw.csv"))
    coll = load(os.path.join(out, "coll.csv"))
    pairs = load(os.path.join(out, "pairs.csv"))
    impls = [i for i in ("openmpi", "mpich") if any(r["impl"] == i for r in raw + coll)]
    bw = netpipe(raw, impls)
    collectives(coll, impls)
    paired(pairs, impls)
    plot(out, bw, impls)


if __name__ == "__main__":
    main()
