#!/usr/bin/env bash
# Tier "pathtest": the test-only path serves every per-descriptor operation
# through the path interface (tests/pathtest/t_pathtest.c), and the same
# checks hold on the kernel path, with and without the library.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
T=${TEST_TIMEOUT:-120}; [ "$T" -gt 120 ] && T=120
t_begin pathtest
t_run test-path "$T" env ZCTEST_PATH=1 ZCSOCK_LOCAL=0 LD_PRELOAD="$TEST_LIB" "$PATHTEST_BIN" path
t_run test-lib-path-off "$T" env -u ZCTEST_PATH ZCSOCK_LOCAL=0 LD_PRELOAD="$TEST_LIB" "$PATHTEST_BIN" kernel
t_run library "$T" env ZCSOCK_LOCAL=0 LD_PRELOAD="$ZC_LIB" "$PATHTEST_BIN" kernel
t_run plain "$T" env -u LD_PRELOAD "$PATHTEST_BIN" kernel
t_end
