#!/usr/bin/env python3
"""Localpath case "spin_wake" (SPINNING WAITERS, shim/paths/local/local_ring.h):
a blocking receiver that spins before it sleeps costs its sender no
FUTEX_WAKE for the messages it catches while spinning.

A server under the library receives 2,000 messages of 4 KiB, every byte
checked, from a client process under the library that sends one every
200 us or so (so the receiver waits for each), both ends alone on their
sides (one thread, no fork since pairing):
  - with a fixed spin of 2 ms (ZCSOCK_SPIN_US=2000) the receiver catches
    them spinning (the server's local.spins_paid, at least one message in
    20): the client's local.futex_wakes stays under half of those
    waits (it was one a wait: 683 for 618);
  - with no spin (ZCSOCK_SPIN=0) the receiver sleeps for each: the
    client's wakes are at least half the messages (the count is live).

    lp_spin_wake.py                  (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import subprocess
import sys

N, SIZE = 2000, 4096

SERVER = r"""
import os, socket, subprocess, sys
N, SIZE = %d, %d
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
cli = subprocess.Popen([sys.executable, "-c", CLIENT, str(l.getsockname()[1])],
                       stdout=subprocess.PIPE, text=True)
c, _ = l.accept()
spins0 = stat("local.spins_paid")
for i in range(N):
    want = bytes([i %% 251]) * SIZE
    got = bytearray()
    while len(got) < SIZE:
        b = c.recv(SIZE - len(got))
        if not b:
            sys.exit("FAIL: EOF at message %%d" %% i)
        got += b
    if got != want:
        sys.exit("FAIL: message %%d came different" %% i)
if stat("local.paired.accepted") != 1:
    sys.exit("FAIL: the connection did not pair")
c.sendall(b"k")
out = cli.communicate(timeout=60)[0].split()
if cli.returncode != 0 or len(out) != 1:
    sys.exit("FAIL: the client failed (%%s, %%r)" %% (cli.returncode, out))
print(int(out[0]), stat("local.spins_paid") - spins0)
""" % (N, SIZE)

CLIENT = r'''
import socket, sys, time
N, SIZE = %d, %d
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
w0 = stat("local.futex_wakes")
for i in range(N):
    t = time.perf_counter() + 200e-6
    while time.perf_counter() < t:
        pass
    s.sendall(bytes([i %% 251]) * SIZE)
s.recv(1)
print(stat("local.futex_wakes") - w0)
''' % (N, SIZE)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import CHILD_PRELUDE  # noqa: E402


def run(extra):
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_LOCAL_PAIR_AFTER="0", **extra)
    # (the client's counters through the same stat() as the server's)
    code = CHILD_PRELUDE + "CLIENT = %r\n" % (CHILD_PRELUDE + CLIENT) + SERVER
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    out = r.stdout.split()
    if r.returncode != 0 or len(out) != 2:
        print("FAIL: %s: %s %s" % (extra, r.stdout, r.stderr[-500:]))
        sys.exit(1)
    return int(out[0]), int(out[1])


wakes, spins = run({"ZCSOCK_SPIN_US": "2000"})
print("spinning receiver: %d sender wakes, %d waits ended spinning, %d messages" % (wakes, spins, N))
if spins < N // 20:
    print("FAIL: the receiver spun through only %d waits: the case tests nothing" % spins)
    sys.exit(1)
if wakes > spins // 2:
    print("FAIL: the sender woke a spinning receiver %d times for %d waits it ended spinning"
          % (wakes, spins))
    sys.exit(1)
wakes0, _ = run({"ZCSOCK_SPIN": "0"})
print("sleeping receiver: %d sender wakes" % wakes0)
if wakes0 < N // 2:
    print("FAIL: a receiver that sleeps for each message was woken %d times of %d" % (wakes0, N))
    sys.exit(1)
print("ok spin_wake")
