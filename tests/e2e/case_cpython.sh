#!/usr/bin/env bash
# CPython's own tests (regrtest, -v and a JUnit XML), once without the
# library, once with it and AF_UNIX pairing on (ZCSOCK_LOCAL_UNIX=1), once
# with its defaults.  Added failures are the tests that fail with the
# library (FAIL, ERROR, unfinished) but did not without it.  Only when there are
# some, those tests run once more without the library: the ones that fail
# then too are flaky here, listed but not counted.  Zero added failures.
#
#   case_cpython.sh [socket]  test_socket, test_selectors, test_epoll and
#                             test_os, in one process (case "cpython";
#                             test_epoll and test_os probe descriptor
#                             numbers such as 10,000 they take to be unused,
#                             where the library's own used to sit).  The VSOCK tests are left
#                             out: this VM has /dev/vsock but nothing
#                             answers, so they hang without the library too.
#                             QUICK=1 also leaves out the timeout and
#                             signal-interruption tests (half the time, all
#                             waiting).
#   case_cpython.sh net       socket servers and protocols of the standard
#                             library (case "cpython_net"): test_socketserver
#                             (forking and threading servers), asyncio's
#                             sock_*/streams/sendfile/server/unix tests,
#                             http.client, urllib with a local server,
#                             xmlrpc, ftplib (with TLS), subprocess
#                             (and asyncio's), test_ssl (not with
#                             QUICK=1, nor xmlrpc's slow MultiPathServer
#                             tests).  -u network for test_socketserver;
#                             the tests that would reach the internet are
#                             left out.  Two regrtest workers (-j2): the run
#                             is mostly waiting (10 s CPU in 48 s).
set -u
. "$(dirname "$0")/lib.sh"
SUITE=${1:-socket}
case $SUITE in
  socket)
    CASE=cpython TITLE=test_socket+test_selectors+test_epoll+test_os
    TESTS=(test_socket test_selectors test_epoll test_os)
    ARGS=()
    IGNORE=(-i '*VSOCK*')
    [ "${QUICK:-0}" = 1 ] && IGNORE+=(-i '*Timeout*' -i '*nterrupt*' -i '*timeout*')
    ;;
  net)
    CASE=cpython_net TITLE="cpython net tests"
    TESTS=(test_socketserver test_asyncio.test_sock_lowlevel test_asyncio.test_streams
           test_asyncio.test_sendfile test_asyncio.test_server test_asyncio.test_unix_events
           test_httplib test_urllib2_localnet test_xmlrpc test_ftplib
           test_subprocess test_asyncio.test_subprocess)
    [ "${QUICK:-0}" = 1 ] || TESTS=(test_ssl "${TESTS[@]}")
    ARGS=(-j2 -u network)
    IGNORE=(-i '*networked*' -i '*NetworkedTests*')
    # Debian's 3.11.2 spends 3 s in each of these (a wait fixed upstream later)
    [ "${QUICK:-0}" = 1 ] && IGNORE+=(-i '*MultiPathServerTestCase*')
    ;;
  *) echo "usage: $0 [socket|net]"; exit 2 ;;
esac
e2e_setup "$CASE"
PY=$(e2e_find_python testsuite) || { echo "skip: no python3 with test.test_socket (libpython3.11-testsuite)"; exit 77; }
OUTCOMES=$E2E_DIR/cpython_outcomes.py
LIMIT=200          # seconds for one whole run (about 50 here); regrtest's --timeout 90 per test

# run_suite LABEL [regrtest args]: results in $E2E_ART/LABEL.{log,tsv}
run_suite() {
  local label=$1; shift
  local t0 pid rc
  mkdir -p "$E2E_TMP/tmp-$label"
  t0=$EPOCHREALTIME
  # the match file must come before the -i patterns: regrtest applies the
  # last pattern group first and lets unmatched tests run after an -i group
  "$PY" -m test -v --timeout 90 --tempdir "$E2E_TMP/tmp-$label" --junit-xml "$E2E_ART/$label.xml" \
    "${ARGS[@]}" "$@" "${IGNORE[@]}" "${TESTS[@]}" >"$E2E_ART/$label.log" 2>&1 & pid=$!
  E2E_PIDS+=("$pid")
  e2e_wait "$pid" "$LIMIT"; rc=$?
  RUN_PID=$pid
  RUN_COUNTS=$(e2e_plain "$PY" "$OUTCOMES" parse "$E2E_ART/$label.xml" "$E2E_ART/$label.log" "$E2E_ART/$label.tsv")
  e2e_say "$label: regrtest exit $rc in $(e2e_since "$t0")s: $RUN_COUNTS"
}

