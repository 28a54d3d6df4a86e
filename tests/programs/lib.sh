# Helpers shared by the "programs" tier cases (bash, sourced).  Same style
# as tests/e2e/lib.sh, but a case here runs in ONE of three modes and puts
# the library on the ends that mode names:
#
#   both   server side and client side preloaded (the connection should pair)
#   one    only the server side preloaded (must stay plain: declined)
#   client only the client side preloaded (must stay plain: declined)
#   none   no process preloaded (the reference run)
#
# The case script itself and its helpers (hashing, data generation) never
# run under the library; only commands started through p_srv / p_cli do.
# Every preloaded process writes ZCSOCK_STATS=1 reports to
# $P_STATS/stats.<pid>; run.sh judges them against expect.txt.
#
#   p_setup CASE MODE      skip (77) without $ZC_LIB; make $P_TMP (removed at
#                          exit), $P_ART (kept: logs) and $P_STATS
#   p_need CMD..           skip (77) unless every command exists
#   p_srv CMD..            run CMD with the server side's environment
#   p_cli CMD..            run CMD with the client side's environment
#   p_bg OUT CMD..         start in the background (output to OUT), pid in
#                          $P_LAST_PID, stopped at exit
#   p_stop PID [SECS]      TERM to PID and its descendants, KILL after SECS
#                          (default 5) to those still there
#   p_wait PID SECS        wait for a child; kill after SECS, return 124
#   p_alive PID            the process runs (zombies do not count)
#   p_free_port            a free TCP port on 127.0.0.1
#   p_wait_listen PORT SECS   until something listens on 127.0.0.1:PORT
#   p_wait_file FILE REGEX SECS  until FILE has a line matching REGEX
#   p_gen SEED BYTES       deterministic pseudo-random bytes on stdout
#   p_sha256 [FILE]        sha256 (hex only) of FILE or stdin
#   p_same WHAT A B        compare two hashes, say so, fail on mismatch
#   p_say MSG / p_die MSG
#   p_nap SECS             sleep without starting a process
#   p_reps N               N, or N/4 (at least 1) when QUICK=1, 1 in mode none,
#                          N/2 in mode client;
#                          P_REPS overrides

P_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

p_say() { echo "[$P_CASE/$P_MODE] $*"; }
p_die() { echo "FAIL: $*"; exit 1; }
p_nap() { read -r -t "$1" -u "$P_NAPFD" _ || true; }

