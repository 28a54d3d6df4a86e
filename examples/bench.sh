#!/usr/bin/env bash
# make bench: kernel sockets versus zcsock (and any further variant listed
# below), interleaved in one run so that machine noise hits every variant
# alike.  For each transport and size the variants alternate for several
# rounds; the report takes medians.  Writes build/bench/raw.csv (every run),
# build/bench/results.csv (medians and ratios) and build/bench/throughput.svg.
#
# Environment: ZC_BUILD (build dir), ZC_LIB (absolute path of libzcsock.so),
# QUICK=1 (fewer sizes and rounds), BENCH_ROUNDS, BENCH_SECONDS, BENCH_SIZES
# (comma list), BENCH_PIN=1 (server on CPU 0, client on CPU 1).
set -euo pipefail

ZC_BUILD=${ZC_BUILD:-build}
ZC_LIB=${ZC_LIB:-$PWD/$ZC_BUILD/libzcsock.so}

# Variants: "name|environment (VAR=value ...)|libzcsock expected active|inactive
# |tests (stream,pingpong; empty: both)".  The first one is the baseline every
# ratio is computed against.
#   zcsock       both ends paired, bytes through the local path's ring
#                (AF_UNIX pairing switched on for the unix rows; page
#                exchange off, ZCSOCK_EXCHANGE=0, so that this row is the
#                ring wherever the run allows 2 MiB pages)
#                (blocking calls spin adaptively before sleeping)
#   zcsock-nospin  the same without spinning (ZCSOCK_SPIN=0): the futex
#                wake-up alone
#   zcsock-spin  the same with blocking calls spinning 50 us before every sleep
#   zcsock-copy  the local path off: every call forwarded (the copy path)
#   zcsock-xchg  the default, page exchange on (ZCSOCK_EXCHANGE=1): whole
#                2 MiB units of the buffers lent instead of copied, where
#                shared memory has 2 MiB pages (below: as root the run
#                allows them); streaming only
VARIANTS=(
  "kernel||inactive|"
  "zcsock|LD_PRELOAD=$ZC_LIB ZCSOCK_LOCAL_UNIX=1 ZCSOCK_EXCHANGE=0|active|"
  "zcsock-nospin|LD_PRELOAD=$ZC_LIB ZCSOCK_LOCAL_UNIX=1 ZCSOCK_EXCHANGE=0 ZCSOCK_SPIN=0|active|pingpong"
  "zcsock-spin|LD_PRELOAD=$ZC_LIB ZCSOCK_LOCAL_UNIX=1 ZCSOCK_EXCHANGE=0 ZCSOCK_SPIN_US=50|active|pingpong"
  "zcsock-copy|LD_PRELOAD=$ZC_LIB ZCSOCK_LOCAL=0|active|"
  "zcsock-xchg|LD_PRELOAD=$ZC_LIB ZCSOCK_LOCAL_UNIX=1 ZCSOCK_EXCHANGE=1|active|stream"
)
# ZC_LIB_BEFORE=/path/libzcsock.so adds "zcsock-before": the same defaults with
# another build of the library (for example the commit before a change), so
# that a redesign's ratios are printed side by side from one run.
if [ -n "${ZC_LIB_BEFORE:-}" ]; then
  VARIANTS+=("zcsock-before|LD_PRELOAD=$ZC_LIB_BEFORE ZCSOCK_LOCAL_UNIX=1 ZCSOCK_EXCHANGE=0|active|")
fi
# Goals per variant (bench_report.py --goals): the local path's (issue #5:
# TCP streaming >= 4x at 64 KiB and 1 MiB, >= 1.5x at 4 KiB, aligned and
# unaligned; 1-byte round trip <= 0.5x, <= 0.15x spinning) and the copy
# path's (>= 0.98x at every size, round trip within +0.3 us).
GOALS="zcsock:tcp/4K>=1.5,tcp/64K>=4,tcp/1M>=4,rtt<=0.5x;zcsock-spin:rtt<=0.15x;zcsock-copy:all>=0.98,rtt<=+0.3us"
TRANSPORTS=(tcp unix)

if [ "${QUICK:-}" = 1 ]; then
  SIZES=(1 4088 4K 64K 1M 16M); ROUNDS=3; SECS=0.3; PP_SECS=0.3
else
  SIZES=(1 64 1K 4088 4K 16K 64K 256K 1M 4M 16M 64M); ROUNDS=5; SECS=0.5; PP_SECS=0.5
fi
# 4088 B: each ring record (8-byte header) then starts where the last one
# did modulo 4 KiB, which put every copy in memcpy's 4 KiB-aliasing trap
# before common/zc_copy.h.
# Ping-pong runs are short and many: more side-by-side pairs make the
# median difference robust against bursts of load from other processes.
BUF_SIZES=(64K 1M)            # also measured with these buffer modes:
BUF_MODES=(unaligned fresh)   # (zcbench --unaligned, --fresh); see README
ROUNDS=${BENCH_ROUNDS:-$ROUNDS}
PP_ROUNDS=$((ROUNDS * 2))
SECS=${BENCH_SECONDS:-$SECS}
[ -n "${BENCH_SIZES:-}" ] && IFS=, read -ra SIZES <<< "$BENCH_SIZES"
PIN=()
[ "${BENCH_PIN:-}" = 1 ] && PIN=(--cpu-server 0 --cpu-client 1)

ZCBENCH=$ZC_BUILD/zcbench
OUT=$ZC_BUILD/bench
RAW=$OUT/raw.csv
TMP=$OUT/run.csv
HERE=$(cd "$(dirname "$0")" && pwd)

die() { printf '\nbench: %s\n' "$*" >&2; exit 1; }

# 2 MiB shared-memory pages for page exchange (the zcsock-xchg variant and
# the "Page exchange" section): as root the run allows shmem THP (advise),
# and later reserves a few hugetlb pages for the crossover probe, and puts
# both back at the end (BENCH_HUGE=0: only what the machine already
# allows).  The ring and the kernel do not use shmem THP: advise (huge pages
# only where asked) leaves them as they are.
hp_thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled
hp_old_thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$hp_thp" 2>/dev/null || true)
hp_old_nr=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo 0)
hp_restore() {
  [ -n "$hp_old_thp" ] && echo "$hp_old_thp" > "$hp_thp" 2>/dev/null
  echo "$hp_old_nr" > /proc/sys/vm/nr_hugepages 2>/dev/null
  true
}
if [ "$(id -u)" = 0 ] && [ "${BENCH_HUGE:-1}" = 1 ]; then
  trap hp_restore EXIT
  case "$hp_old_thp" in never|deny) echo advise > "$hp_thp" 2>/dev/null || true ;; esac
