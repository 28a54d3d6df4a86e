#!/usr/bin/env bash
# gRPC in Python (python3-grpcio, grpc_echo.py: generic handlers, raw bytes)
# over the transport GRPC_TRANSPORT names (tcp: 127.0.0.1, a free port;
# unix: an AF_UNIX socket under $P_TMP, ZCSOCK_LOCAL_UNIX=1 on both sides):
# per round two clients at once, each with its own channel (connect
# deadline 10 s), unary echoes of 1 KiB .. 4 MiB and 8 at once, a 32 MiB
# server stream in 1 MiB messages, a 16 MiB client stream hashed by the
# server, a bidirectional echo of 64 messages.  Repeated.  An earlier
# library stalled gRPC's first connect for its 20 s deadline (a lost
# wake-up: the connection was registered edge-triggered in epoll before it
# paired) and crashed clients in lp_lock_word.
set -u
. "$(dirname "$0")/lib.sh"
TRANSPORT=${GRPC_TRANSPORT:-tcp}
p_setup "grpc_$TRANSPORT" "$1"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || { echo "skip: python3 not installed"; exit 77; }
"$PY" -c 'import grpc' 2>/dev/null || { echo "skip: python3-grpcio not installed"; exit 77; }
REPS=$(p_reps 6)     # a round takes about a second: more first connects
case $TRANSPORT in
  tcp) port=$(p_free_port) || p_die "no free port"
       target=127.0.0.1:$port envx=() ;;
  unix) target=unix:$P_TMP/sock envx=(env ZCSOCK_LOCAL_UNIX=1) ;;
  *) p_die "GRPC_TRANSPORT must be tcp or unix" ;;
esac
p_bg "$P_ART/server.log" p_srv "${envx[@]}" "$PY" "$P_DIR/grpc_echo.py" server "$target"
spid=$P_LAST_PID
p_wait_file "$P_ART/server.log" '^listening' 20 || p_die "gRPC server never listened: $(tail -3 "$P_ART/server.log")"
NCALLS=8    # lines "<call> sent <sha> received <sha> <seconds>" per client
SLOW=${GRPC_SLOW:-5}    # a call (about a second at most) slower than this is named
round() {
  local r=$1 i pids=() rc=0 crc name a b secs n t0=$SECONDS
  for i in 1 2; do
    p_cli "${envx[@]}" timeout -k 2 60 "$PY" "$P_DIR/grpc_echo.py" client "$target" "$r.$i" >"$P_TMP/o$i" 2>"$P_TMP/e$i" & pids+=($!)
  done
  for i in 1 2; do
    p_wait "${pids[i-1]}" "$(p_left $((t0 + 65)))"; crc=$?
    sed "s/^/round $r client $i: /" "$P_TMP/e$i" >>"$P_ART/client.log"
    [ $crc -eq 0 ] || { p_say "round $r client $i exited $crc: $(tail -1 "$P_TMP/e$i")"; rc=1; }
    n=0
    while read -r name _ a _ b secs; do
      [ "$name" = done ] && continue
      p_same "round $r client $i $name" "$a" "$b" || rc=1
      awk -v s="$secs" -v l="$SLOW" 'BEGIN { exit !(s > l) }' && p_say "round $r client $i $name: slow, ${secs}s"
      n=$((n + 1))
    done <"$P_TMP/o$i"
    [ $n -eq $NCALLS ] && grep -qx done "$P_TMP/o$i" || { p_say "round $r client $i: $n of $NCALLS calls done"; rc=1; }
  done
  return $rc
}
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
p_stop "$spid" 5
p_end
