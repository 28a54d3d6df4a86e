#!/usr/bin/env python3
"""Localpath cases "mailbox/*" (issue 30, items 1 and 2): what another user,
or a same-user process that is not the peer, puts into a process's public
mailbox (\\0zcsock/v1/M/<pid>) must neither corrupt nor stall a hand-over
over SCM_RIGHTS.

A dispatcher under the library accepts TCP connections from a client under
the library (they pair at the dispatcher's first receive) and passes each
to a worker under the library over an AF_UNIX connection; the worker
echoes.
Before each of three connections an attacker acts on the worker's mailbox:

  flood    opens 64 connections to it that bring nothing: the backlog
           (64) still lets the dispatcher's record in, behind them; an
           earlier library read 64 connections per look and never saw it
           (the worker read the doorbell byte 0x00 as data and timed out)
  heavy    opens 16 connections that each hold as many messages of 253
           descriptors as their sender's buffer takes (about 70,000 each):
           an earlier library read them in order, gave up after 1 s and
           read the passed socket as a plain one (its ring bytes stranded);
           the record must be found first, the rest read 100 ms per look
  records  (same user only) posts 30 well-formed records for sockets of
           its own that the worker never receives: an earlier library kept
           16 in a table that then stayed full, and every later hand-over
           was read as a plain socket (the doorbell byte 0x00 as data, the
           client's bytes stranded in the ring)
  late     (same user) connects, and sends a well-formed record only once
           the worker looked at the connection and found nothing (the
           worker runs under strace, its shutdown of that connection held
           back 0.6 s): an earlier fix refused that record as a second
           message, which reset a genuine poster's lingering socket
  linger   passes a TCP socket with SO_LINGER 30 s and unsent bytes (its
           own peer never reads): an earlier library received it and
           closed it, blocking the worker's receive for the 30 s

The attacker is another user (nobody) with "other", this user with "same".
The mailbox is in the user's private directory: another user's every
attempt must be denied (EACCES) and nothing of it reach the worker.  With
"-public" (other-public, same-public) the private directory is made
unusable, so the library falls back to the public abstract name, which
the attacker reaches: the checks above must hold there too.
Every echo must be exact, each connection must be over within 5 s, the
worker must have taken every channel over (local.inherited == 3: the
records were found), and, for linger, the attacker's socket must have been
dropped without the wait (local.mailbox.foreign_fds).

    lp_mailbox.py flood|heavy|records|late|linger other|same[-public]  (ZC_LIB: the library)
Exit 0 pass, 1 fail, 77 skip (late without strace)."""
import array
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROUNDS = 3
HEAVY_CONNS = 16
SO_COOKIE = 57
MBOX_MAGIC = 0x31786f624d637a5a

DISPATCHER = r"""
import os, socket, subprocess, sys, tempfile
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
# the worker connects to a named socket: its credentials name it, whatever
# it runs under (strace)
path = os.path.join(tempfile.mkdtemp(), "w")
u = socket.socket(socket.AF_UNIX); u.bind(path); u.listen(1)
wrap = sys.argv[3:]                     # a command the worker runs under
w = subprocess.Popen(wrap + [sys.executable, sys.argv[1], "worker", path],
                     stdout=subprocess.PIPE, text=True)
a, _ = u.accept()
ready = w.stdout.readline().split()
if not ready or ready[0] != "ready":
    sys.exit("the worker did not start")
print(l.getsockname()[1], ready[1], flush=True)
for i in range(int(sys.argv[2])):
    c, _ = l.accept()
    c.settimeout(10)
    # the first receive sends the offer; the client takes it up at its
    # receive of "a" and says so with "p": paired, then passed on
    if c.recv(1) != b"h":
        sys.exit("no hello")
    c.sendall(b"a")
    if c.recv(1) != b"p":
        sys.exit("no p")
    socket.send_fds(a, [b"x"], [c.fileno()])
    c.close()
a.close()
print(w.stdout.read().strip(), flush=True)
sys.exit(w.wait(timeout=60))
"""

