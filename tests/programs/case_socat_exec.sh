#!/usr/bin/env bash
# socat as an inetd-style service: a forking listener that runs
# `sha256sum` per connection with the connection as its stdin and stdout
# (EXEC:sha256sum,nofork: fork, exec with the library inherited).  4
# concurrent socat clients each send 8 MiB, half-close, and must read back
# the sha256 of exactly what they sent.  Repeated (QUICK=1: fewer) so that a
# 1-in-10 stall shows.
set -u
. "$(dirname "$0")/lib.sh"
p_setup socat_exec "$1"
p_need socat openssl

SIZE=$((8 << 20)) CLIENTS=4 REPS=$(p_reps 6)

round() {
  local r=$1 port=$2 i cp=() rc=0 want got t0=$SECONDS
  for ((i = 1; i <= CLIENTS; i++)); do
    p_gen "r$r-c$i" "$SIZE" >"$P_TMP/in$i"
    p_cli timeout -k 2 90 socat -t 30 -T 30 - "TCP4:127.0.0.1:$port" <"$P_TMP/in$i" >"$P_TMP/out$i" 2>"$P_ART/client$r.$i.log" &
    cp+=($!); P_PIDS+=($!)
  done
  for ((i = 1; i <= CLIENTS; i++)); do
    p_wait "${cp[i-1]}" "$(p_left $((t0 + 25)))" || { p_say "round $r client $i exited $?"; rc=1; }
    want=$(p_sha256 "$P_TMP/in$i") got=$(cut -d' ' -f1 "$P_TMP/out$i")
    p_same "round $r client $i" "$want" "$got" || rc=1
  done
  return $rc
}

port=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/listener.log" p_srv socat "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork,backlog=16" EXEC:sha256sum,nofork
lpid=$P_LAST_PID
p_wait_listen "$port" 10 || p_die "listener never listened"
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" "$port" || break; done
p_stop "$lpid" 5
p_end
