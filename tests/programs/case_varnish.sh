#!/usr/bin/env bash
# Varnish Cache (varnishd -F -j none: manager and cache child as root, one
# user, so that connections may pair; -b to an origin of our own,
# http_origin.py, run with the server side's environment like varnishd, so
# in mode one the varnishd -> origin connections are preloaded on both
# ends; -s malloc,256m).  Per round: a 32 MiB object fetched once (a miss)
# then four times at once (hits, checked from X-Varnish), two 32 MiB
# uncacheable fetches at once (Cache-Control: no-store: passed through
# while streaming), two 24 MiB POSTs at once (Varnish passes them to the
# origin, which answers their sha256; one with "Expect: 100-continue"), ab
# without and with keep-alive (2,000 requests, 8 at once) on a small
# object.  Repeated: under an earlier library Varnish failed about half its
# runs (a 24 MiB POST passed to the origin hung, the cache child panicked
# on epoll_ctl(EPOLL_CTL_DEL) == ENOENT in its waiter thread, or
# segfaulted at start-up on a non-canonical pointer).  varnishd's output
# and any panic (varnishadm panic.show) are kept in $P_ART.
set -u
. "$(dirname "$0")/lib.sh"
p_setup varnish "$1"
p_need varnishd varnishadm ab curl openssl
[ "$(id -u)" -eq 0 ] || { echo "skip: varnishd -j none needs root here"; exit 77; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || { echo "skip: python3 not installed"; exit 77; }

REPS=$(p_reps 4) BIG=$((32 << 20)) UP=$((24 << 20))
mkdir -p "$P_TMP/docs"
p_gen big "$BIG" >"$P_TMP/docs/big"
p_gen small 4096 >"$P_TMP/docs/small"
BIG_SHA=$(p_sha256 "$P_TMP/docs/big")
oport=$(p_free_port) && vport=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/origin.log" p_srv "$PY" "$P_DIR/http_origin.py" "$oport" "$P_TMP/docs"
opid=$P_LAST_PID
p_wait_file "$P_ART/origin.log" '^listening' 20 || p_die "origin never listened: $(tail -n 3 "$P_ART/origin.log")"
VN=$P_TMP/varnish
p_bg "$P_ART/server.log" p_srv varnishd -F -j none -n "$VN" -a "127.0.0.1:$vport" -b "127.0.0.1:$oport" \
  -s malloc,256m -p first_byte_timeout=20 -p between_bytes_timeout=20
vpid=$P_LAST_PID
p_wait_listen "$vport" 30 || p_die "varnishd never listened: $(tail -n 5 "$P_ART/server.log")"
V=http://127.0.0.1:$vport

c() { p_t 60 p_cli curl -sS -f --max-time 50 "$@"; }
get() {   # get NAME URL OUT: fetch, keep the headers, hash
  c -D "$P_TMP/$1.h" -o "$P_TMP/$1" "$2" 2>>"$P_ART/curl.log" || { p_say "$1: curl failed: $(tail -1 "$P_ART/curl.log")"; return 1; }
}
hit() { grep -Eiq '^X-Varnish: *[0-9]+ +[0-9]+' "$P_TMP/$1.h"; }
cached() {   # a miss, then 4 at once that must be hits
  local r=$1 i pids=() rc=0 hits=0
  get "m$r" "$V/big?round=$r" || rc=1
  p_same "round $r miss" "$BIG_SHA" "$(p_sha256 "$P_TMP/m$r")" || rc=1
  for i in 1 2 3 4; do get "h$i" "$V/big?round=$r" & pids+=($!); done
  for i in 1 2 3 4; do
    wait "${pids[i-1]}" || rc=1
    p_same "round $r hit $i" "$BIG_SHA" "$(p_sha256 "$P_TMP/h$i")" || rc=1
    hit "h$i" && hits=$((hits + 1))
  done
  p_say "round $r: $hits of 4 served from the cache"
  [ $hits -eq 4 ] || { p_say "expected 4 cache hits: $(grep -i '^X-Varnish' "$P_TMP"/h?.h | tr -d '\r' | tr '\n' ' ')"; rc=1; }
  return $rc
}
passed() {   # two uncacheable fetches at once
  local r=$1 i pids=() rc=0
  for i in 1 2; do get "n$i" "$V/big?nostore=$r.$i" & pids+=($!); done
  for i in 1 2; do
    wait "${pids[i-1]}" || rc=1
    p_same "round $r no-store $i" "$BIG_SHA" "$(p_sha256 "$P_TMP/n$i")" || rc=1
  done
  return $rc
}
posts() {   # two 24 MiB POSTs at once, passed to the origin
  local r=$1 i pids=() rc=0 hdr
  for i in 1 2; do
    p_gen "post$r.$i" "$UP" >"$P_TMP/up$i"
    hdr=(-H 'Expect:'); [ $i = 2 ] && hdr=(-H 'Expect: 100-continue')
    c "${hdr[@]}" --data-binary "@$P_TMP/up$i" "$V/upload" >"$P_TMP/ua$i" 2>>"$P_ART/curl.log" & pids+=($!)
  done
  for i in 1 2; do
    wait "${pids[i-1]}" || { p_say "POST $i: curl failed: $(tail -1 "$P_ART/curl.log")"; rc=1; }
    p_same "round $r POST $i" "$(p_sha256 "$P_TMP/up$i")" "$(cat "$P_TMP/ua$i")" || rc=1
  done
  return $rc
}
abrun() { p_ab 90 2000 "$V/small" "$@"; }   # abrun [-k]: every request complete and whole
healthy() {   # the manager alive, its cache child started once and never panicked
  local n
  p_alive "$vpid" || { p_say "varnishd died: $(tail -n 5 "$P_ART/server.log")"; return 1; }
  p_alive "$opid" || { p_say "the origin died: $(tail -n 5 "$P_ART/origin.log")"; return 1; }
  n=$(grep -c 'Child ([0-9]*) Started' "$P_ART/server.log")
  if grep -Eq 'Panic|died|not responding|Segmentation' "$P_ART/server.log" || [ "$n" -ne 1 ]; then
    p_say "the cache child started $n time(s): $(grep -E 'Panic|died|not responding|Started' "$P_ART/server.log" | head -n 5 | tr '\n' ' ')"
    return 1
  fi
}
for ((r = 1; r <= REPS; r++)); do
  p_step "cached$r" cached "$r" || break
  p_step "passed$r" passed "$r" || break
  p_step "posts$r" posts "$r" || break
  p_step "ab$r" abrun || break
  p_step "ab-keepalive$r" abrun -k || break
  p_step "healthy$r" healthy || { hfail=1; break; }
done
[ "$r" -gt "$REPS" ] || [ -n "${hfail:-}" ] || p_step "healthy" healthy   # after another step failed
timeout 10 varnishadm -n "$VN" panic.show >"$P_ART/panic.txt" 2>&1
grep -q 'has not panicked' "$P_ART/panic.txt" || p_say "varnishadm panic.show: $(head -n 3 "$P_ART/panic.txt" | tr '\n' ' ')"
# the manager stops its cache child (both exit, leaving their reports)
kill -TERM "$vpid" 2>/dev/null
p_wait "$vpid" 15 >/dev/null; p_say "varnishd exited $?"
p_stop "$opid" 5
p_end
