#!/bin/bash
# Tier "localpath": DESIGN.md §3 on connections the local path pairs
# (tests/README.md).  Each case runs as two processes with the
# library on both ends ("both", which must pair), on one end only (a peer
# without zcsock), on neither ("none": the kernel's own behaviour, which
# the cases must accept), in one process connected to itself, over TCP,
# TCP/IPv6 and AF_UNIX.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh
T=${TEST_TIMEOUT:-300}; [ "$T" -gt 240 ] && T=240
PY=${PYTHON:-python3}
TL=tests/localpath/t_local.py
if [ -n "$QUICK" ]; then BIG=$((256 << 20)); else BIG=$((1 << 30)); fi
MID=$((64 << 20))

t_begin localpath
for c in $($PY $TL list); do
  t_run "$c/both" "$T" env T_BYTES=$BIG $PY $TL run "$c" both tcp
done
# every case with neither end preloaded: what the cases check is what the
# kernel does (the library must not be needed for them to pass)
for c in $($PY $TL list); do
  t_run "$c/none" "$T" env T_BYTES=$MID $PY $TL run "$c" none tcp
done
for c in stream_both peek epoll epoll_readd epoll_excl halfclose exec sendfile epipe stdio_filter fdopen seccomp \
         oob shut_rd reset_soerror closefrom fclose_reuse raw_close epoll_released; do
  t_run "$c/plain-client" "$T" env T_BYTES=$MID $PY $TL run "$c" server tcp
  t_run "$c/plain-server" "$T" env T_BYTES=$MID $PY $TL run "$c" client tcp
done
for c in stream_both peek epoll; do
  t_run "$c/tcp6" "$T" env T_BYTES=$MID $PY $TL run "$c" both tcp6
done
for c in stream_both poll_truth halfclose epipe pollout subprocess shut_rd; do
  t_run "$c/unix" "$T" env T_BYTES=$MID $PY $TL run "$c" both unix
done
for c in stream_both epoll; do
  t_run "$c/nonblock-connect" "$T" env T_NONBLOCK_CONNECT=1 T_BYTES=$MID $PY $TL run "$c" both tcp
done
# a destination on another host (a network namespace) whose port a local
# zcsock listener also uses: announced, then declined not_local once
# connected, blocking and non-blocking (as root; tests/localpath/lp_remote.py)
for m in blocking nonblock; do
  t_run "remote/$m" "$T" $PY tests/localpath/lp_remote.py "$m"
done
# spinning: off (ZCSOCK_SPIN=0: no spin at all) and fixed (ZCSOCK_SPIN_US:
# one before every sleep); the default (adaptive) runs in spin_idle/both,
# and in each an idle blocking wait uses next to no CPU
t_run spin_idle/spin-off "$T" env ZCSOCK_SPIN=0 $PY $TL run spin_idle both tcp
t_run spin_idle/spin-fixed "$T" env ZCSOCK_SPIN_US=20 $PY $TL run spin_idle both tcp
# the readiness engine's spin before arming (epoll, poll): fixed (most quick
# waits end spinning, the client sends fewer doorbells) and off
# every readiness case with the engine spinning before each arming look
# (fixed: whatever the machine's load), so the spin's looks are exercised
for c in lowat epoll epoll_readd epoll_excl pollout poll_truth epoll_released epoll_shared; do
  t_run "$c/spin-fixed" "$T" env ZCSOCK_SPIN_US=200 T_BYTES=$MID $PY $TL run "$c" both tcp
done
# readiness calls by other names: fortified poll/ppoll (__poll_chk,
# __ppoll_chk) and epoll_pwait2, on a connection the process made to itself
# (preloaded, it must pair)
if [ -x "${T_READY_CHK:-}" ]; then
  t_run ready_chk/self "$T" env LD_PRELOAD="$ZC_LIB" "$T_READY_CHK"
  t_run ready_chk/none "$T" "$T_READY_CHK"
else
  t_skip ready_chk "T_READY_CHK not built (make test-localpath builds it)"
fi
# a program started under a seccomp filter it inherited never pairs
if [ -x "${T_SECCOMP_EXEC:-}" ]; then
  t_run seccomp_exec "$T" env LD_PRELOAD="$ZC_LIB" "$T_SECCOMP_EXEC"
else
  t_skip seccomp_exec "T_SECCOMP_EXEC not built (make test-localpath builds it)"
