#!/usr/bin/env python3
"""Localpath cases "subreaper/*" (issue 30, item 8): the library's pump
processes are never reaped by, or reported to, anyone but the library.

This process makes itself a child subreaper (PR_SET_CHILD_SUBREAPER, as
systemd, tini or a container's init do), runs one localpath case whose
hand-back starts a pump (a closed peer's lingering socket, an idle peer's
ring) in a process that goes on under the library, waits for it, and then
counts every other process it gets to reap within 3 s: orphans re-parented
to it.  An earlier library made its pumps grandchildren re-parented at once
to the nearest subreaper, whose wait() saw one per hand-back (and a
container whose init never reaps kept their zombies).  Now they are direct
children without an exit signal, reaped by the library: none may arrive.
The case must also have made a pump (its own check of local.linger_pumps or
local.peer_pumps), or this tests nothing.

    lp_subreaper.py CMD...   (the case's command line)
Exit 0 pass, 1 fail, the case's own code when it failed."""
import ctypes
import errno
import os
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("FAIL: prctl(PR_SET_CHILD_SUBREAPER): errno %d" % ctypes.get_errno())
        sys.exit(1)
    case = subprocess.Popen(sys.argv[1:])
    rc = case.wait(timeout=120)
    if rc != 0:
        print("FAIL: the case itself failed (exit %d)" % rc)
        sys.exit(rc if 0 < rc < 128 else 1)
    orphans = []
    end = time.time() + 3
    while time.time() < end:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break                   # nobody left, running or not
        if pid == 0:
            time.sleep(0.05)        # one still running: it may end and come here
            continue
        orphans.append((pid, st))
    try:
        still = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        still = None
    print("reaped %d orphans %r; still running: %r" % (len(orphans), orphans, still))
    if orphans or still:
        print("FAIL: processes of the library's reached the subreaper")
        sys.exit(1)
    print("ok subreaper")


if __name__ == "__main__":
    sys.exit(main())