e2e_plain "$PY" -c 'import sys; print("python", sys.version.split()[0], sys.executable)'

# added MODE LABEL: the tests that fail in run LABEL (library, MODE) but not
# in the plain run, less the ones that fail again without the library when
# rerun (flaky here).  Sets N_ADDED and N_FLAKY.
added() {
  local mode=$1 label=$2 n flaky=0
  e2e_plain "$PY" "$OUTCOMES" diff "$E2E_ART/plain.tsv" "$E2E_ART/$label.tsv" \
    "$E2E_ART/$label-added.txt" >"$E2E_ART/$label-added.log"
  n=$(wc -l <"$E2E_ART/$label-added.txt")
  if [ "$n" -gt 50 ]; then
    e2e_say "$label: $n test(s) fail only with the library (first 30; too many to be flakiness, no rerun):"
    head -n 30 "$E2E_ART/$label-added.log"
  elif [ "$n" -gt 0 ]; then
    e2e_say "$label: $n test(s) fail only with the library (first 30):"
    head -n 30 "$E2E_ART/$label-added.log"
    # Once more without the library, only those tests: failing again there
    # means flaky on this machine, not the library's doing.
    e2e_mode plain
    run_suite "$label-plain-rerun" --matchfile "$E2E_ART/$label-added.txt"
    e2e_plain "$PY" "$OUTCOMES" failed "$E2E_ART/$label-plain-rerun.tsv" >"$E2E_ART/$label-flaky.txt"
    # a test the rerun did not run at all (not matched) counts as not flaky
    flaky=$(grep -cxFf "$E2E_ART/$label-added.txt" "$E2E_ART/$label-flaky.txt")
    if [ "$flaky" -gt 0 ]; then
      e2e_say "flaky without the library too (listed, not counted):"
      grep -xFf "$E2E_ART/$label-added.txt" "$E2E_ART/$label-flaky.txt" | sed 's/^/  /'
    fi
    grep -vxFf "$E2E_ART/$label-flaky.txt" "$E2E_ART/$label-added.txt" >"$E2E_ART/$label-added-real.txt"
    n=$(wc -l <"$E2E_ART/$label-added-real.txt")
    if [ "$n" -gt 0 ]; then
      e2e_mode "$mode"
      run_suite "$label-rerun" --matchfile "$E2E_ART/$label-added-real.txt"
      e2e_say "rerun with the library of the $n added failure(s): $RUN_COUNTS"
    fi
    e2e_mode plain
  fi
  N_ADDED=$n N_FLAKY=$flaky
}

# with MODE LABEL: the whole suite with the library (MODE zc: AF_UNIX
# pairing on; zcdef: the library's defaults); proves the library ran (with
# -j2 the tests run in worker processes) and that some bytes took the local
# path (the suites' connections to themselves pair).
with() {
  local mode=$1 label=$2 stats
  e2e_mode "$mode"
  run_suite "$label"
  stats=$E2E_STATS
  eval "COUNTS_$mode=\$RUN_COUNTS"
  e2e_mode plain
  E2E_STATS=$stats
  if [ "$SUITE" = socket ]; then e2e_check_active 1 "$RUN_PID"; else e2e_check_active 2; fi
  E2E_MODE=$mode e2e_expect_path some "$TITLE ($label)" \
    $(ls "$E2E_STATS" | sed -n 's/^stats\.\([0-9]*\)$/\1/p') ||
    e2e_die "no process of the suite took the local path ($label)"
  E2E_MODE=plain
}

e2e_mode plain
run_suite plain
PLAIN_COUNTS=$RUN_COUNTS
with zc with
with zcdef with-defaults

short() { echo "$1" | sed -E 's/^ran ([0-9]+), ok ([0-9]+), failed ([0-9]+), errors ([0-9]+), skipped ([0-9]+), unfinished ([0-9]+).*/ran \1: \2 ok, \3 failed, \4 errors, \5 skipped, \6 unfinished/'; }
added zc with; n_zc=$N_ADDED flaky=$N_FLAKY
added zcdef with-defaults; n_def=$N_ADDED flaky=$((flaky + N_FLAKY))
echo "$TITLE: without [$(short "$PLAIN_COUNTS")], with [$(short "$COUNTS_zc")], with defaults [$(short "$COUNTS_zcdef")], added failures: $((n_zc + n_def)) (flaky without the library: $flaky)"
[ "$n_zc" -eq 0 ] || e2e_die "$n_zc test(s) fail only with the library (AF_UNIX pairing on): $E2E_ART/with-added.log"
[ "$n_def" -eq 0 ] || e2e_die "$n_def test(s) fail only with the library's defaults: $E2E_ART/with-defaults-added.log"
exit 0
