#!/usr/bin/env bash
# git daemon (fork + exec of git-upload-pack / git-receive-pack with the
# connection as stdin/stdout) serving a bare repository: clone, commit and
# push, fetch into a second clone, fsck of both clones and the server's
# repository; the files' sha256 must match across the clones.  Repeated.
# With pair when it pays (the default since issue 31) git push's sideband
# thread reads the socket while its main thread forks pack-objects, whose
# dup2 onto stdout once spun for ever on a pickup guard the thread held at
# the fork (the child clears it now).
set -u
. "$(dirname "$0")/lib.sh"
p_setup git_daemon "$1"
p_need git openssl
REPS=$(p_reps 3)
export GIT_CONFIG_NOSYSTEM=1 HOME=$P_TMP GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
git config --global init.defaultBranch main
git config --global safe.directory '*'
mkdir -p "$P_TMP/srv"
git init -q --bare "$P_TMP/srv/repo.git" || p_die "git init"
git -C "$P_TMP/srv/repo.git" config receive.denyCurrentBranch ignore
# seed: 4 files of random bytes (6 MiB) committed locally and pushed by file
git init -q "$P_TMP/seed" && for i in 1 2 3 4; do p_gen "seed$i" $((1536 << 10)) >"$P_TMP/seed/f$i"; done
git -C "$P_TMP/seed" add -A && git -C "$P_TMP/seed" commit -qm seed && git -C "$P_TMP/seed" push -q "$P_TMP/srv/repo.git" main || p_die "seed"
port=$(p_free_port) || p_die "no free port"
p_bg "$P_ART/daemon.log" p_srv git daemon --reuseaddr --listen=127.0.0.1 --port="$port" \
  --base-path="$P_TMP/srv" --export-all --enable=receive-pack --verbose "$P_TMP/srv"
dpid=$P_LAST_PID
p_wait_listen "$port" 10 || p_die "git daemon never listened"
URL=git://127.0.0.1:$port/repo.git
g() { p_t 40 p_cli git "$@"; }

round() {
  local r=$1 a=$P_TMP/a$1 b=$P_TMP/b$1
  g clone -q "$URL" "$a" 2>>"$P_ART/client.log" || { p_say "clone exited $?"; return 1; }
  p_same "clone $r" "$(p_tree_sha "$P_TMP/seed")" "$(p_tree_sha "$a")" || return 1
  p_gen "push$r" $((2 << 20)) >"$a/p$r" && git -C "$a" add -A && git -C "$a" commit -qm "r$r" || return 1
  g -C "$a" push -q origin main 2>>"$P_ART/client.log" || { p_say "push exited $?"; return 1; }
  cp "$a/p$r" "$P_TMP/seed/p$r"; git -C "$P_TMP/seed" add -A; git -C "$P_TMP/seed" commit -qm "r$r"
  git -C "$P_TMP/seed" pull -q "$P_TMP/srv/repo.git" main 2>>"$P_ART/client.log" # keep the seed equal
  g clone -q "$URL" "$b" 2>>"$P_ART/client.log" && g -C "$b" fetch -q origin 2>>"$P_ART/client.log" || { p_say "clone/fetch exited $?"; return 1; }
  g -C "$a" fetch -q origin 2>>"$P_ART/client.log" || { p_say "fetch exited $?"; return 1; }
  [ "$(git -C "$a" rev-parse HEAD)" = "$(git -C "$b" rev-parse origin/main)" ] || { p_say "HEADs differ"; return 1; }
  p_same "clone after push $r" "$(p_tree_sha "$a")" "$(p_tree_sha "$b")" || return 1
  git -C "$b" fsck --full --strict --no-progress && git -C "$a" fsck --full --no-progress && git -C "$P_TMP/srv/repo.git" fsck --full --no-progress || { p_say "fsck failed"; return 1; }
}
for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
p_stop "$dpid" 5
p_end
