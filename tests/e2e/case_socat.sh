#!/usr/bin/env bash
# socat on both ends: 1 GiB (QUICK=1: 256 MiB) of deterministic pseudo-random
# bytes through TCP on 127.0.0.1 (socat's default 8 KiB blocks, then 1 MiB
# blocks), through an AF_UNIX stream socket and (a quarter of the size) over
# TCP on ::1, without the library, with it (AF_UNIX pairing on), and with
# its defaults (the AF_UNIX transfer then stays on the copy path).  The sha256 of what the sending socat reads from its stdin
# must equal the sha256 of what the receiving socat writes to its stdout.
# Then an echo service the way inetd would run one: a forking socat listener
# that execs cat with the connection as cat's stdin and stdout (fork, exec
# with the library inherited, a socket used through read/write by a program
# that does not know it is one); 4 concurrent socat clients send 64 MiB each
# (QUICK=1: 16 MiB) and must read back exactly what they sent.
# As root, also a quarter of the size between two network namespaces joined
# by a veth pair (a peer on another "host": the library must not treat it as
# local), both socats preloaded.
set -u
. "$(dirname "$0")/lib.sh"
e2e_setup socat
command -v socat >/dev/null || { echo "skip: socat not installed"; exit 77; }
command -v openssl >/dev/null || { echo "skip: openssl not installed"; exit 77; }

SIZE=$((1 << 30))
[ "$QUICK" = 1 ] && SIZE=$((256 << 20))
ECHO_SIZE=$((64 << 20)) ECHO_CLIENTS=4
[ "$QUICK" = 1 ] && ECHO_SIZE=$((16 << 20))
LIMIT=240                       # seconds for one transfer, generous
HAVE_IPV6=1
e2e_plain "$E2E_PY" -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null || HAVE_IPV6=0
[ "$HAVE_IPV6" = 1 ] || e2e_say "no ::1 here: the tcp6 transfer is left out"

# transfer NAME BLOCK LISTEN CONNECT WAITFOR [SIZE]: one transfer, prints one
# line, leaves the two hashes in $d/in.sha and $d/out.sha; returns nonzero on
# error.
transfer() {
  local name=$1 blk=$2 listen=$3 connect=$4 waitfor=$5 size=${6:-$SIZE} in_ns=${7:-}
  local path=${8:-local}
  local rx_ns=
  [[ $waitfor == netns:* ]] && rx_ns="ip netns exec ${waitfor#netns:}"
  local d=$E2E_TMP/$name-$E2E_MODE log=$E2E_ART/$name-$E2E_MODE
  local t0 rpid spid hpid ipid rc=0 r
  mkdir -p "$d"; mkfifo "$d/rx" "$d/tx"
  t0=$EPOCHREALTIME

  $rx_ns socat -b "$blk" -u "$listen" STDOUT >"$d/rx" 2>"$log.recv.log" & rpid=$!
  E2E_PIDS+=("$rpid")
  e2e_sha256 <"$d/rx" >"$d/out.sha" & hpid=$!
  # in a namespace the client's retry option does the waiting
  [ -n "$rx_ns" ] || e2e_wait_listen "$waitfor" 20 || { echo "$name: receiver never listened"; return 1; }

  e2e_gen "$name" "$size" | tee "$d/tx" |
    $in_ns socat -b "$blk" -u STDIN "$connect" 2>"$log.send.log" & spid=$!
  E2E_PIDS+=("$spid")
  e2e_sha256 <"$d/tx" >"$d/in.sha" & ipid=$!

  e2e_wait "$spid" "$LIMIT"; r=$?; [ $r -eq 0 ] || { echo "$name: sending socat exited $r"; rc=1; }
  e2e_wait "$rpid" 30; r=$?; [ $r -eq 0 ] || { echo "$name: receiving socat exited $r"; rc=1; }
  wait "$hpid" "$ipid"
  LAST_PIDS="$spid $rpid"
  local in out
  in=$(cat "$d/in.sha") out=$(cat "$d/out.sha")
  if [ -z "$in" ] || [ "$in" != "$out" ]; then
    echo "$name: sha256 mismatch: sent ${in:-none}, received ${out:-none}"; rc=1
  fi
  e2e_say "$name: $size bytes in $(e2e_since "$t0")s, sha256 sent ${in:0:16}.. received ${out:0:16}.. $([ $rc -eq 0 ] && echo ok || echo FAILED)"
  if [ "$E2E_MODE" != plain ]; then e2e_expect_path "$path" "$name" "$spid" "$rpid" || rc=1; fi
  return $rc
}

