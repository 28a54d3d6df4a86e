#!/usr/bin/env python3
"""Localpath case "epoll_rearm": an event loop that drops a paired
connection from its epoll set and adds it back per request (redis-
benchmark's loop does, whenever a descriptor's mask empties) keeps every
wake-up, and so does one that re-arms a connection whose bytes are in the
ring already.

One process under the library (pairing at once), a paired TCP connection,
the main thread's epoll set, a sender thread:
  1. 40 rounds: ADD the server end (EPOLLIN), the sender sends 100 bytes
     20 ms later (the wait sleeps and must be woken through the
     connection's wake-up eventfd), the wait reports them within 2 s, the
     bytes are read and checked, DEL.  The wake fd stays in the set between
     rounds: ready.ep_wake_unparked counts the ADDs that took it back.
  2. The same over a new connection after the first one closed (its wake
     fd went with it; a new one may take its number): 10 rounds.
  3. ADD while bytes wait in the ring and no wait runs, then a poll over
     the epoll descriptor itself (an event loop that nests the set in its
     own): the set's kick makes it readable within 2 s (ready.ep_kicks
     grows), and the epoll wait then reports the bytes.
  4. A MOD that makes such bytes wanted while another thread sleeps in a
     wait on the set: it is kicked (ready.ep_kicks grows) and reports them
     within 2 s.
  5. QUIET SETS (issue 31): the ADDs of step 1, made while no wait ran on
     a set this process alone made, neither armed nor kicked
     (ready.ep_quiet counts at least 30 of them; the waits were woken all
     the same).  A new set that gets a ready connection this way and is
     then watched from outside must be readable at once: nested in
     another epoll set (the outer wait reports it), and duplicated (a poll
     over the copy reports it).  And an ADD of a ready connection to a
     new set while another thread sleeps on it is not quiet: that wait is
     woken within 2 s.
No wait may end at the readiness net (ready.net_rescues stays 0).

    lp_epoll_rearm.py       (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import run_child  # noqa: E402

CHILD = r"""
import os, select, socket, sys, threading, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4)
ep = select.epoll()
def pair(n):
    s, c = pair_tcp(l, n)
    c.setblocking(False)
    return s, c
def rounds(s, c, n, base):
    for r in range(n):
        m = bytes([(base + r) & 0xff]) * 100
        ep.register(c.fileno(), select.EPOLLIN)
        t = threading.Timer(0.02, s.sendall, (m,))
        t.start()
        t0 = time.monotonic()
        ev = ep.poll(5)
        dt = time.monotonic() - t0
        t.join()
        if not ev or ev[0][0] != c.fileno() or not ev[0][1] & select.EPOLLIN or dt > 2:
            sys.exit("FAIL: round %d: the wait reported %r after %.3f s" % (base + r, ev, dt))
        if c.recv(200) != m:
            sys.exit("FAIL: round %d: the bytes came different" % (base + r))
        ep.unregister(c.fileno())
rescues0, unparked0 = stat("ready.net_rescues"), stat("ready.ep_wake_unparked")
quiet0 = stat("ready.ep_quiet")
s, c = pair(1)
rounds(s, c, 40, 0)
quiet = stat("ready.ep_quiet") - quiet0
if quiet < 30:
    sys.exit("FAIL: only %d of 40 ADDs with no wait running were quiet" % quiet)
unparked = stat("ready.ep_wake_unparked") - unparked0
if unparked < 30:
    sys.exit("FAIL: only %d of 39 ADDs took the parked wake fd back" % unparked)
s.close(); c.close()
s, c = pair(2)
rounds(s, c, 10, 40)
# 3: ADD while bytes wait in the ring and no wait runs, then a poll over
# the epoll descriptor itself (GLib and others nest an epoll set in their
# own loop): the kick makes the set readable, and the wait reports them
s.sendall(b"3" * 100)
time.sleep(0.05)
kicks0 = stat("ready.ep_kicks")
ep.register(c.fileno(), select.EPOLLIN)
po = select.poll()
po.register(ep.fileno(), select.POLLIN)
t0 = time.monotonic()
pr = po.poll(5000)
if not pr or not pr[0][1] & select.POLLIN or time.monotonic() - t0 > 2:
    sys.exit("FAIL: a poll over the epoll set reported %r after %.3f s" %
             (pr, time.monotonic() - t0))
if stat("ready.ep_kicks") - kicks0 < 1:
    sys.exit("FAIL: the ADD of a ready connection did not kick the set")
ev = ep.poll(1)
if not ev or not ev[0][1] & select.EPOLLIN or c.recv(200) != b"3" * 100:
    sys.exit("FAIL: the wait after the ADD reported %r" % ev)
