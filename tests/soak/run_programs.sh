#!/usr/bin/env bash
# Tier soak-programs (`make soak-programs`, not part of `make test`): the
# real-program cases that failed only sometimes before issue 29's fixes
# (Erlang, gRPC over TCP and AF_UNIX, HAProxy, Varnish, Dovecot, PHP-FPM
# over TCP and AF_UNIX, Apache's event MPM), SOAK_PROGRAMS_REPS (default 20)
# times each with the library on both ends, and once in every other mode;
# the robust tier's race cases as many times.  Every run is a test of its
# own: a case that fails once fails the tier.
set -u
cd "$(dirname "$0")/../.."
REPS=${SOAK_PROGRAMS_REPS:-20}
CASES=${SOAK_PROGRAMS_CASES:-"erlang grpc_tcp grpc_unix haproxy varnish dovecot phpfpm_tcp phpfpm_unix apache_event"}
rc=0
for ((i = 1; i <= REPS; i++)); do
  echo "== soak-programs round $i of $REPS"
  args=()
  for c in $CASES; do args+=("$c/both"); done
  [ "$i" = 1 ] && args=($CASES)             # every mode once
  PROGRAMS_TIER=soak-programs-$i tests/programs/run.sh "${args[@]}" || rc=1
  for m in fresh churn fork; do
    env LD_PRELOAD="$ZC_LIB" "$ZC_BUILD/tests/robust/t_epoll_race" "$m" 2 >/dev/null ||
      { echo "  FAIL robust epoll/$m in round $i"; rc=1; }
  done
done
exit $rc