fi
# a receiver arming its wake-up while the sender writes, with no spin (so
# every wait arms) through epoll and poll
for r in epoll poll; do
  t_run "arm_race/$r-nospin" "$T" env T_READY=$r ZCSOCK_SPIN=0 $PY $TL run arm_race both tcp
done
# many paired connections in one epoll set (LT and ET), one active at a time
t_run epoll_many "$T" $PY tests/localpath/lp_epoll_many.py
# issue 31: 2,000 idle paired connections beside three busy ones (LT, ET,
# one-shot): a wait asks about as many registrations as with 10 idle (the
# ready list), every byte checked; with the ready list off (every
# registration asked at every wait) the same check must fail
t_run epoll_idle "$T" $PY tests/localpath/lp_epoll_idle.py 2000
t_run epoll_idle/spin "$T" $PY tests/localpath/lp_epoll_idle.py 2000 --spin
t_run epoll_idle/scan-all "$T" env ZCSOCK_EPOLL_SCAN_MAX=5000 \
  $PY tests/localpath/lp_epoll_idle.py 2000 --expect-scan
# issue 31: closed channels are unmapped in batches, neighbours together,
# all of them by the last close (DEFERRED UNMAPS)
t_run unmap "$T" $PY tests/localpath/lp_unmap.py
# issue 31: an exec that takes along connections not paired yet cancels
# their offers though their socket cookies were never asked for (COOKIES)
t_run exec_unpaid "$T" $PY tests/localpath/lp_exec_unpaid.py
# issue 31: a listener whose last 8 clients in a row ran without the
# library offers a new connection once; a pairing ends the run
t_run offer_once "$T" $PY tests/localpath/lp_offer_once.py
# issue 31, pair when it pays (ZCSOCK_LOCAL_PAIR_AFTER=2): a one-request
# connection never pairs (local.declined.short); chatty, bulk, both-ways and
# blocked-receiver connections pair mid-stream, every byte checked; a
# blocking MSG_PEEK|MSG_WAITALL spans the switch point (defer/peek); a
# multi-threaded server defers too (/threaded: kernel calls in flight are
# counted and the offer waits for a moment with none; both/threaded receives
# in one thread while another sends; /threaded-client: the same for a
# multi-threaded client, whose announcement waits for a moment when none of
# its receives is in the kernel); an AF_UNIX stream of 1-byte sends pairs soon
# after it pays (trickle)
# issue 32: state changes through the one transition function, counted,
# none refused (tests/localpath/lp_states.py)
t_run states "$T" $PY tests/localpath/lp_states.py
# a spinning blocking receiver costs its sender no FUTEX_WAKE
# (tests/localpath/lp_spin_wake.py)
t_run spin_wake "$T" $PY tests/localpath/lp_spin_wake.py
# issue 31, thousands of connections: 10,000 idle connections and 3 busy
# ones between an epoll server and a client, paired by their traffic (the
# default ZCSOCK_LOCAL_PAIR_AFTER), costs per paired connection (at most one
# library descriptor, one mapping, 16 KiB of resident shared memory), the
# library's descriptors within a quarter of RLIMIT_NOFILE (beyond it the
# kernel, said once: under 20,000 about 5,000 pair), epoll waits that do not
# ask the idle ones, half of them reset, every byte checked, nothing left
# after; the library on the client only, on the server only: no descriptor
# per connection (tests/localpath/lp_scale.py)
for m in both client server; do
  t_run "scale/$m" "$T" $PY tests/localpath/lp_scale.py $m 10000
done
# 200 busy paired connections, then idle, keep at most 16 KiB of shared
# memory resident each, in each process (issue 31; the ring's one-page hot
# window)
t_run conn_memory "$T" $PY tests/localpath/lp_conn_memory.py
# a client of a server without the library asks about the destination once
# a second, not once per connection (local.dest_known), and pairs once that
# server's port gained the library (issue 31)
t_run dest_known "$T" $PY tests/localpath/lp_dest_known.py
# a server that forks a child per connection walks its parent's descriptor
# table once a connection, not once a receive (issue 31)
t_run fork_walks "$T" $PY tests/localpath/lp_fork_walks.py
# learned lifetimes: connections of three turns pair once, not each time;
# a forking server learns from its children (issue 31)
for m in learn forked off; do
  t_run "learn/$m" "$T" $PY tests/localpath/lp_learn.py $m
