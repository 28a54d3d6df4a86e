#!/usr/bin/env python3
"""memcached text-protocol client: set N values (1 B .. 900 KiB,
pseudo-random), get them back one by one and in multi-gets, compare.
Usage: memcached_client.py PORT SEED N; prints "sent <sha> received <sha>"."""
import hashlib, random, socket, sys

port, seed, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rnd = random.Random(seed)
s = socket.create_connection(("127.0.0.1", port), timeout=30)
f = s.makefile("rb")
vals = {}
for i in range(n):
    size = rnd.choice((1, 10, 1000, 5000, 70000, 300000, 900000))
    k = "k%s-%d" % (seed, i)
    v = rnd.randbytes(size)
    vals[k] = v
    s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (k.encode(), len(v), v))
    line = f.readline()
    if line != b"STORED\r\n":
        sys.exit("set %s: %r" % (k, line))


def get(keys):
    s.sendall(b"get " + " ".join(keys).encode() + b"\r\n")
    out = {}
    while True:
        line = f.readline()
        if line == b"END\r\n":
            return out
        parts = line.split()
        if len(parts) != 4 or parts[0] != b"VALUE":
            sys.exit("get: %r" % line[:80])
        out[parts[1].decode()] = f.read(int(parts[3]))
        f.read(2)


got = {}
keys = list(vals)
for k in keys[: n // 2]:
    got.update(get([k]))
for i in range(n // 2, n, 8):
    got.update(get(keys[i:i + 8]))
a, b = hashlib.sha256(), hashlib.sha256()
for k in keys:
    a.update(vals[k])
    b.update(got.get(k, b"<missing>"))
print("sent %s received %s" % (a.hexdigest(), b.hexdigest()))
