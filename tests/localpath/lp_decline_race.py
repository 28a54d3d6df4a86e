#!/usr/bin/env python3
"""Localpath case "decline_threads": a server under the library whose six
threads all call into each accepted connection at once (send, getsockopt,
non-blocking send) while its client runs without the library, so every
connection's offer is declined while other threads are inside calls on it.
The library used to free the connection object there (the process crashed
with SIGSEGV within a few hundred connections); the server must serve all
of them and exit 0.

    lp_decline_race.py [CONNECTIONS]     (default 800; ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import select
import socket
import subprocess
import sys
import threading

N_THREADS = 6

SERVER = r"""
import socket, sys, threading
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 0)); l.listen(64)
print(l.getsockname()[1], flush=True)
n, k = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    a, _ = l.accept()
    bar = threading.Barrier(k)
    def work(j):
        bar.wait()
        try:
            if j % 2:
                a.sendall(b"s")
            a.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            a.send(b"t", socket.MSG_DONTWAIT)
        except OSError:
            pass        # the client may be gone: EPIPE, ECONNRESET
    ts = [threading.Thread(target=work, args=(j,)) for j in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    a.close()
print("served", n, flush=True)
"""


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 800
    plain = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    srv = subprocess.Popen([sys.executable, "-c", SERVER, str(n), str(N_THREADS)],
                           env=dict(plain, LD_PRELOAD=os.environ["ZC_LIB"]),
                           stdout=subprocess.PIPE)
    try:
        r, _, _ = select.select([srv.stdout], [], [], 20)
        if not r:
            print("FAIL: the server never listened")
            return 1
        port = int(srv.stdout.readline())
        for _ in range(n):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=20):
                    pass
            except OSError:
                break       # the server is gone: its status says why
        rc = srv.wait(timeout=120)
        out = srv.stdout.read().decode()
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    if rc != 0 or "served %d" % n not in out:
        print("FAIL: server exit %d (%s), output %r" % (rc, "SIGSEGV" if rc == -11 else "", out))
        return 1
    print("decline_threads: %d connections declined with %d threads in calls on each: ok"
          % (n, N_THREADS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
