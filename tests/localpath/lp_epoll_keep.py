#!/usr/bin/env python3
"""Localpath case "epoll_keep": KEPT DELETES (shim/shim_epoll.c, issue 31).
An epoll DEL of a paired connection from a set this process alone made and
watches stays in the kernel, hidden, and the next ADD takes it back; a
level-triggered MOD that changes nothing the kernel asks for is not passed
on.  redis-benchmark's loop makes five epoll_ctl calls a request (DEL,
ADD, MOD, DEL, ADD), and with them kept it makes none.  What the
application sees must stay exactly the kernel's.

One process under the library (pairing at once), paired TCP connections
(both directions on the ring), the main thread's epoll set:
  1. ADD, DEL: kept (ready.ep_kept).  While deleted, bytes arrive: a wait
     reports nothing; a MOD and a second DEL fail with ENOENT as on the
     kernel; the ADD takes it back (ready.ep_revived, or the kernel
     reported it meanwhile and it was deleted for real,
     ready.ep_kept_gone) and the next wait reports the bytes.
  2. 300 rounds of redis-benchmark's sequence (DEL, ADD EPOLLOUT, a wait
     reports it writable, send, DEL, ADD EPOLLIN, the peer thread echoes,
     the wait reports it, MOD to EPOLLIN again, receive) on two
     connections: every byte checked, ready.ep_kept, ep_revived and
     ep_mod_same count at least 250 each.
  3. The peer closes while the registration is kept: no wait reports the
     deleted one; after the ADD, the wait reports EOF and recv says b"".
  4. A kept registration goes for real (ready.ep_kept_gone) at a fork (the
     child holds the set too), at a dup of the epoll descriptor (the set
     seen under two numbers), at the close of the connection, and at an
     ADD with EPOLLONESHOT, which then reports once.  A subprocess
     (vfork and exec) while one is kept: the next ADD works.
  5. The same process with ZCSOCK_EPOLL_KEEP=0: nothing kept, the same
     answers.
No wait may end at the readiness net (ready.net_rescues stays 0).

    lp_epoll_keep.py       (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import run_child  # noqa: E402

CHILD = r"""
import errno, os, select, socket, sys, threading, time
KEEP = os.environ.get("ZCSOCK_EPOLL_KEEP", "1") != "0"
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
ep = select.epoll()
npaired = 0
def pair():
    global npaired
    npaired += 1
    s, c = pair_tcp(l, npaired)
    # one more round trip: each end's sending direction on the ring too
    s.sendall(b"a"); c.recv(1); c.sendall(b"b"); s.recv(1)
    c.setblocking(False)
    return s, c
def enoent(fn, what):
    try:
        fn()
    except OSError as e:
        if e.errno != errno.ENOENT:
            sys.exit("FAIL: %s: errno %d, the kernel says ENOENT" % (what, e.errno))
        return
    sys.exit("FAIL: %s succeeded on a deleted registration" % what)
def hidden_then_back(what, s, c, m):
    # bytes sent while c's registration is deleted: no wait reports them;
    # after the ADD the wait does, and they read back whole
    s.sendall(m)
    ev = ep.poll(0.3)
    if ev:
        sys.exit("FAIL: %s: a wait reported %r for a deleted registration" % (what, ev))
    ep.register(c.fileno(), select.EPOLLIN)
    ev = ep.poll(2)
    if not ev or ev[0][0] != c.fileno() or c.recv(200) != m:
        sys.exit("FAIL: %s: after the ADD the wait reported %r" % (what, ev))
rescues0 = stat("ready.net_rescues")

# 1
s, c = pair()
k0, r0, g0 = stat("ready.ep_kept"), stat("ready.ep_revived"), stat("ready.ep_kept_gone")
ep.register(c.fileno(), select.EPOLLIN)
ep.unregister(c.fileno())
if KEEP and d("ready.ep_kept", k0) != 1:
    sys.exit("FAIL: the DEL of a paired connection was not kept")
s.sendall(b"1" * 100)
ev = ep.poll(0.3)
if ev:
    sys.exit("FAIL: a wait reported %r for a deleted registration" % ev)
enoent(lambda: ep.modify(c.fileno(), select.EPOLLIN), "MOD")
enoent(lambda: ep.unregister(c.fileno()), "a second DEL")
ep.register(c.fileno(), select.EPOLLIN)
if KEEP and d("ready.ep_revived", r0) + d("ready.ep_kept_gone", g0) != 1:
    sys.exit("FAIL: the ADD neither took the kept registration back nor found it gone")
ev = ep.poll(2)
if ev != [(c.fileno(), select.EPOLLIN)] or c.recv(200) != b"1" * 100:
    sys.exit("FAIL: after the ADD the wait reported %r" % ev)

# 2: redis-benchmark's sequence, two connections, a peer thread echoing
s2, c2 = pair()
conns = [(s, c), (s2, c2)]
for peer, _ in conns:
    peer.setblocking(True)
def echo(peer):
    while True:
        m = peer.recv(65536)
        if not m:
            return
        peer.sendall(m)
th = [threading.Thread(target=echo, args=(p,)) for p, _ in conns]
for t in th:
    t.start()
