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
#              the statistics must show lent bytes
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
THP=/sys/kernel/mm/transparent_hugepage/shmem_enabled
old=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP" 2>/dev/null)
if [ "$old" = advise ] || [ "$old" = always ] || [ "$old" = within_size ] ||
   { [ -w "$THP" ] && echo advise > "$THP" 2>/dev/null; }; then
  d=$(mktemp -d)
  t_run stream/exchange 1800 bash -c '
    env LD_PRELOAD="$1" ZCSOCK_EXCHANGE=1 ZCSOCK_STATS=1 ZCSOCK_LOG_FILE="$2/%p.log" \
      '"$PY $S"' tcp "$3" 6 || exit 1
    lent=$(cat "$2"/*.log | awk -F": " "\$1 == \"local.xchg.bytes_lent\" {s += \$2} END {print s + 0}")
    echo "local.xchg.bytes_lent: $lent"; [ "$lent" -gt 0 ]' _ "$ZC_LIB" "$d" "$GIB"
  rm -rf "$d"
  [ "$old" = advise ] || echo "$old" > "$THP" 2>/dev/null
else
  t_run stream/exchange 5 sh -c 'echo "no 2 MiB shared pages and no root to allow them"; exit 77'
fi
for c in mpi_openmpi mpi_mpich; do
  t_run "mpi/$c" 1800 env P_REPS="$REPS" tests/programs/one.sh "$c" both pairs
done
t_end
