#!/usr/bin/env python3
"""Localpath case "epoll_nest": an application that nests epoll sets around
a paired connection, two deep or as deep as the kernel allows (five), and
waits on the outermost set.

Two deep (NESTED SETS, shim/shim_epoll.c): the client reads each echo with
a wait on the inner set and one receive, not to EAGAIN, then waits on the
outer set, which only the kernel looks at.  The library must arm the
connection for its next bytes when it reports it, or the outer wait
sleeps through them (it did, up to 2026-11-30: round 1 of 20 waited 5 s).

Five deep (WAKE FDS AND NESTING):
The library puts a wake-up descriptor of its own (an epoll instance,
shim/paths/local/efd.c) in every set holding a paired connection, one level
of nesting below it.  The client here pairs a connection with an echo
server, registers it in set S1 (which then holds the library's instance
too: asserted from /proc/self/fdinfo), and nests S1 in S2, S2 in S3, S3 in
S4, S4 in S5: five levels, which the kernel allows, but six with the
library's instance, which it refuses (ELOOP).  Every epoll_ctl must
succeed as without the library (the library takes its wake-up descriptors
out of the sets and tries again: ready.ep_wake_stripped), and a wait on
the outermost set, with no spinning, must then still report the echo of a
byte sent (no wake-up lost: the connection takes doorbell bytes now).
Run without the library too (ZC_LIB empty), where only the nesting and
the echo are checked.

With "poll", S1 is not nested but waited on by poll() (the same rule).

    lp_epoll_nest.py 2|5|poll     (ZC_LIB names the library, or empty)
Exit 0 pass, 1 fail."""
import os
import subprocess
import sys

SERVER = r"""
import socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
print(l.getsockname()[1], flush=True)
a, _ = l.accept()
try:
    while True:
        b = a.recv(65536)
        if not b:
            break
        a.sendall(b)
except OSError:
    pass
"""

CLIENT = r"""
import ctypes, os, select, socket, sys, time
lib = bool(os.environ.get("LD_PRELOAD"))
def stat(name):
    v = ctypes.c_uint64()
    return v.value if ctypes.CDLL(None).zcsock_stat_get(name.encode(), ctypes.byref(v)) == 0 else -1
def tfds(ep):
    with open("/proc/self/fdinfo/%d" % ep.fileno()) as f:
        return sum(1 for line in f if line.startswith("tfd:"))
c = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); c.settimeout(10)
for i in range(20):                     # paired, and the ring carrying bytes to us
    c.sendall(b"x%d" % i)
    if c.recv(16) != b"x%d" % i:
        sys.exit("FAIL: no echo")
if lib and stat("local.paired.connected") < 1:
    sys.exit("FAIL: the connection did not pair")
c.setblocking(False)
s1 = select.epoll()
s1.register(c.fileno(), select.EPOLLIN)
if lib and tfds(s1) != 2:
    sys.exit("FAIL: S1 holds %d descriptors in the kernel, not the socket and the "
             "library's wake-up descriptor: the case tests nothing" % tfds(s1))
sets = [s1]
polled = sys.argv[2] == "poll"         # S1 waited on by poll(), not nested
levels = 1 if polled else int(sys.argv[2])
for level in range(2, levels + 1):
    e = select.epoll()
    try:
        e.register(sets[-1].fileno(), select.EPOLLIN)
    except OSError as err:
        sys.exit("FAIL: nesting S%d in S%d: %s (the kernel allows five levels)"
                 % (level - 1, level, err))
    sets.append(e)
stripped = stat("ready.ep_wake_stripped") if lib else 0
if lib and levels == 5 and stripped < 1:
    sys.exit("FAIL: nested five deep without taking a wake-up descriptor out "
             "(ready.ep_wake_stripped %d): the case tests nothing" % stripped)
outer = select.poll() if polled else sets[-1]
if polled:
    outer.register(s1.fileno(), select.POLLIN)
for i in range(20):
    t0 = time.time()
    c.sendall(b"ping%d" % i)
    if not outer.poll(5000 if polled else 5):
        sys.exit("FAIL: round %d: the outermost set reported nothing in 5 s" % i)
    got = b""
    while len(got) < 5 and time.time() - t0 < 5:
        if s1.poll(1):
            try:
                got += c.recv(16)
            except BlockingIOError:
                pass
    if got != b"ping%d" % i:
        sys.exit("FAIL: round %d: got %r" % (i, got))
print("ok: %s, stripped %d, 20 echoes through the outermost wait"
      % ("polled" if polled else "nested %d deep" % levels, stripped))
"""


def main():
    lib = os.environ.get("ZC_LIB", "")
    env = dict(os.environ, ZCSOCK_SPIN="0", ZCSOCK_LOCAL_PAIR_AFTER="0")
    env.pop("LD_PRELOAD", None)
    if lib:
        env["LD_PRELOAD"] = lib
    srv = subprocess.Popen([sys.executable, "-c", SERVER], env=env, stdout=subprocess.PIPE,
                           text=True)
    try:
        port = srv.stdout.readline().strip()
        cli = subprocess.run([sys.executable, "-c", CLIENT, port, sys.argv[1]], env=env,
                             capture_output=True, text=True, timeout=60)
        sys.stdout.write(cli.stdout + cli.stderr)
        return 0 if cli.returncode == 0 else 1
    finally:
        srv.kill()
        srv.wait()


if __name__ == "__main__":
    sys.exit(main())
