#!/usr/bin/env python3
"""Localpath case "defer/<mode>": pair when it pays (issue 31,
ZCSOCK_LOCAL_PAIR_AFTER).  Both ends under the library, the server
deferring its offer until the connection answered AFTER requests (default
2) or moved AFTER x 128 KiB.  Modes:

  one      one request, one answer, close: never paired, the server counts
           local.declined.short, every byte checked
  chatty   200 request/answer exchanges of random sizes (1 B - 200 KiB), the
           client peeking (MSG_PEEK) and asking FIONREAD before each read:
           pairs mid-stream, after the first answers went through the
           kernel, and carries the rest through the ring
  bulk     one small request, then 64 MiB from the server in one go: pairs on
           the bytes rule with the answer in flight
  both     after one exchange both ends stream 32 MiB at once (non-blocking,
           select): the switch happens with data in flight both ways
  blocked  the client sits in a blocking recv while the server answers the
           request that makes the connection pay (the offer comes while the
           client waits in the kernel)
  peek     after the exchanges that make it pay, the server sends 1000 bytes
           (through the kernel: the client has not attached yet), then 1000
           more after 0.2 s (through the ring), while the client waits in a
           blocking MSG_PEEK|MSG_WAITALL of 1500: the peek spans the switch
           point and must return all 1500, as the kernel's would
  inq      the client turns TCP_INQ on, as gRPC does, and reads each of 60
           echoed answers (up to 30 KiB) in random pieces once all of it
           has arrived; the server writes the second half only after the
           client read the first byte (where it takes an offer up), so the
           switch point falls inside an answer: every recvmsg must carry a
           TCP_CM_INQ message that counts exactly the bytes left (the
           kernel's own count, doorbells included and the ring left out,
           said 0 at the switch point with the rest waiting in the ring,
           and gRPC then waited for an edge that had come already)
  trickle  AF_UNIX (ZCSOCK_LOCAL_UNIX=1, the client announced at its
           connect): the client sends 400,000 bytes one byte a send, the
           server reads them in big pieces; the connection pays at 256 KiB
           and must pair soon after, not at the client's next look by its
           1st, 2nd, 4th ... send count (524,288: never); the ring carries
           at least 100,000 of the bytes
  calls    TCP: the client sends 40,000 bytes one byte a send, the server
           reads them one byte a receive: no request answered, 40 KB moved,
           yet the connection pays by its calls (LP_PAIR_CALLS: the client
           announces at its 1,024th send, the server offers at its 2,048th
           receive) and the ring carries at least 20,000 of the bytes; 4 KiB
           socket buffers keep the client from running far ahead of the
           server (its looks for the offer come at its 1st, 2nd, 4th ...
           send after announcing: with the whole stream queued in the kernel
           before the offer, nothing would be left for the ring)

Every byte is checked (sha256 / exact echo); the statistics of both ends
say whether the connection paired and that the ring carried bytes.
"<mode>/server-only" runs the client without the library: the server's
offers find no announcement, and it carries on plain.

    lp_defer.py MODE [AFTER]        (ZC_LIB names the library)
Exit 0 pass, 1 fail."""
import os
import sys

from lp_util import RECV_EXACT, STAT, run_server_client

COMMON = STAT + RECV_EXACT + r"""
import ctypes, hashlib, os, random, select, socket, struct, sys, fcntl, termios, time
def send_msg(s, b):
    s.sendall(struct.pack("!I", len(b)) + b)
def recv_msg(s, peek=False):
    if peek:
        h = s.recv(4, socket.MSG_PEEK)
        # FIONREAD answers a native int (not network order: "!i" read 151
        # as -1761672960 in CI)
        k = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
        if not h or k < len(h):
            sys.exit("FAIL: peek %r / FIONREAD %d before a message" % (h, k))
    n = struct.unpack("!I", recv_exact(s, 4))[0]
    return recv_exact(s, n)
def blob(seed, n):
    return random.Random(seed).randbytes(n)
TRICKLE = 400000
CALLS = 40000
"""

