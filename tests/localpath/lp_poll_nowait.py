#!/usr/bin/env python3
"""Localpath case "poll_nowait": zero-timeout waits repeated in a tight loop
(an MPI progress loop) answer from the ring without asking the kernel each
time, and still report every kernel descriptor the kernel would.

One process under the library (pairing at once), a paired TCP connection
(s, c), a pipe (r, w), for poll, select and epoll in turn, with
ZCSOCK_POLL_KERNEL_US=1000 (the longest window, so that a broken rule
shows):
  1. 3,000 zero-timeout waits over {c, r} with nothing ready: most are
     answered without the kernel (ready.kernel_skips grows by >= 1,000),
     and none reports anything.
  2. 300 rounds: a few zero-timeout waits, bytes sent on s (through the
     ring) and received on c in between, then a write to the pipe by this
     thread and at once one zero-timeout wait: it must report r readable
     (a call of the thread's that is not a wait or a paired send/receive
     ends the window: the kernel is asked).  The ring's bytes are reported
     by the wait that follows their send, every time.
  3. Another thread writes to the pipe while this one loops: a wait reports
     it within 50 ms (the window is 1 ms).
  4. A closed descriptor in a poll set: every one of 200 zero-timeout polls
     reports POLLNVAL (a kernel answer with something in it is asked again
     every time).
  5. 1,000 zero-timeout ppoll calls with a signal mask: none skips the
     kernel (the kernel applies the mask).
  6. A poll set of 41 (beyond the engine's stack arrays): 50 rounds of the
     ring's bytes and one pipe's, each reported exactly.
  7. An epoll wait that the ring alone fills (maxevents 1) alternating with
     a quiet set: the quiet set's waits still skip the kernel (>= 1,000 of
     3,000; the full wait does not break the chain).
  8. The peer's close, or its shutdown for writing, of a connection idle
     through 1,000 zero-timeout waits: a wait reports it readable within
     2 s and the receive says end of stream (poll, select, epoll).
  9. Two epoll sets polled in turn, as UCX's progress loop does: one with
     the paired connection, one with the pipe only (no claimed
     registration: the wait goes straight to the kernel): the pipe's set
     skips the kernel too (ready.kernel_skips_plain >= 1,000 of 3,000),
     yet reports the pipe at the wait after this thread wrote to it (300
     rounds), and another thread's write within 50 ms; a loop over the
     pipe's set alone (no paired connection in its chain) asks the kernel
     every time (no plain skip in 3,000).
Then, with ZCSOCK_POLL_KERNEL_US=0: steps 1 and 9 skip nothing.

    lp_poll_nowait.py       (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import run_child  # noqa: E402

CHILD = r"""
import os, select, socket, sys, threading, time
WINDOW = int(os.environ["ZCSOCK_POLL_KERNEL_US"])
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4)
s, c = pair_tcp(l)
c.setblocking(False)
r, w = os.pipe()
os.set_blocking(r, False)

def poller(kind):
    # a zero-timeout wait over {c, r}: the set of descriptors it reports
    if kind == "poll":
        p = select.poll()
        p.register(c.fileno(), select.POLLIN)
        p.register(r, select.POLLIN)
        return lambda: {fd for fd, ev in p.poll(0) if ev & select.POLLIN}
    if kind == "select":
        return lambda: set(select.select([c.fileno(), r], [], [], 0)[0])
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN)
    ep.register(r, select.EPOLLIN)
    return lambda: {fd for fd, ev in ep.poll(0) if ev & select.EPOLLIN}

def other_writes(what, wait):
    # another thread's write to the pipe shows within 50 ms of the write
    # (timed from the write's return, not from the timer's start: the writer
    # thread waits for the GIL behind this busy loop, 60 ms once under ASan);
    # wait(): the set of descriptors a zero-timeout wait reports
    for rnd in range(20):
        wrote = []
        t = threading.Timer(0.002, lambda: (os.write(w, b"q"), wrote.append(time.monotonic())))
        t.start()
        t0 = time.monotonic()
        seen = None
        while time.monotonic() - t0 < 2:
            if r in wait():
                seen = time.monotonic()
                break
        t.join()
        if seen is None or seen - wrote[0] > 0.05:
            sys.exit("FAIL: %s: round %d: another thread's write showed %s" %
                     (what, rnd, "never" if seen is None else "%.3f s after it" % (seen - wrote[0])))
        os.read(r, 10)

