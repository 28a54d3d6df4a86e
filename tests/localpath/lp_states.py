#!/usr/bin/env python3
"""Localpath case "states" (issue 32): a connection's state changes go
through one transition function with a table of allowed changes
(shim/paths/local/state.c), and each is counted (local.state.<from>_<to>).

In one process under the library (both ends of a connection are then
ours):
  1. a connection paired by one round trip: the server's end OFFER ->
     PAIRED, the client's PENDING -> PAIRED;
  2. urgent data (MSG_OOB, which only the kernel carries) on it: the
     client's end is handed back, PAIRED -> PLAIN, and so is the server's
     once it reads; every byte, the urgent one too, arrives in order;
  3. (pair when it pays, ZCSOCK_LOCAL_PAIR_AFTER=2) a connection to a server
     without the library: DEFER -> PLAIN once it pays and finds no listener
     of ours (local.declined.not_zcsock);
  4. (the same) a connection to a server under the library: DEFER ->
     PENDING -> PAIRED once it pays, every byte echoed;
  4. no change the table refuses (local.state.refused 0: a checked build
     would have aborted).

    lp_states.py                     (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import run_child  # noqa: E402

PRELUDE = r"""
import os, subprocess, time
S = ("local.state.offer_paired", "local.state.offer_plain", "local.state.pending_paired",
     "local.state.pending_plain", "local.state.paired_plain", "local.state.defer_pending",
     "local.state.defer_plain", "local.state.refused")
def states():
    return dict((k.split(".")[-1], stat(k)) for k in S)
def want(what, **kw):
    now = states()
    bad = dict((k, now[k]) for k, v in kw.items() if now[k] != v)
    if bad:
        sys.exit("FAIL: %s: %s (all: %s)" % (what, bad, now))
    print("%s: %s" % (what, " ".join("%s=%d" % kv for kv in sorted(now.items()))), flush=True)
"""

CHILD = PRELUDE + r"""
want("start", offer_paired=0, pending_paired=0, paired_plain=0, refused=0)
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4)
s, c = pair_tcp(l)
want("paired", offer_paired=1, pending_paired=1, paired_plain=0, refused=0)

s.sendall(b"before")
s.send(b"!", socket.MSG_OOB)            # the client's end goes back to the kernel
s.sendall(b"after")
want("client handed back", paired_plain=1, refused=0)
got = b""
c.settimeout(10)
while len(got) < len(b"beforeafter"):
    got += c.recv(64)                   # (the urgent byte is out of band)
if got != b"beforeafter":
    sys.exit("FAIL: the server read %r" % got)
c.sendall(b"back"); got = b""
while len(got) < 4:
    got += s.recv(4)
if got != b"back":
    sys.exit("FAIL: the client read %r" % got)
want("both handed back", offer_paired=1, pending_paired=1, paired_plain=2, refused=0)
s.close(); c.close()

print("ok states: paired, handed back")
"""

CHILD_PLAIN = PRELUDE + r"""
env = dict(os.environ); env.pop("LD_PRELOAD", None)
plain = subprocess.Popen([sys.executable, "-c",
    "import socket; l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1); "
    "print(l.getsockname()[1], flush=True); c, _ = l.accept(); "
    "[c.sendall(b) for b in iter(lambda: c.recv(64), b'')]"], env=env,
    stdout=subprocess.PIPE, text=True)
port = int(plain.stdout.readline())
p = socket.create_connection(("127.0.0.1", port))
for m in (b"one", b"two", b"three", b"four", b"five"):   # it pays: it announces
    p.sendall(m)
    if p.recv(64) != m:
        sys.exit("FAIL: the plain server's echo differs")
p.close(); plain.wait(10)
want("to a server without the library", defer_plain=1, defer_pending=0, pending_paired=0,
     refused=0)
if stat("local.declined.not_zcsock") != 1:
    sys.exit("FAIL: local.declined.not_zcsock is %d" % stat("local.declined.not_zcsock"))
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4)
s = socket.create_connection(l.getsockname()); c, _ = l.accept()
for i in range(8):                      # it pays (two turns), then it pairs
    m = b"%d" % i * (i + 1)
    s.sendall(m)
    got = b""
    while len(got) < len(m):
        got += c.recv(64)
    c.sendall(got)
    got = b""
    while len(got) < len(m):
        got += s.recv(64)
    if got != m:
        sys.exit("FAIL: the echo differs")
want("deferred, then paired", defer_pending=1, pending_paired=1, offer_paired=1, refused=0)
print("ok states: declined; deferred, then paired")
"""

sys.exit(run_child(CHILD) or run_child(CHILD_PLAIN, pair_after="2"))