done
# learned short connections: after 32 in a row that closed before they
# paid, only every 8th is tracked; a tracked one that pays ends the run
# (issue 31)
t_run short "$T" $PY tests/localpath/lp_short.py
for m in one chatty bulk both blocked peek inq trickle calls chatty/server-only bulk/server-only inq/server-only \
         chatty/threaded blocked/threaded both/threaded chatty/threaded-client \
         blocked/threaded-client both/threaded-client; do
  t_run "defer/$m" "$T" $PY tests/localpath/lp_defer.py $m 2
done
# the same twice more: a pickup in the receiving thread while the sending
# thread's one blocking send of 32 MiB was in the kernel lost bytes in about
# one run of three (the switch point missed that send: lp_pickup_try)
for k in 2 3; do
  t_run "defer/both/threaded-client#$k" "$T" $PY tests/localpath/lp_defer.py both/threaded-client 2
done
# an edge-triggered epoll wait that reported the ring's bytes and sleeps
# again before another thread read them is woken by the next bytes, not by
# the readiness net (tests/localpath/lp_et_quiet.py: gRPC's reader stops at
# TCP_CM_INQ 0 while its poller waits)
t_run et_quiet "$T" $PY tests/localpath/lp_et_quiet.py
# an event loop that drops a paired connection from its set and adds it
# back per request (redis-benchmark), or re-arms it with its bytes in the ring:
# its wake fd stays parked in the set, the set is kicked, no wake-up lost
# (tests/localpath/lp_epoll_rearm.py)
t_run epoll_rearm "$T" $PY tests/localpath/lp_epoll_rearm.py
# KEPT DELETES: an epoll DEL of a paired connection kept in the kernel,
# the kernel's answers kept (tests/localpath/lp_epoll_keep.py)
t_run epoll_keep "$T" $PY tests/localpath/lp_epoll_keep.py
# PLAIN UNTIL PAIRED: a connection that has not paired keeps its epoll
# registrations the application's own, adopted when it pairs (a thread
# asleep on the set woken), one-shots and dups at once
# (tests/localpath/lp_epoll_plain.py)
# (every connection tracked: its 100 short connections would otherwise
# leave most of them to the kernel, case short)
t_run epoll_plain "$T" env ZCSOCK_LOCAL_SHORT_SAMPLE=0 $PY tests/localpath/lp_epoll_plain.py
# zero-timeout waits in a tight loop (an MPI progress loop) answer from the
# ring without the kernel, yet report a pipe the thread just wrote to, a
# closed descriptor's POLLNVAL every time, another thread's write within
# 50 ms; poll, select, epoll (tests/localpath/lp_poll_nowait.py)
t_run poll_nowait "$T" $PY tests/localpath/lp_poll_nowait.py
# a registration in the engine's last slot, woken through its wake-up
# eventfd: its wake tag once read as the set's kick, which the ready list
# lost (redis-benchmark stalled; tests/localpath/lp_epoll_slot.py)
t_run epoll_slot "$T" $PY tests/localpath/lp_epoll_slot.py
# the ready list on small sets too (ZCSOCK_EPOLL_SCAN_MAX=0), spinning and not
t_run epoll_many/ready-list "$T" env ZCSOCK_EPOLL_SCAN_MAX=0 $PY tests/localpath/lp_epoll_many.py
for r in epoll; do
  t_run "arm_race/$r-ready-list" "$T" env T_READY=$r ZCSOCK_SPIN=0 ZCSOCK_EPOLL_SCAN_MAX=0 \
    $PY $TL run arm_race both tcp
  t_run "ready_spin/$r-ready-list" "$T" env T_READY=$r ZCSOCK_SPIN_US=2000 \
    ZCSOCK_EPOLL_SCAN_MAX=0 $PY $TL run ready_spin both tcp
done
# a hostile peer that names the victim's own thread in its lock words, on
# ten connections: the victim's event loop breaks them at once, an innocent
# client is answered (tests/localpath/lp_lock_self.py)
t_run lock_self "$T" $PY tests/localpath/lp_lock_self.py
# epoll sets nested two deep and five deep (the kernel's limit) around a
# paired connection, waited on from the outermost: every nesting succeeds
# as on the kernel (the library's wake-up descriptors leave the sets at
# ELOOP), and no echo is slept through (tests/localpath/lp_epoll_nest.py)
for lv in 2 5 poll; do
  t_run "epoll_nest/$lv" "$T" $PY tests/localpath/lp_epoll_nest.py $lv
