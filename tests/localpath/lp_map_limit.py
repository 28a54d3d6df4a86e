#!/usr/bin/env python3
"""Localpath case "map_limit" (issue 31: mappings and address space handled
by falling back to the kernel path with a one-line notice, never by failing
a call).  One process under the library, both ends of 30 connections in it,
its address space limited (RLIMIT_AS 512 MiB): each paired connection maps
its channel twice here (8 MiB of address space each end at the default
ring size), so 30 of them would take 480 MiB.  The library pairs until its
channels would hold more than a quarter of the limit, then leaves the rest
on the kernel (local.declined.map_limit, the notice said once with
ZCSOCK_DEBUG=1); every connection then moves 64 KiB each way, every byte
checked; and the application can still map 300 MiB of its own, which it
could not had every connection paired.  Re-runs itself under the library
(ZC_LIB); exit 0 pass, 1 fail."""
import mmap
import os
import random
import resource
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import check, recv_exact, zc_stat  # noqa: E402

N, LIMIT, KIB64 = 30, 512 << 20, 64 << 10


def child():
    check(zc_stat("sockets.created") is not None, "the library is not loaded")
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(N)
    conns = []
    for i in range(N):
        s = socket.create_connection(ls.getsockname())
        c, _ = ls.accept()
        s.sendall(b"x")
        check(c.recv(1) == b"x", "connection %d: first byte" % i)
        c.sendall(b"y")
        check(s.recv(1) == b"y", "connection %d: first answer" % i)
        conns.append((s, c))
    paired = zc_stat("local.paired.accepted") or 0
    limited = zc_stat("local.declined.map_limit") or 0
    check(0 < paired < N, "%d of %d connections paired under RLIMIT_AS %d MiB"
          % (paired, N, LIMIT >> 20))
    check(limited > 0, "local.declined.map_limit is %d" % limited)
    rnd = random.Random(7)
    for i, (s, c) in enumerate(conns):
        a, b = rnd.randbytes(KIB64), rnd.randbytes(KIB64)
        s.sendall(a)
        check(recv_exact(c, KIB64) == a, "connection %d: client to server bytes" % i)
        c.sendall(b)
        check(recv_exact(s, KIB64) == b, "connection %d: server to client bytes" % i)
    try:
        m = mmap.mmap(-1, 300 << 20)
        m[0:1] = b"z"
        m.close()
    except OSError as e:
        check(False, "the application could not map 300 MiB of its own: %s" % e)
    for s, c in conns:
        s.close()
        c.close()
    print("map_limit: %d of %d connections paired under RLIMIT_AS %d MiB, %d declined "
          "map_limit, every byte right, 300 MiB still mappable" % (paired, N, LIMIT >> 20,
                                                                  limited))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        sys.exit(child())
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_LOCAL_PAIR_AFTER="0",
               ZCSOCK_DEBUG="1")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "child"], env=env,
                       capture_output=True, text=True, timeout=120)
    sys.stdout.write(r.stdout + r.stderr)
    told = r.stderr.count("local.declined.map_limit; said once")
    if r.returncode == 0 and told != 1:
        sys.stderr.write("FAIL: the map_limit notice said %d times, not once\n" % told)
        sys.exit(1)
    sys.exit(r.returncode)
