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
  # MPICH 4.0 over UCX's TCP can hang in MPI_Finalize after every byte was
  # checked: a rank still closing its endpoints waits for the ACK of a
  # flush its peer, already in the PMI barrier, never sends (pmodels/mpich
  # #6596; about one round in 115 here under load, as often without the
  # library: every unread byte of both rings was the peer's 25-byte flush
  # request).  That stall, "mpi_check: ok" printed and the job still there
  # 10 s later, is said and the round run again, up to 3 times; any other
  # stall or failure fails the round.
  round() {
    local r=$1 rc attempt pid i okat
    for ((attempt = 1; attempt <= 3; attempt++)); do
      rc=0 okat=
      p_cli "$mpiexec" "${opts[@]}" \
        -n 1 env "${P_SRV_ENV[@]}" "$bin" "$r" : -n 1 env "${P_CLI_ENV[@]}" "$bin" "$r" \
        >"$P_TMP/out" 2>>"$P_ART/mpi.log" </dev/null & pid=$!
      P_PIDS+=("$pid")
      for ((i = 0; i < 600; i++)); do
        p_alive "$pid" || break
        if [ "${impl,,}" = mpich ] && grep -q '^mpi_check: ok ' "$P_TMP/out"; then
          okat=${okat:-$i}
          [ $((i - okat)) -ge 100 ] && break
        fi
        p_nap 0.1
      done
      if p_alive "$pid"; then
        if [ -n "$okat" ] && [ $attempt -lt 3 ]; then
          p_say "round $r attempt $attempt: every byte checked, then the job stalled in" \
                "MPI_Finalize (MPICH's finalize race, seen without the library too): again"
          p_stop "$pid" 2
          wait "$pid" 2>/dev/null
          continue
        fi
        echo "pid $pid ($(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null | head -c 80)) still running after $((i / 10))s"
        p_snapshot
        p_stop "$pid" 2
        wait "$pid" 2>/dev/null
        rc=124
        break
      fi
      wait "$pid" || rc=$?
      break
    done
    cat "$P_TMP/out" >>"$P_ART/mpi.log"
    grep -q '^mpi_check: ok ' "$P_TMP/out" && [ $rc -ne 124 ] ||
      { p_say "round $r: exit $rc: $(tail -2 "$P_ART/mpi.log")"; return 1; }
    p_say "round $r: $(cat "$P_TMP/out")"
    return $rc
  }
  for ((r = 1; r <= REPS; r++)); do p_step "round$r" round "$r" || break; done
  p_end
}
