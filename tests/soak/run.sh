#!/usr/bin/env bash
# Tier soak (`make soak`, not part of `make test`: about 5 minutes on 2
# cores): long runs that the default tiers keep short.
#   stream/*   soak_stream.py: SOAK_GIB (default 32) GiB each way at once over
#              one paired connection, sizes 1 B .. 4 MiB mixed, aligned and
#              not, sha256 both ways; TCP, AF_UNIX, ::1, no spin, and once
#              without the library as the reference
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
for c in mpi_openmpi mpi_mpich; do
  t_run "mpi/$c" 1800 env P_REPS="$REPS" tests/programs/one.sh "$c" both pairs
done
t_end
