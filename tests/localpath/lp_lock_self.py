#!/usr/bin/env python3
"""Localpath case "lock_self" (issue 30, item 5): a hostile peer writes the
id of one of the victim's own threads into the victim's lock words, on ten
connections, while an innocent client waits for its answer.

The victim is an event-loop echo server under the library (one epoll
thread, and a second thread that only sleeps, whose id the peer writes).
The hostile client, under the library too, pairs ten connections with it,
then writes that thread id into both role lock words of the victim's side
of every channel and sends a byte on each.  The victim's loop must see at
once that no thread of its own is inside the library for those locks (the
word is forged) and call the channel broken; an earlier library took a
live thread id as a genuine holder and waited the lock's whole bound (3 s)
per connection, 30 s in all.  The innocent client (no library) must get
its echo within 5 s, and the victim must have counted a protocol error on
every hostile connection.

Mode "forked": the victim forks a child that keeps every connection (so no
side is one process's alone, and a thread of another process may hold a
lock of ours genuinely), and the hostile peer writes the id of a thread of
its own.  That thread's process does not hold the victim's socket, so the
word is forged: found after 5 ms (LP_LOCK_CHECK_MS), where an earlier
library waited the whole bound, 3 s per connection, 30 s in all, and a later
one 100 ms per connection, 1.0 s in all: the innocent client must have its
echo within 0.5 s (a wait that adds up across connections fails).

    lp_lock_self.py [forked]     (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import select
import socket
import subprocess
import sys
import time

N = 10
FORKED = sys.argv[1:] == ["forked"]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import HOSTILE_PRELUDE, echo_victim, start_victim  # noqa: E402

VICTIM = echo_victim(setup="""tids, stop, kids = [], threading.Event(), []
def idle():
    tids.append(threading.get_native_id())
    stop.wait(120)
threading.Thread(target=idle, daemon=True).start()
while not tids:
    time.sleep(0.01)""", announce="tids[0]", on_quit="""print("errors %d" % stat("local.proto_errors"), flush=True)
if kids:
    os.kill(kids[0], 9); os.waitpid(kids[0], 0)""", on_bytes="""if b == b"fork":                # a child that keeps every connection
    pid = os.fork()
    if pid == 0:
        time.sleep(120); os._exit(0)
    kids.append(pid)""")

HOSTILE = HOSTILE_PRELUDE + r"""
port, tid, n, forked = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
cs = []
for i in range(n):
    c = socket.create_connection(("127.0.0.1", port)); c.settimeout(20)
    c.sendall(b"x")                     # the server's first data call: its offer
    if c.recv(1) != b"x":               # kernel bytes: the pickup (rule R3)
        sys.exit("FAIL: hostile: no echo")
    c.sendall(b"y")                     # through the ring now
    if c.recv(1) != b"y":
        sys.exit("FAIL: hostile: no echo through the ring")
    cs.append(c)
paired = stat("local.paired.connected")
if forked:                              # once the victim forked: a thread of ours
    print("paired", flush=True)
    sys.stdin.readline()
    tid = os.getpid()
# the victim created each channel (side A): its lock words are side A's
# line of lock words (LP_LOCK_OFF 2560: LP_TX, LP_RX)
word = struct.pack("II", tid, tid)
done = 0
for name in os.listdir("/proc/self/fd"):
    try:
        if "zcsock-ring" not in os.readlink("/proc/self/fd/" + name):
            continue
        m = mmap.mmap(int(name), 4096)
    except OSError:
        continue
    m[2560:2568] = word
    m.close()
    done += 1
for c in cs:
    try:
        c.send(b"z")                    # the victim must take its locks now
    except OSError:
        pass
print("scribbled %d %d" % (paired, done), flush=True)
sys.stdin.read()                        # stay alive until told
"""


def main():
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"])
    vic, first = start_victim(VICTIM)
    hos = None
    try:
        if not first:
            print("FAIL: the victim never listened")
            return 1
        port, tid = first
        hos = subprocess.Popen([sys.executable, "-c", HOSTILE, port, tid, str(N),
                                "1" if FORKED else "0"], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if FORKED:
            r, _, _ = select.select([hos.stdout], [], [], 60)
            if not r or hos.stdout.readline().split() != ["paired"]:
                print("FAIL: the hostile client did not pair")
                return 1
            f = socket.create_connection(("127.0.0.1", int(port)))
            f.settimeout(20)
            f.sendall(b"fork")
            if f.recv(4) != b"fork":
                print("FAIL: the victim did not fork")
                return 1
            hos.stdin.write("go\n")
            hos.stdin.flush()
        r, _, _ = select.select([hos.stdout], [], [], 60)
        line = hos.stdout.readline().split() if r else []
        if len(line) != 3 or line[0] != "scribbled":
            print("FAIL: the hostile client did not get its connections paired: %r" % line)
            return 1
        paired, done = int(line[1]), int(line[2])
        if paired != N or done < N:
            print("FAIL: hostile client paired %d, scribbled %d channels, of %d" % (paired, done, N))
            return 1
        # the innocent client: this process, which runs without the library
        t0 = time.time()
        c = socket.create_connection(("127.0.0.1", int(port)))
        c.settimeout(60)
        c.sendall(b"ping")
        got = c.recv(4)
        dt = time.time() - t0
        c.sendall(b"quit")
        c.close()
        out, _ = vic.communicate(timeout=60)
        errors = int(out.split()[1]) if out.startswith("errors") else -1
        print("innocent client answered in %.2f s; victim protocol errors %d (of %d hostile "
              "connections)" % (dt, errors, N))
        ok = True
        for cond, what in ((got == b"ping", "innocent client got %r" % got),
                           (dt < (0.5 if FORKED else 5),
                            "innocent client waited %.2f s (a forged lock word was "
                            "waited on)" % dt),
                           (errors >= N, "victim counted %d protocol errors, not %d" % (errors, N)),
                           (vic.returncode == 0, "victim exited %s" % vic.returncode)):
            if not cond:
                print("FAIL: " + what)
                ok = False
        return 0 if ok else 1
    finally:
        for p in (vic, hos):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


if __name__ == "__main__":
    sys.exit(main())
