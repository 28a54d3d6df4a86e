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
No wait may end at the readiness net (ready.net_rescues stays 0).

    lp_epoll_rearm.py       (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import run_child  # noqa: E402

CHILD = r"""
import select, socket, sys, threading, time
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
s, c = pair(1)
rounds(s, c, 40, 0)
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
rescues = stat("ready.net_rescues") - rescues0
print("wake fd taken back %d times of 39; ready.net_rescues %d" % (unparked, rescues),
      flush=True)
if rescues:
    sys.exit("FAIL: %d waits were ended by the readiness net" % rescues)
"""


if __name__ == "__main__":
    sys.exit(run_child(CHILD))
