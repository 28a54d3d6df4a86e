#!/usr/bin/env python3
"""Tier "live": `zcsock stat` reads running programs under the library
(issue 34).  One case per run:

  stream     a paired streaming pair: listed by `zcsock stat`; two JSON reads
             a moment apart (validated against the schema below) show
             path.local.send_bytes moving; --watch prints it with a rate
  threads    a process that starts a thread before its first socket, then
             streams on a paired connection and sleeps: its counters are
             live (counters_live, exact byte count) without asking it
  top        `zcsock top` (not a terminal: screens one after another) shows
             the stream pair with its paired ends and ring bytes per second
  conns      --conns: a paired connection on the ring with its bytes and
             addresses (4 MiB sends: exchange=unavailable where shared memory
             has no 2 MiB pages, path=exchange with the bytes lent where it
             has), one to a server without the library on the kernel with
             why=declined.not_zcsock
  many       a server under the library holding 10,000 connections:
             --conns lists all 10,001 sockets with their addresses (the
             time it took is printed, not asserted)
  redis      redis-server under the library while redis-benchmark (under the
             library) runs: its connections paired and its calls move
  mpi        an MPI job over TCP (make bench's ping-pong, two ranks, mpiexec
             under the library): both ranks listed with paired connections,
             their ring bytes moving, --conns naming the ring
  fork       a server that forks a child per connection: each process its
             own file and counts (the child's bytes are not its parent's)
  fork_short a forking server's children that neither make a socket nor
             pair (killed 30 ms after the fork, busy in the library until
             then) make no file, and
             children that exit leave no mailbox name behind (each paid a
             file, a mailbox and a sweep of both directories before)
  shm_small  in a mount namespace whose /dev/shm is a 64 MiB tmpfs (a
             container's): the file goes to /tmp/zcsock-UID, and zcsock stat
             run there finds it (root: unshare -m, else a skip)
  shm_full   in a mount namespace whose /dev/shm (1 GiB, a private
             directory there) has 52 KiB left: the file (412 KiB, reserved
             whole: a page taken at a count's or a reader's first touch would
             be a SIGBUS on a full tmpfs) is not made, which the process says
             once, and 40 threads then count 200 sockets exactly, the process
             unharmed (root, else a skip)
  exit       the file goes at exit(), at _exit(), at exec; one left by
             SIGKILL is removed (and said) by the next `zcsock stat`, or
             by the next process to publish
  scribble   another process of this user overwrites every offset and count
             in the file's header and the store's aux count, and forges
             requests for a second: the process never trusts them (it ran
             on, exited 0)
  off        ZCSOCK_LIVE=0: nothing published; `zcsock stat PID` says so, 1
  other      another user (nobody) can neither list, read nor open it
  private    a directory another user made first is refused: the library
             publishes nothing there, `zcsock stat` says why
  advise     a client under the library whose server runs without it gets
             [peer_without_library] with its counter, live and in its exit
             report; the stream pair (no such decline) gets no advice
  advise_untracked  a process (root) that raises its hard descriptor limit
             after start and sends on a descriptor beyond the library's
             table gets [untracked] with its counters, and no other rule
  advise_xchg  4 MiB sends on a paired connection: [exchange_unavailable]
             exactly when the process counted page exchange unavailable (no
             2 MiB shared pages), never where it lends
  xchg       a paired pair whose 2 MiB sends page exchange lends (t_advise
             placed, shmem THP advise as root): --conns shows the sending
             end on path exchange with its bytes lent, and the lent bytes
             move between two reads; every byte checked by the program
  advise_pages  each page-exchange rule fires on the program built for it
             and on no other: [not_placed] on sends from static memory,
             [unaligned] on 2.5 MiB sends from 1 MiB into a placed block,
             [exchange_unavailable] on whole-unit sends with shmem THP
             never; the advice applied (placed, aligned sends; shmem THP
             advise) gets no advice and moves the connection to exchange
  advise_fd  a process whose paired connections reach a quarter of its
             descriptor limit (128) gets [fd_limit], and no other rule; the
             advice applied (a limit of 4096) pairs all 40 connections

    t_live.py CASE   (ZC_BUILD: the build directory, ZC_LIB: the library)
Exit 0 pass, 1 fail, 77 skip."""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import zc_dir  # noqa: E402
from zc_dir import private_dir, shm_base  # noqa: E402

BUILD = os.environ["ZC_BUILD"]
LIB = os.environ["ZC_LIB"]
ZCSOCK = os.path.join(BUILD, "zcsock")
ENV = dict(os.environ, LD_PRELOAD=LIB)
ENV.pop("ZCSOCK_LOCAL_PAIR_AFTER", None)     # the default, as users run it
PLAIN = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}

SCHEMA = {"pid": int, "command": str, "version": str, "counters_live": bool,
          "modules_age_s": (int, float), "counters": dict}

# A connection s to an echo-one-byte server thread of the same process.
LOOPBACK_PAIR = r"""
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
def srv():
    c, _ = l.accept()
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        c.sendall(b[:1])
threading.Thread(target=srv, daemon=True).start()
s = socket.socket()
s.connect(l.getsockname())
"""

PAIR = r"""
import os, socket, sys, threading, time
if os.environ.get("T_AS_NOBODY"):       # before the first socket: published as nobody
    os.setgid(65534)
    os.setuid(65534)
""" + LOOPBACK_PAIR + r"""
print(os.getpid(), flush=True)
end = time.time() + float(sys.argv[1])
buf = b"x" * 65536
while time.time() < end:
    s.sendall(buf)
    s.recv(1)
s.close()
how = sys.argv[2] if len(sys.argv) > 2 else "exit"
if how == "_exit":
    os._exit(0)
if how == "exec":
    os.execv("/bin/sleep", ["sleep", "1"])
if how == "hang":
    time.sleep(60)
"""


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def live_dir(env=None):
    return private_dir(env)