SERVER = COMMON + r"""
import threading
mode, threaded = sys.argv[1], sys.argv[2] == "threaded"
if threaded:        # a second thread from the start: the process is not single-threaded
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
if mode == "trickle":
    import tempfile
    path = os.path.join(tempfile.mkdtemp(), "s")
    l = socket.socket(socket.AF_UNIX); l.bind(path); l.listen(1)
    print(path, flush=True)
else:
    l = socket.socket(); l.bind(("127.0.0.1", 0))
    if mode == "calls":     # (the accepted socket inherits it)
        l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    l.listen(1)
    print(l.getsockname()[1], flush=True)
a, _ = l.accept()
a.settimeout(60)
if mode == "one":
    send_msg(a, recv_msg(a))
elif mode == "chatty":
    for i in range(200):
        send_msg(a, recv_msg(a))
elif mode == "bulk":
    n = struct.unpack("!I", recv_msg(a))[0]
    a.sendall(blob(7, n))
elif mode == "both" and threaded:
    # one thread sends (blocking) while this one sits in blocking receives:
    # the offer is made between two of them, or never
    send_msg(a, recv_msg(a))
    out, got, n = blob(11, 32 << 20), hashlib.sha256(), 32 << 20
    a.settimeout(None)
    tx = threading.Thread(target=a.sendall, args=(out,))
    tx.start()
    rcvd = 0
    while rcvd < n:
        b = a.recv(1 << 18)
        if not b:
            sys.exit("FAIL: server: EOF after %d bytes" % rcvd)
        got.update(b); rcvd += len(b)
    tx.join(60)
    if got.hexdigest() != hashlib.sha256(blob(13, n)).hexdigest():
        sys.exit("FAIL: server: the client's stream came different")
elif mode == "both":
    send_msg(a, recv_msg(a))
    out, got, n = blob(11, 32 << 20), hashlib.sha256(), 32 << 20
    a.setblocking(False)
    sent = rcvd = 0
    t0 = time.time()
    while sent < n or rcvd < n:
        if time.time() - t0 > 60:
            sys.exit("FAIL: server: streaming both ways took over 60 s")
        r, w, _ = select.select([a] if rcvd < n else [], [a] if sent < n else [], [], 5)
        if w:
            try:
                sent += a.send(out[sent:sent + (1 << 18)])
            except BlockingIOError:
                pass
        if r:
            try:
                b = a.recv(1 << 18)
            except BlockingIOError:
                b = None
            if b == b"":
                sys.exit("FAIL: server: EOF after %d bytes" % rcvd)
            if b:
                got.update(b); rcvd += len(b)
    a.setblocking(True)
    if got.hexdigest() != hashlib.sha256(blob(13, n)).hexdigest():
        sys.exit("FAIL: server: the client's stream came different")
elif mode == "calls":
    pat = bytes(range(251)) * (CALLS // 251 + 2)
    for i in range(CALLS):
        b = a.recv(1)
        if b != pat[i:i + 1]:
            sys.exit("FAIL: server: byte %d came %r" % (i, b))
elif mode == "trickle":
    n, rcvd = TRICKLE, 0
    pat = bytes(range(251)) * (n // 251 + 2)
    while rcvd < n:
        b = a.recv(1 << 16)
        if not b:
            sys.exit("FAIL: server: EOF after %d bytes" % rcvd)
        if b != pat[rcvd:rcvd + len(b)]:
            sys.exit("FAIL: server: byte %d onwards came different" % rcvd)
        rcvd += len(b)
elif mode == "blocked":
    for i in range(8):
        m = recv_msg(a)
        time.sleep(0.1)             # the client sits in recv meanwhile
        send_msg(a, m)
elif mode == "inq":
    for i in range(60):
        m = recv_msg(a)
        out = struct.pack("!I", len(m)) + m
        half = len(out) // 2
        step = half // 4 + 1
        for j in range(0, half, step):
            a.sendall(out[j:min(j + step, half)])
        if recv_exact(a, 1) != b"g":    # the client read the first byte
            sys.exit("FAIL: server: no go")
        for j in range(half, len(out), step):
            a.sendall(out[j:j + step])
elif mode == "peek":
    for i in range(4):
        send_msg(a, recv_msg(a))
    if recv_msg(a) != b"peek":
        sys.exit("FAIL: server: no peek request")
    a.sendall(b"x" * 1000)
    time.sleep(0.2)
    a.sendall(b"y" * 1000)
    if recv_exact(a, 4) != b"done":
        sys.exit("FAIL: server: no done")
a.shutdown(socket.SHUT_WR)
if a.recv(1) != b"":
    sys.exit("FAIL: server: bytes after the end")
a.close()
print("server %d %d %d %d" % (stat("local.paired.accepted"), stat("local.declined.short"),
                              stat("path.local.recv_bytes"), stat("path.local.send_bytes")),
      flush=True)
"""

