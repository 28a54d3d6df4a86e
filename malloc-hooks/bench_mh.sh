#!/usr/bin/env bash
# make bench-mh: allocator overhead of the hooks, as ratios preload/plain.
#   1. malloc/free pairs below the placement threshold (target <= 1.03)
#   2. python3 running a fixed allocation-heavy script, with the defaults
#      (page exchange on: blocks of 2 MiB and more placed where shared
#      memory has 2 MiB pages, which as root this run allows), with
#      exchange off (ZCSOCK_EXCHANGE=0: no placement) and with
#      ZCSOCK_ALLOC_PLACEMENT=1 (every block of 128 KiB and more placed)
#   3. malloc + touch + free by size: glibc against the arena (everything
#      placed: ZCSOCK_ALLOC_PLACEMENT=1 ZCSOCK_ALLOC_MIN=4096), the data
#      behind ZCSOCK_ALLOC_MIN
# Runs alternate plain/preload; each figure is the median of R runs (the
# python3 rows: 2R+1 rounds, wall and CPU time, and the median of the
# rounds' own ratios).
# usage: bench_mh.sh BENCH_BIN   env: MH_LIB (preloaded library), MH_TESTLIB
# (used instead when MH_LIB does not run the hooks yet), QUICK=1.
set -u
bin=$1
lib=${MH_LIB:?}
R=7; PAIRS=3000000; PYN=3
[ -n "${QUICK:-}" ] && { R=3; PAIRS=1000000; PYN=1; }
# the defaults place huge blocks only on 2 MiB shared pages: as root, allow
# them (advise) for the run, put back at exit
. "$(dirname "$0")/../tests/lib/thp.sh"
thp_allow

active=$(LD_PRELOAD=$lib python3 -c '
import ctypes
try:
    f = ctypes.CDLL(None).zcsock_stat_get
    v = ctypes.c_uint64()
    print(1 if f(b"mh.status", ctypes.byref(v)) == 0 and v.value & 1 else 0)
except Exception:
    print(0)')
if [ "$active" != 1 ] && [ -n "${MH_TESTLIB:-}" ]; then
  echo "bench-mh: $lib does not run the hooks yet; using $MH_TESTLIB"
  lib=$MH_TESTLIB
fi

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# run_pair NAME CMD...: R alternating runs each way, prints medians and ratio
run_pair() {
  local name=$1; shift
  local p=() q=()
  for _ in $(seq "$R"); do
    p+=("$("$@")"); q+=("$(env LD_PRELOAD="$lib" ${MH_ENV:-} "$@")")
  done
  local a b
  a=$(printf '%s\n' "${p[@]}" | median); b=$(printf '%s\n' "${q[@]}" | median)
  awk -v n="$name" -v a="$a" -v b="$b" 'BEGIN {printf "  %-34s %12.1f %12.1f %8.3f\n", n, a, b, b / a}'
}

# One run of the script: "WALL_US CPU_US" (CPU: user + system of the python
# process, from its own getrusage, so the shell around it does not count).
pytime() {
  local t0 t1 cpu
  t0=$(date +%s%N)
  cpu=$(python3 -c '
import json, collections, resource
for r in range('"$PYN"'):
    blobs = [bytearray((i * 7919) % 3000000 + 1) for i in range(300)]
    d = collections.Counter(str(i % 977) * (i % 50) for i in range(200000))
    s = json.dumps(sorted(d.items()))
    l = [list(range(i % 5000)) for i in range(3000)]
    t = {i: str(i) * 3 for i in range(300000)}
u = resource.getrusage(resource.RUSAGE_SELF)
print(int((u.ru_utime + u.ru_stime) * 1e6))
')
  t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000 )) $cpu"
}
export -f pytime; export PYN

