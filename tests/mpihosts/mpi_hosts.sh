#!/usr/bin/env bash
# mpi_hosts.sh openmpi|mpich preload|run|none: an MPI job across two "hosts",
# two network namespaces joined by a veth pair (10.213.79.1 and .2), two
# ranks on each, launched by mpiexec from the first with nsexec.sh as its
# ssh (a clean environment on the remote side, as ssh gives).
#   preload  the library reaches the ranks through the MPI's own option
#            (Open MPI: mpiexec -x LD_PRELOAD=...; MPICH: -genv LD_PRELOAD)
#   run      the job under `zcsock run` (Open MPI: -x LD_PRELOAD forwards
#            what zcsock run set; MPICH's mpiexec forwards the whole
#            environment by itself)
#   none     no library: the reference (the job only)
# mpi_check (tests/programs/mpi_check.c) pairs ranks on one host first, then
# ranks on different hosts, 1 B .. 32 MiB each way, and collectives over
# all four, every byte checked.  Then, from each rank's exit statistics:
# it paired with its same-host partner (local.paired.*), kept its
# connections to the other host on TCP (local.declined.not_local), and
# moved at least one phase's payload each way through the ring
# (path.local.recv_bytes) and through the kernel (path.copy.recv_bytes).
# Exit 0 pass, 1 fail, 77 skip (not root, no ip, MPI binary not built).
set -u
impl=$1 mode=$2
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${ZC_BUILD:-build}" && pwd)
lib=${ZC_LIB:-$build/libzcsock.so}
bin=$build/tests/programs/mpi_check_$impl
[ "$(id -u)" = 0 ] || { echo "skip: needs root (ip netns)"; exit 77; }
command -v ip >/dev/null || { echo "skip: no ip (iproute2)"; exit 77; }
[ -x "$bin" ] || { echo "skip: $bin not built (mpicc.$impl missing when make ran)"; exit 77; }
command -v "mpiexec.$impl" >/dev/null || { echo "skip: no mpiexec.$impl"; exit 77; }

A=10.213.79.1 B=10.213.79.2
nsa=zch$$a nsb=zch$$b
work=$(mktemp -d)
cleanup() {
  ip netns del "$nsa" 2>/dev/null
  ip netns del "$nsb" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$nsa" && ip netns add "$nsb" &&
  ip link add "zch$$" type veth peer name "zch$$b" &&
  ip link set "zch$$" netns "$nsa" && ip link set "zch$$b" netns "$nsb" &&
  # one interface name on both hosts (UCX_NET_DEVICES, btl_tcp_if_include)
  ip -n "$nsa" link set "zch$$" name zcv0 && ip -n "$nsb" link set "zch$$b" name zcv0 &&
  ip -n "$nsa" addr add $A/24 dev zcv0 && ip -n "$nsb" addr add $B/24 dev zcv0 &&
  for n in "$nsa" "$nsb"; do ip -n "$n" link set zcv0 up && ip -n "$n" link set lo up || exit 1; done ||
  { echo "skip: cannot make network namespaces here"; exit 77; }
export ZC_NSMAP="$A=$nsa $B=$nsb"
unset ZCSOCK_LOCAL_PAIR_AFTER       # the default, as users run it
export ZCSOCK_STATS=1 ZCSOCK_LOG_FILE=$work/stats/stats.%p MPI_CHECK_PIDS=$work/pids

case $impl in
openmpi)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  printf '%s slots=2\n%s slots=2\n' $A $B > "$work/hosts"
  cmd=(mpiexec.openmpi --hostfile "$work/hosts" --mca plm_rsh_agent "$here/nsexec.sh"
       --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include zcv0 --mca oob_tcp_if_include zcv0
       -x ZCSOCK_STATS -x ZCSOCK_LOG_FILE -x MPI_CHECK_PIDS)
  case $mode in preload) cmd+=(-x "LD_PRELOAD=$lib") ;; run) cmd+=(-x LD_PRELOAD) ;; esac
  cmd+=(-n 4 "$bin" 1) ;;
mpich)
  export UCX_TLS=tcp,self MPIR_CVAR_NOLOCAL=1 UCX_WARN_UNUSED_ENV_VARS=n UCX_NET_DEVICES=zcv0
  cmd=(mpiexec.mpich -launcher ssh -launcher-exec "$here/nsexec.sh" -hosts "$A:2,$B:2")
  [ "$mode" = preload ] && cmd+=(-genv LD_PRELOAD "$lib")
  cmd+=(-n 4 "$bin" 1) ;;
