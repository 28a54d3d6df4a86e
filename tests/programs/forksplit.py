#!/usr/bin/env python3
"""Fork-per-connection echo daemon, and a client that splits into two
processes sharing its socket.

  forksplit.py server PORT        accept; fork a child per connection that
                                  echoes until EOF, then closes; prints
                                  "listening"; stops on SIGTERM
  forksplit.py client PORT SEED BYTES
                                  connect; fork: the child sends BYTES
                                  pseudo-random bytes (random chunk sizes)
                                  and shuts down the write side, the parent
                                  reads the echo to EOF; prints
                                  "sent <sha256> received <sha256>"
"""
import hashlib, os, random, signal, socket, sys


def server(port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # no zombies
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    print("listening", flush=True)
    while True:
        c, _ = ls.accept()
        if os.fork() == 0:
            ls.close()
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
            c.close()
            os._exit(0)
        c.close()


def client(port, seed, n):
    rnd = random.Random(seed)
    data = rnd.randbytes(n)
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.settimeout(None)
    pid = os.fork()
    if pid == 0:
        st = 1
        try:
            off = 0
            while off < n:
                k = rnd.choice((1, 7, 100, 1500, 4096, 65536, 300000))
                s.sendall(data[off:off + k])
                off += k
            s.shutdown(socket.SHUT_WR)
            st = 0
        finally:
            os._exit(st)
    h = hashlib.sha256()
    # no settimeout here: it would make the shared file description
    # non-blocking under the writer's feet
    got = 0
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        h.update(d)
        got += len(d)
    _, st = os.waitpid(pid, 0)
    print("sent %s received %s bytes %d writer %d" % (hashlib.sha256(data).hexdigest(), h.hexdigest(), got, st))
    return 0 if st == 0 and got == n else 1


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]))
    else:
        sys.exit(client(int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
