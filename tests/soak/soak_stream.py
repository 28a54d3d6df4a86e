#!/usr/bin/env python3
"""Soak: a long stream both ways at once over one connection, every byte
sha256-checked, with message sizes from 1 byte to 4 MiB mixed (a third of
them multiples of 4 KiB sent from and received into page-aligned buffers,
the rest at odd offsets), sends by send/sendmsg with several iovecs and
receives by recv_into/recvmsg_into.

    soak_stream.py tcp|tcp6|unix GiB [seed]

Forks a server; each end runs a sender thread and a receiver thread on the
same socket.  Under the library the statistics must show that the
connection paired and the bytes took the local path.  Exit 0 pass, 1 fail."""
import hashlib
import mmap
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "localpath"))
from lp_util import read_all, zc_stat  # noqa: E402

BLOCK = 64 << 20        # the data: a pseudo-random block, read at shifting offsets
MAXMSG = 4 << 20
PAGE = 4096


def block_for(seed):
    r = random.Random(seed)
    return r.randbytes(BLOCK + MAXMSG)


def sizes(r):
    """A message size: 1 B .. 4 MiB, a third of them whole pages."""
    k = r.random()
    if k < 0.33:
        return PAGE * r.randint(1, MAXMSG // PAGE)
    if k < 0.6:
        return r.randint(1, 4096)
    if k < 0.85:
        return r.randint(4097, 256 << 10)
    return r.randint(256 << 10, MAXMSG)


def sender(s, total, seed, res):
    r = random.Random(seed * 7 + 1)
    data = memoryview(block_for(seed))
    aligned = mmap.mmap(-1, MAXMSG)         # page-aligned source for page-sized messages
    h = hashlib.sha256()
    sent, off = 0, 0
    try:
        while sent < total:
            n = min(sizes(r), total - sent)
            off = (off + 4099) % BLOCK
            chunk = data[off:off + n]
            if n % PAGE == 0:
                aligned[:n] = chunk
                src = memoryview(aligned)[:n]
            else:
                src = chunk
            h.update(chunk)
            if r.random() < 0.3 and n > 3:          # sendmsg with three iovecs
                a, b = sorted(r.sample(range(1, n), 2)) if n > 2 else (1, 1)
                parts = [src[:a], src[a:b], src[b:]]
                done = 0
                while done < n:
                    k = s.sendmsg(parts)
                    done += k
                    # drop what went
                    left, rest = k, []
                    for p in parts:
                        if left >= len(p):
                            left -= len(p)
                            continue
                        rest.append(p[left:])
                        left = 0
                    parts = rest
            else:
                s.sendall(src)
            sent += n
        s.shutdown(socket.SHUT_WR)
        res["sent"] = (sent, h.hexdigest())
    except Exception as e:     # reported by the caller
        res["error"] = "sender: %r" % (e,)


def receiver(s, res):
    r = random.Random(99)
    h = hashlib.sha256()
    aligned = mmap.mmap(-1, MAXMSG)
    buf = bytearray(MAXMSG + 64)
    got = 0
    try:
        while True:
            n = sizes(r)
            if n % PAGE == 0:
                view = memoryview(aligned)[:n]
            else:
                o = r.randint(1, 63)
                view = memoryview(buf)[o:o + n]
            if r.random() < 0.2:
                k, _, _, _ = s.recvmsg_into([view])
            else:
                k = s.recv_into(view)
            if k == 0:
                break
            h.update(view[:k])
            got += k
        res["got"] = (got, h.hexdigest())
    except Exception as e:
        res["error"] = "receiver: %r" % (e,)


def run_end(s, total, seed):
    res = {}
    ts = [threading.Thread(target=sender, args=(s, total, seed, res)),
          threading.Thread(target=receiver, args=(s, res))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return res


def main():
    fam, gib = sys.argv[1], float(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    total = int(gib * (1 << 30))
    f = {"tcp": socket.AF_INET, "tcp6": socket.AF_INET6, "unix": socket.AF_UNIX}[fam]
    ls = socket.socket(f, socket.SOCK_STREAM)
    if f == socket.AF_UNIX:
        path = "/tmp/zc-soak-%d.sock" % os.getpid()
        ls.bind(path)
        addr = path
    else:
        ls.bind(("::1" if f == socket.AF_INET6 else "127.0.0.1", 0))
        addr = ls.getsockname()[:2]
    ls.listen(1)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        c, _ = ls.accept()
        ls.close()
        res = run_end(c, total, seed + 1)
        res["paired"] = (zc_stat("local.paired.accepted") or 0, zc_stat("path.local.recv_bytes") or 0)
        os.write(wfd, repr(res).encode())
        os._exit(0)
    os.close(wfd)
    ls.close()
    c = socket.socket(f, socket.SOCK_STREAM)
    c.connect(addr)
    t0 = time.monotonic()
    mine = run_end(c, total, seed)
    theirs = read_all(rfd)
    os.waitpid(pid, 0)
    dt = time.monotonic() - t0
    if f == socket.AF_UNIX:
        os.unlink(addr)
    theirs = eval(theirs.decode()) if theirs else {"error": "server: no result"}
    ok = True
    for who, res in (("client", mine), ("server", theirs)):
        if "error" in res:
            print("FAIL: %s %s" % (who, res["error"]))
            ok = False
    if ok:
        if mine["sent"] != theirs["got"]:
            print("FAIL: client->server: sent %r, received %r" % (mine["sent"], theirs["got"]))
            ok = False
        if theirs["sent"] != mine["got"]:
            print("FAIL: server->client: sent %r, received %r" % (theirs["sent"], mine["got"]))
            ok = False
    lib = zc_stat("sockets.created") is not None
    if ok and lib:
        acc, rb = theirs["paired"]
        con, lb = zc_stat("local.paired.connected") or 0, zc_stat("path.local.recv_bytes") or 0
        # (the first bytes of each direction may go through the kernel
        # before the ring is switched on)
        if not (acc and con and rb >= 0.9 * total and lb >= 0.9 * total):
            print("FAIL: under the library but not paired (accepted %d, connected %d, local "
                  "bytes received %d / %d)" % (acc, con, rb, lb))
            ok = False
    if ok:
        print("soak %s: %.2f GiB each way, sha256 equal both ways, %.1f s (%.2f GB/s each way)%s"
              % (fam, gib, dt, total / dt / 1e9, ", paired" if lib else ", no library"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
