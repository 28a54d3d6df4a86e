#!/usr/bin/env python3
"""Localpath case "dest_known": a client under the library (pairing when it
pays, ZCSOCK_LOCAL_PAIR_AFTER=2, learned lifetimes off) asks about a
destination once, not once per connection (issue 31: a client of a server
without the library paid a sock_diag query, a socket, a refused connect and
a close per connection).

A server without the library listens on port P, one under it on port Q.
The client, under the library, makes connections of four request/answer
turns each, every byte checked:

  1. one to P: declined not_zcsock after a sock_diag query and a beacon
     probe;
  2. P's server goes away and one under the library, bound beside it with
     SO_REUSEPORT, listens on P instead; four more connections to P at once
     are declined from what the first found (local.dest_known 4: a listener
     that gained the library is missed for at most LOCAL_PAIR_DEST_MS, 1 s);
  3. one to P 1.2 s later asks again and pairs;
  4. one to Q pairs (another destination).

    lp_dest_known.py               (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import SERVE_REVERSED, check, conversation, zc_stat  # noqa: E402

SERVER = r"""
import socket, struct, sys, threading
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
l.bind(("127.0.0.1", int(sys.argv[1])))
print(l.getsockname()[1], flush=True)
if sys.argv[2] == "later":      # bound beside the other server; listens when told
    sys.stdin.readline()
l.listen(64)
print("listening", flush=True)
""" + SERVE_REVERSED + r"""
while True:
    c, _ = l.accept()
    threading.Thread(target=lambda c=c: (serve(c), c.close()), daemon=True).start()
"""


def start(lib, port=0, later=False):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env.update(LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_LOCAL_PAIR_AFTER="2")
    p = subprocess.Popen([sys.executable, "-c", SERVER, str(port), "later" if later else "now"],
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    check(line.isdigit(), "a server did not bind")
    if not later:
        check(p.stdout.readline().strip() == "listening", "a server did not listen")
    return p, int(line)


def stop(p):
    p.kill()
    p.wait()


NAMES = {"nz": "local.declined.not_zcsock", "known": "local.dest_known",
         "paired": "local.paired.connected"}


def stats():
    return {name: zc_stat(name) or 0 for name in NAMES.values()}


def moved(before):
    """How far each counter moved since before (stats())."""
    now = stats()
    return {k: now[name] - before[name] for k, name in NAMES.items()}


def main():
    if zc_stat("sockets.created") is None:      # the client runs under the library
        # without learned lifetimes: they would (rightly) keep the later
        # four-turn connections to P plain after the first ones ended
        env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_LOCAL_PAIR_LEARN="0")
        env.pop("ZCSOCK_LOCAL_PAIR_AFTER", None)
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    check(os.environ.get("ZCSOCK_LOCAL_PAIR_AFTER", "2") == "2",
          "the case needs the default ZCSOCK_LOCAL_PAIR_AFTER (2)")
    plain, p = start(False)
    zc, q = start(True)
    zc2, _ = start(True, p, later=True)     # on P too, not listening yet
    try:
        b = stats()
        t0 = time.monotonic()
        conversation(p, 0, 4)                  # asks: a listener without a beacon
        # P's plain server goes, the one under the library listens instead
        stop(plain)
        plain = None
        zc2.stdin.write("go\n")
        zc2.stdin.flush()
        check(zc2.stdout.readline().strip() == "listening", "the second server did not listen")
        for i in range(1, 5):
            conversation(p, i, 4)
        took = time.monotonic() - t0
        got = moved(b)
        if took < 0.9:
            check(got == {"nz": 5, "known": 4, "paired": 0},
                  "five connections to P, the first to a server without the library: %s, "
                  "wanted not_zcsock 5 and dest_known 4 (asked once), paired 0" % got)
        else:   # (a machine this slow passed LOCAL_PAIR_DEST_MS: asked again)
            check(got["known"] >= 1 and got["nz"] + got["paired"] == 5,
                  "five connections to P in %.1f s: %s, wanted some declined from what the "
                  "first found" % (took, got))
        time.sleep(1.2)
        b = stats()
        conversation(p, 10, 4)
        got = moved(b)
        check(got == {"nz": 0, "known": 0, "paired": 1},
              "1.2 s after P's server gained the library: %s, wanted asked again and paired" % got)
        b = stats()
        conversation(q, 20, 4)
        got = moved(b)
        check(got == {"nz": 0, "known": 0, "paired": 1},
              "a connection to Q, under the library: %s, wanted it paired" % got)
    finally:
        for x in (plain, zc, zc2):
            if x:
                stop(x)
    print("dest_known: 5 connections to a plain server asked once; a server that gained the "
          "library on the same port paired 1.2 s later; every byte checked")


if __name__ == "__main__":
    main()
