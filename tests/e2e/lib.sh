# Helpers shared by the end-to-end transparency cases (bash, sourced).
#
# Every case runs real programs twice: once plainly ("plain"), once with
# LD_PRELOAD=$ZC_LIB exported so that every process it starts inherits the
# library ("zc").  Before trusting a "zc" run, the case proves the library
# was active in the processes that did socket I/O: ZCSOCK_STATS=1 with
# ZCSOCK_LOG_FILE=<dir>/stats.%p makes each of them leave a report, and
# e2e_check_active counts the reports with nonzero calls.* counters.
#
#   e2e_setup CASE         skip (exit 77) without $ZC_LIB; make $E2E_TMP
#                          (removed at exit) and $E2E_ART (kept, in the
#                          harness log dir); install the cleanup trap, which
#                          also calls e2e_cleanup_hook if the case has one
#   e2e_mode plain|zc      environment for the commands started next
#   e2e_plain CMD..        run a helper command without the library
#   e2e_check_active MIN [PID..]  at least MIN processes reported calls,
#                          and each PID given among them
#   e2e_bg OUT CMD..       start a server in the background, output to OUT;
#                          its pid is in $E2E_LAST_PID, stopped at exit
#   e2e_stop PID [SECS] [SIG]  SIG (default TERM), then KILL after SECS
#                          (default 10); returns the process's exit status
#   e2e_wait PID SECS      wait for a child; after SECS kill it, return 124
#   e2e_alive PID          the process runs (zombies do not count)
#   e2e_free_port          print a free TCP port on 127.0.0.1 (bind-tested)
#   e2e_wait_listen PORT|PATH SECS   until something listens there
#   e2e_curl NAME "SHA.." ARGS..  one curl process, bodies hashed and checked
#   e2e_gen SEED BYTES     deterministic pseudo-random bytes on stdout
#   e2e_sha256             sha256 of stdin, hex only
#   e2e_say MSG            a line in the case log, prefixed with the mode

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Sleep without starting a process (every process would load the library).
e2e_nap() { read -r -t "$1" -u "$E2E_NAPFD" _ || true; }

e2e_say() { echo "[${E2E_MODE:-setup}] $*"; }
e2e_die() { echo "FAIL: $*"; exit 1; }

# Pick a python3 whose test package has test_socket (pyenv's or Debian's
# libpython3.11-testsuite).  Resolved to the interpreter itself, so that no
# wrapper script runs in between.
e2e_find_python() {
  local cand exe
  for cand in python3 /usr/bin/python3; do
    exe=$(env -u LD_PRELOAD "$cand" -c 'import sys; print(sys.executable)' 2>/dev/null) || continue
    [ -n "$exe" ] || continue
    if [ "${1:-}" = testsuite ]; then
      env -u LD_PRELOAD "$exe" -c 'import test.test_socket, test.test_selectors' 2>/dev/null || continue
    fi
    echo "$exe"; return 0
  done
  return 1
}

