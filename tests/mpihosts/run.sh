#!/usr/bin/env bash
# Tier mpihosts (issue 33): MPI jobs whose ranks sit on two hosts, the hosts
# being two network namespaces joined by a veth pair, two ranks on each,
# launched by mpiexec from the first with tests/mpihosts/nsexec.sh as its
# ssh (mpi_hosts.sh).  Ranks on one host pair through the local path, ranks
# on different hosts keep TCP; every byte of 1 B .. 32 MiB messages and of
# collectives checked; each rank's statistics say which path carried what.
#   openmpi/preload  mpiexec.openmpi -x LD_PRELOAD=libzcsock.so
#   openmpi/run      zcsock run -- mpiexec.openmpi -x LD_PRELOAD
#   mpich/preload    mpiexec.mpich -genv LD_PRELOAD libzcsock.so
#   mpich/run        zcsock run -- mpiexec.mpich
#   */none           without the library: the reference
# Needs root (network namespaces); else every case is a skip.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
T=${TEST_TIMEOUT:-200}; [ "$T" -lt 200 ] && T=200
t_begin mpihosts
for impl in openmpi mpich; do
  for mode in none preload run; do
    t_run "$impl/$mode" "$T" tests/mpihosts/mpi_hosts.sh "$impl" "$mode"
  done
done
t_end
