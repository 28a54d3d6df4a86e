#!/usr/bin/env bash
# asyncio echo: tests/e2e/asyncio_echo.py as a server process (TCP on
# 127.0.0.1 and a unix stream socket) and a client process running 50
# concurrent connections (QUICK=1: 20) with messages of 1 byte to 1 MiB,
# streaming with half-close, ping-pong, and abrupt closes.  Every echoed byte
# is checked; without the library, then with it in both processes (AF_UNIX
# pairing on, then the defaults).
set -u
. "$(dirname "$0")/lib.sh"
e2e_setup asyncio
ECHO=$E2E_DIR/asyncio_echo.py
CLIENTS=50
[ "$QUICK" = 1 ] && CLIENTS=20

run_once() {
  local out=$E2E_ART/$E2E_MODE-server.log sock=$E2E_TMP/echo-$E2E_MODE.sock
  local spid cpid port= i rc src t0
  e2e_bg "$out" "$E2E_PY" "$ECHO" server --unix "$sock"
  spid=$E2E_LAST_PID
  for ((i = 0; i < 200; i++)); do
    port=$(sed -n 's/^ready tcp=//p' "$out")
    [ -n "$port" ] && break
    e2e_alive "$spid" || break
    e2e_nap 0.1
  done
  [ -n "$port" ] || { cat "$out"; e2e_die "echo server did not start"; }
  t0=$EPOCHREALTIME
  "$E2E_PY" "$ECHO" client --port "$port" --unix "$sock" --clients "$CLIENTS" --seed 7 --timeout 60 \
    >"$E2E_ART/$E2E_MODE-client.log" 2>&1 & cpid=$!
  E2E_PIDS+=("$cpid")
  e2e_wait "$cpid" 90; rc=$?
  e2e_stop "$spid" 10; src=$?
  RUN_PIDS="$spid $cpid"
  RUN_LINE="$(tail -n 1 "$E2E_ART/$E2E_MODE-client.log")"
  e2e_say "client exit $rc in $(e2e_since "$t0")s: $RUN_LINE"
  e2e_say "server exit $src: $(tail -n 1 "$out")"
  grep '^FAIL\|Traceback\|Error' "$E2E_ART/$E2E_MODE-client.log" "$out" | head -20
  [ $rc -eq 0 ] && [ $src -eq 0 ]
}

# the TCP and the unix connections pair with AF_UNIX pairing on; with the
# defaults only the TCP ones (both processes use both kinds)
check() {
  e2e_check_active 2 $RUN_PIDS
  e2e_expect_path local "asyncio ($1)" $RUN_PIDS || e2e_die "the connections did not take the local path"
}
e2e_compare run_once check

word() { [ "$1" -eq 0 ] && echo "$CLIENTS/$CLIENTS clients ok" || echo "FAILED"; }
e2e_summary "asyncio echo" word
exit 0
