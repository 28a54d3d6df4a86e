#!/bin/bash
# Tier "localpath-xchg": every localpath case with both ends under the
# library, again with page exchange on (ZCSOCK_EXCHANGE=1) and 2 MiB
# shared-memory pages (as root, shmem THP advise for the tier, put back
# after): exchange must change nothing a case checks.  64 MiB streams.
# Without 2 MiB pages and no root to turn them on, one skip.
# XCHG_PAGES=hugetlb (tier localpath-xchg-hugetlb): on hugetlb pages
# instead, shmem THP never and 1,024 free hugetlb pages (as root, set for
# the tier and put back).
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
. tests/lib/thp.sh
tier=localpath-xchg why="no 2 MiB shared pages here and no root to turn shmem THP on"
if [ "${XCHG_PAGES:-thp}" = hugetlb ]; then
  tier=localpath-xchg-hugetlb
  tlb_allow 1024; THP_HUGE=$TLB_OK why=${TLB_WHY:-}
elif [ "${XCHG_PAGES:-thp}" = 4k ]; then
  # 4 KiB pages (shmem THP never, ZCSOCK_EXCHANGE_4K=1)
  tier=localpath-xchg-4k THP_HUGE=0 why="cannot set shmem THP to never (not root)"
  thp_set never && THP_HUGE=1
  export ZCSOCK_EXCHANGE_4K=1
else
  thp_allow
fi
T=${TEST_TIMEOUT:-300}; [ "$T" -gt 240 ] && T=240
PY=${PYTHON:-python3}
TL=tests/localpath/t_local.py
t_begin $tier
if [ "$THP_HUGE" = 0 ]; then
  t_run huge-pages 5 sh -c 'echo "skip: $1"; exit 77' _ "$why"
else
  for c in $($PY $TL list); do
    t_run "$c/both" "$T" env ZCSOCK_EXCHANGE=1 T_BYTES=$((64 << 20)) $PY $TL run "$c" both tcp
  done
  for c in stream_both poll_truth halfclose subprocess; do
    t_run "$c/unix" "$T" env ZCSOCK_EXCHANGE=1 T_BYTES=$((64 << 20)) $PY $TL run "$c" both unix
  done
fi
t_end
