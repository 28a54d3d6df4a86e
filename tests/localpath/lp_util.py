"""Helpers of the localpath tier shared by t_local.py and its case modules."""
import ctypes
import errno
import fcntl
import hashlib
import os
import random
import select
import signal
import socket
import stat as stat_mod
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "t_local.py")
NBYTES = int(os.environ.get("T_BYTES", str(1 << 30)))
UNIX_DIR = None


# A server loop (code for `python3 -c`) that answers each length-prefixed
# request (4-byte big-endian length, body) with the header and the body
# reversed until EOF; it leaves the socket open (serve(c)).
SERVE_REVERSED = r"""
def serve(c):
    while True:
        h = b""
        while len(h) < 4:
            b = c.recv(4 - len(h))
            if not b:
                return
            h += b
        n = struct.unpack("!I", h)[0]
        body = b""
        while len(body) < n:
            b = c.recv(n - len(body))
            if not b:
                return
            body += b
        c.sendall(h + body[::-1])
"""


def conversation(port, seed, turns):
    """turns request/answer turns with a SERVE_REVERSED server on a new
    connection, every byte checked."""
    rnd = random.Random(seed)
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    with s:
        for _ in range(turns):
            body = rnd.randbytes(rnd.randrange(1, 3000))
            s.sendall(len(body).to_bytes(4, "big") + body)
            got = recv_exact(s, 4 + len(body))
            check(got[4:] == body[::-1], "an answer came back wrong")


def run_server_client(server_code, server_args, client_code, client_args, env, cenv=None,
                      client_timeout=150):
    """Run python code server_code with server_args (it prints its port
    first), then client_code with the port and client_args.  Returns
    (client returncode, client stdout, server returncode, server stdout,
    error): error is the reason when the server never listened or the
    client ran past client_timeout seconds (None otherwise)."""
    srv = subprocess.Popen([sys.executable, "-c", server_code] + [str(a) for a in server_args],
                           env=env, stdout=subprocess.PIPE, text=True)
    try:
        r, _, _ = select.select([srv.stdout], [], [], 30)
        if not r:
            return None, "", None, "", "the server never listened"
        port = srv.stdout.readline().strip()
        try:
            cli = subprocess.run([sys.executable, "-c", client_code, port] +
                                 [str(a) for a in client_args], env=cenv or env,
                                 stdout=subprocess.PIPE, text=True, timeout=client_timeout)
        except subprocess.TimeoutExpired:
            return None, "", None, "", "the client ran past %d s" % client_timeout
        out, _ = srv.communicate(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
    return cli.returncode, cli.stdout, srv.returncode, out, None


# stat(name) for a child's code: the library's counter name, -1 when the
# library is not loaded (or has no such counter).
STAT = r"""
import ctypes
def stat(name):
    v = ctypes.c_uint64()
    try:
        get = ctypes.CDLL(None).zcsock_stat_get
    except AttributeError:
        return -1           # (without the library)
    return v.value if get(name.encode(), ctypes.byref(v)) == 0 else -1
"""

# recv_exact(s, n) for a child's code: exactly n bytes of s, or exit with
# FAIL at an end of stream before them.
RECV_EXACT = r"""
import sys
def recv_exact(s, n):
    out = bytearray()
    while len(out) < n:
        b = s.recv(min(n - len(out), 1 << 20))
        if not b:
            sys.exit("FAIL: EOF after %d of %d bytes" % (len(out), n))
        out += b
    return bytes(out)
"""

# bounce(s, data) for a client's code: send data, read back as many bytes,
# exit with FAIL unless they are the same.
BOUNCE = RECV_EXACT + r"""
def bounce(s, data):
    s.sendall(data)
    if recv_exact(s, len(data)) != data:
        sys.exit("FAIL: client: a message came back different")
"""


CHILD_PRELUDE = r"""
import ctypes, socket, sys
def stat(name):
    v = ctypes.c_uint64()
    get = ctypes.CDLL(None).zcsock_stat_get
    return v.value if get(name.encode(), ctypes.byref(v)) == 0 else -1
def d(name, v0):
    # how far counter name moved since it read v0
    return stat(name) - v0
def pair_tcp(l, n=1):
    # a TCP connection through listener l, paired by one round trip: its
    # client and server ends; n: the server ends this process has paired
    s = socket.create_connection(l.getsockname())
    c, _ = l.accept()
    s.sendall(b"x"); c.recv(1); c.sendall(b"y"); s.recv(1)
    if stat("local.paired.accepted") != n:
        sys.exit("FAIL: connection %d did not pair" % n)
    return s, c
"""


def run_child(code, timeout=120, pair_after="0"):
    """Run python code in a child process under the library (ZC_LIB),
    pairing at once (pair_after: ZCSOCK_LOCAL_PAIR_AFTER), after CHILD_PRELUDE (stat(name): a counter of the
    child's, -1 when there is none; d(name, v0): its move since it read
    v0; pair_tcp(listener, n): a paired TCP
    connection's two ends), and echo what it printed.  Returns 0
    when it exited with 0, else 1 (a case's exit status)."""
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_LOCAL_PAIR_AFTER=pair_after)
    r = subprocess.run([sys.executable, "-c", CHILD_PRELUDE + code], env=env,
                       capture_output=True, text=True, timeout=timeout)
    sys.stdout.write(r.stdout + r.stderr)
    return 0 if r.returncode == 0 else 1


