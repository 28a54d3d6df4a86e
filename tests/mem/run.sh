#!/usr/bin/env bash
# Tier "mem": each program with large-buffer placement on and off.
. "$(dirname "$0")/../lib/harness.sh"
t_begin mem
# t_xu lends units only with 2 MiB shared pages: as root, allow shmem THP
# (advise) for the tier and put the setting back afterwards.
THP=/sys/kernel/mm/transparent_hugepage/shmem_enabled
old=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP" 2>/dev/null)
case $old in never|deny) echo advise > "$THP" 2>/dev/null && trap 'echo "$old" > "$THP"' EXIT ;; esac
for t in "$@"; do
  n=$(basename "$t")
  t_run "$n/placement" 120 env ZCSOCK_ALLOC_PLACEMENT=1 "$t" ${MEM_DLLIB:+"$MEM_DLLIB"}
  t_run "$n/glibc-chunks" 120 env ZCSOCK_ALLOC_PLACEMENT=0 "$t" ${MEM_DLLIB:+"$MEM_DLLIB"}
done
t_end