p_setup() {
  P_CASE=$1 P_MODE=$2
  ZC_BUILD=${ZC_BUILD:-build}
  ZC_LIB=${ZC_LIB:-$PWD/$ZC_BUILD/libzcsock.so}
  case $ZC_LIB in /*) ;; *) ZC_LIB=$PWD/$ZC_LIB ;; esac
  QUICK=${QUICK:-0}; [ -n "$QUICK" ] || QUICK=0
  case $P_MODE in both|one|client|none) ;; *) echo "mode must be both, one, client or none"; exit 2 ;; esac
  [ -f "$ZC_LIB" ] || { echo "skip: $ZC_LIB not built"; exit 77; }
  P_ART=${P_ART:-$ZC_BUILD/test-logs/programs/$P_CASE-$P_MODE.d}
  rm -rf "$P_ART"; mkdir -p "$P_ART"; P_ART=$(cd "$P_ART" && pwd)
  P_STATS=$P_ART/stats
  mkdir -p "$P_STATS"; chmod 1777 "$P_STATS" "$P_ART"
  P_TMP=$(mktemp -d "${TMPDIR:-/tmp}/zc-prog-$P_CASE.XXXXXX")
  chmod 755 "$P_TMP"
  P_PIDS=()
  mkfifo "$P_TMP/nap" && exec {P_NAPFD}<>"$P_TMP/nap"
  unset LD_PRELOAD ZCSOCK_STATS ZCSOCK_LOG_FILE
  local on=(LD_PRELOAD="$ZC_LIB" ZCSOCK_STATS=1 "ZCSOCK_LOG_FILE=$P_STATS/stats.%p")
  local off=(-u LD_PRELOAD -u ZCSOCK_STATS -u ZCSOCK_LOG_FILE)
  case $P_MODE in
    both) P_SRV_ENV=("${on[@]}") P_CLI_ENV=("${on[@]}") ;;
    one)  P_SRV_ENV=("${on[@]}") P_CLI_ENV=("${off[@]}") ;;
    client) P_SRV_ENV=("${off[@]}") P_CLI_ENV=("${on[@]}") ;;
    none) P_SRV_ENV=("${off[@]}") P_CLI_ENV=("${off[@]}") ;;
  esac
  trap p_cleanup EXIT
  trap 'exit 143' TERM INT HUP
  p_say "library $ZC_LIB, QUICK=$QUICK, tmp $P_TMP, logs $P_ART"
}

p_need() {
  local c
  for c in "$@"; do command -v "$c" >/dev/null || { echo "skip: $c not installed"; exit 77; }; done
}

p_cleanup() {
  local pid
  trap - TERM INT HUP
  for pid in "${P_PIDS[@]}"; do p_alive "$pid" && p_stop "$pid" 3 >/dev/null; done
  declare -F p_cleanup_hook >/dev/null && p_cleanup_hook
  [ -n "${P_TMP:-}" ] && rm -rf "$P_TMP"
}

p_srv() { env "${P_SRV_ENV[@]}" "$@"; }
p_cli() { env "${P_CLI_ENV[@]}" "$@"; }

# The background job is the program itself (p_srv / p_cli resolved to
# env, which execs it), not a subshell around it: a subshell would take
# p_stop's signal and leave the program running.
p_bg() {
  local out=$1; shift
  case $1 in
    p_srv) shift; set -- env "${P_SRV_ENV[@]}" "$@" ;;
    p_cli) shift; set -- env "${P_CLI_ENV[@]}" "$@" ;;
  esac
  "$@" >"$out" 2>&1 </dev/null &
  P_LAST_PID=$!
  P_PIDS+=("$P_LAST_PID")
}

# PID and its descendants (4 levels), PID first.
p_tree() {
  local pids=$1 all=$1 lvl p kids
  for ((lvl = 0; lvl < 4; lvl++)); do
    kids=
    for p in $pids; do kids+=" $(cat "/proc/$p/task/"*/children 2>/dev/null)"; done
    pids=$(echo $kids)
    [ -n "$pids" ] || break
    all+=" $pids"
  done
  echo "$all"
}

p_alive() {
  local stat
  stat=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$stat" ] && [ "$stat" != Z ]
}

# A daemon stopped by a signal leaves no statistics report: before stopping
# one, note in $P_STATS/loaded.<pid> each process of its tree (3 levels)
# that has the library mapped, so that one.sh can tell it ran.
p_mark_loaded() {
  local pids=$1 lvl p c kids
  for ((lvl = 0; lvl < 3; lvl++)); do
    kids=
    for p in $pids; do
      grep -q libzcsock "/proc/$p/maps" 2>/dev/null && echo "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | head -c 100)" >"$P_STATS/loaded.$p"
      for c in $(cat "/proc/$p/task/"*/children 2>/dev/null); do kids+=" $c"; done
    done
    pids=$kids
    [ -n "$pids" ] || break
  done
}

p_stop() {
  local pid=$1 secs=${2:-5} i rc tree p left
  p_mark_loaded "$pid"
  tree=$(p_tree "$pid")       # the daemon's workers and children go too
  kill -TERM $tree 2>/dev/null
  for ((i = 0; i < secs * 10; i++)); do
    left=
    for p in $tree; do p_alive "$p" && left+=" $p"; done
    [ -n "$left" ] || break
    p_nap 0.1
  done
  if [ -n "$left" ]; then echo "pid(s)$left (of $pid's tree) ignored TERM for ${secs}s, killing"; kill -KILL $left 2>/dev/null; fi
  wait "$pid" 2>/dev/null; rc=$?
  local keep=() p
  for p in "${P_PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
  P_PIDS=("${keep[@]}")
  return $rc
}