def quiet_loop(kind, wait):
    k0 = stat("ready.kernel_skips")
    for i in range(3000):
        got = wait()
        if got:
            sys.exit("FAIL: %s: wait %d reported %r with nothing ready" % (kind, i, got))
    return stat("ready.kernel_skips") - k0

for kind in ("poll", "select", "epoll"):
    wait = poller(kind)
    skipped = quiet_loop(kind, wait)
    if WINDOW and skipped < 1000:
        sys.exit("FAIL: %s: only %d of 3000 quiet waits answered without the kernel" % (kind, skipped))
    if not WINDOW and skipped:
        sys.exit("FAIL: %s: %d waits skipped the kernel with ZCSOCK_POLL_KERNEL_US=0" % (kind, skipped))
    if not WINDOW:
        continue
    # 2: the thread's own write makes the next wait ask the kernel
    for rnd in range(300):
        for i in range(3):
            wait()
        m = bytes([rnd & 0xff]) * 10
        s.sendall(m)
        got = wait()
        if c.fileno() not in got:
            sys.exit("FAIL: %s: round %d: the ring's bytes were not reported (%r)" % (kind, rnd, got))
        if c.recv(100) != m:
            sys.exit("FAIL: %s: round %d: the bytes came different" % (kind, rnd))
        for i in range(3):
            wait()
        os.write(w, b"p")
        got = wait()
        if r not in got:
            sys.exit("FAIL: %s: round %d: a pipe this thread had just written to was not "
                     "reported readable (%r)" % (kind, rnd, got))
        os.read(r, 10)
    # 3: another thread's write shows within 50 ms
    other_writes(kind, wait)
# 5: a wait with a signal mask always asks the kernel (it applies the mask)
if WINDOW:
    import ctypes
    class PFD(ctypes.Structure):
        _fields_ = [("fd", ctypes.c_int), ("events", ctypes.c_short), ("revents", ctypes.c_short)]
    class TS(ctypes.Structure):
        _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
    libc = ctypes.CDLL(None, use_errno=True)
    pf = (PFD * 2)(PFD(c.fileno(), select.POLLIN, 0), PFD(r, select.POLLIN, 0))
    mask = (ctypes.c_ulong * 16)()
    k0 = stat("ready.kernel_skips")
    for i in range(1000):
        if libc.ppoll(pf, 2, ctypes.byref(TS(0, 0)), mask, 8) != 0:
            sys.exit("FAIL: ppoll with a mask reported something with nothing ready")
    if stat("ready.kernel_skips") != k0:
        sys.exit("FAIL: %d ppoll calls with a signal mask skipped the kernel"
                 % (stat("ready.kernel_skips") - k0))
# 6: a poll set too large for the engine's stack (40 pipes and the
# connection): the ring's bytes and one pipe reported, the rest quiet
if WINDOW:
    pipes = [os.pipe() for _ in range(40)]
    p = select.poll()
    p.register(c.fileno(), select.POLLIN)
    for pr, pw in pipes:
        p.register(pr, select.POLLIN)
    for rnd in range(50):
        for i in range(3):
            if p.poll(0):
                sys.exit("FAIL: large set: round %d: a wait reported something with nothing ready" % rnd)
        s.sendall(b"L")
        os.write(pipes[rnd % 40][1], b"l")
        got = dict(p.poll(0))
        want = {c.fileno(), pipes[rnd % 40][0]}
        if set(got) != want or any(not ev & select.POLLIN for ev in got.values()):
            sys.exit("FAIL: large set: round %d: reported %r, expected %r readable" % (rnd, got, want))
        c.recv(10); os.read(pipes[rnd % 40][0], 10)
# 7: an epoll wait that the ring alone fills (maxevents 1, a connection
# with bytes left unread) keeps the window of the quiet set polled in turn
# (the loop does nothing else): its waits still skip the kernel
if WINDOW:
    s2, c2 = pair_tcp(l, 2)
    s2.sendall(b"E")
    time.sleep(0.05)
    full = select.epoll()
    full.register(c2.fileno(), select.EPOLLIN)
    quiet = poller("epoll")
    k0 = stat("ready.kernel_skips")
    for i in range(3000):
        if len(full.poll(0, 1)) != 1:
            sys.exit("FAIL: full set: wait %d did not report the ring's bytes" % i)
        if quiet():
            sys.exit("FAIL: quiet set: wait %d reported something" % i)
    skipped = stat("ready.kernel_skips") - k0
    if skipped < 1000:
        sys.exit("FAIL: only %d of 3000 quiet waits beside a full one skipped the kernel" % skipped)
    full.close(); s2.close(); c2.close()