fi

[ -x "$ZCBENCH" ] || die "$ZCBENCH missing (make $ZCBENCH)"
[ -f "$ZC_LIB" ] || die "$ZC_LIB missing (make lib)"
mkdir -p "$OUT"
rm -f "$RAW" "$TMP"

echo "# make bench${QUICK:+ QUICK=$QUICK}    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# host: $(uname -sr), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of ${SECS} s per stream run, $PP_ROUNDS rounds of ${PP_SECS} s per ping-pong run${PIN:+, pinned}"
echo "# variants: $(printf '%s ' "${VARIANTS[@]}")"
echo "# sizes: ${SIZES[*]}; transports: ${TRANSPORTS[*]}"

# Fields of variant $1 (index): name, environment, expected state.
v_field() { local IFS='|'; local f; read -ra f <<< "${VARIANTS[$1]}|"; echo "${f[$2]}"; }

# One zcbench run: round variant-index transport test size buffer-mode
# (reused: page-aligned and reused, unaligned, fresh).
# Appends "round,variant,<zcbench csv row>" to $RAW and checks that the
# library was active exactly when the variant expects it, at both ends.
run_one() {
  local round=$1 vi=$2 tport=$3 test=$4 size=$5 mode=$6 name envs expect envarr tests
  name=$(v_field "$vi" 0); envs=$(v_field "$vi" 1); expect=$(v_field "$vi" 2)
  tests=$(v_field "$vi" 3)
  [ -z "$tests" ] || [[ ,$tests, == *,$test,* ]] || return 0
  read -ra envarr <<< "$envs"
  local args=(run --quiet --transport "$tport" --csv "$TMP" "${PIN[@]}")
  if [ "$test" = stream ]; then args+=(--test stream --sizes "$size" --seconds "$SECS")
  else args+=(--test pingpong --pp-sizes "$size" --seconds "$PP_SECS"); fi
  [ "$mode" = reused ] || args+=("--$mode")
  if ! env "${envarr[@]}" "$ZCBENCH" "${args[@]}"; then
    die "run failed: $name: ${envs:+$envs }$ZCBENCH ${args[*]}"
  fi
  local row; row=$(sed -n 2p "$TMP")
  local state peer
  state=$(echo "$row" | cut -d, -f15); peer=$(echo "$row" | cut -d, -f16)
  if [ "$state" != "$expect" ] || [ "$peer" != "$expect" ]; then
    die "variant $name: libzcsock $state in the client and $peer in the server, expected $expect (${envs:-no environment})"
  fi
  [ -f "$RAW" ] || echo "round,variant,$(head -n 1 "$TMP")" > "$RAW"
  echo "$round,$name,$row" >> "$RAW"
}