done
# the same with the victim forked (its sides held by two processes) and a
# thread of the peer's own named: 100 ms a connection, not 3 s
t_run lock_self/forked "$T" $PY tests/localpath/lp_lock_self.py forked
# a hostile peer that names the victim's own pid and descriptors (a file it
# holds a record lock on, its own eventfd) as its wake-up eventfd: nothing
# fetched, the lock kept (tests/localpath/lp_peer_words.py)
t_run peer_words "$T" $PY tests/localpath/lp_peer_words.py
# a hostile peer offers a blocking, nearly full eventfd as its wake-up
# descriptor and announces it sleeps there: the victim must refuse it and
# keep serving (tests/localpath/lp_peer_efd.py; blocked for ever before)
t_run peer_efd "$T" $PY tests/localpath/lp_peer_efd.py
# trust: another user / a same-user process that is not the peer floods the
# mailbox of a worker that receives paired sockets over SCM_RIGHTS, posts
# records never claimed, holds thousands of descriptors in flight before
# the record (heavy), posts late, or passes a socket whose close would
# linger: every hand-over is still taken over at once (lp_mailbox.py;
# issue 30, items 1 and 2).  The mailbox is in the user's private
# directory: another user is denied outright; "-public": the directory
# made unusable, the public fallback name holds against the same attacks
for c in flood/other flood/same heavy/other heavy/same records/same late/same linger/other \
         linger/same flood/other-public heavy/other-public linger/other-public records/same-public; do
  t_run "mailbox_$c" "$T" $PY tests/localpath/lp_mailbox.py "${c%/*}" "${c#*/}"
done
# mailbox files: a dead process's goes when the next binds its own, one
# still listened on stays, an earlier image's (exec) is taken over
t_run mailbox_sweep "$T" $PY tests/localpath/lp_mailbox.py sweep
# trust: records from 80 processes of a same-user flooder evict the record
# of a socket still on its way: its connection is handed back to the kernel
# and the socket, when it comes, reads right as a plain one (an earlier
# library read the doorbell 0x00 as data); another user cannot reach the
# mailbox, and at its public fallback name its records are refused and
# evict nothing (lp_mailbox_evict.py)
for w in same other other-public; do
  t_run "mailbox_evict/$w" "$T" $PY tests/localpath/lp_mailbox_evict.py "$w"
done
# trust: a connection's announcement name bound first, as well as the
# squatter can know it: another user cannot (the names are keyed by the
# user's key in the private directory): paired anyway; a same-user process,
# or another user where there is no private directory (public names): not
# paired, said (local.declined.squatted, one notice); every byte echoed, the
# squatter gets nothing (issue 30, item 7)
for w in other same other-public; do
  t_run "announce_squat/$w" "$T" $PY tests/localpath/lp_announce_squat.py $w
done
# a connect whose listener closes before accepting it: counted as
# local.declined.connect_failed, not error (tests/localpath/lp_connect_failed.py)
t_run connect_failed "$T" $PY tests/localpath/lp_connect_failed.py
# an address-space limit: pairing stops at a quarter of it, said once, and
# the application can still map its own (tests/localpath/lp_map_limit.py)
t_run map_limit "$T" $PY tests/localpath/lp_map_limit.py
t_run epoll_many/spin-fixed "$T" env ZCSOCK_SPIN_US=200 $PY tests/localpath/lp_epoll_many.py
for r in epoll poll; do
  t_run "ready_spin/$r-fixed" "$T" env T_READY=$r ZCSOCK_SPIN_US=2000 $PY $TL run ready_spin both tcp
  t_run "ready_spin/$r-off" "$T" env T_READY=$r ZCSOCK_SPIN=0 $PY $TL run ready_spin both tcp
done
# wake-up eventfds: which signal woke a sleeping event-driven server (no
# spin), through epoll and poll; turned off on the client's side only (it
# never fetches, the server keeps doorbells); a fork that retires them
for r in epoll poll; do
  t_run "wake_efd/$r" "$T" env T_READY=$r T_WAKE=efd ZCSOCK_SPIN=0 $PY $TL run wake_efd both tcp
done
t_run wake_efd/client-off "$T" env T_READY=epoll T_WAKE=bells T_CLIENT_WAKE_EVENTFD=0 \
  ZCSOCK_SPIN=0 $PY $TL run wake_efd both tcp
for r in epoll poll; do
  t_run "busy_poll/$r" "$T" env T_READY=$r $PY $TL run busy_poll both tcp
done
for r in epoll poll recv; do
  t_run "sig_wait/$r" "$T" env T_READY=$r ZCSOCK_SPIN_US=2000 $PY $TL run sig_wait both tcp
