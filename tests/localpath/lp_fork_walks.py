#!/usr/bin/env python3
"""Localpath case "fork_walks": a server that forks a child per connection
(PostgreSQL, rsync's daemon, inetd) pays one look at its parent's
descriptor table per connection, not one per receive (issue 31).

A child that inherits a connection whose offer is due offers only once the
parent let go of its copy (two readers of one stream cannot both follow a
switch-over), which it learns by walking the parent's /proc/PID/fd.  The
answer "not held elsewhere" now stands until our descriptors may reach
another process again (a fork, an exec or spawn, SCM_RIGHTS): before, every
receive while the offer was due walked again (pgbench -C against
PostgreSQL: five walks a connection, a third of the library's system calls).

The server, under the library with pairing when it pays
(ZCSOCK_LOCAL_PAIR_AFTER=2), accepts CONNS connections and forks a child
for each, closing its own copy; the client, without the library, makes
TURNS request/answer turns on each (every byte checked), so the offer stays
due without an announcement.  Each child reports its proc.fd_walks: at most
2 each (one walk finds the parent's copy gone).

    lp_fork_walks.py [CONNS [TURNS]]   (default 4, 30; ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import random
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import check, recv_exact  # noqa: E402

SERVER = r"""
import os, socket, sys
sys.path.insert(0, sys.argv[2])
from zc_stat import zc_stat
n = int(sys.argv[1])
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(n)
print(l.getsockname()[1], flush=True)
for i in range(n):
    c, _ = l.accept()
    kid = os.fork()
    if kid == 0:
        l.close()
        while True:
            b = c.recv(4096)
            if not b:
                break
            c.sendall(b[::-1])
        print("child %d walks %d" % (i, zc_stat("proc.fd_walks")), flush=True)
        os._exit(0)
    c.close()
    os.waitpid(kid, 0)
"""


def main():
    conns = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    lib = os.environ.get("ZC_LIB")
    check(lib and os.path.exists(lib), "ZC_LIB names no library")
    env = dict(os.environ, LD_PRELOAD=lib, ZCSOCK_LOCAL_PAIR_AFTER="2")
    libdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib")
    srv = subprocess.Popen([sys.executable, "-c", SERVER, str(conns), libdir], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline())
        rng = random.Random(7)
        for i in range(conns):
            s = socket.create_connection(("127.0.0.1", port), timeout=20)
            for t in range(turns):
                msg = rng.randbytes(rng.randint(1, 64))
                s.sendall(msg)
                check(recv_exact(s, len(msg)) == msg[::-1], "connection %d turn %d" % (i, t))
            s.close()
            line = srv.stdout.readline().split()
            check(line[:2] == ["child", str(i)], "the server said %r" % line)
            walks = int(line[3])
            print("connection %d: %d turns, the child walked %d descriptor tables" %
                  (i, turns, walks))
            check(walks <= 2, "child %d walked %d descriptor tables in %d turns (a walk per "
                  "receive)" % (i, walks, turns))
        check(srv.wait(timeout=20) == 0, "the server failed")
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    print("ok fork_walks")


if __name__ == "__main__":
    main()
