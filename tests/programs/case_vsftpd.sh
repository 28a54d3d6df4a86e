#!/usr/bin/env bash
# vsftpd (standalone, foreground, as root, a configuration of our own on a
# free port; anonymous login chrooted to $P_TMP/ftp, uploads allowed into
# pub/up, a passive port range from a free port) with curl as the client:
# per round, three passive downloads of 8..32 MiB at once, two passive
# uploads (curl -T) at once, then an active-mode (PORT) download and upload
# (curl -P 127.0.0.1), and a directory listing.  Every byte is hashed: the
# downloads against the served files, the uploads as stored by vsftpd.
# Repeated.  vsftpd's session process sets RLIMIT_AS to 200 MiB; under an
# older library every login failed with "500 OOPS: mmap".
set -u
. "$(dirname "$0")/lib.sh"
p_setup vsftpd "$1"
p_need vsftpd curl openssl
[ "$(id -u)" -eq 0 ] && id ftp >/dev/null 2>&1 || { echo "skip: needs root and an ftp user"; exit 77; }
REPS=$(p_reps 3)
F=$P_TMP/ftp
mkdir -p "$F/pub/up" "$P_TMP/empty" "$P_TMP/up"
chmod 755 "$F" "$F/pub" "$P_TMP/empty"
chown ftp: "$F/pub/up"; chmod 755 "$F/pub/up"
port=$(p_free_port) || p_die "no free port"
pasv=$(p_free_port) || p_die "no free port"
cat >"$P_TMP/vsftpd.conf" <<EOF
listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=$port
background=NO
anonymous_enable=YES
no_anon_password=YES
anon_root=$F
local_enable=NO
write_enable=YES
anon_upload_enable=YES
anon_umask=022
ftp_username=ftp
secure_chroot_dir=$P_TMP/empty
seccomp_sandbox=NO
pasv_enable=YES
pasv_address=127.0.0.1
pasv_min_port=$pasv
pasv_max_port=$((pasv + 40))
port_enable=YES
connect_from_port_20=NO
max_clients=50
max_per_ip=50
idle_session_timeout=60
data_connection_timeout=60
xferlog_enable=YES
xferlog_file=$P_ART/xfer.log
vsftpd_log_file=$P_ART/vsftpd.log
dual_log_enable=YES
log_ftp_protocol=YES
EOF
p_bg "$P_ART/server.log" p_srv vsftpd "$P_TMP/vsftpd.conf"
spid=$P_LAST_PID
p_wait_listen "$port" 10 || p_die "vsftpd never listened: $(tail -3 "$P_ART/server.log")"
url=ftp://127.0.0.1:$port

c() { p_cli timeout -k 2 60 curl -sS --max-time 55 --connect-timeout 10 "$@" 2>>"$P_ART/client.log"; }
size() { echo $(((8 + (($1 * 7 + $2 * 5) % 25)) << 20)); }   # 8..32 MiB
downloads() {
  local r=$1 i pids=() rc=0 t0=$SECONDS
  for i in 1 2 3; do p_gen "dl$r.$i" "$(size "$r" "$i")" >"$F/pub/f$i"; done
  for i in 1 2 3; do c -o "$P_TMP/d$i" "$url/pub/f$i" & pids+=($!); P_PIDS+=($!); done
  for i in 1 2 3; do
    p_wait "${pids[i-1]}" "$(p_left $((t0 + 45)))" || { p_say "round $r download $i: curl exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; }
    p_same "round $r passive download $i ($(stat -c %s "$F/pub/f$i") B)" "$(p_sha256 "$F/pub/f$i")" "$(p_sha256 "$P_TMP/d$i")" || rc=1
  done
  return $rc
}
uploads() {
  local r=$1 i pids=() rc=0 t0=$SECONDS
  for i in 1 2; do p_gen "ul$r.$i" "$(size "$r" $((i + 3)))" >"$P_TMP/up/u$i"; done
  for i in 1 2; do c -T "$P_TMP/up/u$i" "$url/pub/up/r$r-u$i" & pids+=($!); P_PIDS+=($!); done
  for i in 1 2; do
    p_wait "${pids[i-1]}" "$(p_left $((t0 + 45)))" || { p_say "round $r upload $i: curl exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; }
    p_same "round $r passive upload $i ($(stat -c %s "$P_TMP/up/u$i") B)" "$(p_sha256 "$P_TMP/up/u$i")" "$(p_sha256 "$F/pub/up/r$r-u$i")" || rc=1
  done
  return $rc
}
active() {
  local r=$1 rc=0
  p_gen "act$r" $((12 << 20)) >"$F/pub/act"
  p_t 60 c -P 127.0.0.1 -o "$P_TMP/act" "$url/pub/act" || { p_say "round $r active download: curl exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; }
  p_same "round $r active download" "$(p_sha256 "$F/pub/act")" "$(p_sha256 "$P_TMP/act")" || rc=1
  p_gen "actup$r" $((9 << 20)) >"$P_TMP/up/a"
  p_t 60 c -P 127.0.0.1 -T "$P_TMP/up/a" "$url/pub/up/r$r-act" || { p_say "round $r active upload: curl exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; }
  p_same "round $r active upload" "$(p_sha256 "$P_TMP/up/a")" "$(p_sha256 "$F/pub/up/r$r-act")" || rc=1
  return $rc
}
listing() {   # the names in pub/up as vsftpd lists them (NLST)
  local r=$1 want got
  want=$(cd "$F/pub/up" && ls | LC_ALL=C sort)
  got=$(p_t 30 c -l "$url/pub/up/" | LC_ALL=C sort) || { p_say "round $r listing: curl exited $?"; return 1; }
  p_same "round $r listing" "$(echo "$want" | p_sha256)" "$(echo "$got" | p_sha256)"
}
login() {    # the first login, its dialogue kept (a failing one: "500 OOPS: ...")
  p_t 30 p_cli timeout -k 2 25 curl -sS -v --max-time 20 -l "$url/pub/" >"$P_TMP/ls0" 2>"$P_ART/login.log" && return 0
  p_say "login failed: $(grep -m1 -E '^< [45]' "$P_ART/login.log")"; return 1
}
p_step login login || REPS=0
for ((r = 1; r <= REPS; r++)); do
  p_step "downloads$r" downloads "$r" || break
  p_step "uploads$r" uploads "$r" || break
  p_step "active$r" active "$r" || break
  p_step "listing$r" listing "$r" || break
done
p_stop "$spid" 5
p_end
