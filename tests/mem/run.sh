#!/usr/bin/env bash
# Tier "mem": each program with large-buffer placement on and off.
. "$(dirname "$0")/../lib/harness.sh"
t_begin mem
# t_xu lends units only with 2 MiB shared pages: as root, allow shmem THP
# (advise) for the tier and put the setting back afterwards.
. "$(dirname "$0")/../lib/thp.sh"
thp_allow
# t_xu lends units itself, with no ring to weigh a lend against: every unit
# is lent at once (the rent-or-buy rule, common/zc_rent.h, is off)
export ZCSOCK_EXCHANGE_UNIT_US=1
for t in "$@"; do
  n=$(basename "$t")
  t_run "$n/placement" 120 env ZCSOCK_ALLOC_PLACEMENT=1 "$t" ${MEM_DLLIB:+"$MEM_DLLIB"}
  t_run "$n/glibc-chunks" 120 env ZCSOCK_ALLOC_PLACEMENT=0 ZCSOCK_EXCHANGE=0 "$t" ${MEM_DLLIB:+"$MEM_DLLIB"}
done
t_end
