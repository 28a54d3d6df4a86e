#!/usr/bin/env python3
"""Localpath case "learn": learned lifetimes (ZCSOCK_LOCAL_PAIR_LEARN, issue
31).  With pair when it pays (ZCSOCK_LOCAL_PAIR_AFTER=2) a connection that
answers three requests and closes paired at its third and closed at once,
paying for a channel it never used (PostgreSQL under pgbench -C: every
connection).  Each process now learns how long its connections to a
destination, or through a listener, live, and waits past that.

The client, under the library, makes connections of request/answer turns,
every byte checked, to a server under the library:

  learn      a threaded server, both ends learning: six connections of three
             turns: the first pairs, the five after it do not
             (local.pair_learned 5 in the client); then one of 40 turns
             pairs all the same, a few turns later;
  forked     a server that forks a child per connection (the child serves
             it and calls exit() with the socket still open: a PostgreSQL
             backend), the client not learning
             (ZCSOCK_LOCAL_PAIR_LEARN=0 there, so it announces at its
             second turn every time): the server learns from what its
             children saw, through the table they share: one of six
             connections pairs (two when a child's close, which comes
             after the client's, came after the next child's first call);
  off        the forked server and the client, neither learning: all six
             pair (what the case would see without the learning).

    lp_learn.py learn|forked|off    (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import SERVE_REVERSED, check, conversation, zc_stat  # noqa: E402

SERVER = r"""
import ctypes, os, socket, struct, sys, threading
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(64)
print(l.getsockname()[1], flush=True)
""" + SERVE_REVERSED + r"""
while True:
    c, _ = l.accept()
    if sys.argv[1] == "fork":
        pid = os.fork()
        if pid == 0:    # serves, then exits leaving the socket to the
            l.close()   # kernel (as a PostgreSQL backend does)
            serve(c)
            ctypes.CDLL(None).exit(0)
        c.close()
        while True:     # reap what ended
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
    else:
        threading.Thread(target=lambda c=c: (serve(c), c.close()), daemon=True).start()
"""


def counts():
    return {k: zc_stat(n) or 0 for k, n in (("paired", "local.paired.connected"),
                                             ("learned", "local.pair_learned"))}


def moved(before):
    now = counts()
    return {k: now[k] - before[k] for k in now}


def main():
    mode = sys.argv[1]
    learn = {"learn": ("1", "1"), "forked": ("1", "0"), "off": ("0", "0")}[mode]
    if zc_stat("sockets.created") is None:      # the client runs under the library
        env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_LOCAL_PAIR_AFTER="2",
                   ZCSOCK_LOCAL_PAIR_LEARN=learn[1])
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    senv = dict(os.environ, ZCSOCK_LOCAL_PAIR_LEARN=learn[0])
    srv = subprocess.Popen([sys.executable, "-c", SERVER, "thread" if mode == "learn" else "fork"],
                           env=senv, stdout=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline().strip()
        check(line.isdigit(), "the server did not listen")
        port = int(line)
        b = counts()
        for i in range(6):
            conversation(port, i, 3)
            if mode != "learn":
                # the child learns at its close, after ours: a forking server
                # may pair the connection right after the first one too
                time.sleep(0.1)
        got = moved(b)
        want = {"learn": {"paired": 1, "learned": 5}, "forked": {"paired": 1, "learned": 0},
                "off": {"paired": 6, "learned": 0}}[mode]
        check(got == want or (mode == "forked" and got == {"paired": 2, "learned": 0}),
              "six connections of three turns (%s): %s, wanted %s" % (mode, got, want))
        if mode == "learn":
            b = counts()
            conversation(port, 100, 40)
            got = moved(b)
            check(got == {"paired": 1, "learned": 1},
                  "a connection of 40 turns after them: %s, wanted it paired (late)" % got)
    finally:
        srv.kill()
        srv.wait()
    print("learn/%s: six connections of three turns, %d paired; every byte checked" %
          (mode, got["paired"]))


if __name__ == "__main__":
    main()