done
t_run sig_wait/adaptive "$T" env T_READY=epoll $PY $TL run sig_wait both tcp
t_run sig_wait/none "$T" env T_READY=epoll $PY $TL run sig_wait none tcp
t_run wake_efd/fork "$T" env T_READY=epoll T_WAKE=fork ZCSOCK_SPIN=0 $PY $TL run wake_efd both tcp
t_run wake_efd/unix "$T" env T_READY=epoll T_WAKE=efd ZCSOCK_SPIN=0 $PY $TL run wake_efd both unix
# one connection in two epoll sets (LT, ET) and a poll() in another thread
t_run multi_wait/nospin "$T" env ZCSOCK_SPIN=0 $PY $TL run multi_wait both tcp
# a thread blocked in a receive (a send) beside a poll/epoll waiter on the
# same connection: both woken, with eventfds, with doorbell bytes, no spin
for c in mixed_wait mixed_wait_tx; do
  t_run "$c/nospin" "$T" env ZCSOCK_SPIN=0 $PY $TL run $c both tcp
  t_run "$c/unix" "$T" env ZCSOCK_SPIN=0 $PY $TL run $c both unix
done
t_run mixed_wait/bells "$T" env ZCSOCK_SPIN=0 ZCSOCK_WAKE_EVENTFD=0 $PY $TL run mixed_wait both tcp
# declined offers while other threads are inside calls on the connection
t_run decline_threads "$T" $PY tests/localpath/lp_decline_race.py
# splice from a pipe with no descriptor free for the library's peek pipe:
# the fallback (read only what the ring takes at once) loses nothing either
t_run splice_full/emfile "$T" env T_SPLICE_EMFILE=1 $PY $TL run splice_full both tcp
for c in stream_both poll_truth threads; do
  t_run "$c/self" "$T" env T_BYTES=$MID $PY $TL run "$c" self tcp
done
# hand-back: exec / SCM_RIGHTS to a program without the library, ancillary data
for c in exec_plain scm_plain spawn_dup2; do
  t_run "$c/plain-client" "$T" $PY $TL run "$c" server tcp
done
t_run exec_static/both "$T" $PY $TL run exec_static both tcp
t_run exec_static/unix "$T" $PY $TL run exec_static both unix
t_run exec_plain/big "$T" env T_BIG=1 $PY $TL run exec_plain both tcp
t_run exec_plain/epoll "$T" env T_EPOLL=1 $PY $TL run exec_plain both tcp
t_run exec_plain/forked-peer "$T" env T_FORKED_PEER=1 $PY $TL run exec_plain both unix
t_run exec_plain/epoll-big "$T" env T_EPOLL=1 T_BIG=1 $PY $TL run exec_plain both unix
t_run scm_plain/unix "$T" $PY $TL run scm_plain both unix
# a peer that closed with bytes unread in the ring, then a hand-back (exec
# of a program without the library, fdopen) or none: its socket lingers in
# our mailbox and a pump gives the bytes to the kernel; a send to it fails as
# the kernel's would (its socket let go, the reset); hand-backs racing
# the close (T_RACE: whoever sees the other first gives them back)
for c in closed_exec closed_fdopen closed_read closed_write; do
  t_run "$c/unix" "$T" $PY $TL run "$c" both unix
  t_run "$c/plain-client" "$T" $PY $TL run "$c" server tcp
  t_run "$c/self" "$T" $PY $TL run "$c" self tcp
done
# trust: the reader's mailbox name squatted (another user, a same-user process
# that is not the reader) before it paired: another user cannot take it (the
# private directory) and the reader pairs; a same-user squatter makes it not
# pair (declined mailbox); the squatter gets nothing, and every byte arrives, also through
# an exec of a program without the library after the peer closed (which
# lost them when the connection paired without a mailbox: issue 30, item 3)
for c in closed_read closed_exec; do
  t_run $c/squat-other-user "$T" env T_SQUAT_SELF=other $PY $TL run $c both tcp
  t_run $c/squat-same-user "$T" env T_SQUAT_SELF=same $PY $TL run $c both tcp
