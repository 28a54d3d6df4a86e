#!/usr/bin/env bash
# Node.js http server (tests/programs/node_server.js), curl as the client:
# a 32 MiB file streamed out (fs.createReadStream().pipe(res)), a 32 MiB
# upload hashed by the server, a 16 MiB echo (req.pipe(res)).  Repeated.
# CLUSTER=N (case node_cluster): the primary accepts and hands each
# connection to one of N workers.
set -u
. "$(dirname "$0")/lib.sh"
p_setup "${NODE_CASE:-node_http}" "$1"
p_need node curl openssl

REPS=$(p_reps ${NODE_REPS:-3}) SIZE=$((32 << 20)) ECHO=$((16 << 20))
p_gen file "$SIZE" >"$P_TMP/file"
FILE_SHA=$(p_sha256 "$P_TMP/file")
port=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/server.log" p_srv node "$P_DIR/node_server.js" "$port" "$P_TMP/file"
spid=$P_LAST_PID
p_wait_file "$P_ART/server.log" '^listening' 20 || p_die "node never listened: $(head -c 300 "$P_ART/server.log")"

c() { p_t 25 p_cli curl -sS -f --max-time 60 "$@"; }
get_file() { p_same "GET /file" "$FILE_SHA" "$(c "http://127.0.0.1:$port/file" | p_sha256)"; }
upload() { p_same "POST /upload" "$FILE_SHA" "$(c -H 'Expect:' --data-binary "@$P_TMP/file" "http://127.0.0.1:$port/upload")"; }
echo_() {
  p_gen "echo$1" "$ECHO" >"$P_TMP/e"
  p_same "POST /echo" "$(p_sha256 "$P_TMP/e")" "$(c -H 'Expect:' --data-binary "@$P_TMP/e" "http://127.0.0.1:$port/echo" | p_sha256)"
}
# concurrent: 4 echoes at once
par() {
  local i pids=() rc=0
  for i in 1 2 3 4; do p_gen "par$1.$i" $((4 << 20)) >"$P_TMP/p$i"
    c -H 'Expect:' --data-binary "@$P_TMP/p$i" "http://127.0.0.1:$port/echo" >"$P_TMP/q$i" & pids+=($!); done
  for i in 1 2 3 4; do wait "${pids[i-1]}" || rc=1
    p_same "parallel echo $i" "$(p_sha256 "$P_TMP/p$i")" "$(p_sha256 "$P_TMP/q$i")" || rc=1; done
  return $rc
}
for ((r = 1; r <= REPS; r++)); do
  p_step "get$r" get_file || break
  p_step "upload$r" upload || break
  p_step "echo$r" echo_ "$r" || break
  p_step "parallel$r" par "$r" || break
done
p_stop "$spid" 5
p_end
