#!/usr/bin/env python3
"""Localpath case "peer_words" (issue 30, item 4): a hostile peer names the
victim's own process and the victim's own descriptors in the shared words
the library reads (the wake-up eventfd's owner and number, and the header's
pid of the peer's side, which it must agree with).

The victim is an event-loop echo server under the library that holds a
POSIX record lock on a file of its own and an eventfd of its own.  The
hostile client, under the library too (without wake-up eventfds of its
own, so its library never writes those words itself), pairs two
connections, then writes the victim's pid as its side's pid and eventfd
owner, and as the eventfd's number the victim's locked file (first
connection) or the victim's eventfd (second), and waits in poll() for the
echo, so the victim rings it and looks at the words.  An earlier library
fetched the named descriptor from its own process: it closed its copy of
the locked file (the lock went with it) and took the application's
eventfd for its wake-ups (writes the application never made).  Now the
lock must still be held (this process cannot take it), the victim's
eventfd must read 0, and the victim must have fetched nothing
(local.efd_fetched).

    lp_peer_words.py      (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import fcntl
import os
import select
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import HOSTILE_PRELUDE, Z_SLEEP, echo_victim, start_victim  # noqa: E402

VICTIM = echo_victim(setup="""lockf = open(sys.argv[1], "r+b")
fcntl.lockf(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
efd = os.eventfd(0, os.EFD_NONBLOCK)""", announce="os.getpid(), lockf.fileno(), efd",
                     on_quit="""try:
    val = os.eventfd_read(efd)
except BlockingIOError:
    val = 0
print("efd %d fetched %d" % (val, stat("local.efd_fetched")), flush=True)""", on_bytes=Z_SLEEP)

HOSTILE = HOSTILE_PRELUDE + r"""
port, vpid, nos = int(sys.argv[1]), int(sys.argv[2]), [int(x) for x in sys.argv[3:]]
keep = []
for no in nos:
    before = set(ring_fds())
    c = socket.create_connection(("127.0.0.1", port)); c.settimeout(20)
    keep.append(c)
    c.sendall(b"x")
    if c.recv(1) != b"x":
        sys.exit("FAIL: hostile: no echo")
    c.sendall(b"y")
    if c.recv(1) != b"y":
        sys.exit("FAIL: hostile: no echo through the ring")
    new = [fd for fd in ring_fds() if fd not in before]
    if len(new) != 1:
        sys.exit("FAIL: hostile: %d new channel memfds (paired %d, declined %s)" % (len(new), stat("local.paired.connected"), [n for n in ("not_zcsock", "closed", "unverified", "error", "not_local") if stat("local.declined." + n) > 0]))
    m = mmap.mmap(new[0], 4096)
    # we are side B (the client): the header's side_pid[1] (offset 44) and
    # our side words at LP_SIDE_OFF 2048 + sizeof(lp_side_t) 76: efd_pid
    # +20, efd_no +24, efd_gen +28
    m[44:48] = struct.pack("i", vpid)
    m[2124 + 20:2124 + 32] = struct.pack("iiI", vpid, no, 77)
    m.close()
    c.sendall(b"z")                     # the victim echoes it: it rings us and reads the words
    p = select.poll(); p.register(c, select.POLLIN)
    p.poll(5000)
    if c.recv(1) != b"z":
        sys.exit("FAIL: hostile: no echo after scribbling")
print("scribbled %d" % stat("local.paired.connected"), flush=True)
sys.stdin.read()
"""


def main():
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"])
    tmp = tempfile.NamedTemporaryFile(prefix="zc-lock-")
    tmp.write(b"x" * 4096)
    tmp.flush()
    vic, first = start_victim(VICTIM, tmp.name)
    hos = None
    try:
        if not first:
            print("FAIL: the victim never listened")
            return 1
        port, vpid, lock_no, efd_no = first
        hos = subprocess.Popen([sys.executable, "-c", HOSTILE, port, vpid, lock_no, efd_no],
                               env=dict(env, ZCSOCK_WAKE_EVENTFD="0", ZCSOCK_SPIN="0"), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        r, _, _ = select.select([hos.stdout], [], [], 60)
        line = hos.stdout.readline().split() if r else []
        if line != ["scribbled", "2"]:
            print("FAIL: the hostile client did not pair its two connections: %r" % line)
            return 1
        # the victim's lock must still be there: this process cannot take it
        with open(tmp.name, "r+b") as f:
            try:
                fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                lock_held = False
            except OSError:
                lock_held = True
        import socket
        c = socket.create_connection(("127.0.0.1", int(port)))
        c.sendall(b"quit")
        out, _ = vic.communicate(timeout=30)
        c.close()
        f = out.split()
        val, fetched = (int(f[1]), int(f[3])) if len(f) == 4 else (-1, -1)
        print("victim: lock %s, its eventfd %d, descriptors fetched %d" %
              ("held" if lock_held else "LOST", val, fetched))
        ok = True
        for cond, what in ((lock_held, "the victim's record lock went (its file was fetched "
                            "from itself and closed)"),
                           (val == 0, "the victim's own eventfd was written (%d)" % val),
                           (fetched == 0, "the victim fetched %d descriptors named by the "
                            "peer" % fetched),
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
