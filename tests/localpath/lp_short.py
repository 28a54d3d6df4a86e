#!/usr/bin/env python3
"""Localpath case "short": learned short connections
(ZCSOCK_LOCAL_SHORT_SAMPLE, issue 31).  Once 32 connections in a row to a
destination (through a listener) closed before they paid for pairing, only
every 8th new one is tracked; the others are left to the kernel from their
connect or accept, and cost what the hooks cost.  A tracked one that pays
ends the run, so connections that turn long pair again.

A threaded server under the library (SERVE_REVERSED), a client under the
library, ZCSOCK_LOCAL_PAIR_AFTER=2, every byte of every connection checked:

  1. 40 connections of one turn each: the client leaves 7 of the last 8
     alone (local.declined.learned_short 7: connections 33-40, the 40th
     tracked), the server about as many (its count comes from its own
     closes, which may trail the client's by a connection);
  2. one connection that carries 1 MiB each way, left alone at the client
     (the 10th past the run): a call of 64 KiB or more on it ends the run
     there (local.short_bulk 1);
  3. then 24 connections of 20 turns: the run ended (at the server too,
     by the bulk connection or by the first tracked ones that pay), and the
     last four all pair (local.paired.connected);
  4. the same 40 short connections with ZCSOCK_LOCAL_SHORT_SAMPLE=0 in
     both (a second server and a client of its own): none left alone.

    lp_short.py            (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import ctypes
import os
import signal
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import SERVE_REVERSED, STAT, check, conversation, recv_exact, zc_stat  # noqa: E402

# The server answers a request whose length word is 0xffffffff with its
# own count of connections left alone (8 bytes) and closes.
SERVER = r"""
import os, socket, struct, sys, threading
""" + STAT + r"""
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(64)
print(l.getsockname()[1], flush=True)
""" + SERVE_REVERSED + r"""
def first(c):
    h = b""
    while len(h) < 4:
        b = c.recv(4 - len(h))
        if not b:
            c.close()
            return
        h += b
    if h == b"\xff\xff\xff\xff":
        c.sendall(struct.pack("!q", stat("local.declined.learned_short")))
        c.close()
        return
    n = struct.unpack("!I", h)[0]
    body = b""
    while len(body) < n:
        b = c.recv(n - len(body))
        if not b:
            c.close()
            return
        body += b
    c.sendall(h + body[::-1])
    serve(c)
    c.close()
while True:
    c, _ = l.accept()
    threading.Thread(target=first, args=(c,), daemon=True).start()
"""


def server_left(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    with s:
        s.sendall(b"\xff\xff\xff\xff")
        return struct.unpack("!q", recv_exact(s, 8))[0]


def start_server(sample):
    # (it dies with us: a failed check ends this process with os._exit)
    srv = subprocess.Popen([sys.executable, "-c", SERVER],
                           env=dict(os.environ, ZCSOCK_LOCAL_SHORT_SAMPLE=sample),
                           stdout=subprocess.PIPE, text=True,
                           preexec_fn=lambda: ctypes.CDLL(None).prctl(1, signal.SIGKILL))
    line = srv.stdout.readline().strip()
    check(line.isdigit(), "the server did not listen")
    return srv, int(line)


def bulk(port):
    """One turn of 1 MiB each way, every byte checked."""
    body = os.urandom(1 << 20)
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    with s:
        s.sendall(len(body).to_bytes(4, "big") + body)
        check(recv_exact(s, 4 + len(body))[4:] == body[::-1], "the bulk answer came back wrong")


def left():
    return zc_stat("local.declined.learned_short") or 0


def paired():
    return zc_stat("local.paired.connected") or 0


def main():
    phase = sys.argv[1] if len(sys.argv) > 1 else "learn"
    if zc_stat("sockets.created") is None:      # the client runs under the library
        env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_LOCAL_PAIR_AFTER="2")
        for phase in ("learn", "off"):
            env["ZCSOCK_LOCAL_SHORT_SAMPLE"] = "8" if phase == "learn" else "0"
            rc = subprocess.run([sys.executable] + sys.argv[:1] + [phase], env=env).returncode
            if rc:
                sys.exit(rc)
        print("short: 40 connections of one turn, 7 of the last 8 left to the kernel at "
              "both ends; a bulk one left alone ends the run; 24 of 20 turns after them, "
              "the last four paired; with "
              "ZCSOCK_LOCAL_SHORT_SAMPLE=0 none left; every byte checked")
        return
    srv, port = start_server(os.environ["ZCSOCK_LOCAL_SHORT_SAMPLE"])
    try:
        for i in range(40):
            conversation(port, i, 1)
        n, s = left(), server_left(port)
        if phase == "off":
            check(n == 0 and s == 0, "ZCSOCK_LOCAL_SHORT_SAMPLE=0: %d left alone here, %d in "
                  "the server, wanted none" % (n, s))
            return
        check(n == 7, "40 short connections: the client left %d alone, wanted 7" % n)
        check(5 <= s <= 8, "40 short connections: the server left %d alone, wanted 5-8" % s)
        bulk(port)
        check(left() == 9 and zc_stat("local.short_bulk") == 1,
              "a bulk connection after them (and the query of the server's count): left "
              "alone %d (wanted 9), its run ended %s times "
              "(wanted 1)" % (left(), zc_stat("local.short_bulk")))
        got = []
        for i in range(24):
            b = paired()
            conversation(port, 100 + i, 20)
            got.append(paired() - b)
        check(sum(got[-4:]) == 4, "24 connections of 20 turns after them: paired %s, wanted "
              "the last four paired (left alone: %d here, %d in the server; states here: %s)" %
              (got, left(), server_left(port),
               {k: zc_stat("local.state." + k) for k in ("defer_pending", "pending_paired",
                                                         "paired_plain", "pending_plain")}))
    finally:
        srv.kill()
        srv.wait()


if __name__ == "__main__":
    main()
