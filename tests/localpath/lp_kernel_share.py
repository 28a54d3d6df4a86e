#!/usr/bin/env python3
"""Localpath case "epoll/kernel_share" (issue 33, READY: kernel share): an
epoll wait that has ring events to report may leave out the kernel's
zero-timeout look at the set's other descriptors when this thread asked the
kernel about the set less than 8 us before, so an MPI-style progress loop
over a busy ring makes no system call per look.  What must hold:

  * a kernel descriptor's event is never lost: with a paired connection
    whose unread byte keeps it ready (level-triggered) in every look, a
    pipe written after 2,000 zero-timeout looks is reported by a later
    look (within 1 s; it is at most 8 us late);
  * the rule is what carried those looks: ready.kernel_later moved;
  * with nothing on the rings the kernel is always asked: the pipe's event
    comes in the very first look after the write.

Both ends of the connection are in this process (immediate pairing).
    lp_kernel_share.py            (LD_PRELOAD: the library; ZCSOCK_LOCAL_PAIR_AFTER=0)
Exit 0 pass, 1 fail."""
import os
import select
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import check, paired, recv_exact, zc_stat  # noqa: E402


def main():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.create_connection(ls.getsockname())
    a, _ = ls.accept()
    c.sendall(b"h")
    check(recv_exact(a, 1) == b"h", "handshake")
    a.sendall(b"g")
    check(recv_exact(c, 1) == b"g", "handshake back")
    check(paired(), "the connection did not pair")
    r, w = os.pipe()
    ep = select.epoll()
    ep.register(a.fileno(), select.EPOLLIN)
    ep.register(r, select.EPOLLIN)
    c.sendall(b"x")                 # stays unread: a is ready in every look
    for _ in range(2000):
        ev = dict(ep.poll(0))
        check(ev.get(a.fileno(), 0) & select.EPOLLIN, "the ring's byte was not reported")
        check(r not in ev, "the empty pipe was reported")
    before = zc_stat("ready.kernel_later") or 0
    os.write(w, b"p")
    t0, looks = time.monotonic(), 0
    while True:
        looks += 1
        ev = dict(ep.poll(0))
        check(ev.get(a.fileno(), 0) & select.EPOLLIN, "the ring's byte was not reported")
        if r in ev:
            break
        check(time.monotonic() - t0 < 1.0, "the pipe's event was lost (%d looks in 1 s)" % looks)
    took = (time.monotonic() - t0) * 1e6
    later = zc_stat("ready.kernel_later") or 0
    check(later > 0, "ready.kernel_later is 0: no look left the kernel out")
    print("ring busy: the pipe reported at look %d, %.1f us after the write; "
          "ready.kernel_later %d (%d before the write)" % (looks, took, later, before))
    # nothing on the rings: every look asks the kernel
    check(recv_exact(a, 1) == b"x", "the ring's byte")
    os.read(r, 1)
    for _ in range(200):
        check(not ep.poll(0), "an event with nothing ready")
    os.write(w, b"q")
    ev = dict(ep.poll(0))
    check(r in ev, "rings idle: the pipe's event was not in the first look after the write")
    print("ok epoll kernel_share")


if __name__ == "__main__":
    main()