# 4: the same while another thread sleeps on the set (the registration
# asking for nothing meanwhile): the MOD kicks it
ep.modify(c.fileno(), 0)
out = []
def waiter():
    t0 = time.monotonic()
    out.append((ep.poll(5), time.monotonic() - t0))
w = threading.Thread(target=waiter)
w.start()
time.sleep(0.05)
s.sendall(b"4" * 100)
time.sleep(0.05)
kicks0 = stat("ready.ep_kicks")
ep.modify(c.fileno(), select.EPOLLIN)
w.join(10)
if not out or not out[0][0] or not out[0][0][0][1] & select.EPOLLIN or out[0][1] > 2:
    sys.exit("FAIL: the sleeping wait reported %r after the MOD" % (out,))
if stat("ready.ep_kicks") - kicks0 < 1:
    sys.exit("FAIL: the MOD did not kick the sleeping wait")
if c.recv(200) != b"4" * 100:
    sys.exit("FAIL: the bytes of step 4 came different")
# 5: a private set with a ready connection added quietly, then watched
# from outside: nested in another set, and through a copy of its number
# (each on a new connection, whose wake-up eventfd no earlier wait left
# readable, its first doorbell read: only the exposure can make the set
# readable)
def fresh(n):
    s, c = pair(n)
    # the first ring bytes ring a doorbell (S3): a poll that sees it, then
    # the receive that empties the ring, take it from the kernel socket
    s.sendall(b"w")
    time.sleep(0.05)
    po = select.poll()
    po.register(c.fileno(), select.POLLIN)
    if not po.poll(1000) or c.recv(10) != b"w":
        sys.exit("FAIL: connection %d: the first byte came different" % n)
    return s, c
def exposed(watch, n):
    s, c = fresh(n)
    e = select.epoll()
    s.sendall(b"5" * 100)
    time.sleep(0.05)
    q0 = stat("ready.ep_quiet")
    e.register(c.fileno(), select.EPOLLIN)
    if stat("ready.ep_quiet") - q0 != 1:
        sys.exit("FAIL: %s: the ADD to a new set was not quiet" % watch)
    t0 = time.monotonic()
    if watch == "nested":
        outer = select.epoll()
        outer.register(e.fileno(), select.EPOLLIN)
        r = outer.poll(5)
        ok = r and r[0][0] == e.fileno()
        outer.close()
    else:
        d = os.dup(e.fileno())
        po = select.poll()
        po.register(d, select.POLLIN)
        r = po.poll(5000)
        ok = r and r[0][1] & select.POLLIN
        os.close(d)
    if not ok or time.monotonic() - t0 > 2:
        sys.exit("FAIL: %s: the set watched from outside reported %r after %.3f s" %
                 (watch, r, time.monotonic() - t0))
    ev = e.poll(1)
    if not ev or c.recv(200) != b"5" * 100:
        sys.exit("FAIL: %s: the set's own wait reported %r" % (watch, ev))
    e.close(); s.close(); c.close()
exposed("nested", 3)
exposed("dup", 4)
# ... and one a thread already sleeps on: the ADD of a ready connection is
# not quiet, and the sleeping wait is woken
s, c = fresh(5)
e = select.epoll()
out = []
w = threading.Thread(target=lambda: out.append(e.poll(5)))
w.start()
t0 = time.monotonic()      # until the waiter sleeps in the kernel's epoll wait
while time.monotonic() - t0 < 5:
    try:
        with open("/proc/self/task/%d/syscall" % w.native_id) as f:
            if f.read().split()[0] in ("232", "281"):   # epoll_wait, epoll_pwait
                break
    except OSError:
        pass
    time.sleep(0.01)
else:
    sys.exit("FAIL: the waiter thread never slept in epoll_wait")
s.sendall(b"6" * 100)
time.sleep(0.05)
q0 = stat("ready.ep_quiet")
t0 = time.monotonic()
e.register(c.fileno(), select.EPOLLIN)
w.join(10)
if stat("ready.ep_quiet") != q0:
    sys.exit("FAIL: an ADD while a wait slept on the set was quiet (it reported %r after "
             "%.3f s)" % (out, time.monotonic() - t0))
if not out or not out[0] or time.monotonic() - t0 > 2 or c.recv(200) != b"6" * 100:
    sys.exit("FAIL: the sleeping wait reported %r after %.3f s" % (out, time.monotonic() - t0))
e.close()
rescues = stat("ready.net_rescues") - rescues0
print("wake fd taken back %d times of 39; %d quiet ADDs; ready.net_rescues %d" % (unparked, quiet, rescues),
      flush=True)
if rescues:
    sys.exit("FAIL: %d waits were ended by the readiness net" % rescues)
"""


if __name__ == "__main__":
    sys.exit(run_child(CHILD))
