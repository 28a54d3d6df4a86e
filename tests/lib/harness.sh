# Test harness sourced by every tier script (bash).
#   t_begin TIER             start a tier; logs go to $ZC_BUILD/test-logs/TIER/
#   t_run NAME TIMEOUT CMD.. run one test: exit 0 pass, 77 skip, anything else
#                            (or the timeout) fail; output kept in the log
#   t_skip NAME REASON       count a skip found inside a test that ran (a
#                            cmocka skip() in a unit binary)
#   t_end                    print the tier's counts, record them for
#                            tests/summary.sh, return 1 when a test failed
# Environment: ZC_BUILD (build directory, default build), ZC_LIB (the
# library under test, default $ZC_BUILD/libzcsock.so: a tier run by hand
# tests the library, never nothing); ZC_TEST_ONLY (an extended regex: only
# the cases whose names match run, for runs by hand).
ZC_BUILD=${ZC_BUILD:-build}
ZC_LIB=${ZC_LIB:-$PWD/$ZC_BUILD/libzcsock.so}
_t_tier= _t_pass=0 _t_fail=0 _t_skip=0

t_begin() {
  _t_tier=$1 _t_pass=0 _t_fail=0 _t_skip=0
  _t_logdir=$ZC_BUILD/test-logs/$_t_tier
  rm -rf "$_t_logdir"; mkdir -p "$_t_logdir" "$ZC_BUILD/test-results"
  echo "== tier $_t_tier"
}

t_run() {
  local name=$1 tmo=$2; shift 2
  # ZC_TEST_ONLY=<extended regex>: only the cases whose names match run
  # (by hand: ZC_TEST_ONLY='^mailbox' tests/localpath/run.sh ...)
  if [ -n "${ZC_TEST_ONLY:-}" ] && ! printf '%s\n' "$name" | grep -Eq -- "$ZC_TEST_ONLY"; then
    return 0
  fi
  local log=$_t_logdir/${name//\//_}.log start end rc tdir
  # a temporary directory of the test's own (TMPDIR, open to every user as
  # /tmp is: some cases run a second user), removed after it
  tdir=$(mktemp -d "${TMPDIR:-/tmp}/zct.XXXXXX") && chmod 1777 "$tdir" || tdir=
  start=$(date +%s.%N)
  # timeout leads a process group of its own: whatever the case left
  # running in it (a server of a case that failed early) is stopped when
  # the case ends, so it cannot reach the cases after it
  ${tdir:+env TMPDIR="$tdir"} timeout --kill-after=10 "$tmo" "$@" >"$log" 2>&1 </dev/null &
  local tpid=$!
  wait "$tpid"
  rc=$?
  kill -KILL -- "-$tpid" 2>/dev/null
  end=$(date +%s.%N)
  [ -n "$tdir" ] && rm -rf "$tdir"
  local secs; secs=$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')
  case $rc in
    0)  _t_pass=$((_t_pass+1)); printf '  PASS %-52s %6ss\n' "$name" "$secs" ;;
    77) _t_skip=$((_t_skip+1)); printf '  SKIP %-52s %6ss  %s\n' "$name" "$secs" "$(tail -n 1 "$log")" ;;
    *)  _t_fail=$((_t_fail+1))
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && rc="timeout after ${tmo}s"
        printf '  FAIL %-52s %6ss  (%s) log: %s\n' "$name" "$secs" "$rc" "$log"
        tail -n 15 "$log" | sed 's/^/       | /' ;;
  esac
}

t_skip() {
  _t_skip=$((_t_skip+1))
  printf '  SKIP %-52s %6s   %s\n' "$1" "" "$2"
}

t_end() {
  echo "$_t_pass $_t_fail $_t_skip" > "$ZC_BUILD/test-results/$_t_tier"
  echo "== $_t_tier: $_t_pass passed, $_t_fail failed, $_t_skip skipped"
  [ "$_t_fail" -eq 0 ]
}
