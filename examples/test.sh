#!/usr/bin/env bash
# Test tier "examples": zcbench --validate over TCP, TCP/IPv6 and AF_UNIX,
# streaming and ping-pong at small to large sizes, page-aligned and not,
# reused and fresh buffers, each once plainly and once with libzcsock
# preloaded (skipped with 77 when $ZC_LIB is missing; preloaded runs must
# report the library active at both ends), the server/client modes, a
# deliberate corruption that validation must catch, and exit status 2 for
# bad arguments.
# Environment: ZC_BUILD, ZC_LIB (from the Makefile's TEST_ENV).
ZC_BUILD=${ZC_BUILD:-build}
ZC_LIB=${ZC_LIB:-$PWD/$ZC_BUILD/libzcsock.so}
ZCBENCH=$ZC_BUILD/zcbench
SIZES=1,4K,64K,1M,8M
PP_SIZES=1,4K,64K,1M
SECS=0.1
# IPv6 loopback may be missing in containers: then tcp6 cases are left out.
if grep -qs '^0\{31\}1 ' /proc/net/if_inet6; then ALL=tcp,tcp6,unix; HAVE_V6=1
else ALL=tcp,unix; HAVE_V6=0; fi

# ---- cases (run as "$0 case NAME ARGS...", so that t_run can time them) ----

# variant plain|preload: set up the environment or skip.
c_variant() {
  if [ "$1" = preload ]; then
    [ -f "$ZC_LIB" ] || { echo "skip: $ZC_LIB not built"; exit 77; }
    export LD_PRELOAD=$ZC_LIB
  else
    unset LD_PRELOAD
  fi
}

# Every CSV row must say the library was (in)active at both ends.
c_csv_check() {
  local csv=$1 variant=$2 want=inactive rows bad
  [ "$variant" = preload ] && want=active
  rows=$(tail -n +2 "$csv" | wc -l)
  [ "$rows" -gt 0 ] || { echo "no result rows in $csv"; exit 1; }
  bad=$(tail -n +2 "$csv" | awk -F, -v w="$want" '$15 != w || $16 != w' | wc -l)
  [ "$bad" -eq 0 ] || { echo "$bad rows do not say libzcsock $want at both ends:"; cat "$csv"; exit 1; }
  echo "ok: $rows rows, libzcsock $want at both ends"
}

# run VARIANT ZCBENCH-ARGS...: one validated run in run mode.
case_run() {
  local variant=$1; shift
  local csv; csv=$(mktemp "${TMPDIR:-/tmp}/zcbench-test.XXXXXX")
  c_variant "$variant"
  "$ZCBENCH" run --validate --seconds "$SECS" --timeout 10 --csv "$csv" "$@" || { rm -f "$csv"; exit 1; }
  (c_csv_check "$csv" "$variant"); local rc=$?
  rm -f "$csv"
  exit $rc
}

# pair VARIANT TRANSPORT-ARGS...: separate server and client processes.
case_pair() {
  local variant=$1; shift
  local csv spid rc
  if [ "$1" = --ipv6 ] && [ "$HAVE_V6" = 0 ]; then echo "skip: no IPv6 loopback"; exit 77; fi
  csv=$(mktemp "${TMPDIR:-/tmp}/zcbench-test.XXXXXX")
  c_variant "$variant"
  "$ZCBENCH" server --timeout 10 "$@" &
  spid=$!
  "$ZCBENCH" client --validate --seconds "$SECS" --timeout 10 --sizes 1,64K,1M --pp-sizes 1,4K \
    --csv "$csv" "$@"
  rc=$?
  if [ $rc -ne 0 ]; then kill "$spid" 2>/dev/null; fi
  wait "$spid" || rc=1
  [ $rc -eq 0 ] && { (c_csv_check "$csv" "$variant") || rc=1; }
  rm -f "$csv"
  exit $rc
}

# corrupt VARIANT TEST: a flipped byte must fail the run with its offset.
case_corrupt() {
  local variant=$1 test=$2 out rc
  c_variant "$variant"
  out=$("$ZCBENCH" run --quiet --validate --seconds "$SECS" --transport unix --test "$test" \
        --sizes 64K --pp-sizes 4K --corrupt 70001 2>&1)
  rc=$?
  echo "$out"
  [ $rc -eq 1 ] || { echo "expected exit 1, got $rc"; exit 1; }
  echo "$out" | grep -q "VALIDATION FAILED.*offset 70001" || { echo "no mismatch report at offset 70001"; exit 1; }
  echo "ok: corruption detected at offset 70001"
}

# badargs: every bad command line exits 2 with one line on stderr.
case_badargs() {
  local a err rc fails=0
  for a in "" "bogus" "run --no-such-option" "run --sizes 0" "run --sizes 65M" \
           "run --sizes 4X" "run --seconds" "run --seconds -1" "run --transport sctp" \
           "server --transport tcp,unix" "client --transport unix" "run extra" \
           "run --port 65536" "run --iters 0" "run --test bogus"; do
    err=$("$ZCBENCH" $a 2>&1 >/dev/null); rc=$?
    if [ $rc -ne 2 ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ]; then
      echo "FAIL: 'zcbench $a' exited $rc with: $err"; fails=$((fails + 1))
    fi
  done
  "$ZCBENCH" --help | grep -q '^usage: zcbench' || { echo "FAIL: --help"; fails=$((fails + 1)); }
  [ $fails -eq 0 ] && echo "ok: bad arguments exit 2"
  [ $fails -eq 0 ]
}

if [ "${1:-}" = case ]; then
  shift; name=$1; shift
  "case_$name" "$@"
  exit $?
fi

# ---- tier ----
. "$(dirname "$0")/../tests/lib/harness.sh"
t_begin examples
self=$0
[ -x "$ZCBENCH" ] || { echo "missing $ZCBENCH"; exit 1; }
t_run badargs 30 "$self" case badargs
for v in plain preload; do
  t_run "$v/stream-aligned-reused" 60 "$self" case run "$v" --transport $ALL --test stream --sizes $SIZES
  t_run "$v/stream-unaligned-fresh" 60 "$self" case run "$v" --transport $ALL --test stream --sizes $SIZES --unaligned --fresh
  t_run "$v/stream-unaligned-reused" 60 "$self" case run "$v" --transport tcp,unix --test stream --sizes 4K,1M --unaligned
  t_run "$v/stream-aligned-fresh" 60 "$self" case run "$v" --transport tcp,unix --test stream --sizes 4K,1M --fresh
  t_run "$v/pingpong-aligned-reused" 60 "$self" case run "$v" --transport $ALL --test pingpong --pp-sizes $PP_SIZES
  t_run "$v/pingpong-unaligned-fresh" 60 "$self" case run "$v" --transport $ALL --test pingpong --pp-sizes $PP_SIZES --unaligned --fresh
  t_run "$v/pair-tcp6" 60 "$self" case pair "$v" --ipv6 --port $((20000 + RANDOM % 20000))
  t_run "$v/pair-unix" 60 "$self" case pair "$v" --unix "${TMPDIR:-/tmp}/zcbench-pair-$$.sock"
  t_run "$v/corrupt-stream" 60 "$self" case corrupt "$v" stream
  t_run "$v/corrupt-pingpong" 60 "$self" case corrupt "$v" pingpong
done
t_end
