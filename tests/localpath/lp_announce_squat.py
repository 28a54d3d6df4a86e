#!/usr/bin/env python3
"""Localpath case "announce_squat/*" (issue 30, item 7): a squatter binds
the announcement names of a client's connections before the client
connects, as well as it can know them.  Abstract names are public: anyone
may bind one first.  So where the user has a private directory the names
carry a keyed hash of the socket cookie (\\0zcsock/v2/C/<16 hex>, the key in
<private dir>/key, 0600), and only the public fallback is the cookie itself
(\\0zcsock/v1/C/<cookie>, where there is no private directory).

  other         another user: it cannot read the key (asserted), binds the
                public names of the cookies, and the connections pair
                anyway (the library of before: never);
  same          a same-user process that is not the peer reads the key and
                binds the keyed names: the connections must not pair, must
                say why (local.declined.squatted) with one notice for the
                process however many connections meet a squatter;
  other-public  client and server without a private directory: another
                user binds the public names, as in "same".
Every byte must arrive, and the squatter must get nothing (the server
connects to the name it finds, sees another owner and leaves: no byte, no
descriptor).

A server and a client under the library; the client makes two sockets,
reports their cookies, the squatter binds both names, then the client
connects both and echoes 256 KiB on each.

    lp_announce_squat.py other|same|other-public      (ZC_LIB: the library)
Exit 0 pass, 1 fail."""
import os
import socket
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LIB_DIR = os.path.join(HERE, "..", "lib")
sys.path.insert(0, HERE)
import lp_mailbox  # noqa: E402  (public_env)

SO_COOKIE = 57
N = 2

SERVER = r"""
import socket, sys, threading
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
print(l.getsockname()[1], flush=True)
def serve(c):
    with c:
        c.sendall(b"+")     # first: its offer goes before it (a client pairs when it reads it)
        while True:
            b = c.recv(65536)
            if not b:
                return
            c.sendall(b)
ts = []
for _ in range(int(sys.argv[1])):
    c, _ = l.accept()
    t = threading.Thread(target=serve, args=(c,)); t.start(); ts.append(t)
for t in ts:
    t.join(30)
"""

CLIENT = r"""
import ctypes, socket, struct, sys
def stat(name):
    v = ctypes.c_uint64()
    return v.value if ctypes.CDLL(None).zcsock_stat_get(name.encode(), ctypes.byref(v)) == 0 else -1
ss = [socket.socket() for _ in range(int(sys.argv[2]))]
print(" ".join(str(struct.unpack("Q", s.getsockopt(socket.SOL_SOCKET, 57, 8))[0]) for s in ss), flush=True)
sys.stdin.readline()                    # the names are taken now
data = bytes((i * 13 + 1) & 255 for i in range(256 << 10))
for s in ss:
    s.settimeout(20)
    s.connect(("127.0.0.1", int(sys.argv[1])))
    if s.recv(1) != b"+":
        sys.exit("no greeting")
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got = bytearray()
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    if bytes(got) != data:
        sys.exit("echo differs (%d of %d bytes)" % (len(got), len(data)))
    s.close()
print("squatted=%d error=%d paired=%d" % (stat("local.declined.squatted"),
      stat("local.declined.error"), stat("local.paired.connected")), flush=True)
"""

SQUATTER = r"""
import os, socket, sys
sys.path.insert(0, sys.argv[2])
import zc_dir
victim_dir = zc_dir.private_dir()
if sys.argv[1] == "other":
    os.setgid(65534); os.setuid(65534)
# the names as well as the squatter can know them: a same-user process
# computes them as the library does (keyed where there is a key); another
# user cannot read the key (checked below), and binds the public ones
names = [None if sys.argv[1] == "other" else zc_dir.rendezvous_name("C", int(c))
         for c in sys.argv[3:]]
if sys.argv[1] == "other":
    try:
        open(victim_dir + "/key", "rb").read()
        print("the victim's key is readable", flush=True)
    except OSError:
        pass
ls = []
for c, n in zip(sys.argv[3:], names):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(n or b"\0zcsock/v1/C/%016x" % int(c))
    s.listen(8)
    s.setblocking(False)
    ls.append(s)
print("bound", flush=True)
sys.stdin.readline()
got = b""
for s in ls:
    try:
        while True:
            a, _ = s.accept()
            a.setblocking(False)
            try:
                msg, fds, _, _ = socket.recv_fds(a, 4096, 16)
                got += msg + b"%d fds" % len(fds) if (msg or fds) else b""
            except BlockingIOError:
                pass
    except BlockingIOError:
        pass
print("got=%r" % got, flush=True)
"""


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def main():
    who = sys.argv[1]
    public = who.endswith("-public")
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"])
    plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if public:
        env = lp_mailbox.public_env(env)
        plain = dict(plain, XDG_RUNTIME_DIR=env["XDG_RUNTIME_DIR"])
    # only a key no other user can read keeps the names from them
    blocked = who != "other"
    srv = subprocess.Popen([sys.executable, "-c", SERVER, str(N)], env=env, stdout=subprocess.PIPE,
                           text=True)
    port = srv.stdout.readline().strip()
    cli = subprocess.Popen([sys.executable, "-c", CLIENT, port, str(N)],
                           env=dict(env, ZCSOCK_DEBUG="1"),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    cookies = cli.stdout.readline().split()
    sq = subprocess.Popen([sys.executable, "-c", SQUATTER, who.split("-")[0], LIB_DIR] + cookies,
                          env=plain,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    said = sq.stdout.readline().strip()
    if said != "bound":
        fail("the squatter could not bind (%s)" % said)
    try:
        out, err = cli.communicate("go\n", timeout=60)
    except subprocess.TimeoutExpired:
        cli.kill()
        fail("the client hung")
    came, _ = sq.communicate("done\n", timeout=30)
    srv.wait(timeout=30)
    print("client exit %d: %s; squatter: %s" % (cli.returncode, out.strip(), came.strip()))
    notices = [l for l in err.splitlines() if "announcement name" in l]
    for l in err.splitlines()[-int(os.environ.get("T_LINES", "5")):]:
        print("  client: " + l)
    if cli.returncode != 0:
        fail("the client failed")
    st = dict(kv.split("=") for kv in out.split())
    if blocked:
        if int(st["squatted"]) != N:
            fail("local.declined.squatted is %s, not %d (error: %s)" %
                 (st["squatted"], N, st["error"]))
        if int(st["paired"]) != 0:
            fail("a connection paired through a squatted name")
        if len(notices) != 1:
            fail("%d notices of the squat, not one" % len(notices))
    else:
        if int(st["paired"]) != N or int(st["squatted"]) != 0 or notices:
            fail("another user's squat of the public names kept connections from pairing "
                 "(paired %s of %d, squatted %s, %d notices)" %
                 (st["paired"], N, st["squatted"], len(notices)))
    if came.strip() != "got=b''":
        fail("the squatter got something (%s)" % came.strip())
    print("ok announce_squat %s" % who)


if __name__ == "__main__":
    main()
