#!/usr/bin/env python3
"""Localpath case "epoll_plain": PLAIN UNTIL PAIRED (shim/shim_epoll.c,
issue 31).  A connection that has not paired is ready exactly when the
kernel says so, so its epoll registrations stay the application's own in
the kernel (only recorded) until it pairs; then they become the engine's
(tagged), and a wait already asleep on the set is kicked to look.  What
the application sees must stay exactly the kernel's, before, across and
after the switch.

One process under the library with pair when it pays (the default,
ZCSOCK_LOCAL_PAIR_AFTER=2), both ends of TCP connections, epoll sets of
the main thread:
  1. 100 short connections (connect, a request, a reply, close), the
     server ends registered level-triggered in one set: every byte checked;
     every epoll_ctl passed on plain (ready.ep_plain counts 200), none
     adopted, nothing paired, and no wait looked at a registration
     (ready.ep_looks stays put: the waits went straight to the kernel).
  2. A connection registered (EPOLLIN) in a second set on which a thread
     waits all along; the main thread makes it pair by traffic: its
     registration is adopted when it pairs (ready.ep_adopted + 1), and the
     thread, asleep since before the pairing, reports a message the client
     then sends through the ring within 2 s (the adoption kicks the set).
  3. EPOLLONESHOT on a connection that has not paired: not plain (the
     engine follows a one-shot); it reports once, not again until re-armed.
  4. A dup of a connection registered plain: its registrations are
     adopted at the dup; the connection then pairs through the dup and a
     wait on the first number's registration reports ring bytes.
  5. The same process with ZCSOCK_EPOLL_PLAIN=0: nothing plain, the same
     answers.

    lp_epoll_plain.py       (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import run_child  # noqa: E402

CHILD = r"""
import os, select, socket, sys, threading, time
PLAIN = os.environ.get("ZCSOCK_EPOLL_PLAIN", "1") != "0"
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(64)
def exact(s, n):
    b = b""
    while len(b) < n:
        m = s.recv(n - len(b))
        if not m:
            sys.exit("FAIL: EOF after %d of %d bytes" % (len(b), n))
        b += m
    return b
def rounds(cli, srv, n, tag):
    # n request/reply rounds, 200 KiB each way: pair when it pays pairs
    for r in range(n):
        q = bytes([(r + tag) & 0xff]) * 200000
        t = threading.Thread(target=cli.sendall, args=(q,)); t.start()
        if exact(srv, len(q)) != q:
            sys.exit("FAIL: %s round %d: the request came different" % (tag, r))
        t.join()
        a = bytes([(r + tag + 1) & 0xff]) * 200000
        t = threading.Thread(target=srv.sendall, args=(a,)); t.start()
        if exact(cli, len(a)) != a:
            sys.exit("FAIL: %s round %d: the reply came different" % (tag, r))
        t.join()
rescues0 = stat("ready.net_rescues")

# 1: short connections
ep = select.epoll()
p0, a0, k0 = stat("ready.ep_plain"), stat("ready.ep_adopted"), stat("ready.ep_looks")
pa0 = stat("local.paired.accepted")
for i in range(100):
    c = socket.create_connection(l.getsockname())
    s, _ = l.accept()
    ep.register(s.fileno(), select.EPOLLIN)
    m = b"q%03d" % i
    c.sendall(m)
    ev = ep.poll(2)
    if ev != [(s.fileno(), select.EPOLLIN)] or s.recv(100) != m:
        sys.exit("FAIL: short connection %d: the wait reported %r" % (i, ev))
    s.sendall(b"r" + m)
    if exact(c, 5) != b"r" + m:
        sys.exit("FAIL: short connection %d: the reply came different" % i)
    ep.unregister(s.fileno())
    c.close(); s.close()
plain, adopted, looks = d("ready.ep_plain", p0), d("ready.ep_adopted", a0), d("ready.ep_looks", k0)
if d("local.paired.accepted", pa0):
    sys.exit("FAIL: a short connection paired")
if PLAIN and (plain != 200 or adopted or looks):
    sys.exit("FAIL: 100 short connections: %d epoll_ctl plain (200 expected), %d adopted, "
             "%d registrations looked at" % (plain, adopted, looks))
if not PLAIN and (plain or not looks):
    sys.exit("FAIL: ZCSOCK_EPOLL_PLAIN=0: %d epoll_ctl plain, %d looks" % (plain, looks))
print("100 short connections: %d epoll_ctl plain, %d looks" % (plain, looks), flush=True)