CLIENT = COMMON + r"""
import threading
port, mode, threaded = sys.argv[1], sys.argv[2], sys.argv[3] == "threaded"
if threaded:        # a second thread from the start: the process is not single-threaded
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
if mode == "trickle":
    s = socket.socket(socket.AF_UNIX); s.connect(port)
elif mode == "calls":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    s.connect(("127.0.0.1", int(port)))
else:
    s = socket.create_connection(("127.0.0.1", int(port)))
s.settimeout(60)
rnd = random.Random(31)
if mode in ("trickle", "calls"):
    one = [bytes([i]) for i in range(251)]
    for i in range(TRICKLE if mode == "trickle" else CALLS):
        s.send(one[i % 251])
elif mode == "one":
    m = b"GET / HTTP/1.0\r\n\r\n"
    send_msg(s, m)
    if recv_msg(s) != m:
        sys.exit("FAIL: client: the answer came different")
elif mode == "chatty":
    for i in range(200):
        m = rnd.randbytes(rnd.choice((1, 100, 4096, 70000, 200000)))
        send_msg(s, m)
        if recv_msg(s, peek=True) != m:
            sys.exit("FAIL: client: answer %d came different" % i)
elif mode == "bulk":
    n = 64 << 20
    send_msg(s, struct.pack("!I", n))
    if hashlib.sha256(recv_exact(s, n)).digest() != hashlib.sha256(blob(7, n)).digest():
        sys.exit("FAIL: client: the 64 MiB came different")
elif mode == "both" and threaded:
    # one thread sits in blocking receives while this one sends (blocking):
    # the announcement is made between two receives, or never
    send_msg(s, b"go")
    if recv_msg(s) != b"go":
        sys.exit("FAIL: client: the first answer came different")
    out, got, n = blob(13, 32 << 20), hashlib.sha256(), 32 << 20
    s.settimeout(None)
    res = []
    def rx():
        k = 0
        while k < n:
            b = s.recv(1 << 18)
            if not b:
                res.append("EOF after %d bytes" % k)
                return
            got.update(b); k += len(b)
        res.append("ok")
    t = threading.Thread(target=rx)
    t.start()
    s.sendall(out)
    t.join(60)
    if res != ["ok"]:
        sys.exit("FAIL: client: receiving thread: %r" % res)
    if got.hexdigest() != hashlib.sha256(blob(11, n)).hexdigest():
        sys.exit("FAIL: client: the server's stream came different")
    s.settimeout(60)
elif mode == "both":
    send_msg(s, b"go")
    if recv_msg(s) != b"go":
        sys.exit("FAIL: client: the first answer came different")
    out, got, n = blob(13, 32 << 20), hashlib.sha256(), 32 << 20
    s.setblocking(False)
    sent = rcvd = 0
    t0 = time.time()
    while sent < n or rcvd < n:
        if time.time() - t0 > 60:
            sys.exit("FAIL: client: streaming both ways took over 60 s")
        r, w, _ = select.select([s] if rcvd < n else [], [s] if sent < n else [], [], 5)
        if w:
            try:
                sent += s.send(out[sent:sent + (1 << 18)])
            except BlockingIOError:
                pass
        if r:
            try:
                b = s.recv(1 << 18)
            except BlockingIOError:
                b = None
            if b == b"":
                sys.exit("FAIL: client: EOF after %d bytes" % rcvd)
            if b:
                got.update(b); rcvd += len(b)
    s.setblocking(True)
    if got.hexdigest() != hashlib.sha256(blob(11, n)).hexdigest():
        sys.exit("FAIL: client: the server's stream came different")
elif mode == "blocked":
    for i in range(8):
        m = rnd.randbytes(50000)
        send_msg(s, m)
        if recv_msg(s) != m:
            sys.exit("FAIL: client: answer %d came different" % i)
elif mode == "inq":
    s.setsockopt(socket.IPPROTO_TCP, 36, 1)        # TCP_INQ (36), as gRPC sets it
    for i in range(60):
        m = rnd.randbytes(rnd.choice((10, 3000, 20000, 30000)))
        send_msg(s, m)
        # one byte first (a receive: where the client takes an offer up),
        # then the server sends the second half (through the ring once the
        # offer was taken: the switch point falls between the halves)
        want, got = 4 + len(m), bytearray(s.recv(1))
        s.sendall(b"g")
        t0 = time.time()
        while struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0] < want - 1:
            if time.time() - t0 > 10:
                sys.exit("FAIL: client: answer %d never arrived whole" % i)
            time.sleep(0.001)
        while len(got) < want:
            b, anc, _, _ = s.recvmsg(min(want - len(got), rnd.choice((1, 7, 1000, 4096, 65536))),
                                     socket.CMSG_SPACE(4))
            if not b:
                sys.exit("FAIL: client: EOF in answer %d" % i)
            got += b
            inq = [struct.unpack("i", d[:4])[0] for lv, ty, d in anc
                   if lv == socket.IPPROTO_TCP and ty == 36]
            # (after the last answer the server shuts its side: once its FIN
            # is in, the kernel counts one more, so that a reader reads on)
            if inq != [want - len(got)] and not (i == 59 and inq == [want - len(got) + 1]):
                sys.exit("FAIL: client: answer %d, %d of %d bytes read: TCP_CM_INQ %r, want [%d]"
                         % (i, len(got), want, inq, want - len(got)))
        if bytes(got) != struct.pack("!I", len(m)) + m:
            sys.exit("FAIL: client: answer %d came different" % i)
    b, anc, _, _ = s.recvmsg(1, socket.CMSG_SPACE(4))   # the server's end
    inq = [struct.unpack("i", d[:4])[0] for lv, ty, d in anc if lv == socket.IPPROTO_TCP and ty == 36]
    print("EOF inq", b, inq, file=sys.stderr)
    if b != b"" or inq != [1]:
        sys.exit("FAIL: client: at the end %r with TCP_CM_INQ %r, want b'' with [1]" % (b, inq))
    s.shutdown(socket.SHUT_WR)
    s.close()
    print("client %d %d %d" % (stat("local.paired.connected"), stat("path.local.recv_bytes"),
                               stat("path.local.send_bytes")), flush=True)
    sys.exit(0)
elif mode == "peek":
    for i in range(4):
        m = rnd.randbytes(100)
        send_msg(s, m)
        if recv_msg(s) != m:
            sys.exit("FAIL: client: answer %d came different" % i)
    send_msg(s, b"peek")
    s.settimeout(None)      # blocking (a timeout makes Python's socket non-blocking)
    b = s.recv(1500, socket.MSG_PEEK | socket.MSG_WAITALL)
    s.settimeout(60)
    if b != b"x" * 1000 + b"y" * 500:
        sys.exit("FAIL: client: MSG_PEEK|MSG_WAITALL returned %d bytes" % len(b))
    if recv_exact(s, 2000) != b"x" * 1000 + b"y" * 1000:
        sys.exit("FAIL: client: the read after the peek came different")
    s.sendall(b"done")
s.shutdown(socket.SHUT_WR)
if s.recv(1) != b"":
    sys.exit("FAIL: client: bytes after the end")
s.close()
print("client %d %d %d" % (stat("local.paired.connected"), stat("path.local.recv_bytes"),
                           stat("path.local.send_bytes")), flush=True)
"""

