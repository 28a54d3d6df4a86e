#!/usr/bin/env bash
# MPICH (Debian's, ch4 over UCX): two ranks of mpi_check with UCX's TCP
# transport only (UCX_TLS=tcp,self; MPIR_CVAR_NOLOCAL=1 keeps MPICH's own
# shared memory out), so ranks on one host talk through sockets on every
# interface UCX finds.  Every byte of point-to-point messages (1 B ..
# 32 MiB) and collectives is checked against the sender's pattern.
# Repeated.
set -u
. "$(dirname "$0")/lib.sh"
p_setup mpi_mpich "$1"
. "$P_DIR/mpi_case.sh"
export UCX_TLS=tcp,self MPIR_CVAR_NOLOCAL=1 UCX_WARN_UNUSED_ENV_VARS=n
mpi_case MPICH mpiexec.mpich "$(cd "${ZC_BUILD:-build}" 2>/dev/null && pwd)/tests/programs/mpi_check_mpich"
