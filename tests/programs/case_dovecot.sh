#!/usr/bin/env bash
# Dovecot IMAP (dovecot-imapd) on a free port with a configuration of our
# own (passwd-file users "test1" and "test2", maildir under $P_TMP, no TLS, no chroot),
# the whole of Dovecot and its clients as nobody (runuser; pairing needs one
# user, and Dovecot's master keeps LD_PRELOAD / ZCSOCK_* for what it starts
# through import_environment): imap-login accepts the client, authenticates
# it and passes the connected socket to an imap process over SCM_RIGHTS
# (to the "login/imap" listener the master made), which answers from then on.
# Two clients at once (imap_client.py, python3 imaplib), each its own user
# (test1, test2: two sessions of one user creating mailboxes at once can
# get "[ALREADYEXISTS]" from Dovecot 2.3 itself, seen once on CI with the
# library in the client only, where nothing pairs), each APPEND four
# messages (300 B .. a 5 MiB p_gen body base64-encoded, 6.8 MiB) on one
# connection and FETCH them back on a second, singly and all at once;
# every message compared by sha256.  Repeated, new connections each round.
# An earlier library lost the imap process's first answer after login (it
# wrote 408 bytes, the client received none of them).
set -u
. "$(dirname "$0")/lib.sh"
p_setup dovecot "$1"
# Immediate pairing: with the default (pair when it pays) imap-login hands
# each client over after one exchange, before the connection paid, and it
# stays on the kernel; this case is here to carry paired connections across
# SCM_RIGHTS
export ZCSOCK_LOCAL_PAIR_AFTER=0
p_need dovecot openssl base64
[ -x /usr/lib/dovecot/imap ] && [ -x /usr/lib/dovecot/imap-login ] || { echo "skip: dovecot-imapd not installed"; exit 77; }
[ "$(id -u)" -eq 0 ] && getent passwd nobody >/dev/null || { echo "skip: needs root and a user nobody"; exit 77; }
REPS=$(p_reps 3) PY=/usr/bin/python3
[ -x $PY ] || PY=$(command -v python3)

mkdir -p "$P_TMP/run" "$P_TMP/state" "$P_TMP/mail" "$P_TMP/home/test1" "$P_TMP/home/test2" "$P_TMP/msgs"
touch "$P_TMP/dovecot.log"
chown -R nobody: "$P_TMP/run" "$P_TMP/state" "$P_TMP/mail" "$P_TMP/home" "$P_TMP/dovecot.log"
port=$(p_free_port) || p_die "no free port"
for i in 1 2; do echo "test$i:{PLAIN}zcsock-secret:65534:65534::$P_TMP/home/test$i::"; done >"$P_TMP/users"
chmod 644 "$P_TMP/users"
cat >"$P_TMP/dovecot.conf" <<EOF
protocols = imap
listen = 127.0.0.1
base_dir = $P_TMP/run
state_dir = $P_TMP/state
log_path = $P_TMP/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = nobody
default_internal_user = nobody
default_internal_group = nogroup
first_valid_uid = 1
mail_location = maildir:$P_TMP/mail/%u
# the master cleans the environment of what it starts: keep the library's
import_environment = TZ LD_PRELOAD ZCSOCK_STATS ZCSOCK_LOG_FILE ZCSOCK_LOCAL_UNIX ZCSOCK_LOCAL_PAIR_AFTER
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u $P_TMP/users
}
userdb {
  driver = passwd-file
  args = username_format=%u $P_TMP/users
}
# no chroot: the whole of Dovecot runs as nobody (one user: pairing needs it)
service anvil {
  chroot =
}
service imap-login {
  chroot =
  inet_listener imap {
    address = 127.0.0.1
    port = $port
  }
  inet_listener imaps {
    port = 0
  }
}
EOF
p_bg "$P_ART/server.log" runuser -u nobody -- env "${P_SRV_ENV[@]}" dovecot -F -c "$P_TMP/dovecot.conf"
spid=$P_LAST_PID
p_wait_listen "$port" 20 || p_die "dovecot never listened: $(tail -n 3 "$P_ART/server.log" "$P_TMP/dovecot.log")"

# messages with CRLF line ends (what FETCH BODY[] gives back)
mkmsg() {  # NAME SEED BYTES: a base64 attachment-like body of BYTES p_gen bytes
  {
    printf 'From: zcsock <zc@example.com>\r\nTo: test@example.com\r\nSubject: %s\r\n' "$1"
    printf 'MIME-Version: 1.0\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n'
    p_gen "$2" "$3" | base64 -w 76 | sed 's/$/\r/'
  } >"$P_TMP/msgs/$1"
}
mkmsg m1 s1 200
mkmsg m2 s2 65536
mkmsg m3 s3 1048576
mkmsg m4 s4 $((5 << 20))
MSGS=(m1 m2 m3 m4) SHA=()
for m in "${MSGS[@]}"; do SHA+=("$(p_sha256 "$P_TMP/msgs/$m")"); done

round() {
  local r=$1 i j pids=() rc=0 t0=$SECONDS out
  for i in 1 2; do
    out=$P_TMP/out$r.$i; mkdir -p "$out"; chown nobody: "$out"
    runuser -u nobody -- env "${P_CLI_ENV[@]}" timeout -k 2 90 "$PY" "$P_DIR/imap_client.py" "$port" "test$i" zcsock-secret "r$r-c$i" "$out" \
      "${MSGS[@]/#/$P_TMP/msgs/}" >>"$P_ART/client.log" 2>&1 & pids+=($!)
  done
  for i in 1 2; do
    p_wait "${pids[i-1]}" "$(p_left $((t0 + 95)))" || { p_say "round $r client $i exited $?: $(tail -1 "$P_ART/client.log")"; rc=1; continue; }
    out=$P_TMP/out$r.$i
    for j in 1 2 3 4; do
      p_same "round $r client $i message $j" "${SHA[j-1]}" "$(p_sha256 "$out/$j" 2>/dev/null)" || rc=1
      p_same "round $r client $i message $j (FETCH 1:*)" "${SHA[j-1]}" "$(p_sha256 "$out/all.$j" 2>/dev/null)" || rc=1
    done
    rm -rf "$out"
  done
  return $rc
}
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
p_stop "$spid" 5
cp "$P_TMP/dovecot.log" "$P_ART/dovecot.log" 2>/dev/null
p_end
