#!/usr/bin/env bash
# Sum the per-tier counts written by tests/lib/harness.sh and print the one
# closing line CI reads. Exit 1 when any test failed or a tier did not report.
# usage: tests/summary.sh BUILD TIER...
build=$1; shift
p=0 f=0 s=0 missing=()
for tier in "$@"; do
  r=$build/test-results/$tier
  if [ -f "$r" ]; then read -r a b c < "$r"; p=$((p+a)) f=$((f+b)) s=$((s+c))
  else missing+=("$tier"); f=$((f+1)); fi
done
[ ${#missing[@]} -eq 0 ] || echo "tiers that did not report (counted as failures): ${missing[*]}"
echo
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
