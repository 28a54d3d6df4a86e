#!/usr/bin/env bash
# Tier "launcher": the zcsock command (run, doctor, version, usage rules).
# Usage: launcher/test.sh            run the tier (make test-launcher)
#        launcher/test.sh CASE       run one case (what t_run calls)
# Environment: ZC_BUILD (build dir), ZC_LIB (real libzcsock.so).
# Most cases preload a dummy libzcsock.so built here, so they do not depend
# on the state of the shim; lib_active and stats_report use the real one.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT" || exit 1
ZC_BUILD=${ZC_BUILD:-build}
ZC_LIB=${ZC_LIB:-$ROOT/$ZC_BUILD/libzcsock.so}
Z=$ROOT/$ZC_BUILD/zcsock
T=$ROOT/$ZC_BUILD/launcher-test
D=$T/lib/libzcsock.so          # dummy library found as <dir>/../lib
OTHER=$T/other/libother.so     # some other preloaded library

fail() { echo "FAIL: $*"; exit 1; }
# expect_eq WHAT GOT WANT
expect_eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }

# Build the fixtures once: dummy libraries and copies of zcsock laid out as
# in a build tree, an install tree and a multiarch install tree.
setup() {
  rm -rf "$T"; mkdir -p "$T"/{lib,other,copy,bin,none/bin,ma/bin,ma/lib/x86_64-linux-gnu,tree}
  echo 'int zcl_test_dummy;' | cc -shared -fPIC -x c - -o "$D" || return 1
  echo 'int zcl_test_other;' | cc -shared -fPIC -x c - -o "$OTHER" || return 1
  cp "$D" "$T/copy/libzcsock.so"
  ln -s "$D" "$T/other/link.so"
  cp "$Z" "$T/bin/zcsock"
  cp "$Z" "$T/none/bin/zcsock"
  cp "$Z" "$T/ma/bin/zcsock"
  cp "$D" "$T/ma/lib/x86_64-linux-gnu/libzcsock.so"
  echo '#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void boom(void) { fputs("boom\n", stderr); exit(3); }' |
    cc -shared -fPIC -x c - -o "$T/other/boom.so" || return 1
  echo '#include <unistd.h>
__attribute__((constructor)) static void hang(void) { for (int i = 0; i < 600; i++) sleep(1); }' |
    cc -shared -fPIC -x c - -o "$T/other/hang.so" || return 1
  cp "$Z" "$T/tree/zcsock"
  cp "$D" "$T/tree/libzcsock.so"
  printf '#!/bin/sh\necho dash-ok\n' > "$T/bin/-dash"; chmod +x "$T/bin/-dash"
  printf '#!/bin/sh\necho never\n' > "$T/bin/noexec"; chmod -x "$T/bin/noexec"
}

# --- usage rules ----------------------------------------------------------
case_help() {
  local args
  for args in "--help" "-h" "help" "run --help" "run -h" "doctor --help" \
              "doctor -h" "version --help" "version -h" "help run" \
              "help doctor" "help version"; do
    out=$("$Z" $args 2>"$T/err") || fail "zcsock $args: exit $?"
    grep -q '^usage: zcsock' <<<"$out" || fail "zcsock $args: no usage on stdout"
    [ -s "$T/err" ] && fail "zcsock $args: wrote to stderr"
  done
  return 0
}

# bad_args "ARGS..." : exit 2, nothing on stdout, exactly one stderr line
bad_args() {
  local out rc lines
  out=$("$Z" "$@" 2>"$T/err" </dev/null); rc=$?
  expect_eq "zcsock $* exit" "$rc" 2
  expect_eq "zcsock $* stdout" "$out" ""
  lines=$(wc -l <"$T/err")
  expect_eq "zcsock $* stderr lines" "$lines" 1
  grep -qx "zcsock: .* (try 'zcsock --help')" "$T/err" ||
    fail "zcsock $*: bad message: $(cat "$T/err")"
}

