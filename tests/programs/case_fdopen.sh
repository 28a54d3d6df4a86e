#!/usr/bin/env bash
# A server reading its socket through stdio (fdopen + fgets, answer through
# fdopen(dup(fd), "w")) while the client writes with send() in odd-sized
# pieces (fdopen_lines.c).  2 MiB of text lines, repeated.
set -u
. "$(dirname "$0")/lib.sh"
p_setup fdopen "$1"
p_need openssl
BIN=${ZC_BUILD:-build}/tests/programs/fdopen_lines
[ -x "$BIN" ] || { echo "skip: $BIN not built (make test-programs builds it)"; exit 77; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/fdopen_lines
REPS=$(p_reps 10)
round() {
  local r=$1 port spid rc=0
  port=$(p_free_port) || return 1
  p_gen "fd$r" $((1 << 20)) | od -An -v -tx1 >"$P_TMP/in"
  rm -f "$P_TMP/srv.err"
  p_srv timeout -k 2 30 "$BIN" server "$port" >"$P_TMP/got" 2>"$P_TMP/srv.err" & spid=$!; P_PIDS+=($spid)
  p_wait_file "$P_TMP/srv.err" '^listening' 10 || { p_say "server never listened"; return 1; }
  p_t 25 p_cli "$BIN" client "$port" <"$P_TMP/in" >"$P_TMP/ans" 2>>"$P_ART/client.log" || { p_say "client exited $?"; rc=1; }
  p_wait "$spid" 10 || { p_say "server exited $?: $(cat "$P_TMP/srv.err")"; rc=1; }
  p_same "round $r lines" "$(p_sha256 "$P_TMP/in")" "$(p_sha256 "$P_TMP/got")" || rc=1
  [ "$(cat "$P_TMP/ans")" = "lines $(wc -l <"$P_TMP/in")" ] || { p_say "answer '$(head -c 80 "$P_TMP/ans")', want lines $(wc -l <"$P_TMP/in")"; rc=1; }
  return $rc
}
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
p_end