# The workers' helpers (also lp_mailbox_evict.py's): a counter of the
# library's, exactly n bytes of a socket.
WORKER_HELPERS = r"""
import ctypes, os, socket, struct, sys
def stat(name):
    v = ctypes.c_uint64()
    return v.value if ctypes.CDLL(None).zcsock_stat_get(name.encode(), ctypes.byref(v)) == 0 else -1
def exact(s, n):
    b = bytearray()
    while len(b) < n:
        x = s.recv(n - len(b))
        if not x:
            raise EOFError("EOF after %d of %d bytes" % (len(b), n))
        b += x
    return bytes(b)
"""

WORKER = WORKER_HELPERS + r"""
a = socket.socket(socket.AF_UNIX)      # it has a mailbox: it makes AF_UNIX sockets
a.connect(sys.argv[2])
print("ready", os.getpid(), flush=True)
import select, time
worst = 0.0
while True:
    select.select([a], [], [])          # timed: the receive (and its look), not the wait
    t0 = time.monotonic()
    msg, fds, _, _ = socket.recv_fds(a, 16, 4)
    if not msg:
        break
    worst = max(worst, time.monotonic() - t0)
    s = socket.socket(fileno=fds[0])
    s.settimeout(10)
    while True:
        n = struct.unpack("I", exact(s, 4))[0]
        if not n:
            break
        s.sendall(exact(s, n))
    s.close()
print("inherited=%d foreign=%d refused=%d slow=%d recv_ms=%d" % (stat("local.inherited"),
      stat("local.mailbox.foreign_fds"), stat("local.mailbox.refused"),
      stat("local.mailbox.slow"), worst * 1000), flush=True)
"""

# (also lp_mailbox_evict.py's; argv: port [timeout])
CLIENT = r"""
import ctypes, socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])),
                             timeout=float(sys.argv[2]) if len(sys.argv) > 2 else 10)
s.sendall(b"h")
if s.recv(1) != b"a":
    sys.exit("no a")
s.sendall(b"p")
data = bytes((i * 7 + 3) & 255 for i in range(65536))
s.sendall(struct.pack("I", len(data)) + data)
got = bytearray()
while len(got) < len(data):
    x = s.recv(len(data) - len(got))
    if not x:
        sys.exit("EOF after %d bytes" % len(got))
    got += x
if bytes(got) != data:
    first = next(i for i in range(len(got)) if got[i] != data[i])
    sys.exit("echo differs at byte %d (%r)" % (first, bytes(got[first:first + 8])))
s.sendall(struct.pack("I", 0))
v = ctypes.c_uint64()
if ctypes.CDLL(None).zcsock_stat_get(b"local.paired.connected", ctypes.byref(v)) or v.value != 1:
    sys.exit("the client did not pair (local.paired.connected %d)" % v.value)
"""


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


_MBOX_NAMES = {}


def mbox_name(pid):
    """The name of pid's mailbox file, as the library makes it (its pid
    hidden under the user's key: tests/lib/zc_dir.py).  Another user cannot
    compute it (it cannot read the key): an attacker of another user asks
    for it before it leaves our user, as one that learned it somehow."""
    if pid not in _MBOX_NAMES:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
        import zc_dir
        zc_dir.ensure_key()
        _MBOX_NAMES[pid] = zc_dir.mailbox_name(pid)
    return _MBOX_NAMES[pid]


def mbox_addr(pid):
    """pid's mailbox as /proc/net/unix lists it (visible to every user): in
    its user's private directory (<dir>/mbox/<name>, mbox_name), or the
    public \\0zcsock/v1/M/<pid> where it has none; None while not bound."""
    name = "/mbox/" + mbox_name(pid)
    with open("/proc/net/unix") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 8:
                continue
            if parts[7].endswith(name):
                return parts[7]
            if parts[7] == "@zcsock/v1/M/%d" % pid:
                return b"\0" + parts[7][1:].encode()
    return None


def mbox_connect(pid, secs=3):
    """A connection to pid's mailbox; PermissionError at once when its name
    is in a directory closed to us (another user's)."""
    end = time.time() + secs
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            a = mbox_addr(pid)
            if a is None:
                raise FileNotFoundError("no mailbox of %d listed yet" % pid)
            s.connect(a)
            return s
        except PermissionError:
            s.close()
            raise
        except OSError:
            s.close()
            if time.time() > end:
                raise
            time.sleep(0.01)


