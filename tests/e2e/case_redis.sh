#!/usr/bin/env bash
# redis-server + redis-cli + redis-benchmark (Debian's redis-server and
# redis-tools), without the library and twice with it in every process (AF_UNIX
# pairing on, then the defaults):
#   pipe       redis-cli --pipe over the unix socket: 20000 mixed commands
#              (SET, RPUSH, HSET, INCRBY, values 1 B..4 KiB), no errors
#   big        redis-cli -x SET of a 16 MiB value (QUICK=1: 4 MiB) over TCP,
#              GET back, sha256 compared
#   digest     DEBUG DIGEST of the data set: equal with and without the
#              library (same commands, same data)
#   benchmark  redis-benchmark over TCP (20 clients) and over the unix
#              socket (pipelining 16): exit 0, no errors
set -u
. "$(dirname "$0")/lib.sh"
e2e_setup redis
command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null ||
  { echo "skip: redis-server/redis-tools not installed"; exit 77; }
command -v openssl >/dev/null || { echo "skip: openssl not installed"; exit 77; }

BIG=$((16 << 20)) BENCH_N=50000
[ "$QUICK" = 1 ] && BIG=$((4 << 20)) BENCH_N=10000
e2e_gen redis "$BIG" >"$E2E_TMP/big.bin"
SHA_BIG=$(e2e_sha256 <"$E2E_TMP/big.bin")
e2e_plain "$E2E_PY" - "$E2E_TMP/cmds.resp" <<'EOF'
import random, sys
rng = random.Random(42)
def cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)
with open(sys.argv[1], "wb") as f:
    for i in range(20000):
        v = rng.randbytes(rng.randint(1, 4096))
        k = i % 4
        if k == 0:   f.write(cmd("SET", f"key:{i}", v))
        elif k == 1: f.write(cmd("RPUSH", f"list:{i % 100}", v))
        elif k == 2: f.write(cmd("HSET", f"hash:{i % 50}", f"f:{i}", v))
        else:        f.write(cmd("INCRBY", f"counter:{i % 10}", i))
EOF

# client NAME IN CMD..: run one client process, output in $E2E_ART; its pid
# is added to $CLIENT_PIDS.  Returns its exit status.
client() {
  local name=$1 in=$2 pid rc; shift 2
  "$@" <"$in" >"$E2E_ART/$E2E_MODE-$name.out" 2>&1 & pid=$!
  E2E_PIDS+=("$pid")
  e2e_wait "$pid" 120; rc=$?
  CLIENT_PIDS+=" $pid"
  [ $rc -eq 0 ] || e2e_say "$name: exit $rc: $(tail -n 3 "$E2E_ART/$E2E_MODE-$name.out")"
  return $rc
}

run_once() {
  local port sock=$E2E_TMP/redis-$E2E_MODE.sock dir=$E2E_TMP/data-$E2E_MODE spid fail=0 rc got t0 out
  port=$(e2e_free_port) || e2e_die "no free port"
  mkdir -p "$dir"
  e2e_bg "$E2E_ART/$E2E_MODE-server.log" redis-server --port "$port" --bind 127.0.0.1 \
    --unixsocket "$sock" --unixsocketperm 700 --save "" --appendonly no --dir "$dir" \
    --enable-debug-command local --daemonize no --logfile ""
  spid=$E2E_LAST_PID
  e2e_wait_listen "$port" 20 && e2e_wait_listen "$sock" 20 ||
    { cat "$E2E_ART/$E2E_MODE-server.log"; e2e_die "redis-server never listened"; }
  CLIENT_PIDS=
  t0=$EPOCHREALTIME
  client pipe "$E2E_TMP/cmds.resp" redis-cli -s "$sock" --pipe || fail=1
  out=$(tail -n 1 "$E2E_ART/$E2E_MODE-pipe.out")
  e2e_say "pipe: $out"
  [[ $out == *"errors: 0, replies: 20000"* ]] || { e2e_say "pipe: want errors: 0, replies: 20000"; fail=1; }

  client set-big "$E2E_TMP/big.bin" redis-cli -h 127.0.0.1 -p "$port" -x SET big || fail=1
  client get-big /dev/null redis-cli -h 127.0.0.1 -p "$port" --raw GET big || fail=1
  got=$(head -c "$BIG" "$E2E_ART/$E2E_MODE-get-big.out" | e2e_sha256)
  rm -f "$E2E_ART/$E2E_MODE-get-big.out"
  e2e_say "big: $BIG bytes SET and GET, sha256 ${got:0:12}.. $([ "$got" = "$SHA_BIG" ] && echo ok || echo MISMATCH)"
  [ "$got" = "$SHA_BIG" ] || fail=1

  client digest /dev/null redis-cli -h 127.0.0.1 -p "$port" DEBUG DIGEST || fail=1
  client dbsize /dev/null redis-cli -s "$sock" DBSIZE || fail=1
  RUN_DIGEST="$(cat "$E2E_ART/$E2E_MODE-digest.out") keys=$(cat "$E2E_ART/$E2E_MODE-dbsize.out")"
  e2e_say "data set: digest $RUN_DIGEST"

  client bench-tcp /dev/null redis-benchmark -h 127.0.0.1 -p "$port" -q -n "$BENCH_N" -c 20 -d 512 \
    -r 10000 -t ping,set,get,incr,lpush,rpop,mset || fail=1
  client bench-unix /dev/null redis-benchmark -s "$sock" -q -n "$BENCH_N" -c 10 -P 16 -d 100 \
    -r 10000 -t set,get,lpush,lpop || fail=1
  if grep -qiE 'error|ERR ' "$E2E_ART/$E2E_MODE-bench-tcp.out" "$E2E_ART/$E2E_MODE-bench-unix.out"; then
    e2e_say "redis-benchmark reported errors"; fail=1
  fi
  e2e_say "benchmark (tcp): $(tr '\r' '\n' <"$E2E_ART/$E2E_MODE-bench-tcp.out" | grep -E '^(SET|GET): [0-9.]+ requests' | tr '\n' ' ')"
  e2e_say "benchmark (unix, -P 16): $(tr '\r' '\n' <"$E2E_ART/$E2E_MODE-bench-unix.out" | grep -E '^(SET|GET): [0-9.]+ requests' | tr '\n' ' ')"

  e2e_stop "$spid" 10; rc=$?
  [ $rc -eq 0 ] || { e2e_say "redis-server exited $rc after TERM"; fail=1; }
  e2e_say "all in $(e2e_since "$t0")s"
  RUN_PIDS="$spid $CLIENT_PIDS"
  return $fail
}

# the data set must come out the same as without the library
run() {
  local rc
  run_once; rc=$?
  if [ "$E2E_MODE" = plain ]; then
    PLAIN_DIGEST=$RUN_DIGEST
  elif [ "$PLAIN_DIGEST" != "$RUN_DIGEST" ]; then
    e2e_say "data set differs: without '$PLAIN_DIGEST', with '$RUN_DIGEST'"; rc=1; DIGESTS=DIFFERENT
  fi
  return $rc
}
check() {
  e2e_check_active 8 $RUN_PIDS
  e2e_expect_path some "redis ($1)" $RUN_PIDS || e2e_die "the connections did not take the local path"
}
DIGESTS=equal
e2e_compare run check

word() { [ "$1" -eq 0 ] && echo "4/4 ok" || echo "FAILED"; }
e2e_summary redis word "digest $DIGESTS"
exit 0
