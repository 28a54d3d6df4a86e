#!/usr/bin/env bash
# Tier soak (`make soak`, not part of `make test`: about 5 minutes on 2
# cores): long runs that the default tiers keep short.
#   stream/*   soak_stream.py: SOAK_GIB (default 32) GiB each way at once over
#              one paired connection, sizes 1 B .. 4 MiB mixed, aligned and
#              not, sha256 both ways; TCP, AF_UNIX, ::1, no spin, and once
#              without the library as the reference
#   stream/exchange   the same over TCP with page exchange on (ZCSOCK_EXCHANGE=1,
#              shmem THP advise for the run, as root): the sender's 64 MiB
#              source block is lent unit by unit where a message covers one,
#              the receiver copies out of the units (odd offsets, pieces);
#              the statistics must show lent bytes; stream/exchange-hugetlb
#              the same on hugetlb pages (THP never, 1,024 pages, as root)
#   mpi/*      the programs tier's MPI cases, both ends under the library,
#              SOAK_MPI_REPS (default 100) rounds each
set -u
cd "$(dirname "$0")/../.."
. tests/lib/harness.sh
GIB=${SOAK_GIB:-32}
REPS=${SOAK_MPI_REPS:-100}
PY=${PYTHON:-python3}
S=tests/soak/soak_stream.py
small=$(awk -v g="$GIB" 'BEGIN {print g / 4}')
t_begin soak
t_run stream/tcp 1800 env LD_PRELOAD="$ZC_LIB" $PY $S tcp "$GIB" 1
t_run stream/unix 1800 env LD_PRELOAD="$ZC_LIB" ZCSOCK_LOCAL_UNIX=1 $PY $S unix "$GIB" 2
t_run stream/tcp6 1800 env LD_PRELOAD="$ZC_LIB" $PY $S tcp6 "$small" 3
t_run stream/nospin 1800 env LD_PRELOAD="$ZC_LIB" ZCSOCK_SPIN=0 $PY $S tcp "$small" 4
t_run stream/no-library 1800 $PY $S tcp "$small" 5
. tests/lib/thp.sh
xsoak() {   # NAME: the exchange stream, which must show lent bytes
  local d; d=$(mktemp -d)
  t_run "$1" 1800 bash -c '
    env LD_PRELOAD="$1" ZCSOCK_EXCHANGE=1 ZCSOCK_STATS=1 ZCSOCK_LOG_FILE="$2/%p.log" \
      '"$PY $S"' tcp "$3" 6 || exit 1
    lent=$(cat "$2"/*.log | awk -F": " "\$1 == \"local.xchg.bytes_lent\" {s += \$2} END {print s + 0}")
    echo "local.xchg.bytes_lent: $lent"; [ "$lent" -gt 0 ]' _ "$ZC_LIB" "$d" "$GIB"
  rm -rf "$d"
}
thp_allow
if [ "$THP_HUGE" = 1 ]; then
  xsoak stream/exchange
else
  t_run stream/exchange 5 sh -c 'echo "no 2 MiB shared pages and no root to allow them"; exit 77'
fi
# the same on hugetlb pages (shmem THP never, 1,024 pages, as root)
tlb_allow 1024
if [ "$TLB_OK" = 1 ]; then
  xsoak stream/exchange-hugetlb
else
  t_run stream/exchange-hugetlb 5 sh -c 'echo "skip: $1"; exit 77' _ "$TLB_WHY"
fi
hp_restore; trap - EXIT
for c in mpi_openmpi mpi_mpich; do
  t_run "mpi/$c" 1800 env P_REPS="$REPS" tests/programs/one.sh "$c" both pairs
done
t_end
