#!/usr/bin/env python3
"""Localpath case "connect_failed": a non-blocking connect to a zcsock
listener (so it announces) whose listener closes before accepting it: the
kernel resets the queued connection, the first data call fails with
ECONNRESET as without the library, and the decline is counted as
local.declined.connect_failed (the application's connect failed), not as
local.declined.error (a failure of the library's own).  Re-runs itself
under the library (ZC_LIB); exit 0 pass, 1 fail."""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import check, zc_stat  # noqa: E402


def child():
    check(zc_stat("sockets.created") is not None, "the library is not loaded")
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.socket()
    c.setblocking(False)
    rc = c.connect_ex(ls.getsockname())
    check(rc in (0, 115), "connect_ex gave %d" % rc)
    time.sleep(0.1)                 # queued, never accepted
    ls.close()                      # the kernel resets it
    time.sleep(0.1)
    try:
        c.send(b"x")
        fail_msg = "a send on a reset connection succeeded"
    except OSError as e:
        fail_msg = None if e.errno in (104, 32) else "send failed with errno %d" % e.errno
    check(fail_msg is None, fail_msg or "")
    check(zc_stat("local.declined.connect_failed") == 1,
          "local.declined.connect_failed is %s" % zc_stat("local.declined.connect_failed"))
    check(not zc_stat("local.declined.error"),
          "local.declined.error is %s" % zc_stat("local.declined.error"))
    print("connect_failed: reset before accept, declined connect_failed, no error counted")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        sys.exit(child())
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"])
    sys.exit(subprocess.run([sys.executable, os.path.abspath(__file__), "child"], env=env,
                            timeout=60).returncode)
