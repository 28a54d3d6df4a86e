#!/usr/bin/env bash
# openbsd-inetd with a private configuration (foreground, -d; -E keeps
# LD_PRELOAD for the services it execs) on four free ports: sha256sum,
# sed (s/a/b/g), wc -c and cat, each run per connection with the socket as
# its stdin and stdout.  A client (socat) sends 2 MiB, half-closes, and must
# read back what the filter run locally gives.  Every service, repeated.
set -u
. "$(dirname "$0")/lib.sh"
p_setup inetd "$1"
p_need socat openssl sha256sum sed wc cat
INETD=$(command -v inetd || echo /usr/sbin/inetd)
[ -x "$INETD" ] || { echo "skip: openbsd-inetd not installed"; exit 77; }
REPS=$(p_reps 4) SIZE=$((2 << 20))
declare -A PORT CMD
CMD[sha]="/usr/bin/sha256sum sha256sum"
CMD[sed]="/usr/bin/sed sed s/a/b/g"
CMD[wc]="/usr/bin/wc wc -c"
CMD[cat]="/bin/cat cat"
: >"$P_TMP/inetd.conf"
for s in sha sed wc cat; do
  PORT[$s]=$(p_free_port) || p_die "no free port"
  echo "127.0.0.1:${PORT[$s]} stream tcp nowait root ${CMD[$s]}" >>"$P_TMP/inetd.conf"
done
p_bg "$P_ART/inetd.log" p_srv "$INETD" -d -E "$P_TMP/inetd.conf"
ipid=$P_LAST_PID
for s in sha sed wc cat; do p_wait_listen "${PORT[$s]}" 10 || p_die "inetd never listened on ${PORT[$s]}: $(tail -3 "$P_ART/inetd.log")"; done
one() {  # one SERVICE ROUND
  local s=$1 r=$2 want
  # text with many a's for sed: hex of random bytes, 64 per line
  p_gen "$s$r" $((SIZE / 2)) | od -An -v -tx1 | tr -d ' ' >"$P_TMP/in"
  local c=(${CMD[$s]}); want=$("${c[@]:1}" <"$P_TMP/in" | p_sha256)
  p_t 25 p_cli socat -t 60 -T 60 - "TCP4:127.0.0.1:${PORT[$s]}" <"$P_TMP/in" >"$P_TMP/out" 2>>"$P_ART/client.log" ||
    { p_say "$s round $r: client exited $? after $(wc -c <"$P_TMP/out") bytes"; return 1; }
  p_same "$s round $r" "$want" "$(p_sha256 "$P_TMP/out")"
}
for ((r = 1; r <= REPS; r++)); do
  for s in sha sed wc cat; do p_step "$s$r" one "$s" "$r" || break 2; done
done
p_stop "$ipid" 5
p_end