# 4: POLLNVAL every time
if WINDOW:
    dead = socket.socket(); fd = dead.fileno(); dead.close()
    p = select.poll()
    p.register(c.fileno(), select.POLLIN)
    p.register(fd, select.POLLIN)
    for i in range(200):
        got = dict(p.poll(0))
        if not got.get(fd, 0) & select.POLLNVAL:
            sys.exit("FAIL: poll %d over a closed descriptor did not say POLLNVAL (%r)" % (i, got))
# 8: the peer's end (its close, then a shutdown for writing) reaches a
# loop of zero-timeout waits at a connection idle until then (NOTHING NEW
# answers its looks without the ring's lock): readable within 2 s, and the
# receive says end of stream
if WINDOW:
    n = 3
    for kind in ("poll", "select", "epoll"):
        for how in ("close", "shutdown"):
            s3, c3 = pair_tcp(l, n)
            n += 1
            c3.setblocking(False)
            if kind == "poll":
                p3 = select.poll(); p3.register(c3.fileno(), select.POLLIN)
                wait3 = lambda: bool(p3.poll(0))
            elif kind == "select":
                wait3 = lambda: bool(select.select([c3], [], [], 0)[0])
            else:
                e3 = select.epoll(); e3.register(c3.fileno(), select.EPOLLIN)
                wait3 = lambda: bool(e3.poll(0))
            for i in range(1000):
                if wait3():
                    sys.exit("FAIL: end/%s/%s: wait %d reported an idle connection" % (kind, how, i))
            if how == "close":
                s3.close()
            else:
                s3.shutdown(socket.SHUT_WR)
            t0 = time.monotonic()
            while not wait3():
                if time.monotonic() - t0 > 2:
                    sys.exit("FAIL: end/%s/%s: the peer's end never showed to zero-timeout waits"
                             % (kind, how))
            if c3.recv(10) != b"":
                sys.exit("FAIL: end/%s/%s: a receive after the end did not say so" % (kind, how))
            if kind == "epoll":
                e3.close()
            c3.close()
            if how == "shutdown":
                s3.close()
# 9: a set of kernel descriptors only, polled in turn with one of paired
# connections (UCX): its waits skip the kernel too, but only in such a loop
pa = select.epoll(); pa.register(c.fileno(), select.EPOLLIN)
pb = select.epoll(); pb.register(r, select.EPOLLIN)
k0 = stat("ready.kernel_skips_plain")
for i in range(3000):
    if pa.poll(0) or pb.poll(0):
        sys.exit("FAIL: two sets: wait %d reported something with nothing ready" % i)
skipped = stat("ready.kernel_skips_plain") - k0
if WINDOW and skipped < 1000:
    sys.exit("FAIL: two sets: only %d of 3000 waits over the kernel's set skipped it" % skipped)
if not WINDOW and skipped:
    sys.exit("FAIL: two sets: %d waits skipped the kernel with ZCSOCK_POLL_KERNEL_US=0" % skipped)
if WINDOW:
    for rnd in range(300):
        for i in range(3):
            pa.poll(0); pb.poll(0)
        os.write(w, b"u")
        pa.poll(0)
        if r not in {fd for fd, ev in pb.poll(0)}:
            sys.exit("FAIL: two sets: round %d: the pipe this thread had just written to "
                     "was not reported" % rnd)
        os.read(r, 10)
    other_writes("two sets", lambda: (pa.poll(0), {fd for fd, ev in pb.poll(0)})[1])
    k0 = stat("ready.kernel_skips_plain")
    for i in range(3000):
        if pb.poll(0):
            sys.exit("FAIL: the kernel's set alone: wait %d reported something" % i)
    if stat("ready.kernel_skips_plain") != k0:
        sys.exit("FAIL: a loop over a set without paired connections skipped the kernel %d "
                 "times" % (stat("ready.kernel_skips_plain") - k0))
print("poll_nowait: ok (window %d us)" % WINDOW)
"""


def main():
    rc = 0
    for window in ("1000", "0"):
        os.environ["ZCSOCK_POLL_KERNEL_US"] = window
        rc |= run_child(CHILD)
    return rc


if __name__ == "__main__":
    sys.exit(main())