def fail(msg):
    sys.stderr.write("FAIL: %s\n" % msg)
    sys.stderr.flush()
    os._exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from zc_stat import zc_stat  # noqa: E402,F401  (the cases import it from here)


def paired():
    return (zc_stat("local.paired.accepted") or 0) + (zc_stat("local.paired.connected") or 0) + \
        (zc_stat("local.inherited") or 0) > 0


def pattern(seed, n=1 << 20):
    return random.Random(seed).randbytes(n)


# --- streaming helpers ------------------------------------------------------

def send_stream(s, seed, total, sizes=(1, 7, 100, 4096, 65536, 1 << 20, 300001)):
    """Send total bytes of the seed's pattern in mixed sizes, then its sha256."""
    blk = pattern(seed)
    blk2 = memoryview(blk + blk)
    rnd = random.Random(seed + 1)
    h = hashlib.sha256()
    off = 0
    while off < total:
        n = min(rnd.choice(sizes), total - off, len(blk))
        part = blk2[off % len(blk):off % len(blk) + n]
        h.update(part)
        s.sendall(part)
        off += n
    s.sendall(h.digest())


def recv_stream(s, total):
    """Receive total bytes + the sender's sha256 and compare."""
    h = hashlib.sha256()
    buf = bytearray(1 << 20)
    mv = memoryview(buf)
    rnd = random.Random(7)
    got = 0
    while got < total:
        want = min(rnd.choice((1, 13, 4096, 65536, 1 << 20)), total - got)
        n = s.recv_into(mv[:want])
        check(n > 0, "stream ended early at %d of %d" % (got, total))
        h.update(mv[:n])
        got += n
    digest = recv_exact(s, 32)
    check(digest == h.digest(), "sha256 mismatch after %d bytes" % total)


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        check(b, "EOF after %d of %d bytes" % (len(out), n))
        out += b
    return out


def read_all(fd):
    """Everything a pipe's read end gives until EOF."""
    out = b""
    while True:
        b = os.read(fd, 65536)
        if not b:
            return out
        out += b


def expect_eof(s):
    check(s.recv(10) == b"", "expected EOF")


def fionread(s):
    b = fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0")
    return struct.unpack("i", b)[0]