# Where every process under this case sleeps (pid, parent, state, kernel
# wait channel, system call and its first argument): printed when a step
# times out, before anything is killed.
p_snapshot() {
  local pids=$$ all= lvl p c kids sc nr
  for ((lvl = 0; lvl < 6; lvl++)); do
    kids=
    for p in $pids; do for c in $(cat "/proc/$p/task/"*/children 2>/dev/null); do kids+=" $c"; done; done
    all+=$kids; pids=$kids
    [ -n "$pids" ] || break
  done
  echo "snapshot of the processes under the case (syscall: number name arg0):"
  for p in $all; do
    [ -r "/proc/$p/stat" ] || continue
    read -r sc nr _ </proc/$p/syscall 2>/dev/null || sc=?
    case $sc in
      0) n=read ;; 1) n=write ;; 7) n=poll ;; 23) n=select ;; 44) n=sendto ;; 45) n=recvfrom ;;
      46) n=sendmsg ;; 47) n=recvmsg ;; 61) n=wait4 ;; 202) n=futex ;; 232) n=epoll_wait ;;
      270) n=pselect6 ;; 271) n=ppoll ;; 281) n=epoll_pwait ;; 426) n=io_uring_enter ;; 43) n=accept ;;
      288) n=accept4 ;; 20) n=writev ;; 19) n=readv ;; 230) n=clock_nanosleep ;; 35) n=nanosleep ;; *) n= ;;
    esac
    printf '  pid %-7s ppid %-7s %s wchan=%-22s syscall=%s %s fd=%s  %s\n' "$p" "$(cut -d' ' -f4 /proc/$p/stat 2>/dev/null)" \
      "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" "$(cat /proc/$p/wchan 2>/dev/null)" "$sc" "$n" "$((nr))" \
      "$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | head -c 70)"
  done 2>/dev/null
}

p_wait() {
  local pid=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do p_alive "$pid" || break; p_nap 0.1; done
  if p_alive "$pid"; then
    echo "pid $pid ($(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null | head -c 80)) still running after ${secs}s"
    p_snapshot
    p_stop "$pid" 2
    return 124
  fi
  wait "$pid"
}

p_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# A port nothing listens on, never one this case was given before (a case
# that asks for several binds them later: two equal answers made inetd
# serve two services on one port).
p_free_port() {
  local port
  port=$(P_PORTS_FILE="$P_TMP/.ports" python3 - <<'EOF'
import os, random, socket, sys
try:
    given = set(open(os.environ["P_PORTS_FILE"]).read().split())
except OSError:
    given = set()
for _ in range(200):
    port = random.randint(20000, 32000)   # below the ephemeral range
    if str(port) in given:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit(1)
EOF
) || return 1
  echo "$port" >>"$P_TMP/.ports"
  echo "$port"
}

# without connecting (a one-shot server would take the probe as its client)
p_wait_listen() {
  local port=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do
    ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
    p_nap 0.1
  done
  return 1
}

p_wait_file() {
  local f=$1 re=$2 secs=$3 i
  for ((i = 0; i < secs * 10; i++)); do
    grep -Eq -- "$re" "$f" 2>/dev/null && return 0
    p_nap 0.1
  done
  return 1
}

p_gen() {
  openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:zcsock-prog-$1" -in /dev/zero 2>/dev/null | head -c "$2"
}

