#!/usr/bin/env python3
"""Localpath case "remote": a destination on another host, shadowed here by
a local listener under the library on the same port (0.0.0.0:P), so the
client's check before connect() finds a zcsock listener and announces.
Once connected, the server end is not in this namespace: the client must
decline (local.declined.not_local), withdraw its announcement and carry
every byte over the kernel (issue 11: a non-blocking connect used to skip
that check, leaving the announcement up for the connection's life).

    lp_remote.py blocking|nonblock      (as root: makes a network namespace
                                         joined by a veth pair; else skip)

The "remote host" is a network namespace (10.213.78.2, plain echo server);
the client and the shadowing listener run in this namespace with the
library.  With a non-blocking connect the announcement is up until the
first data call (that proves the shadow worked), and gone after it.
Exit 0 pass, 1 fail, 77 skip."""
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import check, fail, pattern, recv_exact, zc_stat  # noqa: E402

HOST, PEER, PORT = "10.213.78.1", "10.213.78.2", 24118
NBYTES = 4 << 20


def announcements():
    """This process's announcement sockets (abstract @zcsock/v2/C/..., keyed,
    or @zcsock/v1/C/... without a private directory)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    n = 0
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            parts = line.split()
            if len(parts) >= 8 and parts[6] in inodes and \
                    parts[7].startswith(("@zcsock/v1/C", "@zcsock/v2/C")):
                n += 1
    return n


def client(mode):
    check(zc_stat("sockets.created") is not None, "the library is not loaded in the client")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if mode == "nonblock":
        s.setblocking(False)
        rc = s.connect_ex((PEER, PORT))
        check(rc in (0, 115), "connect_ex gave %d" % rc)   # EINPROGRESS
        _, w, _ = select.select([], [s], [], 10)
        check(w, "the non-blocking connect did not complete in 10 s")
        check(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0, "connect failed")
        # before the first data call: announced (the shadowing listener made
        # the check before connect() pass), not yet checked
        check(announcements() == 1, "no announcement after the connect: %d (the case "
              "tests nothing)" % announcements())
        s.settimeout(20)
    else:
        s.connect((PEER, PORT))     # blocking (a timeout would make it non-blocking)
        s.settimeout(20)
    data = pattern(7, NBYTES)
    # the first data call (it makes the check), then the rest from a thread
    # while this one reads the echo: a client that sent all 4 MiB before
    # reading could fill both ends' buffers (its receive buffer grows only
    # while it reads) and stall the echo
    sent = s.send(data[:65536])
    check(sent > 0, "the first send sent nothing")
    check(announcements() == 0, "the announcement is still up after the first send")
    check(zc_stat("local.declined.not_local") == 1,
          "local.declined.not_local is %s" % zc_stat("local.declined.not_local"))
    errs = []

    def rest():
        try:
            s.sendall(data[sent:])
        except OSError as e:
            errs.append(e)
    t = threading.Thread(target=rest)
    t.start()
    got = recv_exact(s, NBYTES)
    t.join(30)
    check(not t.is_alive() and not errs, "sending the rest failed: %s" % errs)
    check(got == data, "the echo differs from what was sent")
    s.close()
    paired = (zc_stat("local.paired.connected") or 0) + (zc_stat("path.local.send_bytes") or 0)
    check(paired == 0, "the connection took the local path")
    print("remote/%s: declined not_local, announcement withdrawn, %d bytes echoed" % (mode, NBYTES))
    return 0


ECHO = r"""
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(1); l.settimeout(30)
print("listening", flush=True)
c, _ = l.accept(); c.settimeout(30)
while True:
    b = c.recv(1 << 16)
    if not b:
        break
    c.sendall(b)
"""

SHADOW = r"""
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", int(sys.argv[1]))); l.listen(1)
print("listening", flush=True)
sys.stdin.read()
"""


def sh(*args):
    return subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30)


def need(cond, msg):
    """check() for the orchestrator: raises, so that the namespace goes."""
    if not cond:
        raise RuntimeError(msg)


def main(mode):
    if os.geteuid() != 0:
        print("SKIP: needs root for a network namespace")
        return 77
    lib = os.environ["ZC_LIB"]
    ns, va, vb = "zclpr%d" % os.getpid(), "zclpr%da" % os.getpid(), "zclpr%db" % os.getpid()
    procs = []
    if sh("ip", "netns", "add", ns).returncode:
        print("SKIP: cannot make a network namespace")
        return 77
    try:
        for cmd in (["ip", "link", "add", va, "type", "veth", "peer", "name", vb],
                    ["ip", "link", "set", vb, "netns", ns],
                    ["ip", "addr", "add", HOST + "/24", "dev", va],
                    ["ip", "link", "set", va, "up"],
                    ["ip", "-n", ns, "addr", "add", PEER + "/24", "dev", vb],
                    ["ip", "-n", ns, "link", "set", vb, "up"],
                    ["ip", "-n", ns, "link", "set", "lo", "up"]):
            r = sh(*cmd)
            need(r.returncode == 0, "%s: %s" % (" ".join(cmd), r.stderr.decode().strip()))
        plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        withlib = dict(plain, LD_PRELOAD=lib)
        remote = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", ECHO, PEER,
                                   str(PORT)], env=plain, stdout=subprocess.PIPE)
        procs.append(remote)
        shadow = subprocess.Popen([sys.executable, "-c", SHADOW, str(PORT)], env=withlib,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        procs.append(shadow)
        for p, who in ((remote, "remote echo server"), (shadow, "shadowing listener")):
            r, _, _ = select.select([p.stdout], [], [], 20)
            need(r and p.stdout.readline().startswith(b"listening"), who + " never listened")
        c = subprocess.run([sys.executable, os.path.abspath(__file__), "client", mode],
                           env=withlib, timeout=60)
        need(c.returncode == 0, "client exited %d" % c.returncode)
        return 0
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        sys.stderr.write("FAIL: %s\n" % e)
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
            for f in (p.stdin, p.stdout):
                if f:
                    f.close()
        sh("ip", "link", "del", va)
        sh("ip", "netns", "del", ns)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "client":
        sys.exit(client(sys.argv[2]))
    if len(sys.argv) != 2 or sys.argv[1] not in ("blocking", "nonblock"):
        fail("usage: lp_remote.py blocking|nonblock")
    sys.exit(main(sys.argv[1]))
