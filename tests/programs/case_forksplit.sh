#!/usr/bin/env bash
# A fork-per-connection echo daemon (forksplit.py, CPython) and a client
# that forks after connect: one process writes, the other reads the echo
# (the socket shared by two processes on each end).  2 MiB per connection,
# 3 clients at once, repeated so that a 1-in-10 stall shows.
set -u
. "$(dirname "$0")/lib.sh"
p_setup forksplit "$1"
p_need python3
REPS=$(p_reps 12) PY=$(command -v python3)
port=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/server.log" p_srv "$PY" "$P_DIR/forksplit.py" server "$port"
spid=$P_LAST_PID
p_wait_file "$P_ART/server.log" '^listening' 10 || p_die "server never listened: $(tail -3 "$P_ART/server.log")"
round() {
  local r=$1 i pids=() rc=0 a b t0=$SECONDS
  for i in 1 2 3; do
    p_cli timeout -k 2 90 "$PY" "$P_DIR/forksplit.py" client "$port" "$r.$i" $((2 << 20)) >"$P_TMP/o$i" 2>>"$P_ART/client.log" & pids+=($!)
  done
  for i in 1 2 3; do
    p_wait "${pids[i-1]}" "$(p_left $((t0 + 25)))" || { p_say "round $r client $i exited $?: $(cat "$P_TMP/o$i")"; rc=1; continue; }
    read -r _ a _ b _ <"$P_TMP/o$i"; p_same "round $r client $i" "$a" "$b" || rc=1
  done
  return $rc
}
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
p_stop "$spid" 5
p_end