case_usage_errors() {
  bad_args
  bad_args frob
  bad_args --frob
  bad_args --help extra
  bad_args help nosuch
  bad_args run
  bad_args run --frob true
  bad_args run --lib
  bad_args run --log
  bad_args run --log=
  bad_args run --stats=x true
  bad_args run --stats=4 true
  bad_args run --debug=12 true
  bad_args run --debug --
  bad_args run -dash
  bad_args doctor --bogus
  bad_args doctor --lib
  bad_args version extra
  return 0
}

# --- run: LD_PRELOAD --------------------------------------------------------
preload_of() { "$@" sh -c 'printf %s "$LD_PRELOAD"'; }

case_preload_add() {
  expect_eq "empty" "$(env -u LD_PRELOAD "$Z" run --lib "$D" -- sh -c 'printf %s "$LD_PRELOAD"')" "$D"
  expect_eq "env -i" "$(env -i "$Z" run --lib "$D" -- /bin/sh -c 'printf %s "$LD_PRELOAD"')" "$D"
  expect_eq "no --" "$(env -i "$Z" run --lib "$D" sh -c 'printf %s "$LD_PRELOAD"')" "$D"
  expect_eq "relative --lib" "$(cd "$T" && env -i "$Z" run --lib lib/libzcsock.so sh -c 'printf %s "$LD_PRELOAD"')" "$D"
}

case_preload_keep() {
  expect_eq "keep" "$(LD_PRELOAD=$OTHER "$Z" run --lib "$D" -- sh -c 'printf %s "$LD_PRELOAD"')" "$D:$OTHER"
  expect_eq "env -i keep" "$(env -i LD_PRELOAD="$OTHER" "$Z" run --lib "$D" sh -c 'printf %s "$LD_PRELOAD"')" "$D:$OTHER"
  expect_eq "keep spaces" "$(env -i LD_PRELOAD=" $OTHER " "$Z" run --lib "$D" sh -c 'printf %s "$LD_PRELOAD"')" "$D: $OTHER "
}

case_preload_no_duplicate() {
  local got
  got=$(env -i LD_PRELOAD="$OTHER:$D" "$Z" run --lib "$D" sh -c 'printf %s "$LD_PRELOAD"')
  expect_eq "already there" "$got" "$OTHER:$D"
  got=$(env -i LD_PRELOAD="$T/other/link.so" "$Z" run --lib "$D" sh -c 'printf %s "$LD_PRELOAD"')
  expect_eq "same file by symlink" "$got" "$T/other/link.so"
  got=$(env -i LD_PRELOAD="$OTHER $T/copy/libzcsock.so" "$Z" run --lib "$D" sh -c 'printf %s "$LD_PRELOAD"')
  expect_eq "other copy replaced in place" "$got" "$OTHER:$D"
  got=$(env -i "$Z" run --lib "$D" "$Z" run --lib "$D" sh -c 'printf %s "$LD_PRELOAD"')
  expect_eq "nested run" "$got" "$D"
}

# --- run: variables, arguments, exit codes -----------------------------------
env_of() { env -i "$Z" run --lib "$D" "$@" /usr/bin/env | grep '^ZCSOCK_' | sort | tr '\n' ' '; }

case_run_env() {
  expect_eq "none" "$(env_of)" ""
  expect_eq "--stats" "$(env_of --stats)" "ZCSOCK_STATS=1 "
  expect_eq "--stats=2" "$(env_of --stats=2)" "ZCSOCK_STATS=2 "
  expect_eq "--debug" "$(env_of --debug 2>/dev/null)" "ZCSOCK_DEBUG=1 "
  expect_eq "--debug=2" "$(env_of --debug=2 2>/dev/null)" "ZCSOCK_DEBUG=2 "
  expect_eq "--verbose" "$(env_of --verbose)" "ZCSOCK_VERBOSE=1 "
  expect_eq "--log abs" "$(env_of --log /tmp/zc-%p.log)" "ZCSOCK_LOG_FILE=/tmp/zc-%p.log "
  expect_eq "--log=abs" "$(env_of --log=/tmp/x.log)" "ZCSOCK_LOG_FILE=/tmp/x.log "
  expect_eq "--log rel" "$(cd "$T" && env_of --log rel.log)" "ZCSOCK_LOG_FILE=$T/rel.log "
  expect_eq "all" "$(env_of --stats --debug --log /tmp/a -- 2>/dev/null)" \
    "ZCSOCK_DEBUG=1 ZCSOCK_LOG_FILE=/tmp/a ZCSOCK_STATS=1 "
  # --debug says what it preloads, on stderr
  env -i "$Z" run --debug --lib "$D" true 2>&1 | grep -qx "zcsock: LD_PRELOAD=$D" ||
    fail "--debug does not print LD_PRELOAD"
}

