#!/usr/bin/env bash
# Tier e2e: real programs nobody here wrote, each case run without and with
# LD_PRELOAD=$ZC_LIB in every process; zero added failures required.
# Usage: tests/e2e/run.sh [CASE..]   (default: every case; names as in
# tests/e2e/case_<name>.sh).  Environment: ZC_BUILD, ZC_LIB, QUICK=1.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/harness.sh
ZC_LIB=${ZC_LIB:-$PWD/$ZC_BUILD/libzcsock.so}
export ZC_BUILD ZC_LIB QUICK=${QUICK:-0}
[ -n "$QUICK" ] || QUICK=0

CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=(cpython cpython_net socat nginx asyncio httpserver redis)

t_begin e2e
for c in "${CASES[@]}"; do
  t_run "$c" "${TEST_TIMEOUT:-300}" tests/e2e/case_$c.sh
  # the one-line result of the case, from its log
  grep -E '^[A-Za-z_.+ ]+: without ' "$ZC_BUILD/test-logs/e2e/$c.log" | tail -n 1 | sed 's/^/       /'
done
t_end
