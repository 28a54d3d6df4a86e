#!/usr/bin/env bash
# mosquitto broker on a free port (private config, anonymous, running as
# root), one mosquitto_sub waiting for 100 messages, one mosquitto_pub
# publishing 100 lines (QoS 1, each 1-4 KiB) from stdin; the lines the
# subscriber prints must be exactly the lines published.  Repeated.
set -u
. "$(dirname "$0")/lib.sh"
p_setup mosquitto "$1"
p_need mosquitto_sub mosquitto_pub openssl
MOSQ=$(command -v mosquitto || echo /usr/sbin/mosquitto)
[ -x "$MOSQ" ] || { echo "skip: mosquitto not installed"; exit 77; }
REPS=$(p_reps 4) N=100

port=$(p_free_port) || p_die "no free port"
cat >"$P_TMP/mosq.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous true
user root
persistence false
log_dest file $P_ART/events.log
log_type all
CONF
p_bg "$P_ART/broker.log" p_srv "$MOSQ" -c "$P_TMP/mosq.conf"
bpid=$P_LAST_PID
p_wait_listen "$port" 10 || p_die "broker never listened: $(tail -3 "$P_ART/broker.log")"

round() {
  local r=$1 spid i rc=0
  # 100 lines of hex, 1-4 KiB each
  p_gen "mq$r" $((N * 1536)) | od -An -v -tx1 | tr -d ' \n' | fold -w 3000 | head -n $N >"$P_TMP/msgs"
  [ "$(wc -l <"$P_TMP/msgs")" -eq $N ] || { p_say "generator gave too few lines"; return 1; }
  p_cli timeout -k 2 90 mosquitto_sub -h 127.0.0.1 -p "$port" -q 1 -t "zc/t$r" -C $N -i "sub$r" >"$P_TMP/got" 2>"$P_ART/sub$r.log" &
  spid=$!; P_PIDS+=($spid)
  p_wait_file "$P_ART/events.log" "SUBACK to sub$r" 15 || { p_say "subscriber never subscribed"; p_snapshot; p_stop "$spid" 2; return 1; }
  p_t 30 p_cli mosquitto_pub -h 127.0.0.1 -p "$port" -q 1 -t "zc/t$r" -l -i "pub$r" <"$P_TMP/msgs" 2>"$P_ART/pub$r.log" || { p_say "mosquitto_pub exited $?"; rc=1; }
  p_wait "$spid" 25 || { p_say "mosquitto_sub exited $? after $(wc -l <"$P_TMP/got") lines"; rc=1; }
  p_same "round $r: $N messages" "$(p_sha256 "$P_TMP/msgs")" "$(p_sha256 "$P_TMP/got")" || rc=1
  return $rc
}
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
p_stop "$bpid" 5
p_end
