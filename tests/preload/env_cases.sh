# Environment handling, sourced by run.sh (inside the "preload" tier):
# invalid and unknown ZCSOCK_* values warn once and keep defaults, the
# statistics report and log file work, and nothing the library prints can land
# in one of the application's sockets.

PY=$(command -v /usr/bin/python3 python3 | head -n 1)
export ZC_LIB PY

t_env_bad_values() {
  local err; err=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_STATS=banana ZCSOCK_DEBUG=9 \
    ZCSOCK_VERBOSE=perhaps "$PY" -c 'import socket; a,b=socket.socketpair(); a.send(b"x"); print(b.recv(1))' 2>&1 >/dev/null)
  echo "$err"
  [ "$(grep -c 'ignoring ZCSOCK_STATS=banana: expected an integer 0..3; keeping the default' <<<"$err")" = 1 ] &&
  [ "$(grep -c 'ignoring ZCSOCK_DEBUG=9' <<<"$err")" = 1 ] &&
  [ "$(grep -c 'ignoring ZCSOCK_VERBOSE=perhaps' <<<"$err")" = 1 ] &&
  ! grep -q '# zcsock' <<<"$err"     # the default (no report) was kept
}

t_env_unknown_variable() {
  local err; err=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_STAT=1 /bin/true 2>&1)
  echo "$err"
  [ "$(grep -c 'unknown variable ZCSOCK_STAT=1 ignored' <<<"$err")" = 1 ]
}

t_env_stats_report() {
  local out; out=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_STATS=1 "$PY" -c '
import socket
a, b = socket.socketpair()
a.sendall(b"z" * 100000)
n = 0
while n < 100000: n += len(b.recv(65536))
' 2>&1)
  echo "$out"
  grep -q '^# zcsock .* stats pid=[0-9]* at=exit$' <<<"$out" &&
  grep -q '^sockets.created: 2$' <<<"$out" &&
  grep -q '^path.copy.send_bytes: 100000$' <<<"$out" &&
  grep -q '^path.copy.recv_bytes: 100000$' <<<"$out" &&
  grep -q '^calls.socketpair: 1$' <<<"$out" &&
  # a process without sockets reports only with ZCSOCK_STATS=2
  [ -z "$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_STATS=1 /bin/true 2>&1)" ] &&
  env LD_PRELOAD="$ZC_LIB" ZCSOCK_STATS=2 /bin/true 2>&1 | grep -q '^# zcsock'
}

t_env_log_file() {
  local d; d=$(mktemp -d)
  local err; err=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_STATS=2 ZCSOCK_VERBOSE=1 \
    ZCSOCK_LOG_FILE="$d/log.%p" "$PY" -c 'import os, sys; open(sys.argv[1], "w").write(str(os.getpid()))' "$d/pid" 2>&1)
  local pid; pid=$(cat "$d/pid")
  ls -l "$d"; cat "$d/log.$pid"
  [ -z "$err" ] && grep -q "^zcsock\[$pid\]: config ZCSOCK_LOG_FILE=$d/log.%p$" "$d/log.$pid" &&
    grep -q "^# zcsock .* stats pid=$pid at=exit" "$d/log.$pid"
  local rc=$?; rm -rf "$d"; return $rc
}

t_env_verbose_lists_table() {
  local err; err=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_VERBOSE=1 /bin/true 2>&1)
  echo "$err"
  for v in ZCSOCK_DEBUG ZCSOCK_VERBOSE ZCSOCK_STATS ZCSOCK_LOG_FILE; do
    grep -q "config $v=" <<<"$err" || return 1
  done
}

t_env_report_at_exec() {
  local out; out=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_STATS=1 "$PY" -c '
import os, socket
a, b = socket.socketpair(); a.send(b"12345"); b.recv(5)
os.execv("/bin/true", ["true"])' 2>&1)
  echo "$out"
  grep -q 'at=exec$' <<<"$out" && grep -q '^path.copy.send_bytes: 5$' <<<"$out"
}

# The app closed stderr and its socket took fd 2: the report must not be
# written into that socket (the peer would read it as data).
t_env_never_writes_app_socket() {
  env LD_PRELOAD="$ZC_LIB" ZCSOCK_STATS=2 ZCSOCK_DEBUG=2 "$PY" -c '
import os, socket, sys
os.close(2)
a, b = socket.socketpair()
assert a.fileno() == 2, a.fileno()
pid = os.fork()
if pid == 0:
    sys.exit(0)          # exit() runs the library destructor: report time
os.waitpid(pid, 0)
b.setblocking(False)
try:
    data = b.recv(65536)
except BlockingIOError:
    data = b""
print("bytes leaked into the socket:", len(data), data[:80])
sys.exit(1 if data else 0)'
}

# Each of the 8 exec variants t_proc runs reports at exec (proving the hook
# ran); vfork+exec, posix_spawn and system must not (their exec is internal
# to glibc, or the child shares our memory).
t_env_exec_family_reports() {
  local d; d=$(mktemp -d)
  env LD_PRELOAD="$ZC_LIB" T_EXPECT_PRELOAD=1 ZCSOCK_STATS=1 ZCSOCK_LOG_FILE="$d/log.%p" \
    "$ZC_BUILD/tests/preload/t_proc" || { rm -rf "$d"; return 1; }
  local n; n=$(cat "$d"/log.* | grep -c 'at=exec$')
  echo "exec reports: $n (expected 8)"
  rm -rf "$d"
  [ "$n" = 8 ]
}

export -f t_env_bad_values t_env_unknown_variable t_env_stats_report t_env_log_file \
  t_env_verbose_lists_table t_env_report_at_exec t_env_never_writes_app_socket \
  t_env_exec_family_reports

t_run env/bad-values-warn-once 60 bash -c t_env_bad_values
t_run env/unknown-variable 60 bash -c t_env_unknown_variable
t_run env/stats-report 60 bash -c t_env_stats_report
t_run env/log-file 60 bash -c t_env_log_file
t_run env/verbose-lists-table 60 bash -c t_env_verbose_lists_table
t_run env/report-at-exec 60 bash -c t_env_report_at_exec
t_run env/never-writes-app-socket 60 bash -c t_env_never_writes_app_socket
t_run env/exec-family-reports 60 bash -c t_env_exec_family_reports
