#!/usr/bin/env bash
# Tier robust (issue 29): what real programs did to the library, reduced to
# cases of our own, each with and without the library.
#   epoll/*      t_epoll_race.c: epoll tags never reach the application
#                (threads waiting while others add claimed sockets to fresh
#                sets; ADD/MOD/DEL churn; a forked child waiting on its
#                parent's set)
#   fork_split/* fork_split.py: a connection split across fork pairs in
#                both processes
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
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
t_end