# 2: a registration adopted at the pairing, a thread asleep on its set
ep2 = select.epoll()
c = socket.create_connection(l.getsockname())
s, _ = l.accept()
ep2.register(s.fileno(), select.EPOLLIN)
got = []
def sleeper():
    # wait on ep2 all along (the kernel bytes of the rounds before the
    # pairing wake it: it waits again), until the marker, sent after the
    # pairing, is readable
    t0 = time.monotonic()
    while time.monotonic() - t0 < 20:
        ev = ep2.poll(8)
        if ev and marker_sent.is_set():
            got.append((ev, time.monotonic() - sent_at[0]))
            return
        if ev:
            time.sleep(0.001)   # (level-triggered: until the main thread reads)
marker_sent = threading.Event(); sent_at = [0.0]
a0 = stat("ready.ep_adopted")
pa0 = stat("local.paired.accepted")
th = threading.Thread(target=sleeper); th.start()
rounds(c, s, 4, 2)
if d("local.paired.accepted", pa0) != 1:
    sys.exit("FAIL: the connection did not pair in 4 rounds of 200 KiB")
if PLAIN and d("ready.ep_adopted", a0) != 1:
    sys.exit("FAIL: the pairing adopted %d registrations (1 expected)" % d("ready.ep_adopted", a0))
time.sleep(0.3)                 # the thread sleeps in the kernel by now
sent_at[0] = time.monotonic(); marker_sent.set()
c.sendall(b"marker")
th.join(25)
if not got or got[0][0] != [(s.fileno(), select.EPOLLIN)] or got[0][1] > 2:
    sys.exit("FAIL: the thread asleep on the set reported %r" % got)
if exact(s, 6) != b"marker":
    sys.exit("FAIL: the marker came different")
rounds(c, s, 2, 7)
ep2.unregister(s.fileno())
c.close(); s.close()
print("adopted at the pairing; the sleeping wait woke after %.3f s" % got[0][1], flush=True)

# 3: EPOLLONESHOT before the pairing
c = socket.create_connection(l.getsockname())
s, _ = l.accept()
p0 = stat("ready.ep_plain")
ep.register(s.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
if d("ready.ep_plain", p0):
    sys.exit("FAIL: an EPOLLONESHOT registration stayed plain")
c.sendall(b"o1")
ev = ep.poll(2)
if ev != [(s.fileno(), select.EPOLLIN)] or s.recv(10) != b"o1":
    sys.exit("FAIL: oneshot: the wait reported %r" % ev)
c.sendall(b"o2")
ev = ep.poll(0.3)
if ev:
    sys.exit("FAIL: oneshot: a fired one-shot reported %r again" % ev)
ep.modify(s.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
ev = ep.poll(2)
if ev != [(s.fileno(), select.EPOLLIN)] or s.recv(10) != b"o2":
    sys.exit("FAIL: oneshot: re-armed, the wait reported %r" % ev)
ep.unregister(s.fileno())
c.close(); s.close()

# 4: a dup of a connection registered plain
c = socket.create_connection(l.getsockname())
s, _ = l.accept()
ep.register(s.fileno(), select.EPOLLIN)
a0 = stat("ready.ep_adopted")
s2 = s.dup()
if PLAIN and d("ready.ep_adopted", a0) != 1:
    sys.exit("FAIL: the dup adopted %d registrations (1 expected)" % d("ready.ep_adopted", a0))
pa0 = stat("local.paired.accepted")
rounds(c, s2, 4, 11)
if d("local.paired.accepted", pa0) != 1:
    sys.exit("FAIL: the dup'ed connection did not pair")
c.sendall(b"after the dup")
ev = ep.poll(2)
if ev != [(s.fileno(), select.EPOLLIN)] or exact(s, 13) != b"after the dup":
    sys.exit("FAIL: dup: the wait on the first number reported %r" % ev)
ep.unregister(s.fileno())
s2.close(); c.close(); s.close()

rescues = d("ready.net_rescues", rescues0)
if rescues:
    sys.exit("FAIL: %d waits ended at the readiness net" % rescues)
print("epoll_plain (ZCSOCK_EPOLL_PLAIN=%d): every answer the kernel's" % PLAIN, flush=True)
"""

rc = run_child(CHILD, pair_after="2")
if rc == 0:
    os.environ["ZCSOCK_EPOLL_PLAIN"] = "0"
    rc = run_child(CHILD, pair_after="2")
sys.exit(rc)
