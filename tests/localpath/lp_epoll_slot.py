#!/usr/bin/env python3
"""Localpath case "epoll_slot": a registration in the engine's last slot.
The readiness engine gives every epoll registration of a claimed socket a
slot (its tag), one after the other; the wake tag of slot 65535 once read
as the set's kick eventfd, so with the ready list (ZCSOCK_EPOLL_SCAN_MAX=0
here) the wake-up eventfd of a connection registered in that slot was
heard as a kick and its registration never looked at again: redis-benchmark
waited for ever for a reply.  The server below registers and unregisters
its accepted (paired) socket 65,535 times, so that its real registration
takes the next slot, then echoes 300 one-byte messages with no spinning
(every wait sleeps and is woken through the wake-up eventfd); the client
checks every byte within a bound.  Both ends under the library.

    lp_epoll_slot.py     (ZC_LIB names the library)
Exit 0 pass, 1 fail, 77 skip (the eventfd never used in three runs)."""
import os
import sys

from lp_util import run_server_client

SERVER = r"""
import ctypes, select, socket, sys
def stat(name):
    v = ctypes.c_uint64()
    return v.value if ctypes.CDLL(None).zcsock_stat_get(name.encode(), ctypes.byref(v)) == 0 else -1
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
print(l.getsockname()[1], flush=True)
a, _ = l.accept()
a.setblocking(False)
ep = select.epoll()
for i in range(65535):                  # slots 0 .. 65534
    ep.register(a.fileno(), select.EPOLLIN)
    ep.unregister(a.fileno())
ep.register(a.fileno(), select.EPOLLIN)
n = 0
while True:
    evs = ep.poll(10)
    if not evs:
        sys.exit("FAIL: server: no event for 10 s after %d messages" % n)
    try:
        b = a.recv(4096)
    except BlockingIOError:
        continue
    if not b:
        break
    a.setblocking(True); a.sendall(b); a.setblocking(False)
    n += len(b)
print("served %d %d %d" % (n, stat("local.paired.accepted"), stat("local.efd_wakes")), flush=True)
"""

CLIENT = r"""
import ctypes, socket, sys
def stat(name):
    v = ctypes.c_uint64()
    return v.value if ctypes.CDLL(None).zcsock_stat_get(name.encode(), ctypes.byref(v)) == 0 else -1
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(10)
for i in range(300):
    c = bytes([i % 256])
    s.sendall(c)
    if s.recv(1) != c:
        sys.exit("FAIL: client: message %d came back different" % i)
s.close()
print("sent 300 %d %d" % (stat("local.paired.connected"), stat("local.efd_wakes")), flush=True)
"""


def main():
    # whether the client wakes the server through its eventfd (the wake-up
    # this case is about) or with doorbell bytes depends on timing: up to
    # three runs; one that used the eventfd decides, none at all is a skip
    for attempt in range(3):
        rc = run_once()
        if rc != 77:
            return rc
    print("SKIP: in three runs the client never woke the server through its wake-up "
          "eventfd (doorbell bytes only): the slot's wake tag was not exercised")
    return 77


def run_once():
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_EPOLL_SCAN_MAX="0",
               ZCSOCK_SPIN="0")
    crc, cout, src, sout, err = run_server_client(SERVER, [], CLIENT, [], env, client_timeout=60)
    if err:
        print("FAIL: %s (a wake-up was lost)" % err)
        return 1
    print("client: %s; server: %s" % (cout.strip(), sout.strip()))
    c, s = cout.split(), sout.split()
    if crc != 0 or src != 0 or len(c) != 4 or len(s) != 4:
        print("FAIL: client exit %d, server exit %d" % (crc, src))
        return 1
    if s[1] != "300" or s[2] != "1" or c[2] != "1":
        print("FAIL: every byte echoed on a paired connection was expected")
        return 1
    if int(c[3]) <= 0:
        print("the client never woke the server through its wake-up eventfd "
              "(local.efd_wakes 0): again")
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
