#!/usr/bin/env python3
"""Localpath case "scale/*" (issue 31, thousands of connections): an epoll
echo server and a client, N connections (default 10,000) between them.

  1. the client opens N idle connections and BUSY busy ones, and makes three
     round trips on each (pair when it pays: ZCSOCK_LOCAL_PAIR_AFTER is the
     default here, so they pair by their traffic, at the third);
  2. with them all open and idle, each process reports what they cost it:
     descriptors, mappings and resident shared memory (RssShmem) more than
     before the first one, and the library's descriptors among them;
  3. the busy ones bounce messages of random sizes while the idle ones stay
     open; the server's epoll waits must not ask about the idle ones
     (ready.ep_looks per wait, ZCSOCK_SPIN=0, within LOOKS_MAX);
  4. the client closes every other idle connection abruptly (SO_LINGER 0:
     a reset, which the server must read as ECONNRESET, exactly N/2 times),
     then bounces one more message over each of the others, then closes
     everything; the server must read an end of stream on each;
  5. afterwards each process holds at most a few descriptors more than
     before its first connection (the library's for the process's life).
Every byte is checked.  Modes: "both" (both ends under the library: every
connection pairs, up to the descriptor budget below; at most one library
descriptor, one mapping and 16 KiB of resident shared memory per paired
connection), "client" and "server"
(the library on one end only: nothing pairs, and the library holds no
descriptor per connection).

The library's descriptors may take a quarter of the soft RLIMIT_NOFILE
(raised as far as allowed): beyond it new connections stay on the kernel,
said once (local.declined.fd_limit), and the application never meets
EMFILE where the kernel alone would not have; under a limit of 20,000 about
5,000 of 10,000 pair.

    lp_scale.py both|client|server [N]        (ZC_LIB names the library)
Exit 0 pass, 1 fail, 77 skip (the descriptor limit cannot hold N)."""
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lp_util import BOUNCE, STAT, check  # noqa: E402

BUSY, MSGS, LOOKS_MAX, SHM_KIB_MAX = 3, 3000, 40, 16

# What a process holds: its descriptors, its mappings and its resident
# shared memory in KiB, and the library's counters named.
PRELUDE = STAT + r"""
import ctypes, errno, os, random, select, socket, struct, sys, time
def holds():
    fds = set(int(f) for f in os.listdir("/proc/self/fd"))
    with open("/proc/self/maps") as f:
        maps = sum(1 for _ in f)
    with open("/proc/self/status") as f:
        shm = int([x.split()[1] for x in f if x.startswith("RssShmem:")][0])
    return fds, maps, shm
"""

SERVER = PRELUDE + r"""
n = int(sys.argv[1])
fds0, maps0, shm0 = holds()
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4096); l.setblocking(False)
print(l.getsockname()[1], flush=True)
ep = select.epoll()
ep.register(l.fileno(), select.EPOLLIN)
conns, accepted, closed, resets, eofs, echoed, waits = {}, 0, 0, 0, 0, 0, 0
looks0 = waits0 = looks1 = waits1 = None
while accepted < n or closed < n:
    evs = ep.poll(30)
    waits += 1
    if not evs:
        sys.exit("FAIL: server: no event for 30 s (%d accepted, %d closed of %d)" %
                 (accepted, closed, n))
    for fd, ev in evs:
        if fd == l.fileno():
            while True:
                try:
                    a, _ = l.accept()
                except BlockingIOError:
                    break
                a.setblocking(False)
                conns[a.fileno()] = a
                ep.register(a.fileno(), select.EPOLLIN)
                accepted += 1
            continue
        a = conns[fd]
        try:
            b = a.recv(65536)
        except BlockingIOError:
            continue
        except ConnectionResetError:
            b, resets = None, resets + 1
        if not b:
            eofs += b is not None
            ep.unregister(fd); del conns[fd]; a.close(); closed += 1
            continue
        if b == b"?":               # what the idle connections cost us
            fds, maps, shm = holds()
            lib = fds - fds0 - set(conns) - {l.fileno(), ep.fileno()}
            b = b"%d %d %d %d %d %d|" % (len(fds - fds0), len(lib), maps - maps0, shm - shm0,
                                         stat("local.paired.accepted"),
                                         stat("local.declined.fd_limit"))
        elif b == b"START":
            looks0, waits0 = stat("ready.ep_looks"), waits
        elif b == b"END..":
            looks1, waits1 = stat("ready.ep_looks"), waits
        a.setblocking(True); a.sendall(b); a.setblocking(False)
        echoed += len(b)
fds, _, _ = holds()
extra = fds - fds0 - {l.fileno(), ep.fileno()}
print("served %d %d %d %d %d %d" % (echoed, resets, eofs, len(extra),
      (looks1 - looks0) if looks0 is not None and looks1 is not None else -1,
      (waits1 - waits0) if waits0 is not None and waits1 is not None else -1), flush=True)
"""

