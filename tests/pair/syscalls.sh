#!/bin/bash
# Case pair/syscalls: what pairing a connection costs in system calls, both
# ends together (issue 31: "count the system calls pairing costs per
# connection and cut them"; no walk of /proc/PID/fd).  conn_rate (both ends
# under the library, every connection paired at connect) opens 100, then
# 300 idle connections; the difference over 200 is what one pairing adds to
# a kernel connection's own calls (socket, connect, accept4, epoll_ctl, one
# byte each way), waits left out (their count depends on timing).  Fails
# over PAIR_SYSCALLS_MAX calls (65 on 2026-12-03, 78 before the pairing
# steps stopped asking twice), over 3 readlinkat
# (the proof that the announcer holds its socket: one, hinted, per end),
# or when a connection did not pair.  Skips without strace, or where it
# may not trace.
#   syscalls.sh LIB CONN_RATE
LIB=$1 CR=$2 MAX=${PAIR_SYSCALLS_MAX:-70}
command -v strace >/dev/null || { echo "strace is not installed"; exit 77; }
strace -f -c -o /dev/null true >/dev/null 2>&1 || { echo "strace cannot trace here (ptrace refused)"; exit 77; }
[ -x "$CR" ] || { echo "no $CR"; exit 1; }
run() {     # idle -> "<all calls> <readlinkat calls> <paired>"
  local out st
  out=$(mktemp) st=$(mktemp)
  ZCSOCK_LOCAL_PAIR_AFTER=0 strace -f -c -o "$st" env LD_PRELOAD="$LIB" "$CR" "$1" 0.001 1 >"$out" 2>&1 ||
    { cat "$out"; rm -f "$out" "$st"; return 1; }
  # (waits are left out: how often a wait returns depends on timing)
  awk -v p="$(awk '{for (i = 1; i < NF; i++) if ($i == "paired") print $(i + 1)}' "$out")" '
      $NF == "total" {t += $4} $NF == "readlinkat" {r = $4}
      $NF ~ /^(epoll_p?wait|poll|ppoll|futex|sched_yield|nanosleep|clock_nanosleep)$/ {t -= $4}
      END {printf "%d %d %d\n", t, r, p}' "$st"
  rm -f "$out" "$st"
}
a=$(run 100) && b=$(run 300) || exit 1
read -r t1 r1 p1 <<<"$a"
read -r t2 r2 p2 <<<"$b"
per=$(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.1f", (b - a) / 200}')
rl=$(awk -v a="$r1" -v b="$r2" 'BEGIN {printf "%.1f", (b - a) / 200}')
echo "pairing: $per system calls a connection (both ends), $rl readlinkat; paired $p1 then $p2"
[ $((p2 - p1)) -ge 200 ] || { echo "FAIL: $((p2 - p1)) of 200 more connections paired"; exit 1; }
awk -v x="$per" -v m="$MAX" 'BEGIN {exit !(x <= m)}' ||
  { echo "FAIL: $per system calls a pairing, more than $MAX"; exit 1; }
awk -v x="$rl" 'BEGIN {exit !(x <= 3)}' || { echo "FAIL: $rl readlinkat a pairing (a /proc walk?)"; exit 1; }
