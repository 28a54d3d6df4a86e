"""A connection made before fork() and split between parent and child (each
closes the end it does not use) pairs once each process is the sole holder
of its end (issue 29, item 8: test harnesses and benchmarks connect first and
fork after).  Usage: fork_split.py parent|child (which process keeps the
client end); 8 MiB echoed and hashed; under the library both processes must
have paired their end (zcsock_stat_get)."""
import hashlib, os, socket, sys

N = 8 << 20


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from zc_stat import zc_stat as stat  # noqa: E402


def server(s):
    got = 0
    while got < N:
        b = s.recv(1 << 20)
        if not b:
            break
        s.sendall(b)
        got += len(b)
    s.close()
    return stat("local.paired.accepted")


def client(c):
    data = os.urandom(N)
    back = bytearray()
    off = 0
    while off < N:
        off += c.send(data[off:off + 65536])
        while len(back) < off - 4 * 65536:
            back += c.recv(1 << 20)
    while len(back) < N:
        b = c.recv(1 << 20)
        if not b:
            break
        back += b
    c.close()
    if hashlib.sha256(back).digest() != hashlib.sha256(data).digest():
        print("FAIL: echoed bytes differ (%d of %d)" % (len(back), N))
        return -1
    return stat("local.paired.connected")


def main():
    keeper = sys.argv[1]
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    c = socket.create_connection(lst.getsockname())
    s, _ = lst.accept()
    lst.close()
    pid = os.fork()
    mine = (keeper == "child") == (pid == 0)    # this process keeps the client end
    if mine:
        s.close()
        r = client(c)
    else:
        c.close()
        r = server(s)
    role = "client" if mine else "server"
    if r is not None and r < 0:
        rc = 1
    elif r is None:
        print("%s: no library, bytes ok" % role)
        rc = 0
    else:
        print("%s (%s): paired %d" % (role, "child" if pid == 0 else "parent", r))
        rc = 0 if r >= 1 else 1
    if pid == 0:
        os._exit(rc)
    _, st = os.waitpid(pid, 0)
    sys.exit(rc or (1 if os.waitstatus_to_exitcode(st) else 0))


main()
