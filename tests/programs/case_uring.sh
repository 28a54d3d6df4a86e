#!/usr/bin/env bash
# A socket read through io_uring (uring_recv.c, liburing IORING_OP_RECV)
# while socat sends 16 MiB into it; repeated.  Even rounds read the first
# 64 KiB with recv() before making the ring (a connection that pairs at its
# first data call would then be read through the ring: liburing's inline
# system calls pass no hook, so a process that loaded it never pairs).
# Rounds 3 and 4 (of every 6) run the program with liburing linked
# statically (no DT_NEEDED entry: found by its inline io_uring_setup), and
# rounds 5 and 6 the program whose code and liburing sit in a shared
# library it needs (the inline call is in that library).
set -u
. "$(dirname "$0")/lib.sh"
p_setup uring "$1"
p_need socat openssl
BIN=${ZC_BUILD:-build}/tests/programs/uring_recv
[ -x "$BIN" ] || { echo "skip: $BIN not built (make test-programs builds it)"; exit 77; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/uring_recv
for v in _static _so; do
  [ -x "$BIN$v" ] || { echo "skip: $BIN$v not built (make test-programs builds it)"; exit 77; }
done
VARIANTS=("" _static _so)
REPS=$(p_reps 6)
round() {
  local r=$1 port spid rc=0 src
  port=$(p_free_port) || return 1
  p_gen "ur$r" $((16 << 20)) >"$P_TMP/in"
  rm -f "$P_TMP/srv.err"
  p_srv timeout -k 2 30 "$BIN${VARIANTS[((r - 1) % 6) / 2]}" "$port" $((r % 2 ? 0 : 65536)) >"$P_TMP/got" 2>"$P_TMP/srv.err" & spid=$!; P_PIDS+=($spid)
  p_wait_file "$P_TMP/srv.err" '^listening' 10 || { p_say "server never listened"; return 1; }
  p_t 25 p_cli socat -u -b 65536 STDIN "TCP4:127.0.0.1:$port" <"$P_TMP/in" 2>>"$P_ART/client.log" || { p_say "client exited $?"; rc=1; }
  p_wait "$spid" 10; src=$?
  [ $src -eq 77 ] && { echo "skip: io_uring not available here"; exit 77; }
  [ $src -eq 0 ] || { p_say "server exited $src: $(cat "$P_TMP/srv.err")"; rc=1; }
  p_same "round $r" "$(p_sha256 "$P_TMP/in")" "$(p_sha256 "$P_TMP/got")" || rc=1
  return $rc
}
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
declined() {  # the server said why it never paired
  grep -qs "local.declined.io_uring: [1-9]" "$P_STATS"/stats.* ||
    { p_say "no decline counted as local.declined.io_uring"; return 1; }
}
[ "$P_MODE" = none ] || p_step declined declined
p_end
