#!/usr/bin/env python3
"""Localpath cases "mailbox_evict/{same,other}" (issue 30: a hand-over whose
record is lost is handed back to the kernel, never read as a plain socket
with the ring's bytes stranded).

A dispatcher under the library pairs four TCP connections with clients
under the library and passes each to a worker under the library over
SCM_RIGHTS.  The first (B) goes over a second AF_UNIX connection that the
worker reads only at the end, so its record waits in the worker's table of
records for sockets not received yet.  Before each of the next two hand-
overs (over the first AF_UNIX connection, which the worker reads at once)
an attacker posts 40 well-formed records from 40 processes of its own into
the worker's mailbox: with every poster at one record, the full table (64)
evicts the oldest, B's.  An earlier library dropped it: the worker then
read B's socket as a plain one, took the doorbell byte 0x00 for data and
B's client never got its echo.  Now the eviction hands B's connection back
to the kernel (local.mailbox.handed_back), and B's socket, when the worker
reads it, is the plain socket it is: every echo exact.

"other": the attacker is another user (nobody): the mailbox, in this
user's private directory, is closed to it (every post denied), nothing is
evicted, and the worker takes all four channels over.
"other-public": the same with the private directory made unusable, so the
mailbox has its public fallback name: the other user's records reach it
and are refused, nothing is evicted, the worker takes all four channels
over, and its exit report (and no other) advises mailbox_flood.

    lp_mailbox_evict.py same|other|other-public   (ZC_LIB: the library)
Exit 0 pass, 1 fail."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

from lp_mailbox import CLIENT, WORKER_HELPERS, mbox_name, post_record, public_env

FLOOD = 40          # records per attack, each from its own process

DISPATCHER = r"""
import os, socket, subprocess, sys, tempfile
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
path = os.path.join(tempfile.mkdtemp(), "w")
u = socket.socket(socket.AF_UNIX); u.bind(path); u.listen(2)
w = subprocess.Popen([sys.executable, sys.argv[1], "worker", path],
                     stdout=subprocess.PIPE, text=True)
a, _ = u.accept()
b, _ = u.accept()
ready = w.stdout.readline().split()
if not ready or ready[0] != "ready":
    sys.exit("the worker did not start")
print(l.getsockname()[1], ready[1], flush=True)
def take():
    c, _ = l.accept()
    c.settimeout(10)
    # the first receive sends the offer; the client takes it up at its
    # receive of "a" and says so with "p": paired, then passed on
    if c.recv(1) != b"h":
        sys.exit("no hello")
    c.sendall(b"a")
    if c.recv(1) != b"p":
        sys.exit("no p")
    return c
for i in range(4):
    sys.stdin.readline()                # the test says when
    c = take()
    socket.send_fds(b if i == 0 else a, [b"x"], [c.fileno()])
    c.close()
    print("passed", flush=True)
socket.send_fds(a, [b"B"], [])          # now read B's
a.close(); b.close()
print(w.stdout.read().strip(), flush=True)
sys.exit(w.wait(timeout=60))
"""

WORKER = WORKER_HELPERS + r"""
def echo(s):
    s.settimeout(10)
    while True:
        n = struct.unpack("I", exact(s, 4))[0]
        if not n:
            break
        if n > 1 << 20:
            raise ValueError("a length of %d: not the client's bytes" % n)
        s.sendall(exact(s, n))
    s.close()
a = socket.socket(socket.AF_UNIX); a.connect(sys.argv[2])
b = socket.socket(socket.AF_UNIX); b.connect(sys.argv[2])
print("ready", os.getpid(), flush=True)
while True:
    msg, fds, _, _ = socket.recv_fds(a, 16, 4)
    if msg == b"B":
        msg, fds, _, _ = socket.recv_fds(b, 16, 4)
        echo(socket.socket(fileno=fds[0]))
        break
    echo(socket.socket(fileno=fds[0]))
print(" ".join("%s=%d" % (k, stat("local." + v)) for k, v in
               (("inherited", "inherited"), ("evicted", "mailbox.evicted"),
                ("handed_back", "mailbox.handed_back"), ("lost", "mailbox.lost"),
                ("refused", "mailbox.refused"))), flush=True)