e2e_setup() {
  E2E_CASE=$1
  ZC_BUILD=${ZC_BUILD:-build}
  ZC_LIB=${ZC_LIB:-$PWD/$ZC_BUILD/libzcsock.so}
  case $ZC_LIB in /*) ;; *) ZC_LIB=$PWD/$ZC_LIB ;; esac
  QUICK=${QUICK:-0}
  if [ ! -f "$ZC_LIB" ]; then echo "skip: $ZC_LIB not built"; exit 77; fi
  E2E_PY=$(e2e_find_python) || { echo "skip: no python3"; exit 77; }
  E2E_BASE_PRELOAD=${LD_PRELOAD:-}
  E2E_ART=$ZC_BUILD/test-logs/e2e/$E2E_CASE.d
  rm -rf "$E2E_ART"; mkdir -p "$E2E_ART"; E2E_ART=$(cd "$E2E_ART" && pwd)
  E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/zc-e2e-$E2E_CASE.XXXXXX")
  E2E_PIDS=() E2E_MODE=
  mkfifo "$E2E_TMP/nap" && exec {E2E_NAPFD}<>"$E2E_TMP/nap"
  trap e2e_cleanup EXIT
  trap 'exit 143' TERM INT HUP
  e2e_say "case $E2E_CASE: library $ZC_LIB, QUICK=$QUICK, tmp $E2E_TMP, logs $E2E_ART"
}

e2e_cleanup() {
  local pid
  trap - TERM INT HUP
  for pid in "${E2E_PIDS[@]}"; do
    e2e_alive "$pid" && e2e_stop "$pid" 5 >/dev/null
  done
  declare -F e2e_cleanup_hook >/dev/null && e2e_cleanup_hook
  [ -n "${E2E_TMP:-}" ] && rm -rf "$E2E_TMP"
}

# plain: no library.  zc: the library preloaded in every process started
# from here on, each writing its statistics to $E2E_STATS/stats.<pid>,
# with AF_UNIX pairing on.  zcdef: the same with the library's defaults
# (AF_UNIX connections stay on the copy path).
e2e_mode() {
  E2E_MODE=$1
  unset ZCSOCK_STATS ZCSOCK_LOG_FILE ZCSOCK_LOCAL_UNIX
  if [ -n "$E2E_BASE_PRELOAD" ]; then export LD_PRELOAD=$E2E_BASE_PRELOAD; else unset LD_PRELOAD; fi
  [ "$1" = zc ] || [ "$1" = zcdef ] || return 0
  E2E_RUN_ID=$((${E2E_RUN_ID:-0} + 1))
  E2E_STATS=$E2E_ART/stats-$E2E_RUN_ID
  rm -rf "$E2E_STATS"; mkdir -p "$E2E_STATS"
  local active
  active=$(LD_PRELOAD="$ZC_LIB${E2E_BASE_PRELOAD:+ $E2E_BASE_PRELOAD}" "$E2E_PY" -c \
    'import ctypes; print(ctypes.CDLL(None).zcsock_is_active())' 2>&1)
  [ "$active" = 1 ] || e2e_die "zcsock_is_active() under LD_PRELOAD gave: $active"
  export LD_PRELOAD="$ZC_LIB${E2E_BASE_PRELOAD:+ $E2E_BASE_PRELOAD}"
  export ZCSOCK_STATS=1 ZCSOCK_LOG_FILE=$E2E_STATS/stats.%p
  # AF_UNIX pairing too (opt-in for users): the suites' unix sockets, their
  # SCM_RIGHTS and credentials included, run through the local path
  [ "$1" = zcdef ] || export ZCSOCK_LOCAL_UNIX=1
}

# e2e_compare RUN CHECK: RUN (the case's function: one round of its
# workload in the current mode; status 0 when every check of it passed)
# without the library, with it (mode zc: AF_UNIX pairing on) and with its
# defaults (zcdef).  After each library round, CHECK MODE (the case's
# function) proves from $E2E_STATS that the library ran and which path
# carried the bytes (it dies on a mismatch; other commands it starts run
# without the library).  Leaves the statuses in E2E_RC_plain, E2E_RC_zc,
# E2E_RC_zcdef.
e2e_compare() {
  local run=$1 check=$2 m rc
  for m in plain zc zcdef; do
    e2e_mode "$m"
    "$run"; rc=$?
    eval "E2E_RC_$m=$rc"
    [ "$m" = plain ] && continue
    e2e_mode plain              # keeps $E2E_STATS: the round's reports
    E2E_MODE=$m "$check" "$m"   # (the mode's name only labels the lines)
  done
  e2e_mode plain
}

# e2e_summary TITLE WORD-FN [EXTRA]: the case's one-line result (the tier
# prints it) and its verdict: "TITLE: without ..., with ..., with defaults
# ..., EXTRA, added failures: N"; dies when a round failed.
e2e_summary() {
  local title=$1 word=$2 extra=${3:+, $3} added=0
  [ "$E2E_RC_plain" -eq 0 ] && { [ "$E2E_RC_zc" -ne 0 ] || [ "$E2E_RC_zcdef" -ne 0 ]; } && added=yes
  echo "$title: without $($word "$E2E_RC_plain"), with $($word "$E2E_RC_zc"), with defaults $($word "$E2E_RC_zcdef")$extra, added failures: $added"
  [ "$E2E_RC_plain" -eq 0 ] || e2e_die "$title fails even without the library"
  [ "$E2E_RC_zc" -eq 0 ] || e2e_die "$title fails with the library (AF_UNIX pairing on)"
  [ "$E2E_RC_zcdef" -eq 0 ] || e2e_die "$title fails with the library's defaults"
}

e2e_plain() {
  if [ -n "$E2E_BASE_PRELOAD" ]; then
    env -u ZCSOCK_STATS -u ZCSOCK_LOG_FILE LD_PRELOAD="$E2E_BASE_PRELOAD" "$@"
  else
    env -u ZCSOCK_STATS -u ZCSOCK_LOG_FILE -u LD_PRELOAD "$@"
  fi
}

# Summarise the reports in $E2E_STATS; fail unless at least MIN processes
# reported nonzero calls.* counters and every PID given is among them.
e2e_check_active() {
  local min=$1; shift
  local out
  out=$(e2e_plain awk -v min="$min" -v want="$*" '
    FNR == 1 { pid = ""; if (match($0, /^# zcsock .* stats pid=[0-9]+/)) { pid = $0; sub(/.*pid=/, "", pid); sub(/[^0-9].*/, "", pid) } }
    pid != "" && /^calls\.[A-Za-z0-9_]+: [0-9]+/ { calls[pid] += $2 }
    pid != "" && /^path\.[A-Za-z0-9_.]*bytes: [0-9]+/ { bytes[$1] += $2 }
    END {
      n = 0; list = ""
      for (p in calls) if (calls[p] > 0) { n++; list = list " " p "(" calls[p] ")" }
      printf "library active in %d process(es), pid(calls):%s\n", n, list
      for (k in bytes) if (bytes[k] > 0) printf "  %s %.0f\n", k, bytes[k]
      bad = n < min
      split(want, w, " ")
      for (i in w) if (!(w[i] in calls) || calls[w[i]] == 0) { printf "no report with calls from pid %s\n", w[i]; bad = 1 }
      exit bad
    }' /dev/null "$E2E_STATS"/stats.* 2>&1)
  local rc=$?
  echo "$out" | sed "s/^/[$E2E_MODE] /"
  [ $rc -eq 0 ] || e2e_die "library not proven active (wanted >= $min process(es)${*:+, pids $*}); reports in $E2E_STATS"
}