case_run_args() {
  local out
  out=$(env -i "$Z" run --lib "$D" -- sh -c 'echo "$0|$1|$2"' --help --stats) ||
    fail "exit $?"
  expect_eq "args after the command pass through" "$out" "--help|--stats|"
  out=$(env -i PATH="$T/bin:/usr/bin:/bin" "$Z" run --lib "$D" -- -dash) || fail "-dash exit $?"
  expect_eq "command starting with -" "$out" "dash-ok"
  env -i "$Z" run --lib "$D" sh -c 'exit 42'
  expect_eq "exit status passes through" "$?" 42
}

case_exec_errors() {
  local rc
  "$Z" run --lib "$D" zcsock-no-such-command-zz 2>"$T/err"; rc=$?
  expect_eq "missing: exit" "$rc" 127
  expect_eq "missing: message" "$(cat "$T/err")" \
    "zcsock: cannot run 'zcsock-no-such-command-zz': No such file or directory"
  "$Z" run --lib "$D" /nonexistent/cmd 2>/dev/null
  expect_eq "missing path: exit" "$?" 127
  # root may read anything, but nobody may execute a file without x bits
  "$Z" run --lib "$D" "$T/bin/noexec" 2>"$T/err"; rc=$?
  expect_eq "not executable: exit" "$rc" 126
  grep -qx "zcsock: cannot run '$T/bin/noexec': Permission denied" "$T/err" ||
    fail "not executable: message $(cat "$T/err")"
  "$Z" run --lib "$D" "$T" 2>/dev/null
  expect_eq "directory: exit" "$?" 126
}

# --- library lookup ----------------------------------------------------------
lib_line() { env -u ZCSOCK_LIBRARY "$@" version | sed -n 's/^library: //p'; }

case_lookup() {
  expect_eq "<dir>/libzcsock.so" "$(lib_line "$T/tree/zcsock")" "$T/tree/libzcsock.so"
  expect_eq "<dir>/../lib" "$(lib_line "$T/bin/zcsock")" "$D"
  if [ "$(cc -print-multiarch)" = x86_64-linux-gnu ]; then
    expect_eq "<dir>/../lib/<multiarch>" "$(lib_line "$T/ma/bin/zcsock")" \
      "$T/ma/lib/x86_64-linux-gnu/libzcsock.so"
  fi
  expect_eq "ZCSOCK_LIBRARY" "$(ZCSOCK_LIBRARY=$T/copy/libzcsock.so "$T/bin/zcsock" version | sed -n 's/^library: //p')" \
    "$T/copy/libzcsock.so"
  expect_eq "--lib beats ZCSOCK_LIBRARY" "$(ZCSOCK_LIBRARY=$T/copy/libzcsock.so "$T/bin/zcsock" version --lib "$D" | sed -n 's/^library: //p')" "$D"
  if [ -f "$ZC_BUILD/libzcsock.so" ]; then
    expect_eq "build tree" "$(lib_line "$Z")" "$(readlink -f "$ZC_BUILD")/libzcsock.so"
  fi
  return 0
}