done
t_run closed_fdopen/exit "$T" env T_EXIT=1 $PY $TL run closed_fdopen both tcp
t_run closed_exec/exit-unix "$T" env T_EXIT=1 $PY $TL run closed_exec both unix
# (closed_exec over AF_UNIX twelve times: a close that posted its lingering
# socket while the peer handed back left that copy in the peer's mailbox,
# and the exec'd reader waited for an end of stream for ever, in about one
# run of 25 under load; whoever gives the ring back now sends the end)
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
  if [ $i -le 6 ]; then t_run "closed_fdopen/race$i" "$T" env T_RACE=1 $PY $TL run closed_fdopen both tcp; fi
  t_run "closed_exec/race$i-unix" "$T" env T_RACE=1 $PY $TL run closed_exec both unix
done
# a peer alive but idle (it sent and waits on something else): a hand-back
# (exec, fdopen) starts a pump with the peer's socket, fetched from the
# process its side names, so the reader gets the bytes without the peer's
# help; the peer moves the connection to another number (T_IDLE_MOVED: its
# side names the new one); the process that paired closes its copy and a
# forked child holds it (T_IDLE_FORKED: nothing to fetch, the bytes come at
# the child's next call)
for c in idle_exec idle_fdopen; do
  t_run "$c/unix" "$T" $PY $TL run "$c" both unix
  t_run "$c/self" "$T" $PY $TL run "$c" self tcp
  t_run "$c/moved" "$T" env T_IDLE_MOVED=1 $PY $TL run "$c" both tcp
  t_run "$c/forked" "$T" env T_IDLE_FORKED=1 $PY $TL run "$c" both tcp
done
t_run idle_exec/moved-unix "$T" env T_IDLE_MOVED=1 $PY $TL run idle_exec both unix
# trust: pumps are the library's own children, reaped by it: a subreaper
# parent (systemd, tini) reaps no orphan of ours after a hand-back that
# started one (lp_subreaper.py; issue 30, item 8)
for c in closed_fdopen idle_fdopen; do
  t_run "subreaper/$c" "$T" $PY tests/localpath/lp_subreaper.py $PY $TL run "$c" both tcp
done
t_run idle_exec/forked-unix "$T" env T_IDLE_FORKED=1 $PY $TL run idle_exec both unix
# without the pump (ZCSOCK_LOCAL_PUMP_MS=0) the peer gives its ring back
# itself at its next call (the client asserts it did)
t_run exec_plain/no-pump "$T" env ZCSOCK_LOCAL_PUMP_MS=0 $PY $TL run exec_plain both tcp
t_run scm_plain/no-pump-unix "$T" env ZCSOCK_LOCAL_PUMP_MS=0 $PY $TL run scm_plain both unix
# a hand-back before the peer's first message (sent before pairing, kernel
# bytes) was read, with a doorbell behind it: the hand-back reads it and
# the doorbell, and its pump writes it back before the ring's bytes; the
# peer idle, or calling at once (it waits for the pump)
t_run prefix_exec/unix "$T" $PY $TL run prefix_exec both unix
t_run prefix_exec/active "$T" env T_ACTIVE=1 $PY $TL run prefix_exec both tcp
t_run prefix_exec/active-unix "$T" env T_ACTIVE=1 $PY $TL run prefix_exec both unix
# liburing itself dlopen'ed after pairing, as an FFI binding does (ctypes)
t_run uring_dlopen/ffi "$T" env T_URING_FFI=1 $PY $TL run uring_dlopen both tcp
# a SIGALRM handler sends on the connection whose lock the thread it
# interrupts may hold (SIGDEFER): every byte arrives, nothing stalls; the
# application still sees its own dispositions (SA_RESETHAND, signal())
t_run sig_io/both "$T" env LD_PRELOAD="$ZC_LIB" "$T_SIG_IO" 256
t_run sig_io/none "$T" "$T_SIG_IO" 64
# trust: the receiver's mailbox name squatted by another user / a same-user
# process that is not the receiver: nothing reaches it, the connection goes
# back to the kernel and the receiver reads every byte
t_run scm_plain/squat-other-user "$T" env T_SQUAT=other $PY $TL run scm_plain both tcp
t_run scm_plain/squat-same-user "$T" env T_SQUAT=same $PY $TL run scm_plain both tcp
t_run scm_spawned/child-with-lib "$T" env T_CHILD_LIB=1 $PY $TL run scm_spawned both unix
for c in anc passcred; do
  t_run "$c/unix" "$T" $PY $TL run "$c" both unix
  t_run "$c/unix-plain-server" "$T" $PY $TL run "$c" client unix
done
t_run killed-peer/tcp "$T" $PY $TL run killed_peer - tcp
t_run killed-peer/unix "$T" $PY $TL run killed_peer - unix
t_end
