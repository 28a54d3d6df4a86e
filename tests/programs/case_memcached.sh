#!/usr/bin/env bash
# memcached on a free port (-u root, 256 MiB): 3 clients at once
# (memcached_client.py) each set 200 values of 1 B .. 900 KiB and get them
# back singly and in multi-gets; repeated.
set -u
. "$(dirname "$0")/lib.sh"
p_setup memcached "$1"
p_need memcached python3
REPS=$(p_reps 3) PY=$(command -v python3)
port=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/server.log" p_srv memcached -l 127.0.0.1 -p "$port" -U 0 -u root -m 256 -I 2m -t 2
mpid=$P_LAST_PID
p_wait_listen "$port" 10 || p_die "memcached never listened: $(tail -3 "$P_ART/server.log")"
round() {
  local r=$1 i pids=() rc=0 a b t0=$SECONDS
  for i in 1 2 3; do
    p_cli timeout -k 2 90 "$PY" "$P_DIR/memcached_client.py" "$port" "$r.$i" 200 >"$P_TMP/o$i" 2>>"$P_ART/client.log" & pids+=($!)
  done
  for i in 1 2 3; do
    p_wait "${pids[i-1]}" "$(p_left $((t0 + 35)))" || { p_say "round $r client $i exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; continue; }
    read -r _ a _ b <"$P_TMP/o$i"; p_same "round $r client $i" "$a" "$b" || rc=1
  done
  return $rc
}
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
p_stop "$mpid" 5
p_end
