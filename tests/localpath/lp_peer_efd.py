#!/usr/bin/env python3
"""Localpath case "peer_efd" (issue 30, "bounded by the victim"): a hostile
peer offers, as its wake-up descriptor, an eventfd of its own that is
blocking and one short of full, then announces that it sleeps on it.

Up to 2026-11-30 the library fetched the waiter's eventfd and wrote it
to wake the waiter: such a write blocks until someone reads the eventfd,
and the eventfd was the attacker's, so the victim's event loop stopped
inside a send for as long as the attacker liked.  Now the waiter offers
an epoll instance and the writer adds an eventfd of its own to it (efd.c):
an eventfd offered instead is refused (the add fails), nothing is
fetched, and the victim keeps serving.

The victim is an event-loop echo server under the library.  The hostile
client, under the library too (without wake-up descriptors of its own, so
its library never writes those words itself), pairs a connection, writes
its eventfd into its side words (owner: itself, as the header says),
waits in poll() so that the victim rings it with a doorbell and looks at
the words, then writes the wake-up kind into its announcement word and
sends one more byte: the victim's echo claims that announcement.  A plain
client (no library) must then get its echo from the victim within 10 s,
and the victim must have fetched nothing (local.efd_fetched).

    lp_peer_efd.py      (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import select
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import HOSTILE_PRELUDE, Z_SLEEP, echo_victim, start_victim  # noqa: E402

VICTIM = echo_victim(on_quit='print("fetched %d" % stat("local.efd_fetched"), flush=True)',
                     on_bytes=Z_SLEEP)

HOSTILE = HOSTILE_PRELUDE + r"""
port = int(sys.argv[1])
before = set(ring_fds())
c = socket.create_connection(("127.0.0.1", port)); c.settimeout(20)
for b in (b"x", b"y"):
    c.sendall(b)
    if c.recv(1) != b:
        sys.exit("FAIL: hostile: no echo")
new = [fd for fd in ring_fds() if fd not in before]
if len(new) != 1:
    sys.exit("FAIL: hostile: %d new channel memfds (paired %d)" % (len(new), stat("local.paired.connected")))
efd = os.eventfd(0)                     # blocking
os.eventfd_write(efd, 0xfffffffffffffffe)   # one short of full: a write of 1 blocks
m = mmap.mmap(new[0], 4096)
# we are side B (the client): our side words at LP_SIDE_OFF 2048 +
# sizeof(lp_side_t) 76: efd_pid +20, efd_no +24, efd_gen +28
m[2124 + 20:2124 + 32] = struct.pack("iiI", os.getpid(), efd, 77)
c.sendall(b"z")                         # the victim rings us and reads the words
p = select.poll(); p.register(c, select.POLLIN)
p.poll(5000)
if c.recv(1) != b"z":
    sys.exit("FAIL: hostile: no echo after scribbling")
# our announcement word for direction A->B (ctl[0].cons_waiting, offset
# 148): LOCAL_RING_WAIT_EVENTFD (3), then one more byte: its echo claims it
m[148:152] = struct.pack("I", 3)
c.sendall(b"w")
print("armed %d" % stat("local.paired.connected"), flush=True)
sys.stdin.read()
"""


def main():
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"])
    vic, first = start_victim(VICTIM)
    hos = None
    try:
        if not first:
            print("FAIL: the victim never listened")
            return 1
        port = int(first[0])
        hos = subprocess.Popen([sys.executable, "-c", HOSTILE, str(port)],
                               env=dict(env, ZCSOCK_WAKE_EVENTFD="0", ZCSOCK_SPIN="0"),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        r, _, _ = select.select([hos.stdout], [], [], 60)
        line = hos.stdout.readline().split() if r else []
        if line != ["armed", "1"]:
            print("FAIL: the hostile client did not pair and arm: %r" % line)
            return 1
        time.sleep(0.5)                 # the victim's echo of "w" has run
        # an innocent client, without the library, must be served
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        t0 = time.monotonic()
        c.sendall(b"ping")
        try:
            got = c.recv(4)
        except socket.timeout:
            got = b""
        took = time.monotonic() - t0
        if got != b"ping":
            print("FAIL: the victim stopped serving (no echo in %.1f s): its event loop "
                  "is blocked in a write the hostile peer controls" % took)
            return 1
        c.sendall(b"quit")
        out, _ = vic.communicate(timeout=30)
        c.close()
        f = out.split()
        fetched = int(f[1]) if len(f) == 2 else -1
        print("innocent client answered in %.3f s; victim fetched %d wake-up descriptors"
              % (took, fetched))
        if fetched != 0:
            print("FAIL: the victim used the hostile peer's eventfd")
            return 1
        print("PASS")
        return 0
    finally:
        for p in (hos, vic):
            if p and p.poll() is None:
                p.kill()
                p.wait()


if __name__ == "__main__":
    sys.exit(main())