"""

def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def attacker(who, pid):
    """FLOOD records, each from a process of its own (a table that evicts
    the poster with the most would drop one flooder's own first)."""
    mbox_name(pid)                  # (learned while still of the victim's user)
    if who == "other":
        os.setgid(65534)
        os.setuid(65534)
    kids = []
    for _ in range(FLOOD):
        k = os.fork()
        if k == 0:
            try:
                post_record(pid)        # its socket stays open in flight, then goes
                os._exit(0)
            except PermissionError:
                os._exit(2)             # the mailbox is closed to us
            except Exception:
                os._exit(1)
        kids.append(k)
    codes = [os.WEXITSTATUS(os.waitpid(k, 0)[1]) for k in kids]
    # all reached the mailbox (0), or all were denied (2)
    sys.exit(codes[0] if codes[0] in (0, 2) and len(set(codes)) == 1 else 1)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        exec(WORKER, {"__name__": "worker"})
        return
    if len(sys.argv) > 1 and sys.argv[1] == "attacker":
        attacker(sys.argv[2], int(sys.argv[3]))
        return
    who = sys.argv[1]
    public = who.endswith("-public")
    who = who.split("-")[0]
    denied = who == "other" and not public
    lib = os.environ["ZC_LIB"]
    logs = tempfile.mkdtemp()
    # every process's exit report: the worker's must advise mailbox_flood
    # exactly when another user's 80 records were refused
    env = dict(os.environ, LD_PRELOAD=lib, ZCSOCK_STATS="1",
               ZCSOCK_LOG_FILE=os.path.join(logs, "stats.%p"))
    if public:
        env = public_env(env)
    plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    d = subprocess.Popen([sys.executable, "-c", DISPATCHER, os.path.abspath(__file__)],
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port, wpid = d.stdout.readline().split()
    clients = []
    ok = True
    try:
        for i in range(4):
            if i in (1, 2):
                rc = subprocess.run([sys.executable, os.path.abspath(__file__), "attacker",
                                     who, wpid], env=plain, timeout=60).returncode
                if rc != (2 if denied else 0):
                    fail("the attacker %s (exit %d)" % (
                        "reached the private mailbox" if denied and rc == 0 else "failed", rc))
            clients.append(subprocess.Popen([sys.executable, "-c", CLIENT, port, "15"], env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            text=True))
            d.stdin.write("go\n")
            d.stdin.flush()
            if d.stdout.readline().strip() != "passed":
                fail("the dispatcher did not pass connection %d" % i)
            if i == 0:
                time.sleep(0.2)     # B's record reaches the mailbox before the flood
        for i, c in enumerate(clients):
            try:
                _, err = c.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                c.kill()
                c.communicate()
                ok = False
                print("FAIL: client %s waited 30 s for its echo" % "B012"[i])
                continue
            print("client %s: exit %d %s" % ("B012"[i], c.returncode, err.strip()[-300:]),
                  flush=True)
            if c.returncode != 0:
                ok = False
                print("FAIL: client %s: the echo failed" % "B012"[i])
        d.stdin.close()
        rc = d.wait(timeout=60)
        out = d.stdout.read()
    finally:
        for c in clients:
            if c.poll() is None:
                c.kill()
        if d.poll() is None:
            d.kill()
    print("dispatcher exit %d, worker: %s" % (rc, out.strip()), flush=True)
    if rc != 0 or not out.strip():
        fail("the worker failed")
    st = dict(kv.split("=") for kv in out.split())
    st = {k: int(v) for k, v in st.items()}
    if who == "same":
        if st["evicted"] < 1 or st["handed_back"] < 1:
            fail("B's record was not evicted and handed back (%s): the case tested nothing" % st)
        if st["inherited"] != 3:
            fail("the worker took over %d channels, not 3 (all but B's)" % st["inherited"])
    elif denied:
        if st["evicted"] or st["refused"]:
            fail("another user's records reached the private mailbox (%s)" % st)
        if st["inherited"] != 4:
            fail("the worker took over %d of 4 channels" % st["inherited"])
    else:
        if st["evicted"] or st["refused"] < 2 * FLOOD:
            fail("another user's records were kept (%s)" % st)
        if st["inherited"] != 4:
            fail("the worker took over %d of 4 channels" % st["inherited"])
    advised = [f for f in glob.glob(os.path.join(logs, "stats.*"))
               if "# advice [mailbox_flood]" in open(f).read()]
    shutil.rmtree(logs, ignore_errors=True)
    if who == "other" and public and len(advised) != 1:
        fail("%d exit reports advise mailbox_flood, not the worker's alone" % len(advised))
    if (who == "same" or denied) and advised:
        fail("mailbox_flood advised below its threshold (%d reports)" % len(advised))
    if not ok:
        sys.exit(1)
    print("ok mailbox_evict %s%s" % (who, " (public name)" if public else ""))


if __name__ == "__main__":
    main()