def public_env(env):
    """env with the private directory made unusable (XDG_RUNTIME_DIR whose
    zcsock is a plain file): the library falls back to the public mailbox
    name, and says so."""
    d = tempfile.mkdtemp()
    open(os.path.join(d, "zcsock"), "w").close()
    return dict(env, XDG_RUNTIME_DIR=d)


def post_record(pid):
    """Post one well-formed record, for a socket of our own (returned: it
    must stay open), to pid's mailbox (also lp_mailbox_evict.py's)."""
    own = socket.socket()
    cookie = struct.unpack("Q", own.getsockopt(socket.SOL_SOCKET, SO_COOKIE, 8))[0]
    memfd = os.memfd_create("squat")
    os.ftruncate(memfd, 4096)
    rec = struct.pack("QQII4Q", MBOX_MAGIC, cookie, 0, 0, 0, 0, 0, 0)
    s = mbox_connect(pid)
    s.sendmsg([rec], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                       array.array("i", [memfd, own.fileno()]).tobytes())])
    s.close()
    os.close(memfd)
    return own


def attack(kind, pid, keep):
    """Act on pid's mailbox; what must stay open goes into keep."""
    if kind == "flood":
        for _ in range(64):
            keep.append(mbox_connect(pid))
    elif kind == "heavy":
        # connections that each hold as many messages of 253 descriptors
        # as their sender's buffer takes: reading one to its end (every
        # descriptor received and dropped) takes tens of milliseconds, 16
        # of them more than a second, and the dispatcher's record queues
        # behind them
        r, w = os.pipe()
        fds = array.array("i", [r] * 253).tobytes()
        sent = 0
        for _ in range(HEAVY_CONNS):
            s = mbox_connect(pid)
            s.setblocking(False)
            try:
                while True:
                    s.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                    sent += 253
            except OSError:
                pass            # full (or, another user, its descriptors in flight at the limit)
            keep.append(s)
        os.close(r)
        os.close(w)
        return sent
    elif kind == "records":
        for _ in range(30):
            keep.append(post_record(pid))
    elif kind == "late":
        # connect now, post later (attacker_main: "send"), while the
        # worker's first look found nothing and its shutdown is held back
        keep.append(mbox_connect(pid))
    elif kind == "linger":
        # a TCP connection whose peer never reads: bytes stay unsent
        l = socket.socket()
        l.bind(("127.0.0.1", 0))
        l.listen(1)
        t = socket.socket()
        t.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        t.connect(l.getsockname())
        t.setblocking(False)
        try:
            while True:
                t.send(b"L" * 65536)
        except BlockingIOError:
            pass
        t.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 30))
        s = mbox_connect(pid)
        s.sendmsg([b"garbage"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                  array.array("i", [t.fileno()]).tobytes())])
        s.close()
        t.close()
        keep.append(l)              # the peer lives on: the bytes stay unsent
    return 0


def attacker_main(kind, who, pid, rounds):
    """Runs as the attacker (setuid nobody for "other"): one attack per line
    read from stdin, "ok" written back; lives until stdin closes."""
    mbox_name(pid)                  # (learned while still of the victim's user)
    if who == "other":
        os.setgid(65534)
        os.setuid(65534)
    keep = []
    for _ in range(rounds):
        if not sys.stdin.readline():
            break
        try:
            sent = attack(kind, pid, keep)
        except PermissionError:
            print("denied", flush=True)     # the mailbox is closed to us
            continue
        print("ok %d" % sent, flush=True)
        if kind == "late":
            sys.stdin.readline()
            own = socket.socket()
            cookie = struct.unpack("Q", own.getsockopt(socket.SOL_SOCKET, SO_COOKIE, 8))[0]
            memfd = os.memfd_create("late")
            rec = struct.pack("QQII4Q", MBOX_MAGIC, cookie, 0, 0, 0, 0, 0, 0)
            try:
                keep[-1].sendmsg([rec], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                          array.array("i", [memfd, own.fileno()]).tobytes())])
            except OSError:
                pass                # too late: the worker had shut it (timing)
            os.close(memfd)
            keep.append(own)
    sys.stdin.readline()            # the test is over


