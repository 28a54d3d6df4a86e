#!/usr/bin/env python3
"""Localpath case "et_quiet": an edge-triggered epoll wait that reported the
bytes in the ring and sleeps again before another thread reads them must be
woken by the next bytes, as the kernel's edge comes with every new packet.

One process under the library (pairing at once), a paired TCP connection:
a waiter thread has the server end in an epoll set, EPOLLIN | EPOLLET.
Each of 30 rounds: the client end sends 100 bytes; the waiter's wait
reports them; the waiter waits again at once (the bytes still unread: its
look finds them, reported already, and it sleeps); the main thread reads
exactly the 100 bytes (not on to EAGAIN, as gRPC does when TCP_CM_INQ says
nothing is left), then sends the next 100.  The waiter's second wait must
report them, and no wait may have needed the readiness net's look
(ready.net_rescues stays 0: the previous library slept there until the
net's 100 ms look each round).  Every byte is checked.

    lp_et_quiet.py          (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import run_child  # noqa: E402

CHILD = r"""
import select, socket, sys, threading, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
s, c = pair_tcp(l)
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLIN | select.EPOLLET)
c.setblocking(False)
ROUNDS = 30
got, reported, errors = [], threading.Event(), []
def waiter():
    for r in range(ROUNDS):
        ev = ep.poll(5)
        if not ev:
            errors.append("round %d: the first wait timed out" % r)
            return
        reported.set()
        t0 = time.monotonic()
        ev = ep.poll(5)             # the bytes are still there, reported already
        got.append(time.monotonic() - t0)
        if not ev or not ev[0][1] & select.EPOLLIN:
            errors.append("round %d: the second wait reported %r" % (r, ev))
            return
        reported.set()
t = threading.Thread(target=waiter)
t.start()
rescues0 = stat("ready.net_rescues")
for r in range(ROUNDS):
    m = bytes([r]) * 100
    s.sendall(m)
    if not reported.wait(5):
        sys.exit("FAIL: round %d: no report of the first bytes (%r)" % (r, errors))
    reported.clear()
    time.sleep(0.03)                # the waiter sleeps in its second wait
    if c.recv(100) != m:
        sys.exit("FAIL: round %d: the bytes came different" % r)
    time.sleep(0.02)
    m2 = bytes([r + 100]) * 100
    s.sendall(m2)                   # must wake the second wait
    if not reported.wait(5):
        sys.exit("FAIL: round %d: the second wait was never woken (%r)" % (r, errors))
    reported.clear()
    if c.recv(100) != m2:
        sys.exit("FAIL: round %d: the second bytes came different" % r)
t.join(10)
if errors:
    sys.exit("FAIL: " + "; ".join(errors))
rescues = stat("ready.net_rescues") - rescues0
print("second waits: median %.1f ms, max %.1f ms; ready.net_rescues %d" % (
    1000 * sorted(got)[len(got) // 2], 1000 * max(got), rescues), flush=True)
if rescues:
    sys.exit("FAIL: %d waits were ended by the readiness net, not by the bytes" % rescues)
"""


if __name__ == "__main__":
    sys.exit(run_child(CHILD))
