#!/usr/bin/env python3
"""Localpath case "exec_unpaid": an exec that takes a connection along
before it paid (issue 31, COOKIES in shim/paths/local/conn.c: an accepted
connection's socket cookie is noted only once it may pair, so an exec asks
for it then).  One process under the library, pairing after 2 turns (the
default), accepts three connections and starts a program under the library
with subprocess (vfork and exec) that inherits two of them:
  - one that carried nothing yet: its offer must be cancelled
    (local.never_paired.exec), it stays the kernel's;
  - one that carried one turn: cancelled too (counted as declined short,
    as its close would count it);
  - one kept close-on-exec: untouched, it pairs afterwards
    (local.paired.accepted) and carries its bytes through the ring.
The started program answers 20 turns on each inherited socket, every byte
checked by the client ends in the parent, which closes its own copies
first.

    lp_exec_unpaid.py      (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import sys

from lp_util import RECV_EXACT, run_child

CODE = RECV_EXACT + r"""
import os, random, subprocess
ECHO = r'''
import socket, sys
for fd in map(int, sys.argv[1:]):
    s = socket.socket(fileno=fd)
    for _ in range(20):
        b = s.recv(65536)
        if not b:
            sys.exit("FAIL: started program: EOF")
        s.sendall(b[::-1])
    s.close()
'''
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
ends = []
for _ in range(3):
    s = socket.create_connection(l.getsockname())
    c, _ = l.accept()
    ends.append((s, c))
s1, c1 = ends[1]
s1.sendall(b"x"); recv_exact(c1, 1); c1.sendall(b"y"); recv_exact(s1, 1)    # one turn
n0, d0, p0 = stat("local.never_paired.exec"), stat("local.declined.short"), \
    stat("local.paired.accepted")
fds = [ends[0][1].fileno(), c1.fileno()]
for fd in fds:
    os.set_inheritable(fd, True)
p = subprocess.Popen([sys.executable, "-c", ECHO] + [str(fd) for fd in fds], pass_fds=fds,
                     env=os.environ)
ends[0][1].close(); c1.close()
rnd = random.Random(7)
for i in (0, 1):
    s = ends[i][0]
    for t in range(20):
        b = rnd.randbytes(rnd.randrange(1, 3000))
        s.sendall(b)
        if recv_exact(s, len(b)) != b[::-1]:
            sys.exit("FAIL: connection %d, turn %d: other bytes came back" % (i, t))
if p.wait(timeout=60) != 0:
    sys.exit("FAIL: the started program exited with %d" % p.returncode)
s2, c2 = ends[2]
for t in range(20):
    b = rnd.randbytes(rnd.randrange(1, 3000))
    s2.sendall(b)
    got = recv_exact(c2, len(b))
    c2.sendall(got[::-1])
    if recv_exact(s2, len(b)) != b[::-1]:
        sys.exit("FAIL: the connection kept: turn %d: other bytes came back" % t)
n1, d1, p1 = stat("local.never_paired.exec"), stat("local.declined.short"), \
    stat("local.paired.accepted")
print("offers cancelled by the exec: %d never used, %d after a turn; paired after: %d"
      % (n1 - n0, d1 - d0, p1 - p0))
if n1 - n0 != 1:
    sys.exit("FAIL: local.never_paired.exec moved by %d, not 1" % (n1 - n0))
if p1 - p0 != 1:
    sys.exit("FAIL: the connection kept close-on-exec did not pair (%d)" % (p1 - p0))
"""


def main():
    if "ZCSOCK_LOCAL_PAIR_LEARN" not in os.environ:
        os.environ["ZCSOCK_LOCAL_PAIR_LEARN"] = "0"     # pair at the 3rd turn, always
    return run_child(CODE, pair_after="2")


if __name__ == "__main__":
    sys.exit(main())