def sweep_main():
    """Case mailbox_sweep: mailbox files of processes that are gone go when
    the next process binds its own, unless someone still listens there
    (another process, or a child holding a dead parent's listener); a stale
    file of one's own pid (an earlier image's) is taken over; the files are
    named by their pid hidden under the user's key (k<8 hex>), which the
    sweep reads back."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from lp_handback import private_dir
    d = private_dir(make=True) + "/mbox"

    def dead_pid():
        k = os.fork()
        if k == 0:
            os._exit(0)
        os.waitpid(k, 0)
        return k

    def bind(name, listen):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.bind(name)
        if listen:
            s.listen(1)
        return s
    gone, held = "%s/%s" % (d, mbox_name(dead_pid())), "%s/%s" % (d, mbox_name(dead_pid()))
    bind(gone, False).close()           # the file stays, no one listens
    keep = bind(held, True)             # still listened on
    # a process that bound its own and left, its child still holding the
    # listener (its records may still come there)
    rd, wr = os.pipe()
    k = os.fork()
    if k == 0:
        s = bind("%s/%s" % (d, mbox_name(os.getpid())), True)
        if os.fork() == 0:
            os.read(rd, 1)              # holds s until told
        os._exit(0)
    os.waitpid(k, 0)
    by_child = "%s/%s" % (d, mbox_name(k))
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"])
    prog = ("import os, socket, sys; a, b = socket.socketpair(); "
            "print(os.getpid(), flush=True); sys.stdin.readline()")
    p = subprocess.Popen([sys.executable, "-c", prog], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    pid = int(p.stdout.readline())
    mine = "%s/%s" % (d, mbox_name(pid))
    listed = mbox_addr(pid)
    p.stdin.close()
    p.wait(timeout=10)
    ok = True
    for cond, msg in ((not os.path.exists(gone), "a dead process's mailbox file stayed"),
                      (os.path.exists(held), "a mailbox file still listened on was removed"),
                      (os.path.exists(by_child), "a dead process's mailbox file its child still "
                       "listens on was removed"),
                      (listed == mine, "the process's mailbox is %r, not %r" % (listed, mine)),
                      # /proc/net/unix shows every user the path: not the pid
                      (listed and not listed.endswith("/%d" % pid) and
                       os.path.basename(listed).startswith("k"),
                       "the mailbox's path %r names its pid %d" % (listed, pid))):
        if not cond:
            ok = False
            print("FAIL: " + msg, flush=True)
    keep.close()
    os.unlink(held)
    os.write(wr, b"x")
    if os.path.exists(by_child):
        os.unlink(by_child)
    # an earlier image's file of the same pid (no listener) is taken over:
    # a process that binds, then execs itself under the library
    prog = ("import os, socket, sys\n"
            "a, b = socket.socketpair()\n"
            "if len(sys.argv) < 2: os.execv(sys.executable, [sys.executable, '-c', "
            "sys.argv[0] if False else open('/proc/self/cmdline').read().split('\\0')[2], 'again'])\n"
            "print(os.getpid(), flush=True); sys.stdin.readline()\n")
    p = subprocess.Popen([sys.executable, "-c", prog], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    pid = int(p.stdout.readline())
    listed = mbox_addr(pid)
    p.stdin.close()
    p.wait(timeout=10)
    if listed != "%s/%s" % (d, mbox_name(pid)):
        ok = False
        print("FAIL: after exec the mailbox is %r (the earlier image's file not taken over)"
              % listed, flush=True)
    if not ok:
        sys.exit(1)
    print("ok mailbox_sweep")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "sweep":
        sweep_main()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        exec(WORKER, {"__name__": "worker"})
        return
    if len(sys.argv) > 1 and sys.argv[1] == "attacker":
        attacker_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    kind, who = sys.argv[1], sys.argv[2]
    public = who.endswith("-public")
    who = who.split("-")[0]
    lib = os.environ["ZC_LIB"]
    env = dict(os.environ, LD_PRELOAD=lib)
    if public:
        env = public_env(env)
    # another user cannot reach a mailbox in the private directory at all
    denied = who == "other" and not public
    plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    wrap = []
    if kind == "late" and not shutil.which("strace"):
        print("skip: no strace (it holds the worker's shutdown back)")
        sys.exit(77)
    if kind == "late":
        # the worker's shutdown of a mailbox connection held back 0.6 s, so
        # that a record sent 0.3 s into the hand-over comes after its
        # first look and before the shutdown
        wrap = ["env", "-u", "LD_PRELOAD", "strace", "-f", "-qq", "-o", "/dev/null",
                "-e", "trace=shutdown", "-e", "inject=shutdown:delay_enter=600000",
                "env", "LD_PRELOAD=" + lib]
    d = subprocess.Popen([sys.executable, "-c", DISPATCHER, os.path.abspath(__file__), str(ROUNDS)]
                         + wrap, env=env, stdout=subprocess.PIPE, text=True)
    port, wpid = d.stdout.readline().split()
    wpid = int(wpid)
    att = subprocess.Popen([sys.executable, os.path.abspath(__file__), "attacker", kind, who,
                            str(wpid), str(ROUNDS)], env=plain, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    ok = True
    in_flight = 0                       # descriptors the attacker left in flight (heavy)
    try:
        for r in range(ROUNDS):
            att.stdin.write("go\n")
            att.stdin.flush()
            said, _, sent = att.stdout.readline().strip().partition(" ")
            in_flight += int(sent or 0)
            if said != ("denied" if denied else "ok"):
                fail("the attacker said %r (round %d), not %r" % (said, r,
                     "denied" if denied else "ok"))
            t0 = time.time()
            c = subprocess.Popen([sys.executable, "-c", CLIENT, port], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if kind == "late":
                time.sleep(0.3)
                att.stdin.write("send\n")
                att.stdin.flush()
            try:
                _, err = c.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                c.kill()
                fail("round %d: the client waited 20 s for its echo" % r)
            took = time.time() - t0
            print("round %d: client exit %d in %.2f s %s" % (r, c.returncode, took,
                                                             err.strip()[-300:]), flush=True)
            if c.returncode != 0:
                ok = False
                print("FAIL: round %d: the echo failed" % r)
            elif took > 5:
                ok = False
                print("FAIL: round %d took %.1f s (the worker's receive waited)" % (r, took))
        rc = d.wait(timeout=30)
        out = d.stdout.read()
    finally:
        try:
            att.stdin.close()
        except OSError:
            pass
        att.wait(timeout=30)
        if d.poll() is None:
            d.kill()
    print("dispatcher exit %d, worker: %s" % (rc, out.strip()), flush=True)
    if rc != 0:
        fail("the worker failed")
    st = dict(kv.split("=") for kv in out.split())
    if int(st["inherited"]) != ROUNDS:
        fail("the worker took over %s of %d channels" % (st["inherited"], ROUNDS))
    if kind == "heavy" and not denied:
        # no receive waited near the 1 s an earlier library gave it (the
        # bound is 100 ms: 1 s is the margin for a loaded machine); with a
        # million descriptors in flight (an attacker of ours that is root:
        # no limit on them), the looks stopped at their bound, connections
        # left held, and still found the record first
        print("attacker's descriptors in flight: %d" % in_flight, flush=True)
        if in_flight >= 1000000 and int(st["slow"]) < 1:
            fail("no look into the mailbox reached its bound: the flood was not heavy")
        if int(st["recv_ms"]) >= 1000:
            fail("a receive of a passed socket took %s ms" % st["recv_ms"])
    if kind == "late" and int(st["refused"]) > 0:
        fail("a record sent after the worker's first look was refused (%s)" % st["refused"])
    if denied and (int(st["foreign"]) or int(st["refused"])):
        fail("another user reached the private mailbox (%s)" % out.strip())
    if kind == "linger" and not denied and int(st["foreign"]) < ROUNDS:
        fail("the attacker's sockets were not dropped as foreign (%s)" % st["foreign"])
    if not ok:
        sys.exit(1)
    print("ok mailbox %s %s%s" % (kind, who, " (public name)" if public else
                                  " (denied)" if denied else ""))


if __name__ == "__main__":
    main()
