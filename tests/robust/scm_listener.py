"""A paired connection passed over SCM_RIGHTS to a process that accepted on
a listener another process made (issue 29: Dovecot's imap-login passes the
client's connection to an imap process, which accepted on the listener the
master made; SO_PEERCRED names the master, which never reads the hand-over).
Process M makes an AF_UNIX listener and a TCP listener, then starts W
(fork + exec: the listener inherited, as the master starts imap), S (fork)
and a client C (fork).  S accepts C's connection, writes a greeting (the
connection pairs), passes it to W through the AF_UNIX listener and closes
its copy; W reads 8 MiB from it and answers their sha256, which C checks.
Under the library W must have taken over the channel (local.inherited)."""
import hashlib, os, socket, sys, tempfile

N = 8 << 20


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from zc_stat import zc_stat as stat  # noqa: E402


def recv_exact(s, n):
    b = bytearray()
    while len(b) < n:
        k = s.recv(min(1 << 20, n - len(b)))
        if not k:
            raise SystemExit("early end of stream after %d of %d bytes" % (len(b), n))
        b += k
    return bytes(b)


def worker(ufd):
    u = socket.socket(fileno=ufd)
    c, _ = u.accept()
    msg, anc, _, _ = c.recvmsg(1, socket.CMSG_SPACE(4))
    fds = [int.from_bytes(d[:4], "little") for lvl, typ, d in anc
           if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS]
    if len(fds) != 1:
        raise SystemExit("worker: no descriptor came")
    t = socket.socket(fileno=fds[0])
    h = hashlib.sha256(recv_exact(t, N)).hexdigest().encode()
    t.sendall(h)
    t.close()
    inh = stat("local.inherited")
    print("worker: took the connection over: local.inherited=%s" % inh, flush=True)
    sys.exit(0 if inh is None or inh >= 1 else 1)


def main():
    if sys.argv[1:2] == ["worker"]:
        worker(int(sys.argv[2]))
    path = os.path.join(tempfile.mkdtemp(), "svc")
    u = socket.socket(socket.AF_UNIX)
    u.bind(path)
    u.listen(1)
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    os.set_inheritable(u.fileno(), True)
    pids = {}
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, __file__, "worker", str(u.fileno())])
    pids["worker"] = pid
    pid = os.fork()
    if pid == 0:                                # S: accepts, greets, passes on
        u.close()
        t, _ = lst.accept()
        t.sendall(b"G")
        recv_exact(t, 1)                        # C attached (it answered)
        p = socket.socket(socket.AF_UNIX)
        p.connect(path)
        p.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, t.fileno().to_bytes(4, "little"))])
        t.close()
        p.close()
        print("sender: passed the connection (local.handed_over=%s)" % stat("local.handed_over"),
              flush=True)
        os._exit(0)
    pids["sender"] = pid
    pid = os.fork()
    if pid == 0:                                # C
        u.close()
        s = socket.create_connection(lst.getsockname())
        lst.close()
        if recv_exact(s, 1) != b"G":
            raise SystemExit("client: no greeting")
        s.sendall(b"A")
        data = os.urandom(N)
        s.sendall(data)
        h = recv_exact(s, 64)
        ok = h == hashlib.sha256(data).hexdigest().encode()
        print("client: %s, local.paired.connected=%s" % ("hash ok" if ok else "HASH WRONG",
              stat("local.paired.connected")), flush=True)
        os._exit(0 if ok else 1)
    pids["client"] = pid
    u.close()
    lst.close()
    rc = 0
    for name, p in pids.items():
        _, st = os.waitpid(p, 0)
        if os.waitstatus_to_exitcode(st):
            print("%s failed" % name)
            rc = 1
    os.unlink(path)
    sys.exit(rc)


main()
