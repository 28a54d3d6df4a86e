# Shared by case_mpi_openmpi.sh and case_mpi_mpich.sh (sourced after
# lib.sh): two ranks of mpi_check (tests/programs/mpi_check.c) on this host
# over TCP, launched as `mpiexec -n 1 RANK0 : -n 1 RANK1` so that rank 0
# runs with the server side's environment and rank 1 with the client
# side's; mpiexec itself runs with the client side's (in mode both the whole
# job runs under the library, as `zcsock run -- mpiexec ...` would).
# mpi_case IMPL MPIEXEC BIN ARGS..   (ARGS: mpiexec options before the ranks)
mpi_case() {
  local impl=$1 mpiexec=$2 bin=$3; shift 3
  local opts=("$@") REPS r
  p_need "$mpiexec"
  [ -x "$bin" ] || { echo "skip: $bin not built ($impl's mpicc missing when make ran)"; exit 77; }
  REPS=$(p_reps 4)
  round() {
    local r=$1 rc=0
    p_t 60 p_cli "$mpiexec" "${opts[@]}" \
      -n 1 env "${P_SRV_ENV[@]}" "$bin" "$r" : -n 1 env "${P_CLI_ENV[@]}" "$bin" "$r" \
      >"$P_TMP/out" 2>>"$P_ART/mpi.log" || rc=$?
    cat "$P_TMP/out" >>"$P_ART/mpi.log"
    grep -q '^mpi_check: ok ' "$P_TMP/out" || { p_say "round $r: exit $rc: $(tail -2 "$P_ART/mpi.log")"; return 1; }
    p_say "round $r: $(cat "$P_TMP/out")"
    return $rc
  }
  for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
  p_end
}
