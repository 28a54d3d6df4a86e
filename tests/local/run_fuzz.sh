#!/usr/bin/env bash
# Tier "fuzz": build the libFuzzer target of the local ring's shared-memory
# parser and run it for FUZZ_SECONDS (default 15); pass when no crash is found.
# Skips when clang is not installed.  Run from the repository root by make.
. "$(dirname "$0")/../lib/harness.sh"
t_begin fuzz
FUZZ_MAKE=${FUZZ_MAKE:-make --no-print-directory}
secs=${FUZZ_SECONDS:-15}
if ! command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1; then
  t_run fuzz_ring_build 10 sh -c 'echo "clang not installed"; exit 77'
else
  t_run fuzz_ring_build 300 $FUZZ_MAKE build/fuzz/fuzz_ring
  t_run "fuzz_ring_${secs}s" $((secs + 120)) $FUZZ_MAKE fuzz-ring FUZZ_SECONDS="$secs"
fi
t_end