# Every variant once, in an order that alternates between rounds.
run_variants() {
  local round=$1; shift
  local n=${#VARIANTS[@]} i
  for ((i = 0; i < n; i++)); do
    if ((round % 2)); then run_one "$round" $((n - 1 - i)) "$@"
    else run_one "$round" "$i" "$@"; fi
  done
}

is_buf_size() { local s; for s in "${BUF_SIZES[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

start=$(date +%s)
for tport in "${TRANSPORTS[@]}"; do
  printf 'running %s:' "$tport"
  for size in "${SIZES[@]}"; do
    printf ' %s' "$size"
    for ((r = 1; r <= ROUNDS; r++)); do
      run_variants "$r" "$tport" stream "$size" reused
      if is_buf_size "$size"; then
        for m in "${BUF_MODES[@]}"; do run_variants "$r" "$tport" stream "$size" "$m"; done
      fi
    done
  done
  printf ' pingpong'
  for ((r = 1; r <= PP_ROUNDS; r++)); do run_variants "$r" "$tport" pingpong 1 reused; done
  echo
done
rm -f "$TMP"
echo "# measured in $(( $(date +%s) - start )) s"
for ((i = 0; i < ${#VARIANTS[@]}; i++)); do
  n=$(awk -F, -v v="$(v_field "$i" 0)" '$2 == v' "$RAW" | wc -l)
  [ "$n" -gt 0 ] || continue
  echo "# library check: $(v_field "$i" 0): libzcsock $(v_field "$i" 2) at both ends in all $n runs"
done
echo

names=()
for ((i = 0; i < ${#VARIANTS[@]}; i++)); do names+=("$(v_field "$i" 0)"); done
python3 "$HERE/bench_report.py" --raw "$RAW" --out "$OUT" --variants "$(IFS=,; echo "${names[*]}")" \
  --goals "$GOALS" --rounds "$ROUNDS"
echo
# What a blocking round trip cannot go below here, whatever carries it: the
# 1-byte round trips above (zcsock: a futex wake per hop) compare to this.
PROBE_ROUNDS=$([ "${QUICK:-}" = 1 ] && echo 3 || echo 5)
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
"$ZC_BUILD/wake_floor" "$PROBE_ROUNDS" 2000

# Event-driven request/response (non-blocking sockets and epoll), kernel and
# zcsock runs side by side; ratio: median over rounds of zcsock/kernel.
echo
echo "Event-driven ping-pong (epoll, non-blocking), round trip us (examples/epoll_pingpong.c);"
echo "  nospin: ZCSOCK_SPIN=0 (every wait sleeps: a machine with no CPU free), woken through"
echo "  the wake-up eventfd; bytes: the same with ZCSOCK_WAKE_EVENTFD=0 (doorbell bytes)"
for tport in tcp unix; do
  for size in 1 4096 65536; do
    ratios=(); ks=(); zs=(); rn=(); rb=()
    for ((r = 1; r <= PROBE_ROUNDS; r++)); do
      k=$("$ZC_BUILD/epoll_pingpong" "$tport" "$size" 2000 | awk '{print $3}')
      z=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_LOCAL_UNIX=1 "$ZC_BUILD/epoll_pingpong" "$tport" "$size" 2000 |
          awk '{print $3}')
      zn=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_LOCAL_UNIX=1 ZCSOCK_SPIN=0 \
             "$ZC_BUILD/epoll_pingpong" "$tport" "$size" 2000 | awk '{print $3}')
      zb=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_LOCAL_UNIX=1 ZCSOCK_SPIN=0 ZCSOCK_WAKE_EVENTFD=0 \
             "$ZC_BUILD/epoll_pingpong" "$tport" "$size" 2000 | awk '{print $3}')
      ks+=("$k"); zs+=("$z"); ratios+=("$(awk -v a="$z" -v b="$k" 'BEGIN {printf "%.3f", a / b}')")
      rn+=("$(awk -v a="$zn" -v b="$k" 'BEGIN {printf "%.3f", a / b}')")
      rb+=("$(awk -v a="$zb" -v b="$k" 'BEGIN {printf "%.3f", a / b}')")
    done
    printf '%-5s %6s  kernel %8.2f  zcsock %8.2f  zcsock/kernel %6.3f  nospin %6.3f  bytes %6.3f\n' \
      "$tport" "$size" "$(med "${ks[@]}")" "$(med "${zs[@]}")" "$(med "${ratios[@]}")" \
      "$(med "${rn[@]}")" "$(med "${rb[@]}")"
  done
done

# Connections at scale (issue 31): short connections and a busy round trip
# beside many idle paired ones, kernel and zcsock side by side.
echo
echo "Connections at scale (examples/conn_rate.c, both ends under the library or neither):"
echo "  short: connections/s (connect, 1 byte each way, close, one after the other);"
echo "  rt: a busy connection's 1-byte round trip, us; setup: s to open the idle ones"
echo "  (one round trip each); fds: the client's descriptors; rss: both processes' resident KiB"
echo "  with the idle ones open; paired: the client's connections paired (kernel / zcsock)"
CR_SECS=$([ "${QUICK:-}" = 1 ] && echo 1 || echo 2)
for idle in 0 1000 10000; do
  rs=(); rr=(); ks=(); zs=(); kr=(); zr=(); kset=(); zset=(); kf=; zf=; zp=
  for ((r = 1; r <= PROBE_ROUNDS; r++)); do
    kl=$("$ZC_BUILD/conn_rate" "$idle" "$CR_SECS" 2000)
    zl=$(env LD_PRELOAD="$ZC_LIB" "$ZC_BUILD/conn_rate" "$idle" "$CR_SECS" 2000)
    f() { awk -v k="$2" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}' <<<"$1"; }
    ks+=("$(f "$kl" short_per_s)"); zs+=("$(f "$zl" short_per_s)")
    kr+=("$(f "$kl" rt_us)"); zr+=("$(f "$zl" rt_us)")
    kset+=("$(f "$kl" setup_s)"); zset+=("$(f "$zl" setup_s)")
    kf=$(f "$kl" fds); zf=$(f "$zl" fds); zp=$(f "$zl" paired)
    km=$(f "$kl" rss_kib); zm=$(f "$zl" rss_kib)
    rs+=("$(awk -v a="${zs[-1]}" -v b="${ks[-1]}" 'BEGIN {printf "%.3f", (b > 0 ? a / b : 0)}')")
    rr+=("$(awk -v a="${zr[-1]}" -v b="${kr[-1]}" 'BEGIN {printf "%.3f", (b > 0 ? a / b : 0)}')")
  done
  printf 'idle %5d  short kernel %7.0f zcsock %7.0f zcsock/kernel %6.3f  rt kernel %7.2f zcsock %7.2f zcsock/kernel %6.3f  setup %6.3f / %6.3f  fds %s / %s  rss KiB %s / %s  paired %s\n' \
    "$idle" "$(med "${ks[@]}")" "$(med "${zs[@]}")" "$(med "${rs[@]}")" "$(med "${kr[@]}")" \
    "$(med "${zr[@]}")" "$(med "${rr[@]}")" "$(med "${kset[@]}")" "$(med "${zset[@]}")" \
    "$kf" "$zf" "$km" "$zm" "$zp"
done
# Idle connections that did pair (ZCSOCK_LOCAL_PAIR_AFTER=0: at connect, so
# the one round trip each makes pairs them): what one costs in memory and
# descriptors, against the kernel's, with 2,000 of them open.
kl=$("$ZC_BUILD/conn_rate" 2000 1 100)
zl=$(env LD_PRELOAD="$ZC_LIB" ZCSOCK_LOCAL_PAIR_AFTER=0 "$ZC_BUILD/conn_rate" 2000 1 100)
f() { awk -v k="$2" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}' <<<"$1"; }
awk -v km="$(f "$kl" rss_kib)" -v zm="$(f "$zl" rss_kib)" -v kf="$(f "$kl" fds)" \
    -v zf="$(f "$zl" fds)" -v zp="$(f "$zl" paired)" 'BEGIN {
  printf "idle paired 2000 (PAIR_AFTER=0)  rss KiB both ends kernel %d zcsock %d: +%.1f KiB a connection  client fds kernel %d zcsock %d: +%.2f a connection  paired %d\n",
    km, zm, (zm - km) / 2000, kf, zf, (zf - kf) / 2000, zp }'

# A real event-driven server: redis-server and redis-benchmark (100-byte
# values, one connection, one request at a time and 16 in flight), both
# under the library (the connection pairs) or neither, alternating rounds;
# requests per second, ratio: median over rounds of zcsock/kernel (above 1:
# zcsock serves more).  Skipped (and said so) without redis.
# Stop a server the bench started: TERM, and KILL (said on stderr) if it is
# still there 5 s later, so that a server ignoring TERM cannot hang the run.
stop_server() {
  local pid=$1 i
  kill "$pid" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "bench: pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-60)) still ran 5 s after SIGTERM: killed" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
}
# Kernel and zcsock alternating: PROBE_ROUNDS rounds of FN "" ARGS.. and
# FN "$ZC_LIB" ARGS.. (each prints one figure); sets K_MED, Z_MED and R_MED
# (the median of the rounds' zcsock/kernel ratios).
alt_rounds() {
  local fn=$1 r k z ks=() zs=() ratios=()
  shift
  # kernel first in odd rounds, zcsock first in even ones (ABBA): what a
  # run leaves behind for the next (60 s of TIME_WAIT sockets after a
  # connection per request: the port search slows) weighs on both alike
  for ((r = 1; r <= PROBE_ROUNDS; r++)); do
    if ((r % 2)); then
      k=$("$fn" "" "$@")
      z=$("$fn" "$ZC_LIB" "$@")
    else
      z=$("$fn" "$ZC_LIB" "$@")
      k=$("$fn" "" "$@")
    fi
    ks+=("$k"); zs+=("$z")
    ratios+=("$(awk -v a="$z" -v b="$k" 'BEGIN {printf "%.3f", (b > 0 ? a / b : 0)}')")
  done
  K_MED=$(med "${ks[@]}") Z_MED=$(med "${zs[@]}") R_MED=$(med "${ratios[@]}")
}
redis_rps() {   # preload pipeline [clients] -> requests/s of SET and GET together
  # (REDIS_ONLY=server or client: the library on that end only)
  local pre=$1 pipe=$2 clients=${3:-1} port pid rps spre=$1 cpre=$1
  [ "${REDIS_ONLY:-}" = client ] && spre=
  [ "${REDIS_ONLY:-}" = server ] && cpre=
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  env ${spre:+LD_PRELOAD=$spre ZCSOCK_STATS=1} redis-server --port "$port" --bind 127.0.0.1 \
    --save '' --appendonly no --daemonize no --loglevel warning >/dev/null 2>"$REDIS_ERR.srv" &
  pid=$!
  for ((w = 0; w < 50; w++)); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  # as many round trips at -P 16 as at -P 1 (REDIS_N requests each):
  # 20,000 requests at -P 16 took 15 ms, connection setup more than requests
  rps=$(env ${cpre:+LD_PRELOAD=$cpre ZCSOCK_STATS=1} timeout 120 redis-benchmark -p "$port" -c "$clients" \
          -n "$((REDIS_N * pipe))" -d 100 -P "$pipe" -t set,get --csv 2>"$REDIS_ERR" |
        awk -F'"' 'NR > 1 && $4 != "" {s += $4; n++} END {if (n) printf "%.0f", s / n}')
  stop_server "$pid"
  # with the library: the benchmark's connections must have paired (its
  # statistics at exit), or the figure says nothing about zcsock
  if [ -n "$pre" ] && [ -z "${REDIS_ONLY:-}" ] &&
     awk '$1 == "local.paired.connected:" && $2 > 0 {ok = 1} END {exit !ok}' \
                          "$REDIS_ERR"; then
    echo paired >> "$REDIS_ERR.ok"
    # wake-up signals (doorbells, futex wakes, eventfd writes) both ends
    # sent, per request
    awk -v n="$((REDIS_N * pipe))" '$1 == "local.doorbells:" || $1 == "local.futex_wakes:" ||
                         $1 == "local.efd_wakes:" {s += $2}
      END {printf "%.4f\n", s / (2 * n)}' "$REDIS_ERR" "$REDIS_ERR.srv" >> "$REDIS_ERR.sig$pipe"
  fi
  echo "${rps:-0}"
}
echo
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null &&
   command -v redis-cli >/dev/null; then
  REDIS_N=$([ "${QUICK:-}" = 1 ] && echo 20000 || echo 100000)
  REDIS_ERR=$(mktemp)
  echo "redis-benchmark, 1, 50 (its default) and 1,000 connections, SET+GET, 100-byte values,"
  echo "  $REDIS_N requests at -P 1, $((REDIS_N * 16)) at -P 16, requests/s (higher is better)"
  for clients in 1 50 1000; do
  for pipe in 1 16; do
    rm -f "$REDIS_ERR.sig$pipe"
    alt_rounds redis_rps "$pipe" "$clients"
    printf 'redis -c %-4s -P %-3s kernel %9.0f  zcsock %9.0f  zcsock/kernel %6.3f  wake-ups/request %s\n' \
      "$clients" "$pipe" "$K_MED" "$Z_MED" "$R_MED" \
      "$(sort -g "$REDIS_ERR.sig$pipe" 2>/dev/null | awk '{v[NR] = $1} END {print NR ? v[int((NR + 1) / 2)] : "?"}')"
  done
  done
  # 1,000 connections that live ten times as long (QUICK: 200 round trips
  # of 16 each instead of 20): pairing's cost spread over more requests
  rm -f "$REDIS_ERR.sig16"
  REDIS_N=$((REDIS_N * 10)) alt_rounds redis_rps 16 1000
  printf 'redis -c 1000 -P 16 x10 requests  kernel %9.0f  zcsock %9.0f  zcsock/kernel %6.3f\n' \
    "$K_MED" "$Z_MED" "$R_MED"
  # the library on one end only (the other end a plain program: nothing
  # pairs, the library must cost nothing), redis-benchmark's default 50
  for only in server client; do
    REDIS_ONLY=$only alt_rounds redis_rps 1 50
    printf 'redis -c 50   -P 1   kernel %9.0f  zcsock on the %-6s only %9.0f  zcsock/kernel %6.3f\n' \
      "$K_MED" "$only" "$Z_MED" "$R_MED"
  done
  # (redis_rps runs in a subshell: the paired runs are counted in a file)
  echo "# library check: redis: paired in $(grep -c . "$REDIS_ERR.ok" 2>/dev/null || echo 0) of $((7 * PROBE_ROUNDS)) zcsock runs"
  rm -f "$REDIS_ERR" "$REDIS_ERR".*
else
  echo "redis-benchmark: SKIPPED (redis-server, redis-cli or redis-benchmark not installed)"
fi

# nginx serving a small static file to wrk, both under the library or
# neither, alternating rounds: 4 and 1,000 keep-alive connections (they
# pair), and 8 at a time with "Connection: close" (a connection per request:
# with pair when it pays, the default, they stay on the kernel); requests
# per second, ratio zcsock/kernel, and how many connections paired.
# Skipped without nginx or wrk.
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
nginx_rps() {   # preload connections [header] -> requests/s
  local pre=$1 conns=$2 hdr=${3:-} d port pid rps user=
  d=$(mktemp -d)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  [ "$(id -u)" -eq 0 ] && user="user $(id -un) $(id -gn);"
  mkdir -p "$d/www" "$d/logs"
  head -c 1024 /dev/urandom >"$d/www/f.bin"
  cat >"$d/nginx.conf" <<NGX
daemon off;
master_process off;
$user
pid $d/nginx.pid;
error_log $d/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $d/body;
  proxy_temp_path $d/proxy;
  fastcgi_temp_path $d/fastcgi;
  uwsgi_temp_path $d/uwsgi;
  scgi_temp_path $d/scgi;
  default_type application/octet-stream;
  keepalive_requests 100000000;
  server { listen 127.0.0.1:$port; root $d/www; }
}
NGX
  env ${pre:+LD_PRELOAD=$pre} "$NGINX" -p "$d" -c "$d/nginx.conf" -e "$d/logs/error.log" \
    >/dev/null 2>&1 &
  pid=$!
  for ((w = 0; w < 50; w++)); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/f.bin" && break
    sleep 0.1
  done
  if [ "$hdr" = ab ]; then     # ab without -k: a connection per request, HTTP/1.0
    rps=$(env ${pre:+LD_PRELOAD=$pre ZCSOCK_STATS=1} timeout 60 ab -q -c"$conns" -t"$NGINX_S" \
            -n 1000000 "http://127.0.0.1:$port/f.bin" 2>"$d/wrk.err" |
          awk '/^Requests per second:/ {printf "%.0f", $4}')
  else
    rps=$(env ${pre:+LD_PRELOAD=$pre ZCSOCK_STATS=1} timeout 60 wrk -t1 -c"$conns" -d"$NGINX_S"s \
            ${hdr:+-H "$hdr"} "http://127.0.0.1:$port/f.bin" 2>"$d/wrk.err" |
          awk '/^Requests\/sec:/ {printf "%.0f", $2}')
  fi
  stop_server "$pid"
  # with the library: wrk's connections paired and declined as short (its
  # statistics at exit)
  [ -n "$pre" ] && awk '$1 == "local.paired.connected:" {p += $2}
                        $1 == "local.declined.short:" {s += $2}
                        END {printf "%d %d\n", p, s}' "$d/wrk.err" >> "$NGINX_OK"
  rm -rf "$d"
  echo "${rps:-0}"
}
echo
if [ -x "$NGINX" ] && command -v wrk >/dev/null && command -v curl >/dev/null; then
  NGINX_S=$([ "${QUICK:-}" = 1 ] && echo 2 || echo 5)
  NGINX_OK=$(mktemp)
  echo "nginx (1 KiB static file) and wrk -t1 (row ab: ApacheBench -c 8 without -k, a connection"
  echo "  per request), requests/s (higher is better)"
  for row in "keep-alive|4|" "keep-alive|1000|" "close|8|Connection: close" "ab|8|ab"; do
    IFS='|' read -r kind conns hdr <<<"$row"
    if [ "$hdr" = ab ] && ! command -v ab >/dev/null; then
      echo "nginx ab: SKIPPED (ab not installed)"
      continue
    fi
    : >"$NGINX_OK"
    alt_rounds nginx_rps "$conns" "$hdr"
    printf 'nginx %-10s -c %-4s kernel %9.0f  zcsock %9.0f  zcsock/kernel %6.3f  paired/short per run %s\n' \
      "$kind" "$conns" "$K_MED" "$Z_MED" "$R_MED" \
      "$(awk '{printf "%s%d/%d", (NR > 1 ? " " : ""), $1, $2}' "$NGINX_OK")"
  done
  rm -f "$NGINX_OK"
else
  echo "nginx: SKIPPED (nginx, wrk or curl not installed)"
fi

# PostgreSQL with a connection per transaction (pgbench -C -S, 4 clients):
# the server forks a backend per connection, so what a fork child of a
# process under the library pays shows here; both under the library or
# neither, alternating rounds, transactions/s. Skipped without PostgreSQL
# (as root it runs as the postgres user, whom pairing needs on both ends).
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
pg_run() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- env "$@"; else env "$@"; fi; }
pg_tps() {   # preload -> transactions/s
  local pre=$1 tps
  pg_run ${pre:+LD_PRELOAD=$pre} "$PGBIN/pg_ctl" -D "$PG_D/data" -l "$PG_D/log" -w -o \
    "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$PG_D -c fsync=off" \
    start >/dev/null 2>&1 || { echo 0; return; }
  tps=$(pg_run ${pre:+LD_PRELOAD=$pre ZCSOCK_STATS=1} timeout 60 "$PGBIN/pgbench" -h 127.0.0.1 \
          -p "$PG_PORT" -U postgres -S -C -n -c 4 -j 2 -T "$PG_S" postgres 2>"$PG_D/pgbench.err" |
        awk '/^tps/ {printf "%.0f", $3}
             /^number of transactions actually processed:/ {print $NF > "/dev/stderr"}' 2>"$PG_D/n")
  pg_run "$PGBIN/pg_ctl" -D "$PG_D/data" -m fast -w stop >/dev/null 2>&1
  # with the library: how many of pgbench's connections (one per
  # transaction) paired, from its statistics at exit
  [ -n "$pre" ] && awk -v n="$(cat "$PG_D/n" 2>/dev/null)" '$1 == "local.paired.connected:" {p += $2}
                        END {printf "%d/%d\n", p, n}' "$PG_D/pgbench.err" >> "$PG_D/paired"
  echo "${tps:-0}"
}
echo
if [ -n "$PGBIN" ] && [ -x "$PGBIN/pgbench" ] && { [ "$(id -u)" -ne 0 ] || id postgres >/dev/null 2>&1; }; then
  PG_S=$([ "${QUICK:-}" = 1 ] && echo 3 || echo 8)
  PG_D=$(mktemp -d)
  [ "$(id -u)" -eq 0 ] && chown postgres: "$PG_D"
  PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  if pg_run "$PGBIN/initdb" -D "$PG_D/data" --auth=trust -U postgres -E UTF8 --locale=C.UTF-8 \
       >/dev/null 2>&1 &&
     pg_run "$PGBIN/pg_ctl" -D "$PG_D/data" -l "$PG_D/log" -w -o \
       "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$PG_D" start >/dev/null 2>&1 &&
     pg_run "$PGBIN/pgbench" -h 127.0.0.1 -p "$PG_PORT" -U postgres -i -s 2 -q postgres >/dev/null 2>&1 &&
     pg_run "$PGBIN/pg_ctl" -D "$PG_D/data" -m fast -w stop >/dev/null 2>&1; then
    echo "PostgreSQL, pgbench -C -S -c 4 (a connection per transaction), transactions/s"
    alt_rounds pg_tps
    printf 'pgbench -C  kernel %9.0f  zcsock %9.0f  zcsock/kernel %6.3f  paired/connections per run %s\n' \
      "$K_MED" "$Z_MED" "$R_MED" "$(paste -sd' ' "$PG_D/paired" 2>/dev/null)"
  else
    echo "pgbench: SKIPPED (initdb or pgbench -i failed: $(tail -n 2 "$PG_D/log" 2>/dev/null))"
  fi
  rm -rf "$PG_D"
else
  echo "pgbench: SKIPPED (PostgreSQL not installed, or no postgres user to run it as root)"
fi

# MPI over TCP: two ranks of examples/mpi_pingpong.c on this host through
# the MPI library's TCP transport, without the library and with it (mpiexec
# and both ranks preloaded, as `zcsock run -- mpiexec` does), alternating
# rounds; and the MPI library's own shared-memory transport, what an MPI
# user gets on one host without TCP (the bar of DESIGN.md §7). Figures:
# median over rounds; round trips in us (lower is better), windows of 16
# messages in MB/s (higher is better). Skipped without an MPI.
mpi_fig() {   # IMPL VARIANT -> "lat1 lat4k bw64k bw1m bw8m" (0 on failure)
  local impl=$1 v=$2 bin=$ZC_BUILD/mpi_pingpong_$1 secs pre=() env=() opts=()
  secs=$([ "${QUICK:-}" = 1 ] && echo 0.3 || echo 0.5)
  [ "$v" = zcsock ] && pre=(LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=0)
  [ "$v" = xchg ] && pre=(LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=1)
  if [ "$impl" = openmpi ]; then
    env=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)   # 2 ranks, 2 slots: no
    # oversubscription, which would make idle ranks yield the CPU
    opts=(--mca pml ob1)
    if [ "$v" = shm ]; then opts+=(--mca btl vader,self)
    else opts+=(--mca btl tcp,self --mca btl_tcp_if_include lo); fi
  else
    env=(UCX_WARN_UNUSED_ENV_VARS=n)
    [ "$v" = shm ] || env+=(UCX_TLS=tcp,self MPIR_CVAR_NOLOCAL=1)
  fi
  # a run that fails or times out gives zeros and a line on stderr (set -e
  # and pipefail would end the whole bench: an MPICH page-exchange run
  # stalled once in a QUICK run, 2026-11-29)
  { env "${env[@]}" "${pre[@]}" timeout 120 "mpiexec.$impl" -n 2 "${opts[@]}" "$bin" "$secs" 2>/dev/null ||
      echo "# mpi_fig $impl $v: the job failed or timed out (exit $?)" >&2; } |
    awk '{v[NR] = $3} END {printf "%s %s %s %s %s\n", v[1] + 0, v[2] + 0, v[3] + 0, v[4] + 0, v[5] + 0}'
}
mpi_med() {   # column N of the rows on stdin: the median
  awk -v c="$1" '{print $c}' | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}
echo
mpi_any=
for impl in openmpi mpich; do
  [ -x "$ZC_BUILD/mpi_pingpong_$impl" ] && command -v "mpiexec.$impl" >/dev/null || continue
  [ -n "$mpi_any" ] || echo "MPI, 2 ranks on this host (examples/mpi_pingpong.c): round trip us of 1 B / 4 KiB, MB/s of 64 KiB / 1 MiB / 8 MiB windows; median of $PROBE_ROUNDS rounds"
  mpi_any=1
  rk=$(mktemp) rz=$(mktemp) rs=$(mktemp)
  for ((r = 1; r <= PROBE_ROUNDS; r++)); do
    mpi_fig "$impl" kernel >>"$rk"; mpi_fig "$impl" zcsock >>"$rz"; mpi_fig "$impl" shm >>"$rs"
  done
  k=() z=() m=()
  for c in 1 2 3 4 5; do
    k+=("$(mpi_med "$c" <"$rk")"); z+=("$(mpi_med "$c" <"$rz")"); m+=("$(mpi_med "$c" <"$rs")")
  done
  rat() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
  tcp=$([ "$impl" = openmpi ] && echo "ob1/tcp" || echo "ucx/tcp")
  shm=$([ "$impl" = openmpi ] && echo "ob1/vader" || echo "ucx/shm")
  printf '%-8s %-9s kernel %7.2f %7.2f %8.0f %8.0f %8.0f\n' "$impl" "$tcp" "${k[@]}"
  printf '%-8s %-9s zcsock %7.2f %7.2f %8.0f %8.0f %8.0f   zcsock/kernel %s %s %s %s %s\n' "$impl" "$tcp" "${z[@]}" \
    "$(rat "${z[0]}" "${k[0]}")" "$(rat "${z[1]}" "${k[1]}")" "$(rat "${z[2]}" "${k[2]}")" \
    "$(rat "${z[3]}" "${k[3]}")" "$(rat "${z[4]}" "${k[4]}")"
  printf '%-8s %-9s own    %7.2f %7.2f %8.0f %8.0f %8.0f   zcsock/own    %s %s %s %s %s\n' "$impl" "$shm" "${m[@]}" \
    "$(rat "${z[0]}" "${m[0]}")" "$(rat "${z[1]}" "${m[1]}")" "$(rat "${z[2]}" "${m[2]}")" \
    "$(rat "${z[3]}" "${m[3]}")" "$(rat "${z[4]}" "${m[4]}")"
  rm -f "$rk" "$rz" "$rs"
done
[ -n "$mpi_any" ] || echo "MPI: SKIPPED (no mpiexec.openmpi or mpiexec.mpich with its mpicc at build time)"

# Page exchange versus one copy (issue 13: the crossover on this machine),
# on 4 KiB shmem pages and, where 2 MiB pages can be had, shmem THP and
# hugetlb. As root the run allows shmem THP (advise) and reserves a few
# hugetlb pages for the probe and puts both back afterwards
# (BENCH_HUGE=0: only what the machine already allows).
echo
if [ "$(id -u)" = 0 ] && [ "${BENCH_HUGE:-1}" = 1 ]; then
  [ "$hp_old_nr" -lt 40 ] 2>/dev/null && { echo 40 > /proc/sys/vm/nr_hugepages 2>/dev/null || true; }
  echo "(for this probe: shmem THP $(sed -n 's/.*\[\(.*\)\].*/\1/p' "$hp_thp" 2>/dev/null), hugetlb pages $(cat /proc/sys/vm/nr_hugepages); put back to $hp_old_thp, $hp_old_nr after)"
fi
"$ZC_BUILD/exchange_floor" "$([ "${QUICK:-}" = 1 ] && echo 30 || echo 200)"
# the pool as found again: page exchange lends hugetlb units when shmem THP
# is off, and the rows below say which pages they had
[ "$(id -u)" = 0 ] && echo "$hp_old_nr" > /proc/sys/vm/nr_hugepages 2>/dev/null

# Page exchange on the data path (ZCSOCK_EXCHANGE=1): zcbench streaming over
# TCP, the kernel, the ring (ZCSOCK_EXCHANGE=0) and exchange (the default) in the same
# rounds; MB/s medians, CPU seconds per GB (user + system of both ends), the
# exchange-unit cache's hit rate.  Buffers: reused (sent again unchanged),
# fresh (malloc/free per message), refilled (--validate: the sender writes
# every message, the receiver checks every byte).  Then exchange with shmem
# THP off (it must fall back to the ring, not lose to it).
xb_run() {   # SIZE BUFOPT ENV... -> "MB/s cpu_s_per_GB hit%"
  local size=$1 opt=$2; shift 2
  local d; d=$(mktemp -d)
  local out; out=$( { env "$@" ZCSOCK_STATS=1 ZCSOCK_LOG_FILE="$d/%p.log" /usr/bin/time -f 'cpu %U %S' \
      "$ZC_BUILD/zcbench" run --transport tcp --test stream --sizes "$size" --seconds "$XB_SECS" \
      $opt --quiet --csv "$d/r.csv"; } 2>&1 )
  local mbs bytes cpu
  mbs=$(awk -F, 'NR > 1 && $1 == "stream" {print $7}' "$d/r.csv" 2>/dev/null | head -1)
  bytes=$(awk -F, 'NR > 1 && $1 == "stream" {print $13}' "$d/r.csv" 2>/dev/null | head -1)
  cpu=$(echo "$out" | awk '/^cpu / {print $2 + $3}')
  awk -v m="${mbs:-0}" -v n="${bytes:-0}" -v c="${cpu:-0}" \
      -v h="$(cat "$d"/*.log 2>/dev/null | awk -F': ' '$1 == "pdc.xu.hits" {h += $2} $1 == "pdc.xu.misses" {m += $2} END {print ((h + m) ? 100 * h / (h + m) : -1)}')" \
      'BEGIN {gb = n / 1e9; printf "%s %.3f %.0f\n", m, (gb > 0 ? c / gb : 0), h}'
  rm -rf "$d"
}
# the median (of an even count: the mean of the middle two)
xb_med() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) + 0}'; }
# Windows of 2 s (3 in the full run): a unit's first lend takes a new 2 MiB
# page, 5-13 ms on a VM whose balloon reports free pages to its host, and
# the rent-or-buy rule (common/zc_rent.h) buys a unit only once the ring
# passes its unchanged bytes took add up to that: about 30 passes, a third
# of a second at 64 MiB.  A 0.5 s window measures mostly that once-per-run
# cost (ARCHITECTURE.md, "When a first lend pays", has those numbers).
XB_SECS=$([ "${QUICK:-}" = 1 ] && echo 2 || echo 3)
XB_ROUNDS=$([ "${QUICK:-}" = 1 ] && echo 3 || echo 5)
echo
echo "Page exchange: streaming over TCP, MB/s (median of $XB_ROUNDS rounds), CPU s per GB, cache hit %"
echo "  (shmem THP: $(sed -n 's/.*\[\(.*\)\].*/\1/p' "$hp_thp" 2>/dev/null); ring: ZCSOCK_EXCHANGE=0; exchange: zcsock's default, ZCSOCK_EXCHANGE=1)"
printf '%-9s %5s  %10s %10s %10s  %8s %8s  %6s %6s %6s  %5s\n' buffer size kernel ring exchange \
  "xch/kern" "xch/ring" cpu_k cpu_r cpu_x "hit%"
