#!/usr/bin/env bash
# OpenSSH: an sshd started by the test on a free port (its own host key,
# authorized_keys and config in a temp dir, running as root, privilege
# separation and its seccomp sandbox as packaged), the ssh client with a
# fresh key: `ssh host 'cat >f'` (upload) and `ssh host cat f` (download),
# scp both ways, sftp put/get; 8 MiB each, sha256 checked.
set -u
. "$(dirname "$0")/lib.sh"
p_setup ssh "$1"
p_need ssh scp sftp ssh-keygen openssl
SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] || { echo "skip: openssh-server not installed"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (sshd privilege separation)"; exit 77; }
mkdir -p /run/sshd; chmod 755 /run/sshd
SIZE=$((8 << 20))
K=$P_TMP/keys; mkdir -p "$K" "$P_TMP/srv"; chmod 700 "$K"
ssh-keygen -q -t ed25519 -N '' -f "$K/host" || p_die "ssh-keygen"
ssh-keygen -q -t ed25519 -N '' -f "$K/user" || p_die "ssh-keygen"
cp "$K/user.pub" "$K/authorized_keys"
port=$(p_free_port) || p_die "no free port"
cat >"$K/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $K/host
AuthorizedKeysFile $K/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
Subsystem sftp internal-sftp
LogLevel VERBOSE
CONF
p_bg "$P_ART/sshd.log" p_srv "$SSHD" -D -e -f "$K/sshd_config"
dpid=$P_LAST_PID
p_wait_listen "$port" 10 || p_die "sshd never listened: $(tail -3 "$P_ART/sshd.log")"
O=(-i "$K/user" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes
   -o ConnectTimeout=10 -o ServerAliveInterval=5 -o ServerAliveCountMax=3 -o LogLevel=ERROR)
p_gen up "$SIZE" >"$P_TMP/up"; UP=$(p_sha256 "$P_TMP/up")
p_gen down "$SIZE" >"$P_TMP/srv/down"; DOWN=$(p_sha256 "$P_TMP/srv/down")
S=$P_TMP/srv
t() { p_t 40 p_cli "$@"; }
ssh_up()   { t ssh "${O[@]}" -p "$port" root@127.0.0.1 "cat >$S/up1" <"$P_TMP/up" 2>>"$P_ART/ssh.log" && p_same "ssh cat upload" "$UP" "$(p_sha256 "$S/up1")"; }
ssh_down() { p_same "ssh cat download" "$DOWN" "$(t ssh "${O[@]}" -p "$port" root@127.0.0.1 "cat $S/down" 2>>"$P_ART/ssh.log" </dev/null | p_sha256)"; }
scp_up()   { t scp "${O[@]}" -P "$port" "$P_TMP/up" "root@127.0.0.1:$S/up2" 2>>"$P_ART/ssh.log" </dev/null && p_same "scp upload" "$UP" "$(p_sha256 "$S/up2")"; }
scp_down() { t scp "${O[@]}" -P "$port" "root@127.0.0.1:$S/down" "$P_TMP/down2" 2>>"$P_ART/ssh.log" </dev/null && p_same "scp download" "$DOWN" "$(p_sha256 "$P_TMP/down2")"; }
sftp_both() {
  printf 'put %s %s/up3\nget %s/down %s/down3\n' "$P_TMP/up" "$S" "$S" "$P_TMP" >"$P_TMP/batch"
  t sftp "${O[@]}" -P "$port" -b "$P_TMP/batch" root@127.0.0.1 >>"$P_ART/ssh.log" 2>&1 </dev/null &&
    p_same "sftp put" "$UP" "$(p_sha256 "$S/up3")" && p_same "sftp get" "$DOWN" "$(p_sha256 "$P_TMP/down3")"
}
p_step ssh_up ssh_up; p_step ssh_down ssh_down; p_step scp_up scp_up; p_step scp_down scp_down; p_step sftp sftp_both
p_stop "$dpid" 5
p_end
