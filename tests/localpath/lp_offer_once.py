#!/usr/bin/env python3
"""Localpath case "offer_once": a listener whose clients run without the
library stops offering them more than once (issue 31, UNANSWERED OFFERS in
shim/paths/local/pairing.c).  A server under the library (pairing after 2
turns, the default) answers 14 connections one after the other, 40 turns
each, every byte checked by the client:
  - 1-12 from this process, without the library: the first 8 offer as
    many times as they may (local.offer_once stays 0), the next 4 offer
    once each (local.offer_once 4), all declined not_zcsock;
  - 13 from a client under the library: it still pairs (its announcement
    is there at the server's one offer), and ends the run;
  - 14 without the library again: back to every offer (local.offer_once
    does not move).

    lp_offer_once.py      (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import json
import os
import subprocess
import sys

from lp_util import SERVE_REVERSED, check, conversation

SERVER = SERVE_REVERSED + r"""
import ctypes, json, socket, struct, sys
def stat(name):
    v = ctypes.c_uint64()
    get = ctypes.CDLL(None).zcsock_stat_get
    return v.value if get(name.encode(), ctypes.byref(v)) == 0 else -1
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4)
print(l.getsockname()[1], flush=True)
after = []
for i in range(int(sys.argv[1])):
    c, _ = l.accept()
    serve(c)
    c.close()
    after.append({k: stat("local." + k) for k in
                  ("offer_once", "paired.accepted", "declined.not_zcsock")})
print(json.dumps(after), flush=True)
"""

CLIENT = r"""
import sys
sys.path.insert(0, sys.argv[2])
from lp_util import conversation
conversation(int(sys.argv[1]), 13, 40)
"""


def main():
    lib = os.environ["ZC_LIB"]
    env = dict(os.environ, LD_PRELOAD=lib, ZCSOCK_LOCAL_PAIR_AFTER="2",
               ZCSOCK_LOCAL_PAIR_LEARN="1")
    plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    srv = subprocess.Popen([sys.executable, "-c", SERVER, "14"], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline())
        for i in range(12):
            conversation(port, i, 40)
        r = subprocess.run([sys.executable, "-c", CLIENT, str(port),
                            os.path.dirname(os.path.abspath(__file__))],
                           env=env, timeout=60)
        check(r.returncode == 0, "the client under the library failed")
        conversation(port, 14, 40)
        out, _ = srv.communicate(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    check(srv.returncode == 0, "the server exited with %s" % srv.returncode)
    after = json.loads(out)
    once = [a["offer_once"] for a in after]
    print("local.offer_once after each connection: %s; paired: %d; declined not_zcsock: %d"
          % (once, after[-1]["paired.accepted"], after[-1]["declined.not_zcsock"]))
    check(once[:8] == [0] * 8, "offered once before 8 connections went unanswered: %s" % once)
    check(once[8:12] == [1, 2, 3, 4], "connections 9-12 did not offer once each: %s" % once)
    check(after[12]["paired.accepted"] == 1 and after[11]["paired.accepted"] == 0,
          "the client under the library did not pair (%d)" % after[12]["paired.accepted"])
    check(once[12] == 5 and once[13] == 5, "the pairing did not end the run: %s" % once)
    check(after[11]["declined.not_zcsock"] - after[7]["declined.not_zcsock"] == 4,
          "connections 9-12 did not decline not_zcsock at their one offer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