*) echo "unknown MPI $impl"; exit 2 ;;
esac
[ "$mode" = run ] && cmd=("$build/zcsock" run --lib "$lib" -- "${cmd[@]}")
echo "+ ip netns exec $nsa ${cmd[*]}"
# Print the ranks' stacks (gdb), connections (zcsock stat --conns) and
# both hosts' TCP sockets (ss): a job that does not end.
dump() {
  local p pid n
  for p in "$work"/pids/rank.*; do
    pid=$(cat "$p")
    echo "== ${p##*/} pid $pid: $(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null | cut -c1-80)"
    command -v gdb >/dev/null && timeout 30 gdb -q -batch -p "$pid" -ex 'thread apply all bt 12' 2>&1 |
      grep -E '^(Thread|#)' | head -60
    [ "$mode" = none ] || timeout 10 "$build/zcsock" stat "$pid" --conns 2>&1 | head -40
  done
  for n in "$nsa" "$nsb"; do echo "== TCP in $n"; ip netns exec "$n" ss -tnpi 2>&1 | head -60; done
}
# The job, bounded (MPI_HOSTS_TIMEOUT, 150 s).  MPICH over UCX's TCP can
# hang in MPI_Finalize after every byte was checked: a rank still closing
# its endpoints waits for a peer that already sits in the PMI barrier and
# no longer progresses (UCX 1.13; about one job in four here, and as often
# without the library: case none shows it).  That stall, "mpi_check: ok"
# printed and the job still there 10 s later, is said with its stacks and
# the job run again, up to 5 times; any other stall fails.
for ((attempt = 1; attempt <= 5; attempt++)); do
  rm -rf "$work/pids" "$work/stats"
  mkdir -p "$work/pids" "$work/stats"
  ip netns exec "$nsa" "${cmd[@]}" >"$work/out" 2>&1 &
  job=$!
  okat=
  for ((i = 0; i < ${MPI_HOSTS_TIMEOUT:-150} * 10; i++)); do
    kill -0 $job 2>/dev/null || break
    if [ "$impl" = mpich ] && grep -q '^mpi_check: ok ' "$work/out"; then
      okat=${okat:-$i}
      [ $((i - okat)) -ge 100 ] && break
    fi
    sleep 0.1
  done
  stalled=
  if kill -0 $job 2>/dev/null; then
    if [ -n "$okat" ]; then
      echo "attempt $attempt: every byte checked, then the job stalled in MPI_Finalize" \
           "(the MPICH/UCX finalize race described in this script, seen without the library too); its ranks:"
      [ $attempt -eq 1 ] && dump
      stalled=1
    else
      echo "FAIL: the job still ran after ${MPI_HOSTS_TIMEOUT:-150} s; its ranks:"
      dump
    fi
    kill -TERM $job 2>/dev/null
    sleep 2
    kill -KILL $job 2>/dev/null
  fi
  wait $job
  rc=$?
  [ -n "$stalled" ] || break
done
out=$(cat "$work/out")
echo "$out" | tail -20
[ $rc -eq 0 ] && grep -q '^mpi_check: ok ' <<<"$out" || { echo "FAIL: the job (exit $rc)"; exit 1; }
[ "$mode" = none ] && { echo "ok mpi_hosts $impl none (the reference: no library)"; exit 0; }

# one phase's payload each way: 4 ping-pongs and 4 exchanges of each size
phase=$(( (1 + 7 + 100 + 4096 + 65536 + 65537 + 1048576 + 8388611 + 33554432) * 8 ))
stat() { awk -v k="$1:" '$1 == k {print $2; f = 1} END {if (!f) print 0}' "$2"; }
bad=0
for r in 0 1 2 3; do
  pid=$(cat "$work/pids/rank.$r" 2>/dev/null)
  f=$work/stats/stats.$pid
  if [ -z "$pid" ] || [ ! -s "$f" ]; then echo "FAIL: rank $r: no statistics"; bad=1; continue; fi
  paired=$(( $(stat local.paired.connected "$f") + $(stat local.paired.accepted "$f") ))
  remote=$(stat local.declined.not_local "$f")
  ring=$(stat path.local.recv_bytes "$f") kern=$(stat path.copy.recv_bytes "$f")
  echo "rank $r (pid $pid, host $([ $r -lt 2 ] && echo A || echo B)): paired $paired, kept on TCP as remote $remote, received through the ring $ring B, through the kernel $kern B"
  [ "$paired" -ge 1 ] || { echo "FAIL: rank $r did not pair with its same-host partner"; bad=1; }
  [ "$remote" -ge 1 ] || { echo "FAIL: rank $r saw no connection to the other host"; bad=1; }
  [ "$ring" -ge $phase ] || { echo "FAIL: rank $r: $ring B through the ring, below one phase ($phase)"; bad=1; }
  [ "$kern" -ge $phase ] || { echo "FAIL: rank $r: $kern B through the kernel, below one phase ($phase)"; bad=1; }
done
[ $bad -eq 0 ] || exit 1
echo "ok mpi_hosts $impl $mode"
