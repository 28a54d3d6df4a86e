#!/usr/bin/env bash
# Tier robust (issue 29): what real programs did to the library, reduced to
# cases of our own, each with the library and without it (the reference).
#   epoll/*      t_epoll_race.c: epoll tags never reach the application
#                (threads waiting while others add claimed sockets to fresh
#                sets; ADD/MOD/DEL churn; a forked child waiting on its
#                parent's set)
#   fork_split/* fork_split.py: a connection split across fork pairs in
#                both processes
#   inherit_listen  inherit_listen.py: a listener inherited across exec and
#                listened on there pairs (uvicorn's workers)
#   scm_listener scm_listener.py: a paired connection passed over SCM_RIGHTS
#                to a process that accepted on a listener another process
#                made (Dovecot's imap-login to imap): taken over, every byte
#   aslimit/*    aslimit.py: a limit on the address space, inherited (ulimit
#                -v 200 MiB) or set by the process itself (setrlimit, as
#                vsftpd's session process does), with page exchange's
#                placement where 2 MiB pages exist; vm.overcommit_memory 2
#                (as root, when the machine has the headroom)
#   sigstorm/*   t_sigstorm.c: blocking sends and receives under a storm of
#                SA_RESTART signals, on the copy path (ZCSOCK_LOCAL=0), the
#                ring and page exchange: no short count, no EINTR
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
. tests/lib/thp.sh
T=${TEST_TIMEOUT:-120}; [ "$T" -gt 120 ] && T=120
B=${ROBUST_BIN:-$ZC_BUILD/tests/robust}
L=(env LD_PRELOAD="$ZC_LIB")
N=(env -u LD_PRELOAD)
t_begin robust
for m in fresh churn fork; do
  t_run "epoll/$m" "$T" "${L[@]}" "$B/t_epoll_race" "$m" 3
  t_run "epoll/$m-plain" "$T" "${N[@]}" "$B/t_epoll_race" "$m" 1
done
for k in parent child; do
  t_run "fork_split/$k" "$T" "${L[@]}" python3 tests/robust/fork_split.py "$k"
  t_run "fork_split/$k-plain" "$T" "${N[@]}" python3 tests/robust/fork_split.py "$k"
done
t_run "inherit_listen" "$T" "${L[@]}" python3 tests/robust/inherit_listen.py
t_run "inherit_listen-plain" "$T" "${N[@]}" python3 tests/robust/inherit_listen.py
t_run "scm_listener" "$T" "${L[@]}" python3 tests/robust/scm_listener.py
t_run "scm_listener-plain" "$T" "${N[@]}" python3 tests/robust/scm_listener.py

aslimit() {   # aslimit inherited|lowered [env...]
  local how=$1; shift
  if [ "$how" = inherited ]; then ulimit -v 204800 || return 1; fi
  "$@" python3 tests/robust/aslimit.py "$how"
}
export -f aslimit
thp_allow
for how in inherited lowered; do
  t_run "aslimit/$how" "$T" bash -c 'aslimit "$@"' _ "$how" "${L[@]}"
  t_run "aslimit/$how-exchange" "$T" bash -c 'aslimit "$@"' _ "$how" "${L[@]}" ZCSOCK_EXCHANGE=1
  t_run "aslimit/$how-plain" "$T" bash -c 'aslimit "$@"' _ "$how" "${N[@]}"
done
# vm.overcommit_memory 2 (every private writable mapping charged in full):
# only as root, only with the commit limit twice what is committed now, and
# put back at once
oc2() {
  local f=/proc/sys/vm/overcommit_memory old lim com rc
  [ -w "$f" ] || { echo "skip: not root"; return 77; }
  lim=$(awk '/^CommitLimit:/ {print $2}' /proc/meminfo)
  com=$(awk '/^Committed_AS:/ {print $2}' /proc/meminfo)
  [ "$com" -lt $((lim / 2)) ] || { echo "skip: $com kB committed of $lim: no headroom"; return 77; }
  old=$(cat "$f")
  echo 2 > "$f"
  "$@" python3 tests/robust/aslimit.py none; rc=$?
  echo "$old" > "$f"
  return $rc
}
export -f oc2
t_run "aslimit/overcommit2" "$T" bash -c 'oc2 "$@"' _ "${L[@]}" ZCSOCK_EXCHANGE=1

for p in copy ring; do
  e=(); [ $p = copy ] && e=(ZCSOCK_LOCAL=0)
  t_run "sigstorm/$p" "$T" "${L[@]}" "${e[@]}" "$B/t_sigstorm" 8192 4 3
done
if [ "$THP_HUGE" = 1 ]; then
  t_run "sigstorm/exchange" "$T" "${L[@]}" ZCSOCK_EXCHANGE=1 ZCSOCK_EXCHANGE_UNIT_US=1 \
    "$B/t_sigstorm" 4194304 1 3 aligned
else
  t_run "sigstorm/exchange" 5 sh -c 'echo "skip: no 2 MiB shared pages"; exit 77'
fi
t_run "sigstorm/plain" "$T" "${N[@]}" "$B/t_sigstorm" 8192 4 2
hp_restore
t_end