for bm in reused fresh refilled; do
  case $bm in reused) opt=""; sizes="2M 4M 8M 16M 64M" ;; fresh) opt="--fresh"; sizes="8M 64M" ;;
              refilled) opt="--validate"; sizes="8M 64M" ;; esac
  for size in $sizes; do
    k=(); z=(); x=(); ck=(); cz=(); cx=(); hx=()
    for ((r = 1; r <= XB_ROUNDS; r++)); do
      read -r a b _ <<< "$(xb_run "$size" "$opt" ZCSOCK_X=0)"; k+=("$a"); ck+=("$b")
      read -r a b _ <<< "$(xb_run "$size" "$opt" LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=0)"; z+=("$a"); cz+=("$b")
      read -r a b c <<< "$(xb_run "$size" "$opt" LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=1)"
      x+=("$a"); cx+=("$b"); hx+=("$c")
    done
    mk=$(printf '%s\n' "${k[@]}" | xb_med); mz=$(printf '%s\n' "${z[@]}" | xb_med)
    mx=$(printf '%s\n' "${x[@]}" | xb_med)
    printf '%-9s %5s  %10.0f %10.0f %10.0f  %8.2f %8.2f  %6.3f %6.3f %6.3f  %5s\n' "$bm" "$size" \
      "$mk" "$mz" "$mx" "$(awk -v a="$mx" -v b="$mk" 'BEGIN {print b ? a / b : 0}')" \
      "$(awk -v a="$mx" -v b="$mz" 'BEGIN {print b ? a / b : 0}')" \
      "$(printf '%s\n' "${ck[@]}" | xb_med)" "$(printf '%s\n' "${cz[@]}" | xb_med)" \
      "$(printf '%s\n' "${cx[@]}" | xb_med)" "$(printf '%s\n' "${hx[@]}" | xb_med)"
  done