CLIENT = PRELUDE + BOUNCE + r"""
port, n, busy, msgs = (int(a) for a in sys.argv[1:5])
def ask(s):
    s.sendall(b"?")
    got = b""
    while not got.endswith(b"|"):
        b = s.recv(256)
        if not b:
            sys.exit("FAIL: client: EOF")
        got += b
    return got[:-1].decode()
fds0, maps0, shm0 = holds()
socks = []
for i in range(n):
    socks.append(socket.create_connection(("127.0.0.1", port)))
    socks[-1].settimeout(30)
rnd = random.Random(31)
for r in range(3):                      # three round trips each: they pay, and pair
    msgs_r = [rnd.randbytes(2 + i % 97) for i in range(n)]   # (never a lone "?")
    for s, m in zip(socks, msgs_r):
        s.sendall(m)
    for s, m in zip(socks, msgs_r):
        if recv_exact(s, len(m)) != m:
            sys.exit("FAIL: client: round %d: an echo came back different" % r)
fds, maps, shm = holds()
lib = fds - fds0 - set(s.fileno() for s in socks)
mine = "%d %d %d %d %d %d" % (len(fds - fds0), len(lib), maps - maps0, shm - shm0,
                              stat("local.paired.connected"), stat("local.declined.fd_limit"))
print("idle client %s server %s" % (mine, ask(socks[0])), flush=True)
hot, idle = socks[:busy], socks[busy:]
bounce(hot[0], b"START")
time.sleep(0.35)                        # the server's wait sleeps past its safety net
total = 0
for m in range(msgs):
    data = rnd.randbytes(rnd.choice((2, 100, 4096, 20000)))
    bounce(hot[m % busy], data)
    total += len(data)
bounce(hot[0], b"END..")
for s in idle[0::2]:                    # abruptly: a reset
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
for i, s in enumerate(idle[1::2]):      # the others are still whole
    bounce(s, b"%d" % i)
for s in idle[1::2] + hot:
    s.close()
fds, _, _ = holds()
print("done %d %d" % (total, len(fds - fds0)), flush=True)
"""


