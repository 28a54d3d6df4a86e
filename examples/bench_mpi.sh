#!/bin/bash
# make bench-mpi: MPI over TCP, with and without zcsock, against the MPI
# library's own shared memory, every variant interleaved round by round in
# one run (issue 33).
#
#   NetPIPE (Debian's netpipe-openmpi, netpipe-mpich2): ping-pong and
#   streaming, 8 B to 32 MiB, two ranks.  Half round trip in us, MB/s.
#   examples/mpi_coll.c: allreduce, alltoall, bcast on 2 and 4 ranks (4
#   ranks on a 2-core machine are oversubscribed: compare within a row;
#   MPICH, whose ranks never yield, runs 4 only on 4 CPUs or more).
#
# Variants: Open MPI ob1/tcp (kernel), ob1/tcp under zcsock, ob1/vader (its
# shared memory, CMA), pml ucx (UCX shared memory); MPICH ucx/tcp (kernel),
# ucx/tcp under zcsock, ucx/shm.  Under zcsock each rank writes its
# statistics, and the bench says whether every rank's bytes went through the
# local path (paired) or not.  Prints the tables with ratios against the MPI
# library's own shared memory and against the kernel; writes raw.csv,
# coll.csv, pairs.csv and netpipe.svg (gnuplot) to build/bench-mpi/.
# QUICK=1: one round, NetPIPE up to 8 MiB, 0.1 s per collective figure.
set -u
B=${ZC_BUILD:-build}
LIB=${ZC_LIB:-$PWD/build/libzcsock.so}
ROUNDS=3 UPPER=33554432 CSECS=0.3
[ "${QUICK:-}" = 1 ] && ROUNDS=1 UPPER=8388608 CSECS=0.1
OUT=$B/bench-mpi
rm -rf "$OUT" && mkdir -p "$OUT" || exit 1
echo "round,impl,kind,mode,bytes,usec,mbps" >"$OUT/raw.csv"
echo "round,impl,kind,np,op,bytes,usec" >"$OUT/coll.csv"
echo "impl,kind,job,log,local_bytes,copy_bytes" >"$OUT/pairs.csv"

declare -A NP=([openmpi]=NPopenmpi [mpich]=NPmpich2)
declare -A KINDS=([openmpi]="tcp zcsock vader ucx" [mpich]="tcp zcsock shm")
impls=()
for impl in openmpi mpich; do
  if command -v "mpiexec.$impl" >/dev/null && command -v "${NP[$impl]}" >/dev/null; then
    impls+=("$impl")
  else
    echo "bench-mpi: $impl SKIPPED (needs mpiexec.$impl and ${NP[$impl]}: scripts/deps.sh installs them)"
  fi
done
[ ${#impls[@]} -gt 0 ] || exit 0
[ -f "$LIB" ] || { echo "bench-mpi: no library at $LIB (make first)" >&2; exit 1; }

# run IMPL KIND NRANKS JOB CMD...: one MPI job of the variant; under zcsock
# every rank logs its statistics to $OUT/logs/JOB/rank.PID.log
run() {
  local impl=$1 kind=$2 np=$3 job=$4; shift 4
  local env=() opts=() pre=() wrap=() logs=$OUT/logs/$job
  if [ "$impl" = openmpi ]; then
    env=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    case $kind in
      tcp | zcsock) opts=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo) ;;
      vader) opts=(--mca pml ob1 --mca btl vader,self) ;;
      ucx) opts=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any) ;;
    esac
    [ "$np" -gt "$(nproc)" ] && opts+=(--oversubscribe)
  else
    env=(UCX_WARN_UNUSED_ENV_VARS=n)
    [ "$kind" = shm ] || env+=(UCX_TLS=tcp,self MPIR_CVAR_NOLOCAL=1)
  fi
  if [ "$kind" = zcsock ]; then
    mkdir -p "$logs"
    pre=(LD_PRELOAD="$LIB" ZCSOCK_EXCHANGE=0 ZCSOCK_STATS=1 ZCSOCK_LOG_FILE="$logs/launcher.%p.log")
    wrap=(env ZCSOCK_LOG_FILE="$logs/rank.%p.log")
  fi
  env "${env[@]}" "${pre[@]}" timeout 120 "mpiexec.$impl" -n "$np" "${opts[@]}" "${wrap[@]}" "$@"
}