def stat(*args, as_nobody=False, timeout=30):
    cmd = [ZCSOCK, "stat"] + [str(a) for a in args]
    pre = None
    if as_nobody:
        def pre():
            os.setgid(65534)
            os.setuid(65534)
    r = subprocess.run(cmd, env=dict(PLAIN, XDG_RUNTIME_DIR="") if as_nobody else PLAIN,
                       capture_output=True, text=True, timeout=timeout, preexec_fn=pre)
    return r.returncode, r.stdout, r.stderr


def stat_json(pid):
    rc, out, err = stat(pid, "--json")
    check(rc == 0, "zcsock stat %d --json: exit %d %s" % (pid, rc, err.strip()))
    d = json.loads(out)
    for k, t in SCHEMA.items():
        check(isinstance(d.get(k), t), "JSON field %s missing or not %r: %r" % (k, t, d.get(k)))
    check(d["pid"] == pid, "JSON pid %r" % d["pid"])
    for k, v in d["counters"].items():
        check(isinstance(v, int) and v >= 0, "counter %s = %r" % (k, v))
    return d


def start_pair(secs, how="exit", env=ENV):
    p = subprocess.Popen([sys.executable, "-c", PAIR, str(secs), how], env=env,
                         stdout=subprocess.PIPE, text=True)
    pid = int(p.stdout.readline())
    return p, pid


def wait_counter(pid, key, least, secs=10, late=False):
    """late: the process may not have published yet (a fork child publishes
    at its first socket or pairing)."""
    end = time.time() + secs
    while time.time() < end:
        if late and not os.path.exists(os.path.join(live_dir(), str(pid))):
            time.sleep(0.05)
            continue
        d = stat_json(pid)
        if d["counters"].get(key, 0) >= least:
            return d
        time.sleep(0.1)
    fail("%s of pid %d never reached %d" % (key, pid, least))


def case_stream():
    p, pid = start_pair(6)
    try:
        d1 = wait_counter(pid, "path.local.send_bytes", 1 << 20)
        rc, out, _ = stat()
        check(rc == 0 and any(line.split()[:1] == [str(pid)] for line in out.splitlines()),
              "zcsock stat does not list pid %d:\n%s" % (pid, out))
        rc, out, _ = stat("--json")
        lst = json.loads(out)
        check(any(e["pid"] == pid and e["paired"] >= 2 and e["local_bytes"] > 0 for e in lst),
              "the JSON list lacks pid %d paired: %r" % (pid, lst))
        time.sleep(0.3)
        d2 = stat_json(pid)
        a, b = d1["counters"]["path.local.send_bytes"], d2["counters"]["path.local.send_bytes"]
        check(b > a, "path.local.send_bytes did not move between two reads (%d, %d)" % (a, b))
        check(d2["counters"].get("local.paired.accepted") == 1 and
              d2["counters"].get("local.paired.connected") == 1,
              "the pair's connection is not counted paired on both ends: %r" % d2["counters"])
        check(0 <= d2["modules_age_s"] < 5, "the modules' counters are %r s old" %
              d2["modules_age_s"])
        rc, out, err = stat(pid, "--watch", "0.3", "--count", "2")
        check(rc == 0 and out.count("path.local.send_bytes") == 2 and "/s" in out,
              "--watch: %d %s %s" % (rc, out, err))
        rc, out, _ = stat(pid)
        check(rc == 0 and "\nlocal\n" in out and "local.paired.accepted" in out, out)
        print("read pid %d: %d then %d bytes sent through the ring" % (pid, a, b))
    finally:
        p.kill()
        p.wait()


THREADED = r"""
import os, socket, sys, threading, time
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()   # before any socket
""" + LOOPBACK_PAIR + r"""
buf = b"x" * 65536
for i in range(64):
    s.sendall(buf)
    s.recv(1)
print(os.getpid(), flush=True)
time.sleep(30)                  # asleep: no call into the library
"""


def case_threads():
    # multi-threaded before its first socket, asleep since: its counters
    # are read as they are, all of them, without asking it
    p = subprocess.Popen([sys.executable, "-c", THREADED], env=dict(ENV, ZCSOCK_LOCAL_PAIR_AFTER="0"),
                         stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline())
        t0 = time.time()
        d = stat_json(pid)
        took = time.time() - t0
        c = d["counters"]
        print("counters_live %s, path.local.send_bytes %d, calls.sendall+send %d, read in %.2f s"
              % (d["counters_live"], c.get("path.local.send_bytes", 0),
                 c.get("calls.send", 0) + c.get("calls.sendto", 0), took))
        check(d["counters_live"], "the counters of a threaded process are not live")
        sent = c.get("path.local.send_bytes", 0) + c.get("path.copy.send_bytes", 0)
        # every byte both ways (64 KiB sends, one-byte answers), the most of
        # them paired
        check(sent == 64 * 65536 + 64 and c.get("path.local.send_bytes", 0) >= 32 * 65536,
              "bytes sent %r, want %d: %r" % (sent, 64 * 65536 + 64,
                                              {k: v for k, v in c.items() if "bytes" in k}))
        check(c.get("calls.pthread_create", 0) >= 2, "pthread_create not counted: %r" % c)
    finally:
        p.kill()
        p.wait()