case_lookup_missing() {
  local rc
  ZCSOCK_LIBRARY=$T/nope.so "$T/bin/zcsock" run true 2>"$T/err"; rc=$?
  expect_eq "missing ZCSOCK_LIBRARY: exit" "$rc" 1
  grep -q "$T/nope.so (ZCSOCK_LIBRARY)" "$T/err" || fail "no lookup list: $(cat "$T/err")"
  "$Z" run --lib "$T/nope.so" true 2>/dev/null
  expect_eq "missing --lib: exit" "$?" 1
  "$Z" run --lib /etc/passwd true 2>"$T/err"
  expect_eq "not ELF: exit" "$?" 1
  grep -q "not an ELF file" "$T/err" || fail "not ELF: $(cat "$T/err")"
  env -u ZCSOCK_LIBRARY "$T/none/bin/zcsock" run true 2>"$T/err"; rc=$?
  if [ $rc -eq 0 ]; then
    echo "note: an installed libzcsock.so was found; default lookup not tested"
    return 0
  fi
  expect_eq "nothing anywhere: exit" "$rc" 1
  grep -q "$T/none/bin/libzcsock.so" "$T/err" && grep -q "$T/none/lib/libzcsock.so" "$T/err" ||
    fail "lookup list incomplete: $(cat "$T/err")"
  env -u ZCSOCK_LIBRARY "$T/none/bin/zcsock" version | grep -q '^library: not found; looked in: ' ||
    fail "version without library"
}

# --- the real library --------------------------------------------------------
need_lib() { [ -f "$ZC_LIB" ] || { echo "skip: $ZC_LIB not built yet"; exit 77; }; }

case_lib_active() {
  need_lib
  local probe='import ctypes
try:
    print(ctypes.CDLL(None).zcsock_is_active())
except AttributeError:
    print("absent")'
  expect_eq "without zcsock run" "$(env -u LD_PRELOAD python3 -c "$probe")" absent
  if [ "$ZC_BUILD/libzcsock.so" -ef "$ZC_LIB" ]; then
    expect_eq "zcsock run (build tree lookup)" "$(env -u LD_PRELOAD -u ZCSOCK_LIBRARY "$Z" run python3 -c "$probe")" 1
  fi
  expect_eq "zcsock run --lib" "$(env -i "$Z" run --lib "$ZC_LIB" python3 -c "$probe")" 1
  expect_eq "kept preload" "$(env -i LD_PRELOAD="$OTHER" "$Z" run --lib "$ZC_LIB" python3 -c "$probe")" 1
}

case_stats_report() {
  need_lib
  rm -f "$T/stats.log"
  env -u LD_PRELOAD "$Z" run --stats --log "$T/stats.log" --lib "$ZC_LIB" -- python3 -c '
import socket
a, b = socket.socketpair()
a.sendall(b"x" * 1000)
assert len(b.recv(1000)) > 0' || fail "program failed"
  grep -q '^# zcsock .*stats' "$T/stats.log" || fail "no stats report in the --log file"
  grep -q '^sockets.created: ' "$T/stats.log" || fail "no sockets.created line"
}

# --- version and doctor ----------------------------------------------------
case_version() {
  local want out
  want=$(sed -n 's/^VERSION *:*= *//p' Makefile)
  out=$("$Z" version) || fail "exit $?"
  expect_eq "first line" "$(head -n1 <<<"$out")" "zcsock $want"
  grep -q '^library: ' <<<"$out" || fail "no library line"
  expect_eq "--version" "$("$Z" --version)" "$out"
}

DOCTOR_ITEMS=("kernel" "io_uring" "io_uring SEND_ZC" "io_uring buffers"
  "MSG_ZEROCOPY" "userfaultfd" "uffd write-protect" "THP anon" "THP shmem"
  "hugetlb pool" "VM balloon" "memlock" "ptrace scope" "memfd_create" "library")

check_doctor_output() {
  local item
  for item in "${DOCTOR_ITEMS[@]}"; do
    grep -Eq "^(ok|info|warn|no) +$item " "$1" || fail "doctor: no line for '$item'"
  done
  [ "$(grep -Evc '^(ok|info|warn|no) |^zcsock doctor: ' "$1")" = 0 ] ||
    fail "doctor: unexpected lines"
}