# e2e_expect_path WANT LABEL PID..: which path carried the bytes of each
# process, from its report: WANT=local needs local.paired.* > 0 and
# path.local.*bytes > 0 (both ends ran the library: the connection paired);
# WANT=copy needs both 0 (a peer without the library, another host, or a
# connection handed on before its first data call); WANT=some: at least one
# of them took the local path (a process whose exchanges all fit before the
# switch-over, such as a short redis-cli or a directory listing, may move
# every byte through the kernel).  Returns nonzero on a mismatch, saying
# which.
e2e_expect_path() {
  local want=$1 label=$2 pid p b rc=0 some=0; shift 2
  for pid in "$@"; do
    read -r p b < <(e2e_plain awk '
      /^local\.paired\.(accepted|connected): / { p += $2 }
      /^local\.inherited: / { p += $2 }
      /^path\.local\.[a-z_]*bytes: / { b += $2 }
      END { printf "%d %.0f\n", p, b }' /dev/null "$E2E_STATS/stats.$pid" 2>/dev/null)
    if [ ! -s "$E2E_STATS/stats.$pid" ]; then
      echo "$label: pid $pid left no report"; rc=1
    elif [ "$want" = local ] && { [ "${p:-0}" -eq 0 ] || [ "${b:-0}" = 0 ]; }; then
      echo "$label: pid $pid did not take the local path (paired $p, local bytes $b)"; rc=1
    elif [ "$want" = copy ] && { [ "${p:-0}" -ne 0 ] || [ "${b:-0}" != 0 ]; }; then
      echo "$label: pid $pid paired though it must not (paired $p, local bytes $b)"; rc=1
    else
      e2e_say "$label: pid $pid paired $p, local bytes $b"
    fi
    [ "${p:-0}" -gt 0 ] && [ "${b:-0}" != 0 ] && some=1
  done
  if [ "$want" = some ] && [ $some -eq 0 ]; then
    echo "$label: no process took the local path"; rc=1
  fi
  return $rc
}

e2e_bg() {
  local out=$1; shift
  "$@" >"$out" 2>&1 </dev/null &
  E2E_LAST_PID=$!
  E2E_PIDS+=("$E2E_LAST_PID")
}

# True while PID runs: a zombie does not count (bash does not reap while it
# runs a trap, and kill -0 succeeds on zombies).  Starts no process.
e2e_alive() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

e2e_stop() {
  local pid=$1 secs=${2:-10} sig=${3:-TERM} i rc
  kill -"$sig" "$pid" 2>/dev/null
  for ((i = 0; i < secs * 10; i++)); do
    e2e_alive "$pid" || break
    e2e_nap 0.1
  done
  if e2e_alive "$pid"; then
    echo "pid $pid ignored $sig for ${secs}s, killing"
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null; rc=$?
  local keep=() p
  for p in "${E2E_PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
  E2E_PIDS=("${keep[@]}")
  return $rc
}

e2e_wait() {
  local pid=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do
    e2e_alive "$pid" || break
    e2e_nap 0.1
  done
  if e2e_alive "$pid"; then
    echo "pid $pid still running after ${secs}s"
    e2e_stop "$pid" 2
    return 124
  fi
  wait "$pid"
}

# Seconds since $1 (a value of $EPOCHREALTIME), one decimal.
e2e_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

e2e_free_port() {
  e2e_plain "$E2E_PY" - <<'EOF'
import random, socket, sys
for _ in range(200):
    port = random.randint(20000, 32000)   # below the ephemeral range
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
}

# Wait until a TCP port on 127.0.0.1 or a unix socket path is listening,
# without connecting to it (a one-shot server would take the probe as its
# client).  Returns 1 after SECS.
e2e_wait_listen() {
  local what=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do
    case $what in
      /*) e2e_plain ss -Hlx src "$what" 2>/dev/null | grep -q . && return 0 ;;
      *)  e2e_plain ss -Hltn "sport = :$what" 2>/dev/null | grep -q . && return 0 ;;
    esac
    e2e_nap 0.1
  done
  return 1
}

e2e_gen() {
  openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:zcsock-e2e-$1" -in /dev/zero 2>/dev/null | head -c "$2"
}

e2e_sha256() {
  openssl dgst -sha256 -r | cut -d' ' -f1
}

# e2e_curl NAME "SHA.." CURL_ARGS..: one curl process; each word BODYn in the
# arguments becomes a fifo whose bytes are hashed and compared with the n-th
# expected sha256.  The curl pid is added to $E2E_CURL_PIDS.
e2e_curl() {
  local name=$1 want=($2); shift 2
  local d=$E2E_TMP/$E2E_MODE-$name t0 cpid rc=0 r i args=() hpids=() got ok=1 line=
  mkdir -p "$d"
  for ((i = 1; i <= ${#want[@]}; i++)); do
    mkfifo "$d/body$i"
    e2e_sha256 <"$d/body$i" >"$d/sha$i" & hpids+=($!)
  done
  for a in "$@"; do [[ $a == BODY[0-9] ]] && args+=("$d/body${a#BODY}") || args+=("$a"); done
  t0=$EPOCHREALTIME
  curl -sS -f --max-time 120 -w '%{http_code}/%{size_download} ' "${args[@]}" \
    >"$d/info" 2>"$E2E_ART/$E2E_MODE-$name.curl.log" & cpid=$!
  E2E_PIDS+=("$cpid")
  e2e_wait "$cpid" 150; rc=$?
  # curl opens its outputs lazily: release the hashers of bodies it never
  # wrote (opening a fifo read-write does not block)
  for ((i = 1; i <= ${#want[@]}; i++)); do : <>"$d/body$i"; done
  [ ${#hpids[@]} -eq 0 ] || wait "${hpids[@]}"   # bare wait would wait for servers
  E2E_CURL_PIDS+=" $cpid"
  for ((i = 1; i <= ${#want[@]}; i++)); do
    got=$(cat "$d/sha$i")
    if [ "$got" = "${want[i-1]}" ]; then line+=" ${got:0:12}.. ok"; else line+=" ${got:0:12}.. MISMATCH (want ${want[i-1]:0:12}..)"; ok=0; fi
  done
  e2e_say "$name: curl exit $rc, http/bytes: $(head -c 200 "$d/info") in $(e2e_since "$t0")s, sha256$line"
  [ $rc -eq 0 ] && [ $ok -eq 1 ]
}