def main():
    mode = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    want = 4 * n + 4096                 # the application's, the library's, and room
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:    # as high as allowed (root without CAP_SYS_RESOURCE: the hard limit)
        top = want if hard == resource.RLIM_INFINITY or hard >= want else hard
        if not os.geteuid() and hard != resource.RLIM_INFINITY and hard < want:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
                top = want
            except (ValueError, OSError):
                pass
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, top), max(hard, top)))
    except (ValueError, OSError):
        pass
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit < n + BUSY + limit // 4 + 64:      # (each process: its own, the library's)
        print("skip: RLIMIT_NOFILE %d cannot hold %d connections at both ends" % (limit, n))
        sys.exit(77)
    print("  RLIMIT_NOFILE %d: the library's descriptors may take a quarter, %d" %
          (limit, limit // 4))
    lib = os.environ["ZC_LIB"]
    base = {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", "ZCSOCK_LOCAL_PAIR_AFTER")}
    base["ZCSOCK_SPIN"] = "0"           # a spin looks again and again: count waits only
    on = dict(base, LD_PRELOAD=lib)
    senv = on if mode in ("both", "server") else base
    cenv = on if mode in ("both", "client") else base
    total = n + BUSY
    senv, cenv = dict(senv, ZCSOCK_DEBUG="1"), dict(cenv, ZCSOCK_DEBUG="1")
    srv = subprocess.Popen([sys.executable, "-c", SERVER, str(total)], env=senv,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = srv.stdout.readline().strip()
        check(port.isdigit(), "the server never listened")
        try:
            cli = subprocess.run([sys.executable, "-c", CLIENT, port, str(total), str(BUSY),
                                  str(MSGS)], env=cenv, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, timeout=400)
        except subprocess.TimeoutExpired:
            check(False, "the client ran past 400 s")
        sout, serr = srv.communicate(timeout=120)
    finally:
        if srv.poll() is None:
            srv.kill()
    print("  client: %s" % cli.stdout.strip().replace("\n", "; "))
    print("  server: %s" % sout.strip())
    said = "quarter of its descriptor limit"
    notices = {"client": cli.stderr.count(said), "server": serr.count(said)}
    for who, err in (("client", cli.stderr), ("server", serr)):
        for l in err.splitlines():
            if "Traceback" in err or "FAIL" in l or "Error" in l:
                print("  %s: %s" % (who, l))
    check(cli.returncode == 0 and srv.returncode == 0,
          "client exit %d, server exit %d" % (cli.returncode, srv.returncode))
    lines = dict((l.split(" ", 1)[0], l.split()[1:]) for l in cli.stdout.splitlines())
    idle, done, served = lines["idle"], lines["done"], sout.split()
    # idle: client <fds> <lib fds> <maps> <shm KiB> <paired> <fd_limit>, server the same
    c = [int(x) for x in idle[1:7]]
    s = [int(x) for x in idle[8:14]]
    # the library's descriptors stay within a quarter of the soft limit:
    # beyond it connections stay on the kernel, said once
    budget = limit // 4
    for who, v in (("client", c), ("server", s)):
        under = mode == "both" or mode == who
        paired = v[4] if under else 0
        print("  %s with %d connections open and idle: %d descriptors more (%d of them the "
              "library's), %d mappings more, %d KiB more resident shared memory; paired %d, "
              "kept on the kernel by the descriptor limit %d" %
              (who, total, v[0], v[1], v[2], v[3], v[4], v[5]))
        if mode == "both":
            want = min(total, budget)
            check(want - 16 <= paired <= want, "%s: %d connections paired, not %d (RLIMIT_NOFILE "
                  "%d)" % (who, paired, want, limit))
            check(paired + v[5] == total, "%s: %d paired and %d kept on the kernel by the "
                  "descriptor limit, of %d" % (who, paired, v[5], total))
            check((v[5] > 0) == (notices[who] > 0) and notices[who] <= 1,
                  "%s: %d notices of the descriptor limit" % (who, notices[who]))
        elif under:
            check(paired == 0, "%s: %d connections paired with the library on one end" %
                  (who, paired))
        check(v[1] <= paired + 8, "%s: %d library descriptors for %d paired connections "
              "(at most one a connection)" % (who, v[1], paired))
        check(v[2] <= paired + 64, "%s: %d mappings more for %d paired connections" %
              (who, v[2], paired))
        check(v[3] <= SHM_KIB_MAX * paired + 64, "%s: %d KiB of resident shared memory for "
              "%d idle paired connections (at most %d KiB each, and 64 KiB of the process's)" %
              (who, v[3], paired, SHM_KIB_MAX))
    echoed, resets, eofs, extra, looks, waits = (int(x) for x in served[1:7])
    halves = (n + 1) // 2
    check(resets == halves, "the server read %d resets, not %d" % (resets, halves))
    check(eofs == total - halves, "the server read %d ends of stream, not %d" %
          (eofs, total - halves))
    check(echoed >= int(done[0]), "echoed %d of %s bytes" % (echoed, done[0]))
    if mode in ("both", "server") and waits > 0:
        per_wait = looks / waits
        print("  server: %.1f registrations asked per epoll wait over %d busy and %d idle" %
              (per_wait, BUSY, n))
        check(per_wait <= LOOKS_MAX, "an epoll wait asked about %.1f registrations: the idle "
              "ones too" % per_wait)
    check(int(done[1]) <= 8 and extra <= 8, "descriptors left once every connection closed: "
          "client %s, server %d (the library keeps at most a few for the process's life)" %
          (done[1], extra))
    print("ok scale %s %d" % (mode, n))


if __name__ == "__main__":
    main()