# run_py NAME: the script plain and preloaded (MH_ENV), in RP rounds whose
# order alternates; medians of wall and CPU time, and the median of the
# rounds' own ratios (steadier than a ratio of medians on a busy machine:
# single runs here swing by +-20 %)
RP=$(( R * 2 + 1 ))
run_py() {
  local name=$1 i p q rw=() rc=() pw=() pc=() qw=() qc=()
  for ((i = 0; i < RP; i++)); do
    if (( i % 2 )); then q=$(env LD_PRELOAD="$lib" ${MH_ENV:-} bash -c pytime); p=$(bash -c pytime)
    else p=$(bash -c pytime); q=$(env LD_PRELOAD="$lib" ${MH_ENV:-} bash -c pytime); fi
    read -r a b <<< "$p"; read -r c d <<< "$q"
    pw+=("$a"); pc+=("$b"); qw+=("$c"); qc+=("$d")
    rw+=("$(awk -v x="$c" -v y="$a" 'BEGIN {print x / y}')")
    rc+=("$(awk -v x="$d" -v y="$b" 'BEGIN {print x / y}')")
  done
  awk -v n="$name, wall (us)" -v a="$(printf '%s\n' "${pw[@]}" | median)" \
      -v b="$(printf '%s\n' "${qw[@]}" | median)" -v r="$(printf '%s\n' "${rw[@]}" | median)" \
      'BEGIN {printf "  %-46s %12.1f %12.1f %8.3f\n", n, a, b, r}'
  awk -v n="$name, CPU (us)" -v a="$(printf '%s\n' "${pc[@]}" | median)" \
      -v b="$(printf '%s\n' "${qc[@]}" | median)" -v r="$(printf '%s\n' "${rc[@]}" | median)" \
      'BEGIN {printf "  %-46s %12.1f %12.1f %8.3f\n", n, a, b, r}'
}

echo "bench-mh: library $lib, median of $R alternating runs, shmem THP $(sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP_FILE" 2>/dev/null)"
printf '  %-34s %12s %12s %8s\n' case plain preload ratio
run_pair "malloc/free pairs 16B..64KiB (ns)" "$bin" pairs "$PAIRS"
run_pair "malloc/free pairs 16B..1KiB (ns)" "$bin" small "$((PAIRS * 4))"
MH_ENV="ZCSOCK_ALLOC_PLACEMENT=1" run_pair "realloc 1KiB..8MiB, placed (ns/call)" "$bin" realloc 200
# the defaults: page exchange places only blocks of 2 MiB and more (on 2 MiB
# shared pages): a process that never pairs must not pay for it
echo "  (python3 rows: $RP rounds; ratio: the median of each round's preload/plain)"
run_py "python3 fixed script"
d=$(mktemp -d)
env LD_PRELOAD="$lib" ZCSOCK_STATS=2 ZCSOCK_LOG_FILE="$d/%p.log" bash -c pytime > /dev/null
echo "    (defaults: $(cat "$d"/*.log 2>/dev/null | awk -F': ' '$1 == "mh.alloc.placed_allocs" {n += $2} END {print n + 0}') blocks placed in one run; exchange places only blocks of 2 MiB and more whose last unit is at most an eighth unused)"
rm -rf "$d"
MH_ENV="ZCSOCK_EXCHANGE=0" run_py "python3 fixed script, exchange off"
MH_ENV="ZCSOCK_ALLOC_PLACEMENT=1" run_py "python3 fixed script, placed"
echo "placement threshold data (ns per block), glibc vs arena (ZCSOCK_ALLOC_MIN=4096)"
for kb in 16 32 64 128 256 512 1024 4096; do
  it=$(( 400000 / kb )); [ "$it" -lt 200 ] && it=200
  MH_ENV="ZCSOCK_ALLOC_PLACEMENT=1 ZCSOCK_ALLOC_MIN=4096" run_pair "malloc+touch+free ${kb} KiB" "$bin" touch $((kb * 1024)) "$it"
  it=$(( 4000 / kb )); [ "$it" -lt 4 ] && it=4
  MH_ENV="ZCSOCK_ALLOC_PLACEMENT=1 ZCSOCK_ALLOC_MIN=4096" run_pair "64 live, touch, free ${kb} KiB" "$bin" batch $((kb * 1024)) "$it"
done
# the defaults on hugetlb pages (shmem THP never, 1,024 free pages, as
# root): exchange places blocks in the hugetlb arena from start-up; a
# process that never pairs must not pay for that either
tlb_allow 1024
if [ "$TLB_OK" = 1 ]; then
  run_py "python3 fixed script, hugetlb"
  d=$(mktemp -d)
  env LD_PRELOAD="$lib" ZCSOCK_STATS=2 ZCSOCK_LOG_FILE="$d/%p.log" bash -c pytime > /dev/null
  echo "    (hugetlb: $(cat "$d"/*.log 2>/dev/null | awk -F': ' '$1 == "mh.alloc.placed_allocs" {n += $2} END {print n + 0}') blocks placed in one run)"
  rm -rf "$d"
else
  echo "  python3 fixed script, hugetlb: SKIPPED ($TLB_WHY)"
fi
