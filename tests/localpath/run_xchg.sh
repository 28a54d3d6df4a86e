#!/bin/bash
# Tier "localpath-xchg": every localpath case with both ends under the
# library, again with page exchange on (ZCSOCK_EXCHANGE=1) and 2 MiB
# shared-memory pages (as root, shmem THP advise for the tier, put back
# after): exchange must change nothing a case checks.  64 MiB streams,
# with the default rent-or-buy rule (common/zc_rent.h): where new pages
# cost more than a ring pass, lent and ring-carried units mix in a stream.
# Without 2 MiB pages and no root to turn them on, one skip.
# XCHG_PAGES=hugetlb (tier localpath-xchg-hugetlb): on hugetlb pages
# instead, shmem THP never and 1,024 free hugetlb pages (as root, set for
# the tier and put back).
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
. tests/lib/thp.sh
xchg_pages localpath-xchg
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