case_doctor() {
  "$Z" doctor >"$T/doctor.txt" || fail "exit $?"
  cat "$T/doctor.txt"
  check_doctor_output "$T/doctor.txt"
  "$Z" doctor --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
names = [i["name"] for i in d["items"]]
assert all(i["status"] in ("ok", "info", "warn", "no") for i in d["items"])
for want in sys.argv[1:]:
    assert want in names, want' "${DOCTOR_ITEMS[@]}" || fail "--json"
}

# doctor's library item runs the library in a test process
case_doctor_library() {
  local line
  if [ -f "$ZC_LIB" ]; then
    line=$("$Z" doctor --lib "$ZC_LIB" | grep '^[a-z]* *library ')
    grep -Eq '^ok +library .*active in a test process' <<<"$line" || fail "real library: $line"
  fi
  line=$("$Z" doctor --lib "$D" | grep '^[a-z]* *library ')
  grep -Eq '^no +library .*not a zcsock library' <<<"$line" || fail "dummy: $line"
  line=$("$Z" doctor --lib "$T/other/boom.so" | grep '^[a-z]* *library ')
  grep -Eq '^no +library .*does not start: boom' <<<"$line" || fail "failing constructor: $line"
  line=$("$Z" doctor --lib /etc/passwd | grep '^[a-z]* *library ')
  grep -Eq '^no +library .*not an ELF file' <<<"$line" || fail "not ELF: $line"
  line=$("$Z" doctor --lib "$T/other/hang.so" | grep '^[a-z]* *library ')
  grep -Eq '^no +library .*hung' <<<"$line" || fail "hanging constructor: $line"
  if command -v pgrep >/dev/null && pgrep -x -f 'zcsock __probe' >/dev/null; then
    fail "hung probe left running"
  fi
  return 0
}

case_doctor_unprivileged() {
  command -v setpriv >/dev/null && [ "$(id -u)" = 0 ] ||
    { echo "skip: needs root and setpriv"; exit 77; }
  # nobody, a small memlock limit, no capabilities
  (ulimit -l 64; setpriv --reuid=65534 --regid=65534 --clear-groups \
    --inh-caps=-all "$Z" doctor) >"$T/doctor-nobody.txt" || fail "exit $?"
  cat "$T/doctor-nobody.txt"
  check_doctor_output "$T/doctor-nobody.txt"
  grep -Eq '^warn +memlock .*64 KiB' "$T/doctor-nobody.txt" || fail "memlock not flagged"
}

case_doctor_no_files() {
  command -v unshare >/dev/null || { echo "skip: no unshare"; exit 77; }
  unshare -m true 2>/dev/null || { echo "skip: cannot unshare the mount namespace"; exit 77; }
  # hide /sys, /proc/sys and /proc/meminfo: every item must still print
  unshare -m sh -c 'mount -t tmpfs none /sys && mount -t tmpfs none /proc/sys &&
    mount --bind /dev/null /proc/meminfo && exec "$0" doctor' "$Z" >"$T/doctor-bare.txt" ||
    fail "exit $?"
  cat "$T/doctor-bare.txt"
  check_doctor_output "$T/doctor-bare.txt"
  grep -Eq '^no +THP shmem +not available' "$T/doctor-bare.txt" || fail "THP shmem not reported missing"
}

if [ $# -gt 0 ]; then
  "case_$1"
  exit $?
fi

. tests/lib/harness.sh
t_begin launcher
[ -x "$Z" ] || { echo "no $Z: run make first"; exit 1; }
setup || { echo "fixture setup failed"; exit 1; }
for c in help usage_errors preload_add preload_keep preload_no_duplicate \
         run_env run_args exec_errors lookup lookup_missing lib_active \
         stats_report version doctor doctor_library doctor_unprivileged doctor_no_files; do
  t_run "$c" 30 "$0" "$c"
done
t_end
