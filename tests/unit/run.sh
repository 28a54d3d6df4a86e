#!/usr/bin/env bash
# Run cmocka unit test binaries as the "unit" tier.
. "$(dirname "$0")/../lib/harness.sh"
tier=$1; shift
t_begin "$tier"
for bin in "$@"; do
  t_run "$(basename "$bin")" "${TEST_TIMEOUT:-300}" "$bin"
done
t_end