def case_top():
    p, pid = start_pair(6)
    try:
        wait_counter(pid, "path.local.send_bytes", 1 << 20)
        r = subprocess.run([ZCSOCK, "top", "--interval", "0.3", "--count", "3", "--sort",
                            "avoided"], env=PLAIN, capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "zcsock top: exit %d %s" % (r.returncode, r.stderr))
        screens = r.stdout.split("zcsock top - ")[1:]
        check(len(screens) == 3, "zcsock top printed %d screens, not 3:\n%s" % (len(screens),
                                                                                 r.stdout))
        mine = [line.split() for line in screens[-1].splitlines()
                if line.split()[:1] == [str(pid)]]
        check(mine and mine[0][2] == "2" and mine[0][4] not in ("0", "-"),
              "the last screen shows pid %d without its 2 paired ends or ring bytes per "
              "second:\n%s" % (pid, screens[-1]))
        print(screens[-1].strip())
    finally:
        p.kill()
        p.wait()


CONNS = r"""
import os, socket, sys, threading, time
plain = socket.socket()
plain.connect(("127.0.0.1", int(sys.argv[1])))   # its server runs without the library
for i in range(4):          # enough to pay for pairing: it announces, nobody offers
    plain.sendall(b"x" * 1000)
    plain.recv(1)
""" + LOOPBACK_PAIR + r"""
print(os.getpid(), plain.fileno(), s.fileno(), flush=True)
end = time.time() + 8
big = bytearray(4 << 20)            # sends page exchange would lend
while time.time() < end:
    s.sendall(big)
    s.recv(1)
"""


def case_conns():
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(1)
    p = subprocess.Popen([sys.executable, "-c", CONNS, str(l.getsockname()[1])], env=ENV,
                         stdout=subprocess.PIPE, text=True)
    c, _ = l.accept()
    try:
        for i in range(4):
            got = 0
            while got < 1000:
                got += len(c.recv(1000 - got))
            c.sendall(b"a")
        pid, pfd, sfd = map(int, p.stdout.readline().split())
        wait_counter(pid, "path.local.send_bytes", 1 << 20)
        rc, out, err = stat(pid, "--conns", "--json")
        check(rc == 0, "--conns: %d %s" % (rc, err))
        d = json.loads(out)
        by = {e["fd"]: e for e in d["connections"]}
        print(out.strip()[:600])
        e = by.get(pfd)
        # declined: on the copy path from its next call (its reason is
        # local.declined.not_zcsock's)
        check(e and e["path"] == "kernel" and e["kernel_tx"] and e["kernel_tx"] >= 4000 and
              e["kernel_rx"] and e["kernel_rx"] >= 4 and   # the kernel's counts (tcp_info)
              e["why"] in ("declined", "declined.not_zcsock") and
              e["remote"] == "127.0.0.1:%d" % l.getsockname()[1],
              "the connection to the plain server: %r" % e)
        e = by.get(sfd)
        check(e and e["path"] in ("ring", "exchange") and e["state"] == "paired" and
              e["ring_tx"] > 0 and e["local"].startswith("127.0.0.1:"),
              "the paired connection: %r" % e)
        line = next((x for x in open(os.path.join(live_dir(), "%d.conns" % pid))
                     if x.startswith("fd=%d " % sfd)), "")
        cnt = stat_json(pid)["counters"]
        if cnt.get("local.xchg.unavailable"):   # no 2 MiB shared pages: said per connection
            check("exchange=unavailable" in line and e["path"] == "ring", line)
        elif cnt.get("local.xchg.bytes_lent"):
            check(e["path"] == "exchange" and " lent=" in line, line)
        print(line.strip())
        rc, out, err = stat(pid, "--conns")
        check(rc == 0 and " declined" in out and " ring " in out, out)
        print(out)
    finally:
        p.kill()
        p.wait()
        c.close()


