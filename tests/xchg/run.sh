#!/usr/bin/env bash
# Tier "xchg": page exchange end to end.  Each case of t_xchg runs over TCP
# and over AF_UNIX with ZCSOCK_EXCHANGE=1, both ends under the library; its
# statistics (one report per process) must show which path carried the
# bytes.  Then the fallbacks: shmem without 2 MiB pages (the ring, and a
# counted reason), and exchange off.  (Not under AddressSanitizer: its
# runtime's malloc replaces ours, so nothing is placed and nothing lent; the
# unit tiers run the arena's unit states and the ring's PAGES reads under
# ASan and UBSan.)
. "$(dirname "$0")/../lib/harness.sh"
t_begin xchg
BIN=${XCHG_BIN:-$ZC_BUILD/tests/xchg/t_xchg}
. "$(dirname "$0")/../lib/thp.sh"
thp_allow
THP=$THP_FILE huge=$THP_HUGE

# xcase NAME CASE FAMILY THP(advise|never|hugetlb) EXCHANGE CHECK...
#   CHECK: "stat>N", "stat>=N", "stat==N" or "stat<=N" over the sum of both reports
#   hugetlb: shmem THP never and the hugetlb pool of tlb_pages (below)
xcase() {
  local name=$1 mode=$2 fam=$3 thp=$4 ex=$5; shift 5
  if [ "$thp" = advise ] && [ $huge = 0 ]; then
    t_run "$name" 5 sh -c 'echo "no 2 MiB shared pages here and no root to turn shmem THP on"; exit 77'
    return
  fi
  if [ "$thp" = hugetlb ] && [ "$TLB_OK" != 1 ]; then
    t_run "$name" 5 sh -c 'echo "skip: $1"; exit 77' _ "$TLB_WHY"
    return
  fi
  t_run "$name" 120 "$(dirname "$0")/case.sh" "$BIN" "$mode" "$fam" "$thp" "$ex" "$THP" "$@"
}
for fam in tcp unix; do
  xcase "mutate/$fam" mutate $fam advise 1 local.xchg.bytes_lent\>0 local.xchg.bytes_mapped\>0 \
    local.xchg.bytes_copied\>0 local.xchg.rewritten\>0 xchg.refused.rewritten.1\>0 xchg.refused.not_placed.2\>0 xu.frozen\>0 mh.units.mapped_in\>0 mh.units.released\>0
  xcase "kill/$fam" kill $fam advise 1 local.xchg.bytes_mapped==134217728
  xcase "rkill/$fam" rkill $fam advise 1 local.xchg.bytes_lent\>=67108864
  xcase "echo/$fam" echo $fam advise 1 local.xchg.bytes_mapped\>0 local.xchg.not_placed\>0
  xcase "thread/$fam" thread $fam advise 1 local.xchg.bytes_lent\>0 xu.rewritten\>0
  xcase "fork/$fam" fork $fam advise 1 local.xchg.bytes_mapped\>0 local.xchg.not_placed\>0
  xcase "exec/$fam" exec $fam advise 1 local.xchg.bytes_mapped==67108864
  XCHG_ENV="ZCSOCK_PDC_SEND_BUDGET=32M" xcase "budget/$fam" budget $fam advise 1 \
    local.xchg.bytes_lent\>0 local.xchg.budget\>0
  [ $fam = tcp ] && XCHG_ENV="ZCSOCK_PDC_SEND_BUDGET=32M" xcase "budget_conns" budget_conns tcp \
    advise 1 local.xchg.bytes_lent\>0 local.xchg.proc_budget\>0
  XCHG_ENV="ZCSOCK_PDC_SEND_BUDGET=32M" xcase "budget_wait/$fam" budget_wait $fam advise 1 \
    local.xchg.bytes_lent\>=100663296 local.xchg.budget_waits\>0
done
# what can change memory behind the allocator's back (issue 29): a kernel
# pin (an io_uring fixed buffer registered after liburing is loaded late),
# mmap(MAP_FIXED) over a lent buffer, mprotect, two threads lending one
# buffer that a third rewrites
xcase "uring/tcp" uring tcp advise 1 local.xchg.pinned\>0 local.xchg.bytes_lent\>0 \
  local.xchg.bytes_mapped\>0
for fam in tcp unix; do
  xcase "mapfixed/$fam" mapfixed $fam advise 1 local.xchg.app\>0 local.xchg.bytes_lent\>0 \
    mh.units.app\>0
done
xcase "mprotect/tcp" mprotect tcp advise 1 local.xchg.app\>0 mh.units.app\>0
xcase "threads/tcp" threads tcp advise 1 local.xchg.bytes_lent\>0
# refusals by reason and call site: too small, unaligned
xcase "reasons/tcp" reasons tcp advise 1 local.xchg.too_small\>=1 local.xchg.unaligned\>=1 \
  xchg.refused.too_small.1\>=1 xchg.refused.unaligned.1\>=1 local.xchg.bytes_lent==0