k0, r0, m0 = stat("ready.ep_kept"), stat("ready.ep_revived"), stat("ready.ep_mod_same")
ep.register(c2.fileno(), select.EPOLLIN)
for r in range(300):
    for i, (_, x) in enumerate(conns):
        fd = x.fileno()
        msg = bytes([(r * 2 + i) & 0xff]) * (1 + (r * 37) % 4000)
        ep.unregister(fd)
        ep.register(fd, select.EPOLLOUT)
        ev = ep.poll(2)
        if (fd, select.EPOLLOUT) not in ev:
            sys.exit("FAIL: round %d: the wait for writable reported %r" % (r, ev))
        x.sendall(msg)
        ep.unregister(fd)
        ep.register(fd, select.EPOLLIN)
        got = b""
        t0 = time.monotonic()
        while len(got) < len(msg):
            ev = ep.poll(2)
            if not ev or ev[0][0] != fd or time.monotonic() - t0 > 2:
                sys.exit("FAIL: round %d: the wait for the echo reported %r" % (r, ev))
            ep.modify(fd, select.EPOLLIN)
            got += x.recv(65536)
        if got != msg:
            sys.exit("FAIL: round %d: the echo came different" % r)
kept, rev, same = d("ready.ep_kept", k0), d("ready.ep_revived", r0), d("ready.ep_mod_same", m0)
if KEEP and min(kept, rev, same) < 250:
    sys.exit("FAIL: of 600 rounds' DELs, ADDs and MODs only %d kept, %d taken back, %d "
             "MODs not passed on" % (kept, rev, same))
if not KEEP and (kept, rev, same) != (0, 0, 0):
    sys.exit("FAIL: ZCSOCK_EPOLL_KEEP=0 kept %d, took back %d, skipped %d" % (kept, rev, same))
print("600 rounds: %d DELs kept, %d ADDs took them back, %d MODs not passed on" %
      (kept, rev, same), flush=True)
ep.unregister(c2.fileno())
for _, x in conns:
    x.shutdown(socket.SHUT_WR)      # the echo threads see EOF and return
for t in th:
    t.join(10)
    if t.is_alive():
        sys.exit("FAIL: an echo thread did not see EOF")

# 3: the peer closes while the registration is kept
s3, c3 = pair()
ep.register(c3.fileno(), select.EPOLLIN)
ep.unregister(c3.fileno())
s3.close()
ev = ep.poll(0.3)
if ev:
    sys.exit("FAIL: the peer's close was reported %r on a deleted registration" % ev)
ep.register(c3.fileno(), select.EPOLLIN)
ev = ep.poll(2)
if not ev or ev[0][0] != c3.fileno() or not ev[0][1] & select.EPOLLIN or c3.recv(10) != b"":
    sys.exit("FAIL: after the peer's close and the ADD the wait reported %r" % ev)
ep.unregister(c3.fileno())

# 4: kept registrations that go for real
def gone(what, act):
    s, c = pair()
    ep.register(c.fileno(), select.EPOLLIN)
    ep.unregister(c.fileno())
    g0 = stat("ready.ep_kept_gone")
    act(s, c)
    if KEEP and d("ready.ep_kept_gone", g0) < 1:
        sys.exit("FAIL: %s: the kept registration stayed" % what)
    return s, c
def forked(s, c):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
s, c = gone("fork", forked)
hidden_then_back("fork", s, c, b"f" * 10)
ep.unregister(c.fileno())
ep.close()
ep = select.epoll()     # private again (a set made after the fork)
dups = []
s, c = gone("dup", lambda s, c: dups.append(os.dup(ep.fileno())))
s.sendall(b"d" * 10)
po = select.poll()
po.register(dups[0], select.POLLIN)
if po.poll(300):
    sys.exit("FAIL: dup: a poll over the set's copy saw a deleted registration")
os.close(dups[0])
ep.close()
ep = select.epoll()
s, c = gone("close", lambda s, c: c.close())
s.close()
s, c = gone("oneshot", lambda s, c: ep.register(c.fileno(), select.EPOLLIN | select.EPOLLONESHOT))
s.sendall(b"o" * 10)
ev = ep.poll(2)
if not ev or ev[0][0] != c.fileno() or c.recv(20) != b"o" * 10:
    sys.exit("FAIL: oneshot: the wait reported %r" % ev)
s.sendall(b"p" * 10)
ev = ep.poll(0.3)
if ev:
    sys.exit("FAIL: oneshot: a fired one-shot reported %r again" % ev)
# a subprocess (vfork and exec; the child closes every descriptor of ours)
# while a registration is kept in a set made after the connection: the
# next ADD works (no EEXIST) and the wait reports the bytes
import subprocess
s, c = pair()
ep.close()
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLIN)
ep.unregister(c.fileno())
subprocess.run(["/bin/true"], close_fds=True, check=True)
hidden_then_back("subprocess", s, c, b"v" * 10)
rescues = d("ready.net_rescues", rescues0)
if rescues:
    sys.exit("FAIL: %d waits ended at the readiness net" % rescues)
print("epoll_keep (ZCSOCK_EPOLL_KEEP=%d): every answer the kernel's" % KEEP, flush=True)
"""

rc = run_child(CHILD)
if rc == 0:
    os.environ["ZCSOCK_EPOLL_KEEP"] = "0"
    rc = run_child(CHILD)
sys.exit(rc)
