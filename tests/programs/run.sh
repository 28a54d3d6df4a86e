#!/usr/bin/env bash
# Tier programs: real programs from Debian packages (and three small ones of
# our own) with the library on both ends, on one end (the server) and on
# none; every byte checked by sha256, pairing judged from the statistics
# reports against expect.txt (see README.md).
# Usage: tests/programs/run.sh [CASE[/MODE]..]   (default: every entry of
# expect.txt not marked known-fail; PROGRAMS_ALL=1: every entry)
# Environment: ZC_BUILD, ZC_LIB, QUICK=1, PROGRAMS_ALL=1, TEST_TIMEOUT,
# PROGRAMS_MODES (the modes to run, default "both one client none"),
# PROGRAMS_PAIRING_ONLY=1 (leave out the entries expected plain).
set -u
cd "$(dirname "$0")/../.."
. tests/lib/harness.sh
ZC_LIB=${ZC_LIB:-$PWD/$ZC_BUILD/libzcsock.so}
# real programs as users run them: the library's defaults (make test pins
# immediate pairing for the mechanism tiers; PROGRAMS_PAIR_AFTER=N to set it)
unset ZCSOCK_LOCAL_PAIR_AFTER
[ -n "${PROGRAMS_PAIR_AFTER:-}" ] && export ZCSOCK_LOCAL_PAIR_AFTER=$PROGRAMS_PAIR_AFTER
export ZC_BUILD ZC_LIB QUICK=${QUICK:-0}
[ -n "$QUICK" ] || QUICK=0
ALL=${PROGRAMS_ALL:-0}
TMO=${TEST_TIMEOUT:-150}
[ "$TMO" -gt 150 ] 2>/dev/null && TMO=150

want=" $* "
t_begin "${PROGRAMS_TIER:-programs}"
t0=$SECONDS
left_out=()
never=()
while read -r name both one none client; do
  [ -n "$name" ] && [ "${name:0:1}" != "#" ] || continue
  for mode in ${PROGRAMS_MODES:-both one client none}; do
    entry=${!mode}
    [ -n "$entry" ] && [ "$entry" != - ] || continue    # not run in this mode
    expect=${entry%%:*}
    if [ "$want" != "  " ] && [[ $want != *" $name "* ]] && [[ $want != *" $name/$mode "* ]]; then continue; fi
    # PROGRAMS_PAIRING_ONLY=1 (run_xchg.sh): a case expected plain pairs
    # nothing, so exchange never runs there; the programs tier runs it
    if [ "${PROGRAMS_PAIRING_ONLY:-0}" = 1 ] && [ "$expect" = plain ]; then
      never+=("$name/$mode"); continue
    fi
    if [[ $entry == *:known-fail ]] && [ "$ALL" != 1 ] && [[ $want != *" $name/$mode "* ]] && [[ $want != *" $name "* ]]; then
      left_out+=("$name/$mode"); continue
    fi
    t_run "$name/$mode" "$TMO" tests/programs/one.sh "$name" "$mode" "$expect"
    grep -E '^result: ' "$_t_logdir/${name}_$mode.log" | tail -n 1 | sed 's/^/       /'
  done
done < tests/programs/expect.txt
[ ${#never[@]} -eq 0 ] || echo "  left out, expected plain (they pair nothing; the programs tier runs them): ${never[*]}"
[ ${#left_out[@]} -eq 0 ] || echo "  known failures left out (make test-programs-all runs them): ${left_out[*]}"
if [ "${PROGRAMS_EXPECT_LENT:-0}" = 1 ]; then
  # run_xchg.sh: page exchange must have carried bytes somewhere
  t_run exchange-used 10 sh -c 'n=$(cat "$1"/*.d/stats/* 2>/dev/null |
      awk -F": " "\$1 == \"local.xchg.bytes_mapped\" {s += \$2} END {printf \"%.0f\", s}");
    echo "local.xchg.bytes_mapped over the tier: $n"; [ "$n" -gt 0 ]' sh "$_t_logdir"
fi
echo "  tier time $((SECONDS - t0))s"
t_end