done
# MPI over TCP with page exchange: the 8 MiB window's bandwidth
for impl in openmpi mpich; do
  [ -x "$ZC_BUILD/mpi_pingpong_$impl" ] && command -v "mpiexec.$impl" >/dev/null || continue
  rk=$(mktemp) rz=$(mktemp) rx=$(mktemp)
  for ((r = 1; r <= XB_ROUNDS; r++)); do
    mpi_fig "$impl" kernel >>"$rk"; mpi_fig "$impl" zcsock >>"$rz"; mpi_fig "$impl" xchg >>"$rx"
  done
  k=$(mpi_med 5 <"$rk"); z=$(mpi_med 5 <"$rz"); x=$(mpi_med 5 <"$rx")
  printf 'MPI %-8s 8 MiB windows, MB/s: kernel %.0f, ring %.0f, exchange %.0f: exchange/kernel %.2f, exchange/ring %.2f\n' \
    "$impl" "$k" "$z" "$x" "$(awk -v a="$x" -v b="$k" 'BEGIN {print b ? a / b : 0}')" \
    "$(awk -v a="$x" -v b="$z" 'BEGIN {print b ? a / b : 0}')"
  rm -f "$rk" "$rz" "$rx"
done
if [ "$(id -u)" = 0 ] && echo never > "$hp_thp" 2>/dev/null; then
  z=(); x=()
  for ((r = 1; r <= XB_ROUNDS; r++)); do
    read -r a _ <<< "$(xb_run 8M "" LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=0)"; z+=("$a")
    read -r a _ <<< "$(xb_run 8M "" LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=1)"; x+=("$a")
  done
  mz=$(printf '%s\n' "${z[@]}" | xb_med); mx=$(printf '%s\n' "${x[@]}" | xb_med)
  printf 'shmem THP never, hugetlb pages %s, reused 8M: ring %.0f, exchange %.0f MB/s: exchange/ring %.2f (falls back to the ring)\n' \
    "$(cat /proc/sys/vm/nr_hugepages)" "$mz" "$mx" "$(awk -v a="$mx" -v b="$mz" 'BEGIN {print b ? a / b : 0}')"
  # exchange on 4 KiB pages, opt-in (ZCSOCK_EXCHANGE_4K=1): ring, exchange
  echo "Page exchange on 4 KiB pages (shmem THP never, ZCSOCK_EXCHANGE_4K=1), MB/s (median of $XB_ROUNDS rounds)"
  for c in "reused 8M" "fresh 8M" "refilled 8M" "refilled 64M"; do
    set -- $c
    case $1 in reused) opt="" ;; fresh) opt="--fresh" ;; refilled) opt="--validate" ;; esac
    z=(); x=()
    for ((r = 1; r <= XB_ROUNDS; r++)); do
      read -r a _ <<< "$(xb_run "$2" "$opt" LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=0)"; z+=("$a")
      read -r a _ <<< "$(xb_run "$2" "$opt" LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE_4K=1)"; x+=("$a")
    done
    mz=$(printf '%s\n' "${z[@]}" | xb_med); mx=$(printf '%s\n' "${x[@]}" | xb_med)
    printf '  %-9s %4s  ring %8.0f  exchange %8.0f  exchange/ring %6.2f\n' "$1" "$2" "$mz" "$mx" \
      "$(awk -v a="$mx" -v b="$mz" 'BEGIN {print b ? a / b : 0}')"
  done
  # hugetlb units: shmem THP still never, 1024 hugetlb pages (2 GiB) for
  # both ends' buffers, unit files and mapped units
  echo "$((hp_old_nr + 1024))" > /proc/sys/vm/nr_hugepages 2>/dev/null
  if [ "$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)" -ge 1024 ]; then
    echo "Page exchange on hugetlb (shmem THP never, $(cat /proc/sys/vm/nr_hugepages) hugetlb pages), MB/s (median of $XB_ROUNDS rounds)"
    for c in "reused 8M" "reused 64M" "fresh 8M" "refilled 8M" "refilled 64M"; do
      set -- $c
      case $1 in reused) opt="" ;; fresh) opt="--fresh" ;; refilled) opt="--validate" ;; esac
      k=(); z=(); x=()
      for ((r = 1; r <= XB_ROUNDS; r++)); do
        read -r a _ <<< "$(xb_run "$2" "$opt" ZCSOCK_X=0)"; k+=("$a")
        read -r a _ <<< "$(xb_run "$2" "$opt" LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=0)"; z+=("$a")
        read -r a _ <<< "$(xb_run "$2" "$opt" LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=1)"; x+=("$a")
      done
      mk=$(printf '%s\n' "${k[@]}" | xb_med); mz=$(printf '%s\n' "${z[@]}" | xb_med)
      mx=$(printf '%s\n' "${x[@]}" | xb_med)
      printf '  %-9s %4s  kernel %8.0f  ring %8.0f  exchange %8.0f  exchange/kernel %7.2f  exchange/ring %6.2f\n' \
        "$1" "$2" "$mk" "$mz" "$mx" "$(awk -v a="$mx" -v b="$mk" 'BEGIN {print b ? a / b : 0}')" \
        "$(awk -v a="$mx" -v b="$mz" 'BEGIN {print b ? a / b : 0}')"
    done
  else
    echo "Page exchange on hugetlb: SKIPPED (the kernel gave fewer than 1024 free hugetlb pages)"
  fi
  echo "$hp_old_nr" > /proc/sys/vm/nr_hugepages 2>/dev/null
fi
hp_restore
trap - EXIT