# pairs IMPL JOB: one row per rank of a zcsock job (bytes it sent through
# the local path and through the kernel)
pairs() {
  local f l c
  for f in "$OUT/logs/$2"/rank.*.log; do
    [ -f "$f" ] || continue
    l=$(awk -F': ' '$1 == "path.local.send_bytes" {s += $2} END {printf "%.0f", s}' "$f")
    c=$(awk -F': ' '$1 == "path.copy.send_bytes" {s += $2} END {printf "%.0f", s}' "$f")
    echo "$1,zcsock,$2,$(basename "$f"),$l,$c" >>"$OUT/pairs.csv"
  done
}

# job IMPL KIND NRANKS WHAT CMD...: one job of the variant, its output in
# $OUT/job.out; a failure said on stderr (1); under zcsock, its ranks' rows
# in pairs.csv
jobs=0
job() {
  local impl=$1 kind=$2 np=$3 what=$4; shift 4
  jobs=$((jobs + 1))
  if ! run "$impl" "$kind" "$np" "j$jobs" "$@" >"$OUT/job.out" 2>"$OUT/job.log"; then
    # kept, so that a hang after the work (in MPI_Finalize) tells from one in it
    cp "$OUT/job.out" "$OUT/failed.j$jobs.out"; cp "$OUT/job.log" "$OUT/failed.j$jobs.log"
    echo "# bench-mpi: $what, $impl $kind on $np ranks, failed (round $r; $(wc -l <"$OUT/job.out") lines of output, kept in failed.j$jobs.*): $(tail -1 "$OUT/job.log")" >&2
    return 1
  fi
  [ "$kind" != zcsock ] || pairs "$impl" "j$jobs"
}

for ((r = 1; r <= ROUNDS; r++)); do
  for impl in "${impls[@]}"; do
    for mode in pingpong stream; do
      for kind in ${KINDS[$impl]}; do
        flag=(); [ "$mode" = stream ] && flag=(-s)
        rm -f "$OUT/np.out"
        job "$impl" "$kind" 2 "NetPIPE $mode" "${NP[$impl]}" -l 8 -u "$UPPER" -p 0 "${flag[@]}" \
          -o "$OUT/np.out" && [ -s "$OUT/np.out" ] &&
          awk -v p="$r,$impl,$kind,$mode" '$1 > 0 {printf "%s,%d,%.4f,%.2f\n", p, $1, $3 * 1e6, $2}' \
            "$OUT/np.out" >>"$OUT/raw.csv"
      done
    done
    for np in 2 4; do
      [ -x "$B/mpi_coll_$impl" ] || continue
      # MPICH's ranks poll without yielding: more ranks than CPUs measure
      # the scheduler (its TCP jobs did not finish in 300 s on 2 CPUs)
      if [ "$impl" = mpich ] && [ "$np" -gt "$(nproc)" ]; then
        [ "$r" = 1 ] && echo "bench-mpi: mpich on $np ranks SKIPPED ($(nproc) CPUs: MPICH's ranks poll without yielding)"
        continue
      fi
      for kind in ${KINDS[$impl]}; do
        job "$impl" "$kind" "$np" collectives "$B/mpi_coll_$impl" "$CSECS" &&
          awk -v p="$r,$impl,$kind,$np" '$1 == "coll" {printf "%s,%s,%s,%s\n", p, $2, $3, $4}' \
            "$OUT/job.out" >>"$OUT/coll.csv"
      done
    done
  done
done

echo "make bench-mpi, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $ROUNDS round(s), medians; $(nproc) CPUs"
python3 "$(dirname "$0")/bench_mpi_report.py" "$OUT"