p_sha256() {
  if [ $# -gt 0 ]; then openssl dgst -sha256 -r <"$1" | cut -d' ' -f1
  else openssl dgst -sha256 -r | cut -d' ' -f1; fi
}

# sha256 of every regular file under DIR (names and contents), one hash
p_tree_sha() {
  (cd "$1" && find . -type f ! -path './.git/*' -print0 | LC_ALL=C sort -z |
     xargs -0 -r sha256sum) | p_sha256
}

p_same() {
  local what=$1 a=$2 b=$3
  if [ -n "$a" ] && [ "$a" = "$b" ]; then p_say "$what: sha256 ${a:0:16}.. ok"; return 0; fi
  p_say "$what: sha256 MISMATCH sent ${a:-none} received ${b:-none}"
  return 1
}

# p_ab SECS N URL [AB-ARGS..]: ab with N requests, 8 at once (P_AB_WRAP:
# what runs it, e.g. setpriv); its summary lines printed; 0 when every
# request completed, none failed and every answer was 2xx
P_AB_WRAP=()
p_ab() {
  local secs=$1 n=$2 url=$3 out; shift 3
  out=$(p_t "$secs" p_cli "${P_AB_WRAP[@]}" ab -q -n "$n" -c 8 -s 20 "$@" "$url" 2>&1)
  echo "$out" | grep -E 'Complete requests|Failed requests|Connect: |Non-2xx|Requests per second|apr_' |
    sed "s/^/[ab $*] /"
  echo "$out" | grep -Eq "^Complete requests: +$n\$" &&
    echo "$out" | grep -Eq '^Failed requests: +0$' &&
    ! echo "$out" | grep -q 'Non-2xx'
}

# p_par_get N SHA URL..: N downloads at once through the case's c() (curl),
# URLs taken in turn; each must hash to SHA
p_par_get() {
  local n=$1 sha=$2 i pids=() rc=0; shift 2
  local urls=("$@")
  for ((i = 1; i <= n; i++)); do
    c -o "$P_TMP/d$i" "${urls[(i - 1) % ${#urls[@]}]}" 2>"$P_TMP/d$i.err" & pids+=($!)
  done
  for ((i = 1; i <= n; i++)); do
    wait "${pids[i-1]}" || { p_say "download $i: curl failed: $(tail -n 1 "$P_TMP/d$i.err")"; rc=1; }
    p_same "download $i ${urls[(i - 1) % ${#urls[@]}]} ($(stat -c %s "$P_TMP/d$i" 2>/dev/null) bytes)" \
      "$sha" "$(p_sha256 "$P_TMP/d$i" 2>/dev/null)" || rc=1
    rm -f "$P_TMP/d$i" "$P_TMP/d$i.err"
  done
  return $rc
}

# p_par_post N FILE SHA URL: N uploads of FILE at once through c(); each
# answer must be SHA (the server hashes what it received)
p_par_post() {
  local n=$1 file=$2 sha=$3 url=$4 i pids=() rc=0
  for ((i = 1; i <= n; i++)); do
    c -H 'Content-Type: application/octet-stream' --data-binary "@$file" -o "$P_TMP/u$i" "$url" \
      2>"$P_TMP/u$i.err" & pids+=($!)
  done
  for ((i = 1; i <= n; i++)); do
    wait "${pids[i-1]}" || { p_say "upload $i: curl failed: $(tail -n 1 "$P_TMP/u$i.err")"; rc=1; }
    p_same "upload $i (sha256 by the server)" "$sha" "$(cat "$P_TMP/u$i" 2>/dev/null)" || rc=1
  done
  return $rc
}

p_reps() {
  local n=$1
  if [ "$QUICK" = 1 ]; then n=$(((n + 3) / 4))
  # mode none is the baseline without the library: one round shows the
  # workload itself passes; the rounds are for the library's modes
  elif [ "$P_MODE" = none ]; then n=1
  # mode client: the clients alone run the library, nothing pairs; half
  elif [ "$P_MODE" = client ]; then n=$(((n + 1) / 2)); fi
  [ -n "${P_REPS:-}" ] && n=$P_REPS     # make soak: many more rounds
  echo "$n"
}

# p_fail_count: cases count their failed steps in P_FAILS and end with p_end
P_FAILS=0
p_step() {  # p_step NAME CMD..: run one step, count its failure
  local name=$1 t0 rc; shift
  t0=$EPOCHREALTIME
  "$@"; rc=$?
  if [ $rc -eq 0 ]; then p_say "step $name ok ($(p_since "$t0")s)"
  else p_say "step $name FAILED rc=$rc ($(p_since "$t0")s)"; P_FAILS=$((P_FAILS + 1)); fi
  return $rc
}
p_end() {
  if [ "$P_FAILS" -eq 0 ]; then p_say "all steps ok"; exit 0; fi
  p_say "$P_FAILS step(s) failed"; exit 1
}

# p_t SECS CMD..: run CMD (stdin kept), wait at most SECS; on a timeout the
# processes under the case are snapshot (p_snapshot) and CMD killed (124)
p_t() {
  local secs=$1 pid; shift
  "$@" <&0 & pid=$!
  P_PIDS+=("$pid")
  p_wait "$pid" "$secs"
}

# p_left DEADLINE: seconds from now to DEADLINE (a $SECONDS value), at least 1
p_left() { local l=$(($1 - SECONDS)); [ $l -ge 1 ] || l=1; echo $l; }
