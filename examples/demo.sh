#!/usr/bin/env bash
# make demo: the same validated zcbench transfers on the kernel and under the
# library, in one run, side by side with the ratio, then a short summary of
# which path carried the library's bytes.  A warm-up pass comes first: on a
# fresh virtual machine new memory faults in from the host and the first
# figures are low whichever side goes first.
#   ZC_BUILD, ZC_LIB (set by make); DEMO_SECONDS (1), DEMO_ARGS (zcbench run
#   options that replace the default sizes)
set -u
B=${ZC_BUILD:?}
L=${ZC_LIB:?}
S=${DEMO_SECONDS:-1}
ARGS=${DEMO_ARGS:---transport tcp,unix --sizes 4K,64K,1M,16M --pp-sizes 1,64K}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

echo "zcsock demo: validated transfers (every byte checked), kernel and zcsock in one run"
echo "warming up (new memory faults in from the host on a fresh machine) ..."
env -u LD_PRELOAD "$B/zcbench" run --transport tcp --test stream --sizes 16M --seconds 0.5 \
  >/dev/null 2>&1
LD_PRELOAD="$L" "$B/zcbench" run --transport tcp --test stream --sizes 16M --seconds 0.5 \
  >/dev/null 2>&1
# shellcheck disable=SC2086
if ! env -u LD_PRELOAD "$B/zcbench" run $ARGS --seconds "$S" --validate --csv "$T/kernel.csv" \
     >"$T/kernel.out" 2>&1; then
  cat "$T/kernel.out"; echo "demo: the kernel run failed"; exit 1
fi
# shellcheck disable=SC2086
if ! ZCSOCK_STATS=1 ZCSOCK_LOG_FILE="$T/stats.%p" "$B/zcsock" run --lib "$L" -- \
     "$B/zcbench" run $ARGS --seconds "$S" --validate --csv "$T/zcsock.csv" \
     >"$T/zcsock.out" 2>&1; then
  cat "$T/zcsock.out"; echo "demo: the zcsock run failed"; exit 1
fi
python3 - "$T" <<'EOF'
import csv, glob, os, sys
t = sys.argv[1]
def rows(name):
    with open(os.path.join(t, name)) as f:
        return {(r["test"], r["transport"], r["size"]): r for r in csv.DictReader(f)}
k, z = rows("kernel.csv"), rows("zcsock.csv")
def size(n):
    n = int(n)
    for u, s in ((1 << 20, "M"), (1 << 10, "K")):
        if n >= u and n % u == 0:
            return "%d%s" % (n // u, s)
    return str(n)
print()
print("%-9s %-5s %5s  %12s %12s  %7s" % ("test", "tport", "size", "kernel", "zcsock", "ratio"))
worst = None
for key in k:
    if key not in z:
        continue
    a, b = k[key], z[key]
    if key[0] == "stream":
        kv, zv = float(a["mbps"]), float(b["mbps"])
        r = zv / kv if kv else 0
        cells = ("%9.0f MB/s" % kv, "%9.0f MB/s" % zv, "%6.2fx" % r)
    else:
        kv, zv = float(a["median_us"]), float(b["median_us"])
        r = kv / zv if zv else 0         # higher is better: a shorter round trip
        cells = ("%9.1f us" % kv, "%9.1f us" % zv, "%6.2fx" % r)
    worst = r if worst is None else min(worst, r)
    print("%-9s %-5s %5s  %12s %12s  %7s" % ((key[0], key[1], size(key[2])) + cells))
print("(ratio: zcsock against the kernel; for round trips, kernel time / zcsock time)")
tot = {}
for f in glob.glob(os.path.join(t, "stats.*")):
    for line in open(f):
        if ": " in line and not line.startswith("#"):
            key, v = line.rstrip("\n").split(": ", 1)
            if v.isdigit():
                tot[key] = tot.get(key, 0) + int(v)
g = lambda key: tot.get(key, 0)
kern = g("path.copy.send_bytes")
local = g("path.local.send_bytes")
lent = g("local.xchg.bytes_lent")
paired = g("local.paired.accepted") + g("local.paired.connected")
print()
print("where zcsock's bytes went (both processes, from their exit reports):")
print("  kernel socket (copied):        %14d bytes sent" % kern)
print("  local path (shared-memory ring): %12d bytes sent, %d connection ends paired" %
      (local, paired))
print("  of which page exchange (lent): %14d bytes%s" % (lent, "" if lent else
      "  (off here: `zcsock doctor` says why)"))
if not paired:
    print("  nothing paired: `zcsock doctor` and ZCSOCK_DEBUG=1 say why")
EOF
