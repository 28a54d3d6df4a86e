#!/usr/bin/env bash
# rsync daemon (private rsyncd.conf, free port, forks per connection): pull
# a tree of 40 files (12 MiB), change some, pull again, push a tree into
# the module, push again after changes; the trees' sha256 must match.
# Repeated.
set -u
. "$(dirname "$0")/lib.sh"
p_setup rsync "$1"
p_need rsync openssl
REPS=$(p_reps 3)
S=$P_TMP/mod; mkdir -p "$S/pull" "$S/push" "$P_TMP/local"
fill() {  # fill DIR SEED: 40 files, 0..600 KiB, in 4 subdirectories
  local i; for ((i = 0; i < 40; i++)); do mkdir -p "$1/d$((i % 4))"; p_gen "$2.$i" $(((i * 15817) % 614400)) >"$1/d$((i % 4))/f$i"; done
}
fill "$S/pull" pull; fill "$P_TMP/local" push
port=$(p_free_port) || p_die "no free port"
cat >"$P_TMP/rsyncd.conf" <<CONF
use chroot = no
uid = root
gid = root
pid file = $P_TMP/rsyncd.pid
[m]
  path = $S
  read only = false
CONF
p_bg "$P_ART/daemon.log" p_srv rsync --daemon --no-detach --address=127.0.0.1 --port="$port" --config="$P_TMP/rsyncd.conf" --log-file="$P_ART/rsyncd.log"
dpid=$P_LAST_PID
p_wait_listen "$port" 10 || p_die "rsync daemon never listened"
R=rsync://127.0.0.1:$port/m
rs() { p_t 40 p_cli rsync -a --delete --timeout=30 "$@" 2>>"$P_ART/client.log"; }
round() {
  local r=$1 i
  rs "$R/pull/" "$P_TMP/got/" || { p_say "pull exited $?"; return 1; }
  p_same "pull $r" "$(p_tree_sha "$S/pull")" "$(p_tree_sha "$P_TMP/got")" || return 1
  for i in 3 17 29; do p_gen "pull$r.$i" $((100000 + r * 977)) >"$S/pull/d$((i % 4))/f$i"; done
  rs "$R/pull/" "$P_TMP/got/" || { p_say "second pull exited $?"; return 1; }
  p_same "pull again $r" "$(p_tree_sha "$S/pull")" "$(p_tree_sha "$P_TMP/got")" || return 1
  rs "$P_TMP/local/" "$R/push/" || { p_say "push exited $?"; return 1; }
  p_same "push $r" "$(p_tree_sha "$P_TMP/local")" "$(p_tree_sha "$S/push")" || return 1
  for i in 5 11; do p_gen "push$r.$i" $((200000 + r * 31)) >"$P_TMP/local/d$((i % 4))/f$i"; done
  rs "$P_TMP/local/" "$R/push/" || { p_say "second push exited $?"; return 1; }
  p_same "push again $r" "$(p_tree_sha "$P_TMP/local")" "$(p_tree_sha "$S/push")"
}
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
p_stop "$dpid" 5
p_end
