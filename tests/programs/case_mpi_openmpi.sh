#!/usr/bin/env bash
# Open MPI: two ranks of mpi_check over its TCP transport (pml ob1, btl
# tcp,self on the loopback interface: the shared-memory transport is left
# out, so ranks on one host talk through sockets as ranks on two hosts do).
# Every byte of point-to-point messages (1 B .. 32 MiB) and collectives is
# checked against the sender's pattern.  Repeated.
set -u
. "$(dirname "$0")/lib.sh"
p_setup mpi_openmpi "$1"
. "$P_DIR/mpi_case.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi_case "Open MPI" mpiexec.openmpi "$(cd "${ZC_BUILD:-build}" 2>/dev/null && pwd)/tests/programs/mpi_check_openmpi" \
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
