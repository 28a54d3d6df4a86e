#!/usr/bin/env python3
"""Localpath case "conn_memory": what a paired connection that has been
busy costs in shared memory (issue 31: at most 16 KiB of resident memory
per idle paired connection).

A server and a client under the library, both pairing at once
(ZCSOCK_LOCAL_PAIR_AFTER=0); the client opens 200 connections and makes 64
request/answer round trips of 1,000 bytes on each, every byte checked, then
leaves them open and idle.  Each process's resident shared memory
(RssShmem: the rings' pages it touched) may then have grown by at most
16 KiB a connection.  Request/response keeps to the ring's first page
(LOCAL_RING_HOT); a library that walked a 64 KiB window instead touched 16
pages a direction, about 130 KiB a connection.

    lp_conn_memory.py              (ZC_LIB names the library)
Exit 0 pass, 1 fail, 77 skip (shmem THP always, within_size or force: the
rings then have 2 MiB pages)."""
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import check, recv_exact, zc_stat  # noqa: E402

N, TRIPS, SIZE, LIMIT_KIB = 200, 64, 1000, 16

SERVER = r"""
import os, selectors, socket, sys
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(256)
print(l.getsockname()[1], flush=True)
sel = selectors.DefaultSelector()
sel.register(l, selectors.EVENT_READ)
sel.register(sys.stdin, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj is l:
            c, _ = l.accept()
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ)
        elif key.fileobj is sys.stdin:
            line = sys.stdin.readline()
            if not line:
                sys.exit(0)
            with open("/proc/self/status") as f:
                print([x.split()[1] for x in f if x.startswith("RssShmem:")][0], flush=True)
        else:
            c = key.fileobj
            try:
                b = c.recv(65536)
            except BlockingIOError:
                continue
            if not b:
                sel.unregister(c)
                c.close()
                continue
            c.setblocking(True)
            c.sendall(b)
            c.setblocking(False)
"""


def shmem_kib():
    with open("/proc/self/status") as f:
        return int([x.split()[1] for x in f if x.startswith("RssShmem:")][0])


def main():
    if zc_stat("sockets.created") is None:      # the client runs under the library
        env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_LOCAL_PAIR_AFTER="0")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    try:
        with open("/sys/kernel/mm/transparent_hugepage/shmem_enabled") as f:
            thp = f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        thp = "never"
    if thp in ("always", "within_size", "force"):
        print("SKIP: shmem THP is %r here: the rings' pages are 2 MiB ones" % thp)
        sys.exit(77)
    import socket
    srv = subprocess.Popen([sys.executable, "-c", SERVER], env=dict(os.environ),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline())

        def server_shmem():
            srv.stdin.write("status\n")
            srv.stdin.flush()
            return int(srv.stdout.readline())

        # one connection first, so that what every process maps once (its
        # statistics, the first ring's neighbours) is in the baseline
        warm = socket.create_connection(("127.0.0.1", port), timeout=20)
        warm.sendall(b"w")
        check(recv_exact(warm, 1) == b"w", "the first connection's echo came back wrong")
        c0, s0 = shmem_kib(), server_shmem()
        conns = []
        rnd = random.Random(31)
        for i in range(N):
            s = socket.create_connection(("127.0.0.1", port), timeout=20)
            for _ in range(TRIPS):
                msg = rnd.randbytes(SIZE)
                s.sendall(msg)
                check(recv_exact(s, SIZE) == msg, "connection %d: an echo came back wrong" % i)
            conns.append(s)
        paired = zc_stat("local.paired.connected") or 0
        check(paired >= N, "only %d of %d connections paired (the case measures nothing)"
              % (paired, N + 1))
        c1, s1 = shmem_kib(), server_shmem()
        per_c, per_s = (c1 - c0) / N, (s1 - s0) / N
        print("conn_memory: %d busy paired connections (%d round trips of %d B each), now idle: "
              "shared memory resident +%.1f KiB a connection in the client, +%.1f in the server "
              "(limit %d)" % (N, TRIPS, SIZE, per_c, per_s, LIMIT_KIB))
        check(per_c <= LIMIT_KIB and per_s <= LIMIT_KIB,
              "a busy paired connection keeps %.1f / %.1f KiB of shared memory resident "
              "(client / server), over %d KiB" % (per_c, per_s, LIMIT_KIB))
        for s in conns + [warm]:
            s.close()
    finally:
        srv.stdin.close()
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


if __name__ == "__main__":
    main()