def case_redis():
    srv, bench = shutil.which("redis-server"), shutil.which("redis-benchmark")
    if not srv or not bench:
        print("skip: redis-server or redis-benchmark not installed")
        sys.exit(77)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = subprocess.Popen([srv, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no"], env=ENV, stdout=subprocess.DEVNULL)
    b = None
    try:
        end = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                check(time.time() < end, "redis-server did not start")
                time.sleep(0.05)
        b = subprocess.Popen([bench, "-p", str(port), "-c", "4", "-n", "2000000", "-t", "get",
                              "-q"], env=ENV, stdout=subprocess.DEVNULL)
        d1 = wait_counter(r.pid, "local.paired.accepted", 1)
        time.sleep(0.5)
        d2 = stat_json(r.pid)
        for key in ("calls.read", "path.local.recv_calls"):
            a, z = d1["counters"].get(key, 0), d2["counters"].get(key, 0)
            print("redis-server %s: %d then %d" % (key, a, z))
            check(z > a, "%s of redis-server did not move" % key)
        check(d2["command"].startswith("redis"), "command %r" % d2["command"])
    finally:
        if b:
            b.kill()
            b.wait()
        r.terminate()
        r.wait(timeout=10)


FORKER = r"""
import os, socket, sys, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
print(os.getpid(), l.getsockname()[1], flush=True)
c, _ = l.accept()
kid = os.fork()
if kid == 0:
    l.close()
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        c.sendall(b[:1])
    os._exit(0)
c.close()
print(kid, flush=True)
os.waitpid(kid, 0)
time.sleep(float(sys.argv[1]))
"""


def case_fork():
    f = subprocess.Popen([sys.executable, "-c", FORKER, "30"], env=ENV, stdout=subprocess.PIPE,
                         text=True)
    try:
        ppid, port = map(int, f.stdout.readline().split())
        c = subprocess.Popen([sys.executable, "-c", r"""
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
end = time.time() + 3
while time.time() < end:
    s.sendall(b"y" * 65536); s.recv(1)
"""
                              , str(port)], env=ENV)
        kid = int(f.stdout.readline())
        dk = wait_counter(kid, "path.local.recv_bytes", 1 << 20, late=True)
        dp = stat_json(ppid)
        print("parent %d: local recv %d, child %d: %d" % (
            ppid, dp["counters"].get("path.local.recv_bytes", 0), kid,
            dk["counters"]["path.local.recv_bytes"]))
        check(dp["counters"].get("path.local.recv_bytes", 0) < 65536 * 4,
              "the child's bytes show in its parent's counters")
        c.wait(timeout=30)
        end = time.time() + 10
        while os.path.exists(os.path.join(live_dir(), str(kid))):
            check(time.time() < end, "the child's file outlived it (it left by _exit)")
            time.sleep(0.05)
    finally:
        f.kill()
        f.wait()


FORK_SHORT = r"""
import os, signal, socket, sys, time
a, b = socket.socketpair()          # an AF_UNIX socket: this process has a mailbox
t = socket.socket(); t.bind(("127.0.0.1", 0))
n, d, seen, exited = int(sys.argv[1]), sys.argv[2], [], []
for i in range(2 * n):
    kid = os.fork()
    if kid == 0:
        end = time.time() + (0.03 if i < n else 0.005)
        while time.time() < end:    # calls into the library all along
            t.getsockname()
        if i < n:
            time.sleep(60)
        os._exit(0) if i % 2 == 0 else sys.exit(0)
    if i < n:
        time.sleep(0.03)            # the kid alive, 30 ms after its fork
        if os.path.exists(os.path.join(d, str(kid))) or \
           os.path.exists(os.path.join(d, ".%d.new" % kid)):
            seen.append(kid)
        os.kill(kid, signal.SIGKILL)
    else:
        exited.append(kid)
    os.waitpid(kid, 0)
print(" ".join(map(str, seen)), flush=True)
print(" ".join(map(str, exited)), flush=True)
sys.stdin.read()
"""


def case_fork_short():
    d = live_dir()
    p = subprocess.Popen([sys.executable, "-c", FORK_SHORT, "20", d], env=ENV,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        seen = [int(x) for x in p.stdout.readline().split()]
        exited = [int(x) for x in p.stdout.readline().split()]
        check(len(exited) == 20, "the forker said %r" % exited)
        check(os.path.exists(os.path.join(d, str(p.pid))), "the parent published no file")
        check(not seen, "children made files within 30 ms of their fork: %d of 20" % len(seen))
        # the mailboxes: exit() takes the name away (the last child's too,
        # which no later one sweeps); _exit() leaves it to a sweep
        names = set(os.listdir(os.path.join(d, "mbox"))) if os.path.isdir(
            os.path.join(d, "mbox")) else set()
        mbox = zc_dir.mailbox_name      # (a mailbox file does not name its pid)
        check(mbox(p.pid) in names, "the parent has no mailbox (%s)" % sorted(names)[:10])
        stay = [k for k in exited[1::2] if mbox(k) in names]    # (those that called exit())
        check(not stay, "children that exited left their mailbox names: %r" % stay)
        print("20 children killed 30 ms after the fork made no file; of 10 that _exit()ed "
              "%d left a mailbox name" % sum(mbox(k) in names for k in exited[0::2]))
    finally:
        p.stdin.close()
        p.wait(timeout=30)


SHM_SMALL = r"""
import os, socket, subprocess, sys
s = socket.socket()     # the first socket: the file is made
d = "/tmp/zcsock-%d" % os.geteuid()
print(os.path.exists(os.path.join(d, str(os.getpid()))),
      os.path.exists("/dev/shm/zcsock-%d/%d" % (os.geteuid(), os.getpid())), flush=True)
r = subprocess.run([sys.argv[1], "stat", str(os.getpid()), "--json"], capture_output=True,
                   text=True, env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
print(r.returncode, flush=True)
"""


def case_shm_small():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("skip: needs root and unshare (a mount namespace of its own)")
        sys.exit(77)
    env = dict(ENV, XDG_RUNTIME_DIR="")
    cmd = "mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm && exec \"$0\" -c \"$1\" \"$2\""
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd,
                        sys.executable, SHM_SMALL, ZCSOCK], env=env, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0 and "mount" in r.stderr:
        print("skip: cannot mount a tmpfs here: %s" % r.stderr.strip()[-200:])
        sys.exit(77)
    out = r.stdout.split()
    check(r.returncode == 0 and len(out) == 3, "the program failed: %r %s" % (r.stdout,
                                                                             r.stderr[-300:]))
    check(out[:2] == ["True", "False"], "with a 64 MiB /dev/shm the file went elsewhere: "
          "in /tmp %s, in /dev/shm %s" % tuple(out[:2]))
    check(out[2] == "0", "zcsock stat did not find it there (exit %s)" % out[2])
    print("a 64 MiB /dev/shm: the file in /tmp/zcsock-UID, zcsock stat found it")


SHM_FULL = r"""
import ctypes, os, socket, sys, threading
def stat(name):
    v = ctypes.c_uint64()
    if ctypes.CDLL(None).zcsock_stat_get(name.encode(), ctypes.byref(v)) != 0:
        sys.exit("no counter " + name)
    return v.value
s = socket.socket()     # the first socket: the file is made
path = "/dev/shm/zcsock-%d/%d" % (os.geteuid(), os.getpid())
print(os.path.exists(path), flush=True)
before = stat("calls.socket")
def work():
    for i in range(5):
        socket.socket().close()
ts = [threading.Thread(target=work) for i in range(40)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(stat("calls.socket") - before, flush=True)
"""


def case_shm_full():
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("fallocate"):
        print("skip: needs root, unshare and fallocate (a mount namespace of its own)")
        sys.exit(77)
    if os.path.isdir("/run/user/0"):
        print("skip: the file would go to /run/user/0, not the tmpfs this case fills")
        sys.exit(77)
    env = dict(ENV, XDG_RUNTIME_DIR="", ZCSOCK_DEBUG="1")   # (notices said)
    # 1 GiB (the least a /dev/shm the library uses), all but 13 pages taken;
    # the private directory and its key made first (one page)
    cmd = ("mount -t tmpfs -o size=1g,mode=1777 tmpfs /dev/shm && mkdir -m 0700 /dev/shm/zcsock-0 "
           "&& head -c 16 /dev/urandom > /dev/shm/zcsock-0/key && chmod 0600 /dev/shm/zcsock-0/key "
           "&& fallocate -l $((1024 * 1024 * 1024 - 56 * 1024)) /dev/shm/fill "
           "&& exec \"$0\" -c \"$1\"")
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd,
                        sys.executable, SHM_FULL], env=env, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0 and "mount" in r.stderr:
        print("skip: cannot mount a tmpfs here: %s" % r.stderr.strip()[-200:])
        sys.exit(77)
    out = r.stdout.split()
    check(r.returncode == 0 and len(out) == 2,
          "the program failed (exit %d, a SIGBUS is -7): %r %s" % (r.returncode, r.stdout,
                                                                 r.stderr[-300:]))
    check(out[0] == "False", "a file was made with 52 KiB left: the case tests nothing")
    check(r.stderr.count("cannot write its file") == 1,
          "the missing file was not said once: %r" % r.stderr[-400:])
    check(out[1] == "200", "40 threads made 200 sockets, the counters say %s" % out[1])
    print("52 KiB left: no file, said once; 200 sockets counted by 40 threads")


def case_exit():
    d = live_dir()
    for how in ("exit", "_exit", "exec"):
        p, pid = start_pair(0.5, how)
        path = os.path.join(d, str(pid))
        check(os.path.exists(path), "no file for pid %d" % pid)
        p.wait(timeout=30)
        check(not os.path.exists(path), "the file outlived %s" % how)
        print("%s: the file went" % how)
    p, pid = start_pair(2, "hang")
    path = os.path.join(d, str(pid))
    stat(pid, "--conns")                # its connection list (while it streams), left too
    os.kill(pid, signal.SIGKILL)
    p.wait()
    check(os.path.exists(path) and os.path.exists(path + ".conns"),
          "no files left by SIGKILL (the case tests nothing)")
    rc, out, err = stat()
    check(rc == 0 and "stale" in err, "zcsock stat did not say it removed a stale file: %r"
          % err)
    check(not os.path.exists(path) and not os.path.exists(path + ".conns"),
          "the stale files of pid %d are still there" % pid)
    print("SIGKILL: the next zcsock stat removed the stale file and its connection list")
    p, pid = start_pair(2, "hang")
    path = os.path.join(d, str(pid))
    stat(pid, "--conns")
    # a threaded process that never made a socket: its file, made at its
    # first pthread_create, is never listed; gone at exit, swept if killed
    t = subprocess.Popen([sys.executable, "-c", "import os, threading, time\n"
                          "threading.Thread(target=time.sleep, args=(0.1,)).start()\n"
                          "print(os.getpid(), flush=True); time.sleep(float(input()))"],
                         env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    tpid = int(t.stdout.readline())
    staged = os.path.join(d, ".%d.new" % tpid)
    check(os.path.exists(staged), "no file made at the first pthread_create")
    rc, out, err = stat()
    check(not any(line.split()[:1] == [str(tpid)] for line in out.splitlines()),
          "a process without a socket is listed: %s" % out)
    os.kill(pid, signal.SIGKILL)
    p.wait()
    t.kill()
    t.wait()
    check(os.path.exists(path) and os.path.exists(path + ".conns") and os.path.exists(staged),
          "no files left by SIGKILL: %s %s %s" % (os.path.exists(path),
                                                  os.path.exists(path + ".conns"),
                                                  os.path.exists(staged)))
    q, _ = start_pair(0.1)
    q.wait(timeout=30)
    check(not os.path.exists(path) and not os.path.exists(path + ".conns") and
          not os.path.exists(staged), "the next process to publish left stale files: %s"
          % os.listdir(d))
    print("SIGKILL: the next process to publish removed the stale files (published, "
          "its connection list, and one made at a first pthread_create)")
    t = subprocess.Popen([sys.executable, "-c", "import os, threading, time\n"
                          "threading.Thread(target=time.sleep, args=(0.1,)).start()\n"
                          "print(os.getpid(), flush=True); time.sleep(0.2)"],
                         env=ENV, stdout=subprocess.PIPE, text=True)
    tpid = int(t.stdout.readline())
    t.wait(timeout=30)
    check(not os.path.exists(os.path.join(d, ".%d.new" % tpid)),
          "the file made at pthread_create outlived its exit")


def case_off():
    p, pid = start_pair(1, "exit", dict(ENV, ZCSOCK_LIVE="0"))
    try:
        check(not os.path.exists(os.path.join(live_dir(), str(pid))),
              "ZCSOCK_LIVE=0 published a file")
        rc, _, err = stat(pid)
        check(rc == 1 and "no live statistics for pid %d" % pid in err, "%d %s" % (rc, err))
    finally:
        p.wait()


def case_other():
    p, pid = start_pair(4)
    try:
        wait_counter(pid, "path.local.send_bytes", 1)
        path = os.path.join(live_dir(), str(pid))
        st = os.stat(path)
        check(st.st_mode & 0o777 == 0o600, "file mode %o" % (st.st_mode & 0o777))
        check(os.stat(live_dir()).st_mode & 0o777 == 0o700, "directory not 0700")
        rc, out, err = stat(pid, as_nobody=True)
        check(rc == 1 and "no live statistics" in err, "nobody read pid %d: %d %s %s"
              % (pid, rc, out, err))
        rc, out, err = stat(as_nobody=True)
        check(str(pid) not in out, "nobody lists pid %d:\n%s" % (pid, out))
        r = subprocess.run([sys.executable, "-c", "import os; os.setgid(65534); "
                            "os.setuid(65534); open(%r, 'rb').read(8)" % path],
                           env=PLAIN, capture_output=True, text=True)
        check(r.returncode != 0 and "PermissionError" in r.stderr,
              "nobody opened the file: %s" % r.stderr)
        print("another user: not listed, not readable")
    finally:
        p.kill()
        p.wait()


def case_private():
    d = shm_base() + "/zcsock-65534"
    if os.path.lexists(d):
        shutil.rmtree(d) if os.path.isdir(d) and not os.path.islink(d) else os.unlink(d)
    os.mkdir(d, 0o700)          # made first by root, not by nobody
    try:
        env = dict(ENV, XDG_RUNTIME_DIR="", ZCSOCK_DEBUG="1", T_AS_NOBODY="1")
        r = subprocess.run([sys.executable, "-c", PAIR, "0.3"], env=env, capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 0, "the program failed under nobody: %s" % r.stderr)
        check("live statistics off" in r.stderr, "no notice: %s" % r.stderr[-500:])
        check(not os.listdir(d), "published into another user's directory: %r" % os.listdir(d))
        rc, out, err = stat(as_nobody=True)
        check(rc == 1 and "not a private directory" in err, "%d %s %s" % (rc, out, err))
        print("a directory of another user's: refused, said")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_advise():
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(1)
    port = l.getsockname()[1]
    cl = subprocess.Popen([sys.executable, "-c", r"""
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
for i in range(4):
    s.sendall(b"q" * 1000); s.recv(1)
print(os.getpid(), flush=True)
time.sleep(30)
""", str(port)], env=ENV, stdout=subprocess.PIPE, text=True)
    c, _ = l.accept()
    try:
        for i in range(4):
            got = 0
            while got < 1000:
                got += len(c.recv(1000 - got))
            c.sendall(b"a")
        cpid = int(cl.stdout.readline())
        end = time.time() + 10
        while True:
            rc, out, err = stat(cpid, "--advise")
            if "[peer_without_library]" in out or time.time() > end:
                break
            time.sleep(0.2)
        print(out.strip())
        check(rc == 0 and "[peer_without_library]" in out and "local.declined.not_zcsock = 1"
              in out, "no advice for a peer without the library: %d %s %s" % (rc, out, err))
        # the exit report (ZCSOCK_STATS=1) gives the same advice
        rep = subprocess.Popen([sys.executable, "-c", r"""
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
for i in range(4):
    s.sendall(b"q" * 1000)
    s.recv(1)
""", str(port)], env=dict(ENV, ZCSOCK_STATS="1"), stderr=subprocess.PIPE, text=True)
        c2, _ = l.accept()
        for i in range(4):
            got = 0
            while got < 1000:
                got += len(c2.recv(1000 - got))
            c2.sendall(b"a")
        _, rerr = rep.communicate(timeout=30)
        c2.close()
        check("\n# advice [peer_without_library] " in rerr, "the exit report lacks the "
              "advice: %s" % rerr[-800:])
        p, pid = start_pair(3)
        try:
            wait_counter(pid, "path.local.send_bytes", 1)
            rc, out, err = stat(pid, "--advise")
            check(rc == 0 and out.startswith("no advice"), "advice for the stream pair: %s"
                  % out)
        finally:
            p.kill()
            p.wait()
    finally:
        cl.kill()
        cl.wait()
        c.close()


FDLIM = r"""
import os, resource, socket, sys, time
lim = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (lim, lim))
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(64)
keep = []
for i in range(40):
    c = socket.socket(); c.connect(l.getsockname()); a, _ = l.accept()
    c.sendall(b"x"); a.recv(1); a.sendall(b"y"); c.recv(1)
    keep += [c, a]
print(os.getpid(), flush=True)
time.sleep(20)
"""


def case_advise_fd():
    for lim in (128, 4096):     # the advice, then the advice applied
        p = subprocess.Popen([sys.executable, "-c", FDLIM, str(lim)],
                             env=dict(ENV, ZCSOCK_LOCAL_PAIR_AFTER="0"), stdout=subprocess.PIPE,
                             text=True)
        try:
            pid = int(p.stdout.readline())
            rc, out, err = stat(pid, "--advise")
            d = stat_json(pid)["counters"]
            paired = d.get("local.paired.accepted", 0) + d.get("local.paired.connected", 0)
            print("RLIMIT_NOFILE %d: %d connection ends paired; %s" % (lim, paired, out.strip()))
            if lim == 128:
                check(rc == 0 and "[fd_limit]" in out and "local.declined.fd_limit = " in out,
                      "no fd_limit advice: %d %s %s" % (rc, out, err))
                check("[peer_without_library]" not in out, "another rule fired: %s" % out)
                before = paired
            else:
                check(rc == 0 and out.startswith("no advice"), "advice after raising the "
                      "limit: %s" % out)
                check(paired == 80 and paired > before, "raising the limit paired %d of 80 "
                      "connection ends (%d before)" % (paired, before))
        finally:
            p.kill()
            p.wait()


def case_mpi():
    impl = next((m for m in ("openmpi", "mpich") if os.access(os.path.join(BUILD, "mpi_pingpong_"
                + m), os.X_OK) and shutil.which("mpiexec." + m)), None)
    if not impl:
        print("skip: no MPI (mpiexec.openmpi or mpiexec.mpich, and make bench's mpi_pingpong)")
        sys.exit(77)
    env = dict(ENV, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               UCX_WARN_UNUSED_ENV_VARS="n", UCX_TLS="tcp,self", MPIR_CVAR_NOLOCAL="1")
    opts = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include",
            "lo"] if impl == "openmpi" else []
    job = subprocess.Popen(["mpiexec." + impl, "-n", "2"] + opts +
                           [os.path.join(BUILD, "mpi_pingpong_" + impl), "2"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        end = time.time() + 30
        ranks = []
        while time.time() < end and len(ranks) < 2:
            rc, out, _ = stat("--json")
            ranks = [e for e in json.loads(out) if e["command"].startswith("mpi_pingpong")
                     and e["paired"] > 0]
            time.sleep(0.2)
        check(len(ranks) == 2, "two MPI ranks with paired connections never showed: %r" % ranks)
        pid = ranks[0]["pid"]
        d1 = stat_json(pid)
        time.sleep(0.5)
        d2 = stat_json(pid)
        a = d1["counters"].get("path.local.send_bytes", 0)
        b = d2["counters"].get("path.local.send_bytes", 0)
        print("%s rank pid %d: path.local.send_bytes %d then %d" % (impl, pid, a, b))
        check(b > a, "the rank's ring bytes did not move between two reads")
        rc, out, err = stat(pid, "--conns")
        check(rc == 0 and " ring " in out, "--conns of the rank: %s %s" % (out, err))
    finally:
        out, _ = job.communicate(timeout=120)
    check(job.returncode == 0, "the MPI job failed: %s" % out[-500:])


UNTRACKED_INNER = r"""
import os, resource, socket, sys, time
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))   # above the table's 1024
except (ValueError, OSError):
    print("skip", flush=True)       # no CAP_SYS_RESOURCE (a container)
    sys.exit(0)
a, b = socket.socketpair()
os.dup2(a.fileno(), 3000)
s = socket.socket(fileno=3000)
for i in range(20):
    s.send(b"x" * 100)
    b.recv(100)
print(os.getpid(), flush=True)
time.sleep(20)
"""

UNTRACKED = r"""
import os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))   # the library sizes its table now
os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
"""


def case_advise_untracked():
    p = subprocess.Popen([sys.executable, "-c", UNTRACKED, UNTRACKED_INNER], env=ENV,
                         stdout=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline().strip()
        if first == "skip":
            print("skip: cannot raise the hard descriptor limit here (no CAP_SYS_RESOURCE)")
            sys.exit(77)
        pid = int(first)
        rc, out, err = stat(pid, "--advise")
        print(out.strip())
        check(rc == 0 and "[untracked]" in out and "fd.beyond_table = 20" in out,
              "no untracked advice: %d %s %s" % (rc, out, err))
        check(out.count("[") == 1, "another rule fired: %s" % out)
    finally:
        p.kill()
        p.wait()


XCHG = r"""
import os, socket, sys, threading, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
def srv():
    c, _ = l.accept()
    n = 0
    while True:
        b = c.recv(1 << 22)
        if not b:
            break
        n += len(b)
        if n >= 4 << 20:
            n -= 4 << 20
            c.sendall(b"k")
threading.Thread(target=srv, daemon=True).start()
s = socket.socket(); s.connect(l.getsockname())
buf = bytearray(4 << 20)
for i in range(8):
    s.sendall(buf)
    s.recv(1)
print(os.getpid(), flush=True)
time.sleep(20)
"""


def case_advise_xchg():
    p = subprocess.Popen([sys.executable, "-c", XCHG], env=dict(ENV, ZCSOCK_LOCAL_PAIR_AFTER="0"),
                         stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline())
        rc, out, err = stat(pid, "--advise")
        c = stat_json(pid)["counters"]
        print("local.xchg.unavailable %d, bytes lent %d: %s" % (
            c.get("local.xchg.unavailable", 0), c.get("local.xchg.bytes_lent", 0), out.strip()))
        check(c.get("path.local.send_bytes", 0) >= 16 << 20, "the 4 MiB sends were not paired")
        if c.get("local.xchg.unavailable", 0):
            check("[exchange_unavailable]" in out and "local.xchg.unavailable = " in out,
                  "no exchange advice where it is unavailable: %s" % out)
        else:
            check("[exchange_unavailable]" not in out, "exchange advice where it is "
                  "available: %s" % out)
    finally:
        p.kill()
        p.wait()


ADVISE_BIN = os.path.join(BUILD, "tests", "live", "t_advise")
THP_FILE = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"


def thp_now():
    with open(THP_FILE) as f:
        return f.read().split("[")[1].split("]")[0]


def thp_set(mode):
    """Set shmem THP to mode (as root); exit 77 where it cannot be."""
    if thp_now() == mode:
        return
    try:
        with open(THP_FILE, "w") as f:
            f.write(mode)
    except OSError as e:
        print("skip: cannot set shmem THP to %s (%s)" % (mode, e))
        sys.exit(77)


class ShmemThp:
    """with ShmemThp(): the setting found is put back at the end."""
    def __enter__(self):
        self.old = thp_now()
        return self

    def __exit__(self, *exc):
        if thp_now() != self.old:
            with open(THP_FILE, "w") as f:
                f.write(self.old)


class Advised:
    """t_advise MODE under the library, paired at once, every unit lent at
    its first send; .pid once its first batch is sent and checked."""
    def __init__(self, mode):
        self.p = subprocess.Popen([ADVISE_BIN, mode], env=dict(
            ENV, ZCSOCK_LOCAL_PAIR_AFTER="0", ZCSOCK_EXCHANGE_UNIT_US="1"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.strip().isdigit():
            self.p.kill()
            fail("t_advise %s: %r (exit %s)" % (mode, line, self.p.wait()))
        self.pid = int(line)

    def again(self):
        """The second batch, sent and checked."""
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        check(self.p.stdout.readline().strip() == "done", "t_advise's second batch")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            rc = self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        if exc[0] is None:
            check(rc == 0, "t_advise exited %d (a byte differed or a call failed)" % rc)


def sender_conn(pid):
    """The entry of --conns --json that sent the bytes (the most ring or
    exchange bytes sent)."""
    rc, out, err = stat(pid, "--conns", "--json")
    check(rc == 0, "--conns: %d %s" % (rc, err))
    conns = json.loads(out)["connections"]
    return max(conns, key=lambda e: (e.get("ring_tx") or 0) + (e.get("lent") or 0))


def rules(pid):
    rc, out, err = stat(pid, "--advise")
    check(rc == 0, "--advise: %d %s" % (rc, err))
    return sorted(set(re.findall(r"^\[([a-z_]+)\]", out, re.M))), out


def case_xchg():
    with ShmemThp():
        thp_set("advise")
        with Advised("placed") as a:
            d1 = stat_json(a.pid)["counters"]
            e = sender_conn(a.pid)
            print("sender: %r" % e)
            check(d1.get("local.xchg.bytes_lent", 0) > 0, "nothing lent: %r" % d1)
            check(e["path"] == "exchange" and e["state"] == "paired",
                  "the sending end is not on exchange: %r" % e)
            a.again()
            d2 = stat_json(a.pid)["counters"]
            print("local.xchg.bytes_lent %d then %d" % (d1["local.xchg.bytes_lent"],
                                                       d2.get("local.xchg.bytes_lent", 0)))
            check(d2.get("local.xchg.bytes_lent", 0) > d1["local.xchg.bytes_lent"],
                  "the lent bytes did not move between two reads")


def case_advise_pages():
    want = [("static", "advise", ["not_placed"], "ring"),
            ("unaligned", "advise", ["unaligned"], "ring"),
            ("placed", "never", ["exchange_unavailable"], "ring"),
            ("placed", "advise", [], "exchange")]     # the advice applied
    with ShmemThp():
        for mode, thp, rule, path in want:
            thp_set(thp)
            with Advised(mode) as a:
                got, out = rules(a.pid)
                e = sender_conn(a.pid)
                print("%s, shmem THP %s: rules %s, path %s" % (mode, thp, got, e["path"]))
                print("  " + out.strip()[:300])
                check(got == rule, "%s with shmem THP %s: rules %s, want %s: %s"
                      % (mode, thp, got, rule, out))
                check(e["path"] == path, "%s with shmem THP %s: path %r, want %s"
                      % (mode, thp, e, path))


MANY_SERVER = r"""
import os, resource, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (12000, 12000))
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4096)
print(l.getsockname()[1], flush=True)
keep = []
while len(keep) < 10000:
    keep.append(l.accept()[0])
print(os.getpid(), flush=True)
end = time.time() + 60
while time.time() < end:        # calls into the library: it answers at once
    l.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
    time.sleep(0.005)
"""

MANY_CLIENT = r"""
import resource, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (12000, 12000))
port = int(sys.argv[1])
keep = []
for i in range(10000):
    s = socket.socket(); s.connect(("127.0.0.1", port)); keep.append(s)
print("connected", flush=True)
time.sleep(60)
"""


def case_many():
    srv = subprocess.Popen([sys.executable, "-c", MANY_SERVER], env=ENV, stdout=subprocess.PIPE,
                           text=True)
    cl = None
    try:
        port = srv.stdout.readline().strip()
        cl = subprocess.Popen([sys.executable, "-c", MANY_CLIENT, port], env=PLAIN,
                              stdout=subprocess.PIPE, text=True)
        check(cl.stdout.readline().strip() == "connected", "the client did not connect")
        pid = int(srv.stdout.readline())
        t0 = time.time()
        rc, out, err = stat(pid, "--conns")
        took = time.time() - t0
        lines = [x for x in out.splitlines()[1:] if x.split()[:1] and x.split()[0].isdigit()]
        print("zcsock stat --conns listed %d sockets of pid %d in %.2f s" % (len(lines), pid,
                                                                            took))
        check(rc == 0 and len(lines) == 10001, "listed %d sockets, not 10,001 (rc %d, %s)"
              % (len(lines), rc, err.strip()))
        check(sum(" 127.0.0.1:" in x for x in lines) == 10001, "addresses missing")
    finally:
        for p in (cl, srv):
            if p:
                p.kill()
                p.wait()


def case_scribble():
    import mmap
    import struct
    p, pid = start_pair(3)
    try:
        wait_counter(pid, "path.local.send_bytes", 1 << 20)
        path = os.path.join(live_dir(), str(pid))
        with open(path, "r+b") as f:
            m = mmap.mmap(f.fileno(), 0)
            # header: magic(8) version(4) hdr_size(4) pid(4) uid(4) starttime(8)
            # published(8) comm(32) lib_version(32) nstats(4) nblocks(4) names_off(8)
            # text_off(8) store_off(8) ...: the store's offset, then scribble
            store_off = struct.unpack_from("Q", m, 128)[0]
            naux_off = struct.unpack_from("Q", m, 176)[0]
            m[112:200] = b"\xff" * 88           # every offset and count
            struct.pack_into("I", m, store_off + naux_off, 0xFFFFFFFF)
            want = 200                          # the request words (want, done; conns_req +24)
            end = time.time() + 1.0
            n = 0
            while time.time() < end:
                struct.pack_into("II", m, want, n, 0)     # want moves, done forged
                struct.pack_into("I", m, want + 24, 1)   # conns_req
                n += 1
            m.close()
        rc = p.wait(timeout=30)
        check(rc == 0, "the process under the library died (%d) after its file was scribbled"
              % rc)
        print("%d forged requests and scribbled offsets: the process ran on and exited 0" % n)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def main():
    case = sys.argv[1]
    if not os.access(ZCSOCK, os.X_OK):
        fail("no %s" % ZCSOCK)
    if case in ("other", "private", "advise_untracked") and os.geteuid() != 0:
        print("skip: needs root (it runs a reader as nobody)")
        sys.exit(77)
    globals()["case_" + case]()
    print("ok live %s" % case)


if __name__ == "__main__":
    main()
