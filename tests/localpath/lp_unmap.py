#!/usr/bin/env python3
"""Localpath case "unmap": the mappings of closed channels go in batches
(issue 31, DEFERRED UNMAPS in shim/paths/local/conn.c).  One process under
the library pairs N TCP connections with itself (256 KiB rings, so that
several fit the batch), closes every other one, checks every byte of a
round trip over each one left, then closes the rest and the listener:
every closed channel must have been unmapped (local.unmapped, both ends of
each connection: 2 N), in fewer system calls than channels (local.unmaps:
neighbours go together), and the process must hold no channel mapping any more
(/proc/self/maps: the last close empties the batch).

    lp_unmap.py [N]      (default 40; ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import sys

from lp_util import RECV_EXACT, run_child

CODE = RECV_EXACT + r"""
import random
n = int(sys.argv[1]) if len(sys.argv) > 1 else N
def nmaps():     # the channels' mappings (memfd "zcsock-ring")
    with open("/proc/self/maps") as f:
        return sum(1 for l in f if "zcsock-ring" in l)
m0 = nmaps()
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(n)
pairs = [pair_tcp(l, i + 1) for i in range(n)]
m1 = nmaps()
for i in range(1, n, 2):
    for e in pairs[i]:
        e.close()
rnd = random.Random(31)
for i in range(0, n, 2):
    s, c = pairs[i]
    a, b = rnd.randbytes(rnd.choice((1, 100, 70000))), rnd.randbytes(rnd.choice((1, 4096)))
    s.sendall(a)
    if recv_exact(c, len(a)) != a:
        sys.exit("FAIL: connection %d: the server end received other bytes" % i)
    c.sendall(b)
    if recv_exact(s, len(b)) != b:
        sys.exit("FAIL: connection %d: the client end received other bytes" % i)
for i in range(0, n, 2):
    for e in pairs[i]:
        e.close()
l.close()
m2, unmaps, unmapped = nmaps(), stat("local.unmaps"), stat("local.unmapped")
print("%d connections: %d channel mappings before, %d paired, %d closed; %d channels "
      "unmapped in %d calls"
      % (n, m0, m1, m2, unmapped, unmaps))
if unmapped != 2 * n:
    sys.exit("FAIL: %d channels unmapped, not %d" % (unmapped, 2 * n))
if not 0 < unmaps < unmapped:
    sys.exit("FAIL: %d unmap calls for %d channels (none went together)" % (unmaps, unmapped))
if m1 - m0 != 2 * n or m2 != m0:
    sys.exit("FAIL: channel mappings: %d before pairing, %d paired, %d after every close"
             % (m0, m1, m2))
"""


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    import os
    os.environ["ZCSOCK_LOCAL_RING"] = "262144"
    return run_child(CODE.replace("else N", "else %d" % n))


if __name__ == "__main__":
    sys.exit(main())