def wait_fionread(s, n, secs=5, settle=None):
    """Wait until s has n bytes unread (FIONREAD), at most secs; with
    settle, also return once some are there and none came for settle
    seconds (a kernel socket whose buffer holds less than n)."""
    end = time.time() + secs
    last, since = -1, time.time()
    while time.time() < end:
        got = fionread(s)
        if got >= n:
            return got
        if got != last:
            last, since = got, time.time()
        elif settle is not None and got > 0 and time.time() - since >= settle:
            return got
        time.sleep(0.005)
    return fionread(s)



def c_exec(c):
    for i in range(20):
        msg = bytes([65 + i]) * (1 << i)
        c.sendall(struct.pack("I", len(msg)) + msg)
        check(recv_exact(c, len(msg)) == msg, "echo %d" % i)
    c.sendall(struct.pack("I", 0))
    expect_eof(c)




# --- the hostile-peer cases (lp_peer_words, lp_peer_efd, lp_lock_self) --------

HOSTILE_PRELUDE = r"""
import ctypes, mmap, os, select, socket, struct, sys, time
def stat(name):
    v = ctypes.c_uint64()
    return v.value if ctypes.CDLL(None).zcsock_stat_get(name.encode(), ctypes.byref(v)) == 0 else -1
def ring_fds():
    # the channel memfds this process holds
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if "zcsock-ring" in os.readlink("/proc/self/fd/" + name):
                out.append(int(name))
        except OSError:
            pass
    return out
"""

_ECHO_VICTIM = r"""
import ctypes, fcntl, os, select, socket, sys, threading, time
def stat(name):
    v = ctypes.c_uint64()
    return v.value if ctypes.CDLL(None).zcsock_stat_get(name.encode(), ctypes.byref(v)) == 0 else -1
%(setup)s
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(64)
print(l.getsockname()[1], %(announce)s flush=True)
ep, conns = select.epoll(), {}
ep.register(l.fileno(), select.EPOLLIN)
def drop(fd):
    ep.unregister(fd); conns.pop(fd).close()
end = time.time() + 120
while time.time() < end:
    for fd, ev in ep.poll(1):
        if fd == l.fileno():
            a, _ = l.accept(); a.setblocking(False)
            conns[a.fileno()] = a; ep.register(a.fileno(), select.EPOLLIN)
            continue
        a = conns[fd]
        try:
            b = a.recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            b = b""
        if b == b"quit":
%(on_quit)s
            sys.exit(0)
        if not b:
            drop(fd); continue
%(on_bytes)s
        try:
            a.setblocking(True); a.sendall(b); a.setblocking(False)
        except OSError:
            drop(fd)
sys.exit("FAIL: victim: never told to quit")
"""


def echo_victim(setup="", announce="", on_quit="", on_bytes=""):
    """Python code of the victim of the hostile-peer cases: an event-loop
    echo server (one epoll thread) that echoes each receive with a blocking
    send.  setup runs first; its first line printed is its port, then the
    expressions in announce (a comma-separated list, or empty); on_quit
    runs when a client sends b"quit" (it prints what the case reads), then
    it exits 0; on_bytes runs with the bytes b received before each echo
    (b"z": the case's hostile peer sleeps in poll(), so the echo rings it).
    Statements are written at no indentation."""
    import textwrap
    return _ECHO_VICTIM % {
        "setup": setup,
        "announce": (announce + ",") if announce else "",
        "on_quit": textwrap.indent(on_quit or "pass", " " * 12),
        "on_bytes": textwrap.indent(on_bytes or "pass", " " * 8),
    }


Z_SLEEP = 'if b == b"z":\n    time.sleep(0.3)             # the peer is asleep in poll(): we ring it\n'


def start_victim(code, *args):
    """Start victim code (echo_victim) under the library (ZC_LIB) with args:
    (the process, the words of its first line), or (the process, None)
    when it printed nothing in 20 s."""
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"])
    vic = subprocess.Popen([sys.executable, "-c", code] + [str(a) for a in args], env=env,
                           stdout=subprocess.PIPE, text=True)
    r, _, _ = select.select([vic.stdout], [], [], 20)
    return vic, (vic.stdout.readline().split() if r else None)
