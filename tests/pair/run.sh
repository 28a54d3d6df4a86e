#!/bin/bash
# Tier "pair": each case of test_pair in its own process (tests/pair/README.md).
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
BIN=${PAIR_BIN:-$ZC_BUILD/tests/pair/test_pair}
T=${TEST_TIMEOUT:-300}; [ "$T" -gt 60 ] && T=60

t_begin pair
for c in paired-tcp4 paired-tcp6 paired-mapped paired-unix nonblock accept4 plain-client plain-server \
         plain-acceptor foreign-server foreign-client prefork self other-user crash \
         late-offer closed-offer fork-requeue squatter squatter-same forged-offer netns-unix timing; do
  t_run "$c" "$T" env ZCSOCK_LOCAL=0 "$BIN" "$c"   # the binary links the hooks
done
# what a pairing costs in system calls, both ends under the library (conn_rate)
t_run syscalls "$T" tests/pair/syscalls.sh "$ZC_LIB" "${CONN_RATE_BIN:-$ZC_BUILD/conn_rate}"
grep -h '^timing:' "$ZC_BUILD/test-logs/pair/timing.log" 2>/dev/null | sed 's/^/  /'
t_end
