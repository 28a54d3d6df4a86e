#!/bin/bash
# Tier "localpath-asan": the local path's trickiest cases (hand-back, process
# model, ancillary data, streams with the switch-over in the middle) with the
# library built under AddressSanitizer (make SANITIZE=address), preloaded
# after the ASan runtime in every process of both ends.  ZC_ASAN_LIB is that
# library; the cases are those of run.sh (t_local.py), smaller.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
T=${TEST_TIMEOUT:-300}; [ "$T" -gt 240 ] && T=240
PY=${PYTHON:-python3}
TL=tests/localpath/t_local.py
RT=$(${CC:-cc} -print-file-name=libasan.so)

t_begin localpath-asan
if [ ! -e "$RT" ] || [ ! -e "$ZC_ASAN_LIB" ]; then
  t_run setup 10 sh -c "echo 'ASan runtime ($RT) or library ($ZC_ASAN_LIB) missing' >&2; exit 1"
  t_end
  exit
fi
export ZC_LIB="$RT $ZC_ASAN_LIB" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:exitcode=99
export T_BYTES=$((32 << 20))
for c in stream_both sizes epoll fork exec scm subprocess exec_plain scm_plain scm_spawned; do
  t_run "$c/tcp" "$T" $PY $TL run "$c" both tcp
done
for c in anc passcred poll_truth; do
  t_run "$c/unix" "$T" $PY $TL run "$c" both unix
done
t_run exec_plain/forked-peer "$T" env T_FORKED_PEER=1 $PY $TL run exec_plain both unix
t_run exec_plain/epoll-big "$T" env T_EPOLL=1 T_BIG=1 $PY $TL run exec_plain both tcp
t_run killed-peer/tcp "$T" $PY $TL run killed_peer - tcp
# a closed peer's lingering socket: posted, taken, pumped (a raw clone) or dropped
for c in closed_fdopen closed_exec closed_read; do
  t_run "$c/tcp" "$T" $PY $TL run "$c" both tcp
done
# an idle peer's unread ring bytes: its socket fetched, a pump (or the fallback)
t_run idle_fdopen/tcp "$T" $PY $TL run idle_fdopen both tcp
t_run idle_exec/forked "$T" env T_IDLE_FORKED=1 $PY $TL run idle_exec both tcp
# wake-up eventfds (fetch, write, retire on fork) and several waiters at once
t_run wake_efd/poll "$T" env T_READY=poll T_WAKE=efd ZCSOCK_SPIN=0 $PY $TL run wake_efd both tcp
t_run wake_efd/fork "$T" env T_READY=epoll T_WAKE=fork ZCSOCK_SPIN=0 $PY $TL run wake_efd both tcp
# the epoll engine's parked wake fds and kicks (lp_epoll_rearm.py)
t_run epoll_rearm "$T" $PY tests/localpath/lp_epoll_rearm.py
# KEPT DELETES: an epoll DEL of a paired connection kept in the kernel,
# the kernel's answers kept (tests/localpath/lp_epoll_keep.py)
t_run epoll_keep "$T" $PY tests/localpath/lp_epoll_keep.py
# PLAIN UNTIL PAIRED: a connection that has not paired keeps its epoll
# registrations the application's own, adopted when it pairs (a thread
# asleep on the set woken), one-shots and dups at once
# (tests/localpath/lp_epoll_plain.py)
t_run epoll_plain "$T" env ZCSOCK_LOCAL_SHORT_SAMPLE=0 $PY tests/localpath/lp_epoll_plain.py   # (every connection tracked, as in run.sh)
# zero-timeout waits that skip the kernel, a poll set beyond the stack arrays
t_run poll_nowait "$T" $PY tests/localpath/lp_poll_nowait.py
# the hand-over mailbox read as untrusted: a same-user process's
# connections holding millions of descriptors, records never claimed, a
# lingering socket (lp_mailbox.py)
for c in heavy records linger; do
  t_run "mailbox_$c/same" "$T" $PY tests/localpath/lp_mailbox.py $c same
done
t_run multi_wait/nospin "$T" env ZCSOCK_SPIN=0 $PY $TL run multi_wait both tcp
t_run mixed_wait/nospin "$T" env ZCSOCK_SPIN=0 $PY $TL run mixed_wait both tcp
t_run mixed_wait_tx/nospin "$T" env ZCSOCK_SPIN=0 $PY $TL run mixed_wait_tx both tcp
t_end