# rent or buy (common/zc_rent.h), a lend costing 10 ms: the refilled buffer
# is never lent (1 unit at the start, 2 of the buffer sent unchanged), the
# unchanged one is, then hit
for fam in tcp unix; do
  XCHG_ENV="ZCSOCK_EXCHANGE_UNIT_US=10000" xcase "rent/$fam" rent $fam advise 1 \
    local.xchg.cost\>=400 xchg.refused.cost.1\>=1 pdc.xu.regs\<=3 pdc.xu.regs\>=2 \
    pdc.xu.hits\>=1 xu.rent_us\>0
done
# the default (ZCSOCK_EXCHANGE unset) lends where 2 MiB pages exist
xcase "mutate/default" mutate tcp advise default local.xchg.bytes_lent\>0 local.xchg.bytes_mapped\>0
# placement for exchange starts at start-up (blocks allocated before any
# connection must be lendable), and not at all with exchange off
xcase "placement/default" placement tcp advise default mh.alloc.placed_allocs\>0
xcase "placement/exchange-off" placement tcp advise 0 mh.alloc.placed_allocs==0
xcase "mutate/no-huge-pages" mutate tcp never 1 local.xchg.unavailable\>0 local.xchg.bytes_lent==0 \
  path.local.send_bytes\>0
# ... and says so under ZCSOCK_DEBUG, once, at start-up (with free hugetlb
# pages here the arena would be placed on them: nothing to say)
if [ $huge = 0 ]; then
  t_run "notice/no-huge-pages" 5 sh -c 'echo "skip: no root to turn shmem THP off"; exit 77'
elif [ "$(tlb_free)" -gt 0 ]; then
  t_run "notice/no-huge-pages" 5 sh -c 'echo "skip: free hugetlb pages here: placement uses them"; exit 77'
else
  t_run "notice/no-huge-pages" 20 sh -c '
    old=$(sed -n "s/.*\[\(.*\)\].*/\1/p" "$1"); echo never > "$1"
    out=$(env ZCSOCK_EXCHANGE=1 ZCSOCK_DEBUG=1 LD_PRELOAD="$2" "$3" placement tcp 2>&1)
    echo "$old" > "$1"; echo "$out"
    [ "$(echo "$out" | grep -c "large-buffer placement off: page exchange lends only")" = 1 ]' \
    _ "$THP" "$ZC_LIB" "$BIN"
fi
# on 4 KiB pages when asked for (ZCSOCK_EXCHANGE_4K=1, shmem THP never)
for c in mutate fork thread; do
  XCHG_ENV="ZCSOCK_EXCHANGE_4K=1" xcase "4k/$c" $c tcp never 1 local.xchg.bytes_lent\>0 \
    local.xchg.bytes_mapped\>0 local.xchg.unavailable==0
done
XCHG_ENV="ZCSOCK_EXCHANGE_4K=1" xcase "4k/kill" kill tcp never 1 local.xchg.bytes_mapped==134217728
xcase "mutate/exchange-off" mutate tcp advise 0 local.xchg.bytes_lent==0 local.xchg.unavailable==0 \
  path.local.send_bytes\>0

# hugetlb units: shmem THP never, 2 GiB of hugetlb pages (as root the tier
# reserves them for these cases and gives them back).  Each case must leave
# the pool as it found it (XCHG_TLB_LEAK: no page held or reserved after
# every process of the case exited).
tlb_pages 1024
for fam in tcp unix; do
  XCHG_TLB_LEAK=1 xcase "hugetlb/mutate/$fam" mutate $fam hugetlb 1 local.xchg.bytes_lent\>0 \
    local.xchg.bytes_mapped\>0 local.xchg.rewritten\>0 xu.frozen\>0 mh.units.mapped_in\>0
  XCHG_TLB_LEAK=1 xcase "hugetlb/kill/$fam" kill $fam hugetlb 1 local.xchg.bytes_mapped==134217728
  XCHG_TLB_LEAK=1 xcase "hugetlb/rkill/$fam" rkill $fam hugetlb 1 local.xchg.bytes_lent\>=67108864
done
for c in echo thread fork exec threads; do
  XCHG_TLB_LEAK=1 xcase "hugetlb/$c/tcp" $c tcp hugetlb 1 local.xchg.bytes_mapped\>0
done
XCHG_TLB_LEAK=1 xcase "hugetlb/mapfixed/tcp" mapfixed tcp hugetlb 1 local.xchg.app\>0
# a dry pool (64 pages: the two arenas take 48, unit files and mapped units
# soon find none left): what cannot get a page is copied (counted), some
# units are still lent, nothing fails
if [ "$TLB_OK" = 1 ] && [ -n "$TLB_OLD" ]; then
  echo $(( TLB_OLD + 64 )) > "$TLB_FILE"
  [ "$(tlb_free)" -ge 64 ] || { TLB_OK=0; TLB_WHY="could not size the pool to 64 free pages"; }
fi
[ -n "$TLB_OLD" ] || { TLB_OK=0; TLB_WHY="the pool was not ours to shrink (not root, or pages free already)"; }
XCHG_TLB_LEAK=1 xcase "hugetlb/pool-dry" mutate tcp hugetlb 1 local.xchg.pool_dry\>0 \
  local.xchg.bytes_lent\>0 path.local.send_bytes\>0
hp_restore; trap - EXIT
t_end