# fork_echo: the forking listener execs cat per connection; ECHO_CLIENTS
# concurrent clients, each checking its echo.
fork_echo() {
  local port lpid i t0 rc=0 r in out d=$E2E_TMP/echo-$E2E_MODE cpids=() hpids=()
  port=$(e2e_free_port) || e2e_die "no free port"
  mkdir -p "$d"
  t0=$EPOCHREALTIME
  e2e_bg "$E2E_ART/echo-$E2E_MODE.listen.log" socat \
    "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork,backlog=16" EXEC:cat,nofork
  lpid=$E2E_LAST_PID
  e2e_wait_listen "$port" 20 || { echo "echo: listener never listened"; return 1; }
  for ((i = 1; i <= ECHO_CLIENTS; i++)); do
    mkfifo "$d/tx$i" "$d/rx$i"
    e2e_sha256 <"$d/tx$i" >"$d/in$i.sha" & hpids+=($!)
    e2e_sha256 <"$d/rx$i" >"$d/out$i.sha" & hpids+=($!)
    e2e_gen "echo$i" "$ECHO_SIZE" | tee "$d/tx$i" |
      socat -b 262144 -t 60 - "TCP4:127.0.0.1:$port" >"$d/rx$i" 2>"$E2E_ART/echo-$E2E_MODE.client$i.log" &
    cpids+=($!)
    E2E_PIDS+=($!)
  done
  for ((i = 1; i <= ECHO_CLIENTS; i++)); do
    e2e_wait "${cpids[i-1]}" "$LIMIT"; r=$?
    [ $r -eq 0 ] || { echo "echo: client $i exited $r"; rc=1; }
  done
  wait "${hpids[@]}"
  e2e_stop "$lpid" 10
  for ((i = 1; i <= ECHO_CLIENTS; i++)); do
    in=$(cat "$d/in$i.sha") out=$(cat "$d/out$i.sha")
    if [ -z "$in" ] || [ "$in" != "$out" ]; then
      echo "echo: client $i: sha256 mismatch: sent ${in:-none}, echoed ${out:-none}"; rc=1
    fi
  done
  LAST_PIDS="$lpid ${cpids[*]}"
  # each connection is handed to cat (dup2 onto stdin/stdout, exec) before
  # the listener's first data call on it: never paired
  if [ "$E2E_MODE" != plain ]; then e2e_expect_path copy "fork+exec echo client" "${cpids[@]}" || rc=1; fi
  e2e_say "fork+exec echo: $ECHO_CLIENTS clients x $ECHO_SIZE bytes in $(e2e_since "$t0")s $([ $rc -eq 0 ] && echo ok || echo FAILED)"
  return $rc
}

# Two network namespaces joined by a veth pair, 10.213.77.1 <-> .2; removed
# at exit.  NETNS stays empty where that is not possible (not root).
NETNS=
netns_setup() {
  local n=zce2e$$
  ip netns add "${n}a" 2>/dev/null || return 1
  NETNS="${n}a"
  ip netns add "${n}b" || return 1
  NETNS+=" ${n}b"
  ip link add "${n}x" type veth peer name "${n}y" &&
    ip link set "${n}x" netns "${n}a" && ip link set "${n}y" netns "${n}b" &&
    ip -n "${n}a" addr add 10.213.77.1/24 dev "${n}x" && ip -n "${n}b" addr add 10.213.77.2/24 dev "${n}y" &&
    ip -n "${n}a" link set "${n}x" up && ip -n "${n}b" link set "${n}y" up &&
    ip -n "${n}a" link set lo up && ip -n "${n}b" link set lo up
}
e2e_cleanup_hook() {
  local ns
  for ns in $NETNS; do ip netns del "$ns" 2>/dev/null; done
}

# netns_transfer: SIZE/4 from namespace b to a listener in namespace a.
netns_transfer() {
  # a fixed port is safe: nothing else lives in these fresh namespaces
  local a=${NETNS%% *} b=${NETNS##* } port=24117
  transfer veth 1048576 "TCP4-LISTEN:$port,bind=10.213.77.1,reuseaddr" \
    "TCP4:10.213.77.1:$port,retry=50,interval=0.1" "netns:$a" $((SIZE / 4)) "ip netns exec $b" copy
}

run_all() {
  local port path fail=0 pids=
  port=$(e2e_free_port) || e2e_die "no free port"
  transfer tcp-8k 8192 "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" \
    "TCP4:127.0.0.1:$port,retry=20,interval=0.1" "$port" || fail=1
  pids+=" $LAST_PIDS"
  port=$(e2e_free_port) || e2e_die "no free port"
  transfer tcp-1m 1048576 "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" \
    "TCP4:127.0.0.1:$port,retry=20,interval=0.1" "$port" || fail=1
  pids+=" $LAST_PIDS"
  path=$E2E_TMP/unix-$E2E_MODE.sock
  # AF_UNIX pairs only when asked for (ZCSOCK_LOCAL_UNIX=1, mode zc)
  transfer unix 1048576 "UNIX-LISTEN:$path" "UNIX-CONNECT:$path,retry=20,interval=0.1" "$path" \
    "" "" "$([ "$E2E_MODE" = zc ] && echo local || echo copy)" || fail=1
  pids+=" $LAST_PIDS"
  if [ "$HAVE_IPV6" = 1 ]; then
    port=$(e2e_free_port) || e2e_die "no free port"
    transfer tcp6 1048576 "TCP6-LISTEN:$port,bind=[::1],reuseaddr" \
      "TCP6:[::1]:$port,retry=20,interval=0.1" "$port" $((SIZE / 4)) || fail=1
    pids+=" $LAST_PIDS"
  fi
  fork_echo || fail=1
  pids+=" $LAST_PIDS"
  if [ -n "$NETNS" ]; then
    netns_transfer || fail=1
    pids+=" $LAST_PIDS"
  fi
  RUN_PIDS=$pids
  return $fail
}

HAVE_NETNS=0
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null; then
  if netns_setup; then HAVE_NETNS=1; else e2e_say "cannot make network namespaces: the veth transfer is left out"; e2e_cleanup_hook; NETNS=; fi
fi
check() { e2e_check_active $((11 + 2 * HAVE_IPV6 + 2 * HAVE_NETNS)) $RUN_PIDS; }
e2e_compare run_all check

N=$((4 + HAVE_IPV6 + HAVE_NETNS))
word() { [ "$1" -eq 0 ] && echo "$N/$N ok" || echo "FAILED"; }
e2e_summary socat word "size $SIZE bytes"
exit 0