# mode -> must the connection pair?
PAIRS = {"one": False, "chatty": True, "bulk": True, "both": True, "blocked": True,
         "peek": True, "inq": True, "trickle": True, "calls": True}


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "chatty"
    after = sys.argv[2] if len(sys.argv) > 2 else "2"
    # "<mode>/server-only": the client runs without the library: the server
    # offers again and again (finding no announcement) and nothing pairs
    server_only = mode.endswith("/server-only")
    # "<mode>/threaded": the server is multi-threaded (kernel calls in flight
    # are counted, lp_kio_enter); "both/threaded" receives in one thread
    # while another sends, so it may never find a moment to offer: any
    threaded = mode.endswith("/threaded")
    # "<mode>/threaded-client": the client is multi-threaded (its receives in
    # the kernel are counted and the announcement waits for a moment with
    # none); "both/threaded-client" receives in one thread while another sends
    tclient = mode.endswith("/threaded-client")
    mode = mode.split("/")[0]
    env = dict(os.environ, LD_PRELOAD=os.environ["ZC_LIB"], ZCSOCK_LOCAL_PAIR_AFTER=after,
               ZCSOCK_LOCAL_UNIX="1")
    cenv = dict(env)
    if server_only:
        del cenv["LD_PRELOAD"]
    crc, cout, src, sout, err = run_server_client(SERVER, [mode, "threaded" if threaded else "plain"], CLIENT,
                                                     [mode, "threaded" if tclient else "plain"], env, cenv)
    if err:
        print("FAIL: " + err)
        return 1
    print("%s; %s" % (cout.strip(), sout.strip()))
    c, s = cout.split(), sout.split()
    if crc != 0 or src != 0 or len(c) != 4 or len(s) != 5:
        print("FAIL: client exit %d, server exit %d" % (crc, src))
        return 1
    paired_c, paired_s, short = int(c[1]), int(s[1]), int(s[2])
    ring = int(c[2]) + int(c[3]) + int(s[3]) + int(s[4])
    if server_only:
        if paired_c != -1 or paired_s != 0 or int(s[3]) + int(s[4]) != 0:
            print("FAIL: with a client without the library nothing may pair (client %d, "
                  "server %d)" % (paired_c, paired_s))
            return 1
        return 0
    if (threaded or tclient) and mode == "both":
        # Both paired or neither; or the server found its moment to offer
        # only near the end and the client, whose looks for a deferred
        # offer come at its 1st, 2nd, 4th ... call, made none before its
        # shutdown gave the offer up: then nothing went through a ring
        # (every byte above was checked all the same).  Seen once in a full
        # run (client 0, server 1, no ring bytes), not in 30 runs by hand.
        if paired_c == paired_s or (paired_c == 0 and paired_s == 1 and ring == 0):
            return 0
        print("FAIL: client paired %d, server %d, ring bytes %d" % (paired_c, paired_s, ring))
        return 1
    if mode == "trickle" and int(c[3]) < 100000:
        print("FAIL: the ring carried %d of the client's 400,000 bytes (at least 100,000: "
              "the client found the offer late)" % int(c[3]))
        return 1
    if mode == "calls" and int(c[3]) < 20000:
        print("FAIL: the ring carried %d of the client's 40,000 one-byte sends (at least "
              "20,000: the connection pays by its calls)" % int(c[3]))
        return 1
    if PAIRS[mode]:
        if paired_c != 1 or paired_s != 1 or ring <= 0:
            print("FAIL: expected a pairing that carried bytes (client %d, server %d, ring "
                  "bytes %d)" % (paired_c, paired_s, ring))
            return 1
    elif paired_c or paired_s or short != 1 or ring:
        print("FAIL: a one-request connection paired or was not counted short (client %d, "
              "server %d, short %d, ring bytes %d)" % (paired_c, paired_s, short, ring))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
