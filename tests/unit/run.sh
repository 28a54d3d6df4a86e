#!/usr/bin/env bash
# Run cmocka unit test binaries as the "unit" tier.  A binary is one test
# (PASS/FAIL by its exit status); each cmocka skip() inside it is reported
# and counted as a SKIP of its own, with the reason the test printed just
# before it ("skip: ..."), never folded into the binary's PASS.
. "$(dirname "$0")/../lib/harness.sh"
tier=$1; shift
t_begin "$tier"
# test_mh_arena's hugetlb arena needs free hugetlb pages: as root, reserve
# a few for the tier and put the pool back afterwards
. "$(dirname "$0")/../lib/thp.sh"
tlb_pages 8
for bin in "$@"; do
  name=$(basename "$bin")
  t_run "$name" "${TEST_TIMEOUT:-300}" "$bin"
  log=$_t_logdir/$name.log
  # skips of the run itself: before cmocka's summary line
  awk '/^\[==========\] [0-9]+ test\(s\) run\./ { exit }
       /skip: / { r = $0; sub(/.*skip: /, "", r) }
       /^\[  SKIPPED \] / { t = $0; sub(/^\[  SKIPPED \] /, "", t); print t "\t" (r == "" ? "no reason given" : r); r = "" }' \
    "$log" > "$log.skips"
  while IFS=$'\t' read -r t why; do
    t_skip "$name/$t" "$why"
  done < "$log.skips"
done
t_end
