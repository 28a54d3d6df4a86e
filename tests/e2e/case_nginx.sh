#!/usr/bin/env bash
# nginx + curl: nginx (master and 2 workers, private prefix and config in a
# temp dir, free loopback port) serves a 256 MiB file of pseudo-random bytes
# (QUICK=1: 64 MiB, smaller range and slow read);
# curl downloads it several ways, without the library and twice with it in
# nginx and in curl (AF_UNIX pairing on, then the defaults):
#   sendfile   location with sendfile on (the file goes out by sendfile(2))
#   copy+range sendfile off, 1 MiB output buffers (read + writev), then in
#              the same curl process (keep-alive connection) a range
#              request of 100000000 bytes from offset 1000
#   slow       sendfile off, 64 MiB range read at --limit-rate 64M, so the
#              server keeps hitting a full socket buffer (EAGAIN + epoll)
# Every body's sha256 must match the file's (or the slice's), and nginx's
# error log must not gain crit/alert/emerg lines.
set -u
. "$(dirname "$0")/lib.sh"
e2e_setup nginx
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "skip: nginx not installed"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not installed"; exit 77; }
command -v openssl >/dev/null || { echo "skip: openssl not installed"; exit 77; }

SIZE=$((256 << 20))
RANGE_OFF=1000 RANGE_LEN=100000000
SLOW_LEN=$((64 << 20))
[ "$QUICK" = 1 ] && SIZE=$((64 << 20)) RANGE_LEN=20000000 SLOW_LEN=$((16 << 20))
WWW=$E2E_TMP/www
mkdir -p "$WWW"
e2e_gen nginx "$SIZE" >"$WWW/big.bin"
SHA_FULL=$(e2e_sha256 <"$WWW/big.bin")
SHA_RANGE=$(tail -c +$((RANGE_OFF + 1)) "$WWW/big.bin" | head -c "$RANGE_LEN" | e2e_sha256)
SHA_SLOW=$(head -c "$SLOW_LEN" "$WWW/big.bin" | e2e_sha256)

write_conf() {
  local d=$1 port=$2 user=
  [ "$(id -u)" -eq 0 ] && user="user $(id -un) $(id -gn);"
  mkdir -p "$d/logs"
  cat >"$d/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 2;
$user
pid $d/nginx.pid;
error_log $d/logs/error.log info;
events { worker_connections 256; }
http {
  access_log $d/logs/access.log;
  client_body_temp_path $d/body;
  proxy_temp_path $d/proxy;
  fastcgi_temp_path $d/fastcgi;
  uwsgi_temp_path $d/uwsgi;
  scgi_temp_path $d/scgi;
  default_type application/octet-stream;
  keepalive_requests 100;
  server {
    listen 127.0.0.1:$port;
    location /sendfile/ { alias $WWW/; sendfile on; tcp_nopush on; }
    location /copy/ { alias $WWW/; sendfile off; output_buffers 2 1m; }
    location /slow/ { alias $WWW/; sendfile off; output_buffers 4 32k; }
  }
}
EOF
}

run_all() {
  local d=$E2E_TMP/nginx-$E2E_MODE port fail=0 master workers rc bad
  port=$(e2e_free_port) || e2e_die "no free port"
  write_conf "$d" "$port"
  e2e_bg "$E2E_ART/$E2E_MODE-nginx.out" "$NGINX" -p "$d" -c "$d/nginx.conf" -e "$d/logs/error.log"
  master=$E2E_LAST_PID
  e2e_wait_listen "$port" 20 || { cp "$d/logs/error.log" "$E2E_ART/$E2E_MODE-error.log"; e2e_die "nginx never listened on $port"; }
  e2e_say "nginx master pid $master on 127.0.0.1:$port"
  E2E_CURL_PIDS=
  local base=http://127.0.0.1:$port
  e2e_curl sendfile "$SHA_FULL" -o BODY1 "$base/sendfile/big.bin" || fail=1
  e2e_curl copy+range "$SHA_FULL $SHA_RANGE" -o BODY1 "$base/copy/big.bin" --next -w "%{http_code}/%{size_download} " \
    -r "$RANGE_OFF-$((RANGE_OFF + RANGE_LEN - 1))" -o BODY2 "$base/copy/big.bin" || fail=1
  e2e_curl slow "$SHA_SLOW" --limit-rate 64M -r "0-$((SLOW_LEN - 1))" -o BODY1 "$base/slow/big.bin" || fail=1
  workers=$(e2e_plain ps -o pid= --ppid "$master" | tr -d ' ' | tr '\n' ' ')
  e2e_stop "$master" 10; rc=$?
  [ $rc -eq 0 ] || { e2e_say "nginx exited $rc after TERM"; fail=1; }
  cp "$d/logs/error.log" "$E2E_ART/$E2E_MODE-error.log"
  bad=$(grep -cE '\[(crit|alert|emerg)\]' "$d/logs/error.log")
  [ "$bad" -eq 0 ] || { e2e_say "nginx error log has $bad crit/alert/emerg lines"; grep -E '\[(crit|alert|emerg)\]' "$d/logs/error.log" | head -5; fail=1; }
  RUN_WORKERS=$workers
  return $fail
}

# curl processes by pid, plus at least one nginx worker (the workers serve
# the requests; the master does no socket I/O after startup).
check() {
  local w wanted=0
  e2e_check_active 4 $E2E_CURL_PIDS
  e2e_expect_path local "nginx ($1)" $E2E_CURL_PIDS || e2e_die "the connections did not take the local path"
  for w in $RUN_WORKERS; do [ -s "$E2E_STATS/stats.$w" ] && grep -qE '^calls\.[a-z0-9_]+: [1-9]' "$E2E_STATS/stats.$w" && wanted=1; done
  [ $wanted -eq 1 ] || e2e_die "no nginx worker ($RUN_WORKERS) reported calls"
}
e2e_compare run_all check

word() { [ "$1" -eq 0 ] && echo "3/3 ok" || echo "FAILED"; }
e2e_summary nginx word "file $SIZE bytes"
exit 0
