#!/usr/bin/env bash
# Apache httpd (Debian's apache2) on a free port with a configuration of
# our own, MPM from APACHE_MPM (event: Debian's default, a listener thread
# beside the workers; prefork): six parallel downloads of a 32 MiB file
# (sendfile), ab without and with keep-alive (2,000 requests, 8 at once),
# a 5 MiB upload hashed by a CGI script through mod_cgid and a 4 MiB CGI
# download.  Repeated.  Apache's event MPM crashed under the library when a
# worker added a claimed socket to the listener thread's epoll set while
# that thread waited in it (the tag leaked as epoll_data).
set -u
. "$(dirname "$0")/lib.sh"
MPM=${APACHE_MPM:-event}
p_setup "apache_$MPM" "$1"
p_need apache2 ab curl openssl

REPS=$(p_reps 3) BIG=$((32 << 20))
mods=/usr/lib/apache2/modules
[ -f "$mods/mod_mpm_$MPM.so" ] || { echo "skip: no mod_mpm_$MPM"; exit 77; }
mkdir -p "$P_TMP/docs" "$P_TMP/cgi" "$P_TMP/logs"
p_gen big "$BIG" >"$P_TMP/docs/big"
p_gen small 4096 >"$P_TMP/docs/small"
p_gen up 5000000 >"$P_TMP/up"
p_gen cgiout 4194304 >"$P_TMP/cgiout"
BIG_SHA=$(p_sha256 "$P_TMP/docs/big") UP_SHA=$(p_sha256 "$P_TMP/up")
CGI_SHA=$(p_sha256 "$P_TMP/cgiout")
cat >"$P_TMP/cgi/sum.cgi" <<'EOF'
#!/bin/sh
printf 'Content-Type: text/plain\n\n'
openssl dgst -sha256 -r | cut -d' ' -f1
EOF
cat >"$P_TMP/cgi/get.cgi" <<EOF
#!/bin/sh
printf 'Content-Type: application/octet-stream\n\n'
exec cat "$P_TMP/cgiout"
EOF
chmod 755 "$P_TMP/cgi/"*.cgi
chmod -R a+rX "$P_TMP"
chmod 777 "$P_TMP/logs"
port=$(p_free_port) || p_die "no free port"
case $MPM in
  event) tune="StartServers 2
ThreadsPerChild 8
MaxRequestWorkers 32" ;;
  *) tune="StartServers 4
MaxRequestWorkers 16" ;;
esac
cat >"$P_TMP/httpd.conf" <<EOF
ServerRoot $P_TMP
PidFile $P_TMP/logs/httpd.pid
Listen 127.0.0.1:$port
LoadModule mpm_${MPM}_module $mods/mod_mpm_$MPM.so
LoadModule authz_core_module $mods/mod_authz_core.so
LoadModule mime_module $mods/mod_mime.so
LoadModule alias_module $mods/mod_alias.so
LoadModule cgid_module $mods/mod_cgid.so
ServerName localhost
TypesConfig /etc/mime.types
DocumentRoot $P_TMP/docs
ErrorLog $P_TMP/logs/error.log
LogLevel warn
ScriptSock $P_TMP/logs/cgisock
ScriptAlias /cgi/ $P_TMP/cgi/
EnableSendfile On
KeepAliveTimeout 5
$tune
<Directory $P_TMP/docs>
  Require all granted
</Directory>
<Directory $P_TMP/cgi>
  Require all granted
</Directory>
EOF
# Everything runs as nobody: the local path pairs only processes of one
# user, and Apache started as root keeps its listener root's while its
# workers become nobody.  Its own process group: prefork's parent stops its
# children with a signal to its whole group, which would take this script.
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
p_bg "$P_ART/server.log" p_srv "${AS_NOBODY[@]}" setsid apache2 -f "$P_TMP/httpd.conf" -D FOREGROUND
spid=$P_LAST_PID
p_wait_listen "$port" 20 || p_die "apache never listened: $(tail -3 "$P_ART/server.log" "$P_TMP/logs/error.log")"
url=http://127.0.0.1:$port

P_AB_WRAP=("${AS_NOBODY[@]}")
c() { p_t 60 p_cli "${AS_NOBODY[@]}" curl -sS -f --max-time 50 "$@"; }
downloads() {
  local i pids=() rc=0
  for i in 1 2 3 4 5 6; do
    ( set -o pipefail; c "$url/big" | p_sha256 >"$P_TMP/d$i" ) & pids+=($!)
  done
  for i in 1 2 3 4 5 6; do
    wait "${pids[i-1]}" || { p_say "download $i: curl failed"; rc=1; }
    p_same "download $i" "$BIG_SHA" "$(cat "$P_TMP/d$i")" || rc=1
  done
  return $rc
}
# -l: ab counts a keep-alive response cut by the server's keep-alive limit
# as a length error, with or without the library
abrun() { p_ab 60 2000 "$url/small" -l "$@"; }   # abrun [-k]: every request complete and whole
cgi_up() { p_same "CGI upload" "$UP_SHA" "$(c --data-binary "@$P_TMP/up" "$url/cgi/sum.cgi")"; }
cgi_down() { p_same "CGI download" "$CGI_SHA" "$(c "$url/cgi/get.cgi" | p_sha256)"; }
crashed() {
  if grep -E 'AH00052|Segmentation fault|exit signal' "$P_TMP/logs/error.log"; then
    p_say "an apache process died"; return 1
  fi
}
for ((r = 1; r <= REPS; r++)); do
  p_step "downloads$r" downloads || break
  p_step "ab$r" abrun || break
  p_step "ab-keepalive$r" abrun -k || break
  p_step "cgi-upload$r" cgi_up || break
  p_step "cgi-download$r" cgi_down || break
done
p_step "no-crash" crashed
p_stop "$spid" 5
cp "$P_TMP/logs/error.log" "$P_ART/error.log" 2>/dev/null
p_end
