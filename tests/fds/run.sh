#!/usr/bin/env bash
# Tier "fds": descriptor hygiene (tests/fds/t_fds.c) without the library,
# with it, with call-site attribution asked for (ZCSOCK_STATS=1), with
# placement on (its arena memfds come with the first placed allocation,
# above the floor), and CPython's pass_fds tests with and without it.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
T=${TEST_TIMEOUT:-120}; [ "$T" -gt 120 ] && T=120
B=${FDS_BIN:-$ZC_BUILD/tests/fds/t_fds}
t_begin fds
t_run plain "$T" env -u LD_PRELOAD "$B" start
t_run library "$T" env LD_PRELOAD="$ZC_LIB" "$B" start
t_run library-stats "$T" env LD_PRELOAD="$ZC_LIB" ZCSOCK_STATS=1 "$B" start
# placement on: no arena at start-up, the first placed allocation's above
# the floor
t_run library-placement "$T" env LD_PRELOAD="$ZC_LIB" ZCSOCK_ALLOC_PLACEMENT=1 "$B" start
# page exchange on 2 MiB pages (as root, shmem THP advise for the run):
# the unit transports' receiving ends a fork+exec child inherits are taken
# up by it, or closed, never left to it as descriptors of nobody's
. tests/lib/thp.sh
thp_allow
if [ "$THP_HUGE" = 1 ]; then
  t_run library-exchange "$T" env LD_PRELOAD="$ZC_LIB" ZCSOCK_EXCHANGE=1 "$B" start
else
  t_run library-exchange 5 sh -c 'echo "skip: no 2 MiB shared pages"; exit 77'
fi
hp_restore
# as an unprivileged user (nobody) when run as root: a same-user process
# must not open the library's memfds (rings, arenas) through /proc/PID/fd
if [ "$(id -u)" = 0 ]; then
  NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
  t_run unprivileged/library "$T" "${NOBODY[@]}" env LD_PRELOAD="$ZC_LIB" "$B" start
  t_run unprivileged/library-placement "$T" "${NOBODY[@]}" env LD_PRELOAD="$ZC_LIB" \
    ZCSOCK_ALLOC_PLACEMENT=1 "$B" start
fi
pyt() {
  python3 -c 'import test.test_subprocess' 2>/dev/null || { echo "skip: CPython test suite not installed"; exit 77; }
  python3 -m test test_subprocess -m '*pass_fds*' -v
}
export -f pyt
t_run cpython-pass_fds/plain "$T" env -u LD_PRELOAD bash -c pyt
t_run cpython-pass_fds/library "$T" env LD_PRELOAD="$ZC_LIB" bash -c pyt
t_end
