#!/usr/bin/env bash
# PHP-FPM (php-fpm8.2, pm=static, 3 children, run as root with -R) behind
# nginx (2 workers, fastcgi_pass), the pool listening on 127.0.0.1:PORT
# (FPM_LISTEN=tcp) or on a unix socket $P_TMP/fpm.sock (FPM_LISTEN=unix;
# the library pairs AF_UNIX only with ZCSOCK_LOCAL_UNIX=1, set for nginx and
# php-fpm), every server process as root, like the clients (pairing needs
# one user).  PHP scripts of our own: four concurrent downloads of a 32 MiB
# file streamed by readfile(), two concurrent 24 MiB POSTs whose sha256
# PHP computes from php://input, ab (1,000 requests, 8 at once) on a 1 KiB
# page.  Repeated.  An earlier library stopped a 32 MiB download after
# 86,016 bytes and never completed a 24 MiB POST: nginx registers the
# upstream socket with EPOLLET before connect(), and the wake-ups went to
# an eventfd nobody watched.
set -u
. "$(dirname "$0")/lib.sh"
LISTEN=${FPM_LISTEN:-tcp}
p_setup "phpfpm_$LISTEN" "$1"
p_need php-fpm8.2 nginx curl ab openssl
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (php-fpm -R, nginx user root)"; exit 77; }
[ "$LISTEN" = unix ] && P_SRV_ENV+=(ZCSOCK_LOCAL_UNIX=1)

REPS=$(p_reps 3) BIG=$((32 << 20)) UP=$((24 << 20))
mkdir -p "$P_TMP/www" "$P_TMP/logs" "$P_TMP/tmp"
p_gen phpbig "$BIG" >"$P_TMP/big"
p_gen phpup "$UP" >"$P_TMP/up"
p_gen phpsmall 1024 >"$P_TMP/small"
BIG_SHA=$(p_sha256 "$P_TMP/big") UP_SHA=$(p_sha256 "$P_TMP/up") SMALL_SHA=$(p_sha256 "$P_TMP/small")
cat >"$P_TMP/www/big.php" <<EOF
<?php
header('Content-Type: application/octet-stream');
header('Content-Length: ' . filesize('$P_TMP/big'));
readfile('$P_TMP/big');
EOF
cat >"$P_TMP/www/small.php" <<EOF
<?php
header('Content-Type: application/octet-stream');
readfile('$P_TMP/small');
EOF
cat >"$P_TMP/www/sum.php" <<'EOF'
<?php
header('Content-Type: text/plain');
echo hash_file('sha256', 'php://input'), "\n";
EOF
chmod -R a+rX "$P_TMP"

port=$(p_free_port) || p_die "no free port"
if [ "$LISTEN" = unix ]; then fpm_listen=$P_TMP/fpm.sock upstream=unix:$P_TMP/fpm.sock
else fport=$(p_free_port) || p_die "no free port"; fpm_listen=127.0.0.1:$fport upstream=127.0.0.1:$fport
fi
cat >"$P_TMP/php-fpm.conf" <<EOF
[global]
pid = $P_TMP/php-fpm.pid
error_log = $P_TMP/logs/php-fpm.log
daemonize = no
[pool]
user = root
group = root
listen = $fpm_listen
pm = static
pm.max_children = 3
request_terminate_timeout = 120
php_admin_value[post_max_size] = 64M
php_admin_value[memory_limit] = 256M
php_admin_flag[log_errors] = on
catch_workers_output = yes
EOF
cat >"$P_TMP/nginx.conf" <<EOF
user root root;
worker_processes 2;
pid $P_TMP/nginx.pid;
error_log $P_TMP/logs/error.log warn;
events { worker_connections 512; }
http {
  access_log $P_TMP/logs/access.log;
  client_body_temp_path $P_TMP/tmp/body;
  fastcgi_temp_path $P_TMP/tmp/fastcgi;
  proxy_temp_path $P_TMP/tmp/proxy;
  uwsgi_temp_path $P_TMP/tmp/uwsgi;
  scgi_temp_path $P_TMP/tmp/scgi;
  client_max_body_size 64m;
  keepalive_timeout 5;
  server {
    listen 127.0.0.1:$port;
    root $P_TMP/www;
    location ~ \\.php\$ {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
      fastcgi_read_timeout 60s;
      fastcgi_pass $upstream;
    }
  }
}
EOF
p_bg "$P_ART/php-fpm.out" p_srv php-fpm8.2 -F -R -y "$P_TMP/php-fpm.conf"
fpid=$P_LAST_PID
if [ "$LISTEN" = unix ]; then
  p_wait_file /proc/net/unix "$P_TMP/fpm.sock" 20 || p_die "php-fpm never listened: $(tail -n 3 "$P_ART/php-fpm.out" "$P_TMP/logs/php-fpm.log")"
else
  p_wait_listen "$fport" 20 || p_die "php-fpm never listened: $(tail -n 3 "$P_ART/php-fpm.out" "$P_TMP/logs/php-fpm.log")"
fi
p_bg "$P_ART/nginx.out" p_srv nginx -p "$P_TMP" -e "$P_TMP/logs/error.log" -c "$P_TMP/nginx.conf" -g 'daemon off;'
npid=$P_LAST_PID
p_wait_listen "$port" 20 || p_die "nginx never listened: $(tail -n 3 "$P_ART/nginx.out" "$P_TMP/logs/error.log")"
url=http://127.0.0.1:$port

c() { p_t 90 p_cli curl -sS -f --max-time 80 "$@"; }
downloads() { p_par_get 4 "$BIG_SHA" "$url/big.php"; }
uploads() { p_par_post 2 "$P_TMP/up" "$UP_SHA" "$url/sum.php"; }
small() { p_same "1 KiB page" "$SMALL_SHA" "$(c "$url/small.php" 2>"$P_TMP/s.err" | p_sha256)" || { p_say "curl: $(tail -n 1 "$P_TMP/s.err")"; return 1; }; }
abrun() { p_ab 60 1000 "$url/small.php"; }   # every request complete and whole
for ((r = 1; r <= REPS; r++)); do
  p_step "small$r" small || break
  p_step "downloads$r" downloads || break
  p_step "uploads$r" uploads || break
  p_step "ab$r" abrun || break
done
p_stop "$npid" 5
p_stop "$fpid" 5
cp "$P_TMP/logs/error.log" "$P_ART/nginx-error.log" 2>/dev/null
cp "$P_TMP/logs/php-fpm.log" "$P_ART/php-fpm.log" 2>/dev/null
p_end
