#!/usr/bin/env bash
# Tier "mh": malloc-hooks preload tests.  Every program runs without the
# library and with it (LD_PRELOAD=$MH_LIB); the storm, place and events
# programs run once more with a subscriber that allocates inside events
# (standalone libmhtest.so only); python3 and a foreign allocator too.
# Environment: MH_LIB (library to preload), MH_BIN (test binaries), QUICK.
. "$(dirname "$0")/../../tests/lib/harness.sh"
t_begin mh
B=${MH_BIN:-$ZC_BUILD/tests/mh}
L=${MH_LIB:-$ZC_LIB}
T=$(abspath() { cd "$(dirname "$1")" && echo "$PWD/$(basename "$1")"; }; abspath "$B/libmhtest.so")
iters=20000; [ -n "$QUICK" ] && iters=4000
# Placement is off by default in libzcsock (nothing consumes placed blocks
# yet); this tier tests it, so it runs with it on (cases that need it off
# say so).  libmhtest.so places by default.
export ZCSOCK_ALLOC_PLACEMENT=1

run_both() {   # NAME TIMEOUT CMD...
  local name=$1 tmo=$2; shift 2
  t_run "$name/plain" "$tmo" "$@"
  t_run "$name/preload" "$tmo" env LD_PRELOAD="$L" "$@"
}

t_run events/preload 60 env LD_PRELOAD="$L" "$B/t_events"   # (plain: nothing to count)
run_both place 60 "$B/t_place"
t_run place/placement-off 60 env LD_PRELOAD="$L" ZCSOCK_ALLOC_PLACEMENT=0 "$B/t_place"
t_run place/alloc-min-16k 60 env LD_PRELOAD="$L" ZCSOCK_ALLOC_MIN=16384 "$B/t_place"
run_both fork 60 "$B/t_fork"
run_both forkloop 120 "$B/t_forkloop" 100
# hugetlb arenas (shmem THP never, free hugetlb pages; as root the tier
# sets both and puts them back): a fork child writes its copy without
# SIGBUS even when the pool has no page left for it; t_place's realloc,
# alignment and madvise(DONTNEED) zeroing (done in place there: a punched
# hugetlb page loses its reservation) hold; and the blocks really were in a
# hugetlb arena (mh.status 0x40, a placed block)
. "$(dirname "$0")/../../tests/lib/thp.sh"
tlb_allow 8
tlb_case() {   # NAME PROGRAM ARGS...: the program passes and placed in hugetlb
  local out st
  out=$(env LD_PRELOAD="$1" ZCSOCK_STATS=2 "${@:2}" 2>&1); st=$?
  echo "$out"
  [ $st = 0 ] || return 1
  # standalone hooks (libmhtest.so) print no report: the run is the test
  grep -q '^mh.status: ' <<<"$out" || return 0
  grep -q '^mh.alloc.placed_allocs: [1-9]' <<<"$out" &&
  awk '/^mh.status: / { if (int($2 / 64) % 2) f = 1 } END { exit !f }' <<<"$out"
}
export -f tlb_case
for c in fork "forkloop 40" place; do
  set -- $c
  if [ "$TLB_OK" = 1 ]; then
    t_run "hugetlb/$1" 120 bash -c 'tlb_case "$@"' _ "$L" "$B/t_$1" "${@:2}"
  else
    t_run "hugetlb/$1" 5 bash -c 'echo "skip: $1"; exit 77' _ "$TLB_WHY"
  fi
done
hp_restore; trap - EXIT
run_both dlopen 60 "$B/t_dlopen" "$B/libmhdl.so"
t_run dlopen/preloaded-ctor 60 env LD_PRELOAD="$L $B/libmhdl.so" "$B/t_dlopen" "$B/libmhdl.so"
run_both storm 300 "$B/t_storm" "$iters"

# the hooks active on their own (standalone libmhtest.so), whatever $MH_LIB is
t_run standalone/events 60 env LD_PRELOAD="$T" "$B/t_events"
t_run standalone/place 60 env LD_PRELOAD="$T" "$B/t_place"
t_run standalone/fork 60 env LD_PRELOAD="$T" "$B/t_fork"
t_run standalone/forkloop 120 env LD_PRELOAD="$T" "$B/t_forkloop" 100

# re-entrancy: a subscriber that allocates inside every event
for t in events place storm; do
  args=(); [ $t = storm ] && args=("$iters")
  t_run "reentrant/$t" 300 env LD_PRELOAD="$T" MH_TEST_ALLOC_IN_CB=1 "$B/t_$t" "${args[@]}"
done

# self-test: a munmap in front of ours hides the probe event
t_run selftest/munmap-hidden 60 env LD_PRELOAD="$B/libmhnomunmap.so $L" "$B/t_selftest"
t_run selftest/standalone-munmap-hidden 60 env LD_PRELOAD="$B/libmhnomunmap.so $T" "$B/t_selftest"

# foreign allocator: jemalloc after us (RTLD_NEXT) and before us (default)
JE=$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -n 1)
if [ -n "$JE" ]; then
  t_run foreign/jemalloc-after 60 env LD_PRELOAD="$L $JE" "$B/t_foreign"
  t_run foreign/jemalloc-before 60 env LD_PRELOAD="$JE $L" "$B/t_foreign"
  t_run foreign/standalone-jemalloc-after 60 env LD_PRELOAD="$T $JE" "$B/t_foreign"
  t_run foreign/standalone-jemalloc-before 60 env LD_PRELOAD="$JE $T" "$B/t_foreign"
  t_run foreign/jemalloc-storm 300 env LD_PRELOAD="$L $JE" "$B/t_storm" 2000
else
  t_run foreign/jemalloc 5 bash -c 'echo "skip: libjemalloc2 not installed"; exit 77'
fi

# python3: a fixed allocation-heavy script gives the same output either way
PY='
import hashlib, json, collections
h = hashlib.sha256()
blobs = [bytearray((i * 7919) % 3000000 + 1) for i in range(300)]
for i, b in enumerate(blobs):
    b[0] = i % 256; b[-1] = (i * 3) % 256
    blobs[i] = b + bytes(i * 1000)
for b in blobs: h.update(b)
d = collections.Counter(str(i % 977) * (i % 50) for i in range(200000))
s = json.dumps(sorted(d.items())[:5000])
l = [list(range(i % 5000)) for i in range(3000)]
print(h.hexdigest(), len(s), hashlib.md5(s.encode()).hexdigest(), sum(map(len, l)))
'
t_run python3/same-output 120 bash -c '
  a=$(python3 -c "$1") || exit 1
  b=$(LD_PRELOAD="$2" python3 -c "$1") || exit 1
  echo "plain:   $a"; echo "preload: $b"; [ "$a" = "$b" ]' _ "$PY" "$L"
t_run python3/subprocess 120 env LD_PRELOAD="$L" python3 -c '
import subprocess, os
buf = bytearray(5 << 20); buf[-1] = 7
out = subprocess.run(["python3", "-c", "print(sum(range(10**5)))"], capture_output=True).stdout
pid = os.fork()
if pid == 0:
    os._exit(0 if buf[-1] == 7 else 1)
_, st = os.waitpid(pid, 0)
assert out.strip() == b"4999950000" and st == 0, (out, st)
print("ok")'
t_end
