#!/usr/bin/env python3
"""Contracts of DESIGN.md §3 on connections the local path pairs.

    t_local.py run CASE MODE [FAMILY]   launcher: starts the server and the
                                        client roles, each with or without
                                        the library (MODE: both, server,
                                        client, none), and checks both
    t_local.py serve CASE FAMILY        server role (prints its port)
    t_local.py connect CASE FAMILY ADDR client role

Every role checks what the kernel would give (the same test passes without
the library) and reports whether its connection was paired; in mode "both"
the launcher requires that it was, so a case cannot pass by never taking the
local path.  T_BYTES bounds the streaming cases."""
import ctypes
import errno
import fcntl
import hashlib
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

HERE = os.path.abspath(__file__)
NBYTES = int(os.environ.get("T_BYTES", str(1 << 30)))
UNIX_DIR = None


def fail(msg):
    sys.stderr.write("FAIL: %s\n" % msg)
    sys.stderr.flush()
    os._exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def zc_stat(name):
    try:
        f = ctypes.CDLL(None).zcsock_stat_get
    except AttributeError:
        return None
    v = ctypes.c_uint64()
    if f(name.encode(), ctypes.byref(v)) != 0:
        return None
    return v.value


def paired():
    return (zc_stat("local.paired.accepted") or 0) + (zc_stat("local.paired.connected") or 0) + \
        (zc_stat("local.inherited") or 0) > 0


def pattern(seed, n=1 << 20):
    return random.Random(seed).randbytes(n)


# --- streaming helpers ------------------------------------------------------

def send_stream(s, seed, total, sizes=(1, 7, 100, 4096, 65536, 1 << 20, 300001)):
    """Send total bytes of the seed's pattern in mixed sizes, then its sha256."""
    blk = pattern(seed)
    blk2 = memoryview(blk + blk)
    rnd = random.Random(seed + 1)
    h = hashlib.sha256()
    off = 0
    while off < total:
        n = min(rnd.choice(sizes), total - off, len(blk))
        part = blk2[off % len(blk):off % len(blk) + n]
        h.update(part)
        s.sendall(part)
        off += n
    s.sendall(h.digest())


def recv_stream(s, total):
    """Receive total bytes + the sender's sha256 and compare."""
    h = hashlib.sha256()
    buf = bytearray(1 << 20)
    mv = memoryview(buf)
    rnd = random.Random(7)
    got = 0
    while got < total:
        want = min(rnd.choice((1, 13, 4096, 65536, 1 << 20)), total - got)
        n = s.recv_into(mv[:want])
        check(n > 0, "stream ended early at %d of %d" % (got, total))
        h.update(mv[:n])
        got += n
    digest = recv_exact(s, 32)
    check(digest == h.digest(), "sha256 mismatch after %d bytes" % total)


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        check(b, "EOF after %d of %d bytes" % (len(out), n))
        out += b
    return out


def expect_eof(s):
    check(s.recv(10) == b"", "expected EOF")


def fionread(s):
    b = fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0")
    return struct.unpack("i", b)[0]


def wait_fionread(s, n, secs=5):
    end = time.time() + secs
    while time.time() < end:
        if fionread(s) >= n:
            return fionread(s)
        time.sleep(0.005)
    return fionread(s)


# --- cases: (server(conn), client(conn)) -------------------------------------

def s_stream_both(c):
    t = threading.Thread(target=send_stream, args=(c, 1, NBYTES))
    t.start()
    recv_stream(c, NBYTES)
    t.join()


def c_stream_both(c):
    t = threading.Thread(target=send_stream, args=(c, 2, NBYTES))
    t.start()
    recv_stream(c, NBYTES)
    t.join()


def s_sizes(c):
    # gather sends, partial non-blocking writes, scattered receives
    rnd = random.Random(3)
    h = hashlib.sha256()
    c.setblocking(False)
    total = min(NBYTES, 64 << 20)
    sent = 0
    blk = pattern(4)
    while sent < total:
        parts = [blk[i:i + rnd.randint(0, 70000)] for i in range(rnd.randint(1, 5))]
        try:
            n = c.sendmsg(parts)
        except BlockingIOError:
            select.select([], [c], [], 5)
            continue
        flat = b"".join(parts)[:n]
        h.update(flat)
        sent += n
    c.setblocking(True)
    c.shutdown(socket.SHUT_WR)
    check(recv_exact(c, 32) == h.digest(), "client digest differs")
    expect_eof(c)


def c_sizes(c):
    h = hashlib.sha256()
    rnd = random.Random(5)
    bufs = [bytearray(rnd.randint(1, 50000)) for _ in range(4)]
    while True:
        n, _, flags, _ = c.recvmsg_into(bufs)
        if n == 0:
            break
        for b in bufs:
            k = min(n, len(b))
            h.update(b[:k])
            n -= k
            if not n:
                break
    c.sendall(h.digest())
    c.close()


def s_peek(c):
    c.sendall(b"0123456789" * 100)
    check(recv_exact(c, 2) == b"ok", "no ok")
    c.sendall(b"abc")
    check(recv_exact(c, 4) == b"done", "no done")


def c_peek(c):
    check(wait_fionread(c, 1000) == 1000, "FIONREAD %d, expected 1000" % fionread(c))
    check(c.recv(10, socket.MSG_PEEK) == b"0123456789", "MSG_PEEK")
    check(c.recv(10, socket.MSG_PEEK) == b"0123456789", "second MSG_PEEK")
    check(fionread(c) == 1000, "FIONREAD after peek")
    check(c.recv(10) == b"0123456789", "read after peek")
    check(c.recv(990, socket.MSG_WAITALL) == b"0123456789" * 99, "MSG_WAITALL")
    check(fionread(c) == 0, "FIONREAD after drain: %d" % fionread(c))
    try:
        c.recv(10, socket.MSG_DONTWAIT)
        fail("MSG_DONTWAIT on an empty socket returned data")
    except BlockingIOError:
        pass
    c.sendall(b"ok")
    # WAITALL across a later arrival
    check(c.recv(3, socket.MSG_WAITALL) == b"abc", "WAITALL across arrivals")
    c.sendall(b"done")


def s_lowat(c):
    check(recv_exact(c, 1) == b"r", "no ready")
    c.sendall(b"x" * 50)
    time.sleep(0.3)
    c.sendall(b"y" * 60)
    check(recv_exact(c, 2) == b"ok", "no ok")


def c_lowat(c):
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 100)
    c.sendall(b"r")
    p = select.poll()
    p.register(c, select.POLLIN)
    check(wait_fionread(c, 50, 2) == 50, "50 bytes did not arrive")
    check(p.poll(100) == [], "readable below SO_RCVLOWAT")
    ev = p.poll(5000)
    check(ev and ev[0][1] & select.POLLIN, "not readable at SO_RCVLOWAT")
    check(recv_exact(c, 110) == b"x" * 50 + b"y" * 60, "lowat data")
    c.sendall(b"ok")


def epoll_read_all(c, ep, want, secs=10):
    out = b""
    end = time.time() + secs
    while len(out) < want:
        check(time.time() < end, "epoll: only %d of %d bytes" % (len(out), want))
        evs = ep.poll(1.0)
        for fd, ev in evs:
            while True:
                try:
                    b = c.recv(65536)
                except BlockingIOError:
                    break
                check(b, "EOF in epoll read")
                out += b
    return out


def s_epoll(c):
    c.setblocking(False)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN | select.EPOLLET)
    for i in range(50):
        msg = epoll_read_all(c, ep, 1000 + i)
        check(msg == bytes([i % 251]) * (1000 + i), "epoll round %d" % i)
        # nothing more is coming: edge-triggered epoll must stay quiet
        check(ep.poll(0.02) == [], "spurious EPOLLIN after draining (round %d)" % i)
        c.setblocking(True)
        c.sendall(b"k")
        c.setblocking(False)
    c.setblocking(True)
    check(recv_exact(c, 3) == b"bye", "no bye")


def c_epoll(c):
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN)      # level-triggered on this side
    for i in range(50):
        c.sendall(bytes([i % 251]) * (1000 + i))
        evs = ep.poll(5.0)
        check(evs and evs[0][1] & select.EPOLLIN, "no EPOLLIN for the ack (round %d)" % i)
        check(c.recv(1) == b"k", "ack")
        check(ep.poll(0) == [], "level-triggered EPOLLIN without data (round %d)" % i)
    c.sendall(b"bye")


def epoll_read_exact(c, ep, want, secs=10):
    """Level-triggered, like libuv: wait, then read exactly what is due (a
    read that returns less than asked is not followed by one that fails)."""
    out = b""
    end = time.time() + secs
    while len(out) < want:
        check(time.time() < end, "epoll: only %d of %d bytes" % (len(out), want))
        if not ep.poll(1.0):
            continue
        try:
            b = c.recv(want - len(out))
        except BlockingIOError:
            continue
        check(b, "EOF in epoll read")
        out += b
    return out


def s_epoll_readd(c):
    # libuv's way: EPOLL_CTL_ADD of a descriptor already in the set gets
    # EEXIST, then EPOLL_CTL_MOD; readiness must keep coming from the path
    c.setblocking(False)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN)
    try:
        ep.register(c.fileno(), select.EPOLLIN)
        fail("second EPOLL_CTL_ADD did not fail")
    except FileExistsError:
        pass
    ep.modify(c.fileno(), select.EPOLLIN)
    for i in range(50):
        msg = epoll_read_exact(c, ep, 1000 + i)
        check(msg == bytes([i % 251]) * (1000 + i), "epoll round %d" % i)
        # nothing is due until our ack: level-triggered epoll must say so
        check(ep.poll(0.01) == [], "EPOLLIN without data (round %d)" % i)
        c.setblocking(True)
        c.sendall(b"k")
        c.setblocking(False)
    c.setblocking(True)
    check(recv_exact(c, 3) == b"bye", "no bye")


def s_epoll_excl(c):
    # EPOLLEXCLUSIVE registrations cannot be modified: re-arming must
    # register them again, and readiness must follow the path
    c.setblocking(False)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLEXCLUSIVE)
    for i in range(50):
        msg = epoll_read_all(c, ep, 1000 + i)
        check(msg == bytes([i % 251]) * (1000 + i), "epoll round %d" % i)
        c.setblocking(True)
        c.sendall(b"k")
        c.setblocking(False)
    c.setblocking(True)
    check(recv_exact(c, 3) == b"bye", "no bye")


def s_pollout(c):
    # fill our sending side until it would block, then wait for room
    c.setblocking(False)
    sent = 0
    blk = b"z" * 65536
    while True:
        try:
            sent += c.send(blk)
        except BlockingIOError:
            break
        check(sent < (1 << 30), "never full")
    p = select.poll()
    p.register(c, select.POLLOUT)
    check(p.poll(200) == [], "POLLOUT while full")
    r, w, _ = select.select([], [c], [], 0.1)
    check(w == [], "select writable while full")
    ev = p.poll(10000)
    check(ev and ev[0][1] & select.POLLOUT, "no POLLOUT after the peer read")
    c.setblocking(True)
    c.sendall(b"E")
    check(recv_exact(c, 2) == b"ok", "no ok")


def c_pollout(c):
    time.sleep(0.5)
    while True:
        b = c.recv(1 << 20)
        check(b, "EOF")
        if b[-1:] == b"E":
            break
        check(b.count(b"z") == len(b), "stray bytes")
    c.sendall(b"ok")


def s_poll_truth(c):
    for i in range(30):
        check(recv_exact(c, 1) == b"q", "query")
        c.sendall(b"a" * (i + 1))
    check(recv_exact(c, 3) == b"bye", "no bye")     # our EOF would be readable


def c_poll_truth(c):
    p = select.poll()
    p.register(c, select.POLLIN)
    for i in range(30):
        c.sendall(b"q")
        check(p.poll(5000), "no POLLIN for the answer")
        r, _, _ = select.select([c], [], [], 5)
        check(r == [c], "select not readable")
        check(recv_exact(c, i + 1) == b"a" * (i + 1), "answer")
        # drained: neither poll nor select may call it readable now
        check(p.poll(20) == [], "POLLIN on a drained socket (round %d)" % i)
        r, _, _ = select.select([c], [], [], 0.02)
        check(r == [], "select readable on a drained socket (round %d)" % i)
    c.sendall(b"bye")


def s_halfclose(c):
    check(recv_exact(c, 5) == b"hello", "hello")
    expect_eof(c)
    expect_eof(c)
    c.sendall(b"reply after your FIN")
    c.close()


def c_halfclose(c):
    c.sendall(b"hello")
    c.shutdown(socket.SHUT_WR)
    check(recv_exact(c, 20) == b"reply after your FIN", "reply")
    expect_eof(c)
    try:
        c.send(b"x")
        fail("send after SHUT_WR succeeded")
    except BrokenPipeError:
        pass


SIGPIPES = []


def s_epipe(c):
    check(recv_exact(c, 1) == b"s", "start")
    c.close()


def c_epipe(c):
    signal.signal(signal.SIGPIPE, lambda *a: SIGPIPES.append(1))
    c.sendall(b"s")
    check(c.recv(1) == b"", "EOF from the closed peer")
    err = None
    for i in range(200):
        try:
            c.send(b"data" * 100)
        except (BrokenPipeError, ConnectionResetError) as e:
            err = e
            break
        time.sleep(0.01)
    check(err is not None, "sends to a closed peer never failed")
    if isinstance(err, BrokenPipeError):
        check(SIGPIPES, "EPIPE without SIGPIPE")


def s_reset(c):
    c.sendall(b"x" * 1000)
    check(recv_exact(c, 1) == b"s", "start")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def c_reset(c):
    check(wait_fionread(c, 1000) == 1000, "data did not arrive")
    c.sendall(b"s")
    time.sleep(0.3)
    # Linux still hands out what was queued, then the reset
    check(recv_exact(c, 1000) == b"x" * 1000, "queued data after the reset")
    try:
        b = c.recv(10)
        fail("recv after the peer's abortive close returned %r" % b[:10])
    except ConnectionResetError:
        pass


def s_unread_close(c):
    # closing with unread data resets the connection (like the kernel)
    check(wait_fionread(c, 10) >= 10, "data did not arrive")
    c.close()


def c_unread_close(c):
    c.sendall(b"0123456789")
    time.sleep(0.3)
    try:
        c.recv(10)
        r = "eof"
    except ConnectionResetError:
        r = "reset"
    check(r == "reset", "peer closed with unread data: expected ECONNRESET, got %s" % r)


def s_fork(c):
    # a data call before the fork makes the offer (the server offers at its
    # first one): the child inherits a paired connection
    check(c.recv(1, socket.MSG_PEEK), "first byte")
    pid = os.fork()
    if pid == 0:
        try:
            recv_stream(c, min(NBYTES, 64 << 20))
            send_stream(c, 9, 1 << 20)
            os._exit(0)
        except SystemExit:
            os._exit(1)
    c.close()
    _, st = os.waitpid(pid, 0)
    check(st == 0, "forked child failed (%d)" % st)


def c_fork(c):
    send_stream(c, 8, min(NBYTES, 64 << 20))
    recv_stream(c, 1 << 20)


def s_exec(c):
    c.set_inheritable(True)
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, HERE, "echo", str(c.fileno())])
    c.close()
    _, st = os.waitpid(pid, 0)
    check(st == 0, "exec'd child failed (%d)" % st)


def c_exec(c):
    for i in range(20):
        msg = bytes([65 + i]) * (1 << i)
        c.sendall(struct.pack("I", len(msg)) + msg)
        check(recv_exact(c, len(msg)) == msg, "echo %d" % i)
    c.sendall(struct.pack("I", 0))
    expect_eof(c)


def s_exec2(c):
    # like socat's exec: the connection on two descriptors (read one, write the other)
    d = os.dup(c.fileno())
    c.set_inheritable(True)
    os.set_inheritable(d, True)
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, HERE, "echo", str(c.fileno()), str(d)])
    c.close()
    os.close(d)
    _, st = os.waitpid(pid, 0)
    check(st == 0, "exec'd child failed (%d)" % st)


def s_subprocess(c):
    # subprocess (vfork + exec in CPython): an unrelated child must not touch
    # the connection, and one given the descriptor (pass_fds) takes it over
    check(subprocess.run([sys.executable, "-c", "pass"], close_fds=True).returncode == 0,
          "plain child")
    c.sendall(b"1")
    check(recv_exact(c, 1) == b"2", "exchange after a child came and went")
    p = subprocess.Popen([sys.executable, HERE, "echo", str(c.fileno())], pass_fds=[c.fileno()])
    c.close()
    check(p.wait(timeout=120) == 0, "child given the connection failed")


def c_subprocess(c):
    check(recv_exact(c, 1) == b"1", "exchange after a child came and went")
    c.sendall(b"2")
    c_exec(c)


def s_scm(c):
    # hand the connection to a forked worker through SCM_RIGHTS
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        a.close()
        _, fds, _, _ = socket.recv_fds(b, 16, 4)
        check(len(fds) == 1, "no descriptor received")
        w = socket.socket(fileno=fds[0])
        while True:
            n = struct.unpack("I", recv_exact(w, 4))[0]
            if not n:
                break
            w.sendall(recv_exact(w, n))
        if os.environ.get("T_MODE") == "both":
            check(zc_stat("local.inherited"), "the worker did not take the channel over")
        w.close()
        os._exit(0)
    b.close()
    socket.send_fds(a, [b"x"], [c.fileno()])
    c.close()
    _, st = os.waitpid(pid, 0)
    check(st == 0, "worker failed (%d)" % st)


# --- hand-back: the connection leaves for a program without the library --------

PRE_A, PRE_B = 300001, 100003     # unread in each direction when the server hands over


def env_without_lib():
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    return e


def pre_a():
    # T_BIG: a first message larger than the ring, so the client is still
    # sending (waiting for room) when the server hands the connection over
    return (12 << 20) + 5 if os.environ.get("T_BIG") else PRE_A


def s_handback_common(c, give):
    """Wait until the client's first message is there unread (all of it, or
    a ring's worth), put one of ours in flight unread, then give the
    connection away (give(c))."""
    check(wait_fionread(c, min(4 + pre_a(), 1 << 20), 10), "client's first message never arrived")
    c.sendall(pattern(21, PRE_B))
    give(c)


def c_handback(c):
    n = pre_a()
    blk = pattern(20, 1 << 20)
    msg = struct.pack("I", n) + (blk * (n // len(blk) + 1))[:n]
    if os.environ.get("T_EPOLL"):
        echo_epoll(c, msg, pattern(21, PRE_B) + msg[4:])
    else:
        c.sendall(msg)
        time.sleep(0.5)             # the server hands the connection over meanwhile
        if os.environ.get("T_FORKED_PEER"):
            # a forked child reads up to (and maybe past) the MARK; the parent goes on
            pid = os.fork()
            if pid == 0:
                got = c.recv(PRE_B + 100, socket.MSG_WAITALL)
                os._exit(0 if got == pattern(21, PRE_B) + msg[4:104] else 1)
            _, st = os.waitpid(pid, 0)
            check(st == 0, "forked reader failed")
            check(recv_exact(c, n - 100) == msg[104:], "echo after the forked reader")
        else:
            check(recv_exact(c, PRE_B) == pattern(21, PRE_B),
                  "server's data sent before the hand-over")
            check(recv_exact(c, n) == msg[4:], "echo of the data sent before the hand-over")
    c_exec(c)
    if os.environ.get("T_MODE") == "both" and not os.environ.get("T_FORKED_PEER"):
        # (with a forked reader, whichever process came first gave them back)
        check(zc_stat("local.returned_bytes"), "the client gave no ring data back to the kernel")


def echo_epoll(c, out, want, secs=60):
    """Non-blocking, edge-triggered epoll: send out, read until want came."""
    c.setblocking(False)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLET)
    got = bytearray()
    off = 0
    end = time.time() + secs
    while len(got) < len(want):
        check(time.time() < end, "epoll echo stalled: sent %d/%d, got %d/%d"
              % (off, len(out), len(got), len(want)))
        ep.poll(1.0)
        while off < len(out):
            try:
                off += c.send(out[off:off + (1 << 20)])
            except BlockingIOError:
                break
        while True:
            try:
                b = c.recv(1 << 20)
            except BlockingIOError:
                break
            check(b, "EOF in the epoll echo")
            got += b
    check(bytes(got) == want, "epoll echo data")
    ep.close()
    c.setblocking(True)


def fork_exec_with(c, argv, env):
    """Fork a child that execs argv with connection c inherited (its number
    appended), close ours, wait for the child to succeed."""
    c.set_inheritable(True)
    pid = os.fork()
    if pid == 0:
        os.execve(argv[0], argv + [str(c.fileno())], env)
    c.close()
    _, st = os.waitpid(pid, 0)
    check(st == 0, "exec'd child %s failed (%d)" % (os.path.basename(argv[-1]), st))


def s_exec_unswitched(c):
    # the server offers (a data call that finds nothing), then a forked child
    # execs a program without the library before the client attached: the
    # hand-back cannot switch our sending direction and rings no doorbell
    # (it used to wait forever for its own lock)
    c.setblocking(False)
    try:
        c.recv(1)
    except BlockingIOError:
        pass
    c.setblocking(True)
    fork_exec_with(c, [sys.executable, HERE, "echo_plain"], env_without_lib())


def c_exec_late(c):
    time.sleep(0.3)                 # the server hands the connection back first
    c_exec(c)


STDIO_BYTES = 3 << 20


def s_stdio_filter(c):
    # inetd-style: the paired socket becomes a filter's stdin and stdout
    # (dup2), and the filter (sha256sum, with the library) reads and writes
    # through stdio, which no hook sees: the connection goes back to the
    # kernel at the dup2
    pid = os.fork()
    if pid == 0:
        os.dup2(c.fileno(), 0)
        os.dup2(c.fileno(), 1)
        os.execvp("sha256sum", ["sha256sum"])
    c.close()
    _, st = os.waitpid(pid, 0)
    check(st == 0, "sha256sum failed (%d)" % st)


def c_stdio_filter(c):
    data = pattern(31, STDIO_BYTES)
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        b = c.recv(4096)
        if not b:
            break
        out += b
    check(out.split()[0].decode() == hashlib.sha256(data).hexdigest(),
          "sha256sum over the socket: %r" % out[:80])


def s_fdopen(c):
    # a server that reads its socket through fdopen + fgets and answers with
    # fputs: glibc's stdio calls no hook, so fdopen hands the connection back
    libc = ctypes.CDLL(None)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fgets.restype = ctypes.c_char_p
    libc.fgets.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
    libc.fputs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    libc.fflush.argtypes = [ctypes.c_void_p]
    fp = libc.fdopen(os.dup(c.fileno()), b"r+")
    check(fp, "fdopen")
    buf = ctypes.create_string_buffer(256)
    for i in range(200):
        line = libc.fgets(buf, 256, fp)
        check(line == b"line %d\n" % i, "fgets %d: %r" % (i, line))
        libc.fputs(b"echo %d\n" % i, fp)
        libc.fflush(fp)
    if os.environ.get("T_MODE") == "both":
        check(zc_stat("local.handed_back.fdopen") == 1, "fdopen did not hand the connection back")


def c_fdopen(c):
    f = c.makefile("rb")
    for i in range(200):
        c.send(b"line %d\n" % i)
        check(f.readline() == b"echo %d\n" % i, "echo %d" % i)


def seccomp_deny_getsockopt():
    """Install a seccomp filter that kills the process on getsockopt (x86_64),
    as sshd's sandbox would kill it on a system call it does not expect."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    ins = [(0x20, 0, 0, 0),                 # ld [nr]
           (0x15, 0, 1, 55),                # jeq #getsockopt, kill, allow
           (0x06, 0, 0, 0x80000000),        # ret KILL_PROCESS
           (0x06, 0, 0, 0x7fff0000)]        # ret ALLOW
    prog = b"".join(struct.pack("HBBI", *i) for i in ins)
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = struct.pack("HxxxxxxQ", len(ins), ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    u = ctypes.c_ulong
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, u(1), u(0), u(0), u(0)) == 0, "no_new_privs")
    check(libc.prctl(PR_SET_SECCOMP, u(SECCOMP_MODE_FILTER), u(ctypes.addressof(fbuf)), u(0),
                     u(0)) == 0, "seccomp: errno %d" % ctypes.get_errno())


def s_seccomp(c):
    # sshd's way: the process installs a seccomp filter that kills it for
    # system calls the library would add; the connection goes back to the
    # kernel before the filter is in place, and nothing the library does
    # afterwards trips it
    pid = os.fork()
    if pid == 0:
        try:
            seccomp_deny_getsockopt()
            for i in range(50):
                n = struct.unpack("I", recv_exact(c, 4))[0]
                c.sendall(recv_exact(c, n))
            if os.environ.get("T_MODE") == "both":
                check(zc_stat("local.handed_back.seccomp") == 1, "not handed back at seccomp")
            os._exit(0)
        except SystemExit:
            os._exit(1)
    c.close()
    _, st = os.waitpid(pid, 0)
    check(st == 0, "sandboxed child failed (%d)" % st)


def c_seccomp(c):
    for i in range(50):
        msg = bytes([i]) * (1000 + 997 * i)
        c.sendall(struct.pack("I", len(msg)) + msg)
        check(recv_exact(c, len(msg)) == msg, "echo %d" % i)


def ring_memfd():
    for name in os.listdir("/proc/self/fd"):
        try:
            if "zcsock-ring" in os.readlink("/proc/self/fd/" + name):
                return int(name)
        except OSError:
            pass
    return None


def s_scribble(c):
    # a hostile peer: write garbage over every shared word of the channel it
    # can reach (lock words set to a live thread id, indices, flags, ring
    # bytes), then keep the connection open; the client must see data, an
    # error or EOF on every call, never hang (DESIGN.md §3.9)
    import mmap
    c.sendall(b"h")                 # first data call: the offer goes out
    check(c.recv(1) == b"a", "no answer from the client")
    if os.environ.get("T_MODE") != "both":
        c.sendall(b"s")
        time.sleep(8)
        return
    fd = ring_memfd()
    check(fd is not None, "no channel memfd to scribble over")
    m = mmap.mmap(fd, 4096 + 65536)
    word = struct.pack("I", os.getpid())
    rnd = random.Random(5)
    m[0:4096] = word * 1024
    m[4096:4096 + 65536] = rnd.randbytes(65536)
    try:
        c.sendall(b"s")             # through whatever the channel now is
    except OSError:
        pass                        # our own library may call the channel broken
    time.sleep(8)                   # stay alive: the lock words name us


def c_scribble(c):
    c.settimeout(20)
    check(c.recv(1) == b"h", "no greeting")     # pairs here when both ends run the library
    c.sendall(b"a")
    t0 = time.time()
    outcomes = []
    for op in ("recv", "send", "poll", "recv"):
        t = time.time()
        try:
            if op == "recv":
                outcomes.append(len(c.recv(100)))
            elif op == "send":
                outcomes.append(c.send(b"x" * 1000))
            else:
                p = select.poll()
                p.register(c, select.POLLIN | select.POLLOUT)
                outcomes.append(p.poll(5000))
        except (OSError, socket.timeout) as e:
            outcomes.append(type(e).__name__)
        check(time.time() - t < 10, "%s took %.1f s (%r)" % (op, time.time() - t, outcomes))
    check(time.time() - t0 < 30, "calls on a scribbled channel took %.1f s" % (time.time() - t0))
    check("timeout" not in outcomes, "a call waited out its timeout: %r" % outcomes)


def s_oob(c):
    # urgent data: the ring cannot carry it, so the sender hands the
    # connection back before it; the bytes before it (ring), its inline part
    # and the bytes after (kernel) arrive in order
    c.sendall(pattern(40, 300000))
    check(recv_exact(c, 1) == b"r", "client's go")
    check(c.send(b"ab!", socket.MSG_OOB) == 3, "send MSG_OOB")
    c.sendall(pattern(41, 200000))
    check(recv_exact(c, 1) == b"d", "client done")
    check(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0,
          "TCP_NODELAY, never set by the application, reads as set")
    if os.environ.get("T_MODE") == "both":
        check(zc_stat("local.handed_back.oob"), "MSG_OOB was not counted as a hand-back")


def c_oob(c):
    check(recv_exact(c, 300000) == pattern(40, 300000), "data before the urgent byte")
    c.sendall(b"r")
    check(recv_exact(c, 2) == b"ab", "inline part of the MSG_OOB send")
    p = select.poll()
    p.register(c, select.POLLPRI)
    check(p.poll(5000), "no POLLPRI for the urgent byte")
    check(c.recv(1, socket.MSG_OOB) == b"!", "urgent byte")
    check(recv_exact(c, 200000) == pattern(41, 200000), "data after the urgent byte")
    c.sendall(b"d")


def s_shut_rd(c):
    # shutdown(SHUT_RD): the kernel decides what reads return from then on,
    # so the connection goes back to it; what the server sends after still
    # arrives whole
    check(recv_exact(c, 100000) == pattern(42, 100000), "client's data")
    c.shutdown(socket.SHUT_RD)
    check(c.recv(100) == b"", "a read after SHUT_RD")
    c.sendall(pattern(43, 500000))
    c.shutdown(socket.SHUT_WR)
    if os.environ.get("T_MODE") == "both":
        check(zc_stat("local.handed_back.shut_rd"), "SHUT_RD was not counted as a hand-back")
    time.sleep(0.3)


def c_shut_rd(c):
    c.sendall(pattern(42, 100000))
    check(recv_exact(c, 500000) == pattern(43, 500000), "data sent after SHUT_RD")
    expect_eof(c)


def s_reset(c):
    # the server resets the connection (SO_LINGER {1, 0}); the client's poll
    # sees it, and getsockopt(SO_ERROR) still says ECONNRESET after the
    # library's own reads of the socket
    c.sendall(pattern(44, 70000))
    check(recv_exact(c, 1) == b"r", "client's go")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def c_reset(c):
    check(recv_exact(c, 70000) == pattern(44, 70000), "data before the reset")
    c.sendall(b"r")
    p = select.poll()
    p.register(c, select.POLLIN)
    check(p.poll(5000), "the reset never made the socket readable")
    time.sleep(0.2)
    p.poll(0)
    err = c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    check(err == errno.ECONNRESET, "SO_ERROR after a reset: %d" % err)
    check(c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0, "SO_ERROR twice")


def s_closefrom(c):
    # closefrom() above the connection: glibc closes through its internal
    # close_range, which must not take the library's own descriptors (the
    # channel memfd) or leave the connection unusable
    c.sendall(pattern(45, 200000))
    check(recv_exact(c, 1) == b"r", "client's go")
    ctypes.CDLL(None).closefrom(c.fileno() + 1)
    if os.environ.get("T_MODE") == "both":
        check(ring_memfd() is not None, "closefrom closed the library's channel memfd")
    c.sendall(pattern(46, 300000))
    check(recv_exact(c, 100000) == pattern(47, 100000), "data after closefrom")


def c_closefrom(c):
    check(recv_exact(c, 200000) == pattern(45, 200000), "data before closefrom")
    c.sendall(b"r")
    check(recv_exact(c, 300000) == pattern(46, 300000), "data after closefrom")
    c.sendall(pattern(47, 100000))


def s_epoll_released(c):
    # registered for EPOLLOUT before the first data call, which makes the
    # connection plain when the client has no library (PostgreSQL's backend
    # does this): a later EPOLL_CTL_MOD to EPOLLIN must be what the kernel
    # reports from then on, not the first registration's EPOLLOUT
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLOUT)
    c.setblocking(False)
    try:
        check(c.recv(100) is None, "data before the go")
    except BlockingIOError:
        pass
    ep.modify(c.fileno(), select.EPOLLIN)
    ev = ep.poll(0.3)
    check(ev == [], "events before the client sent anything: %r" % ev)
    c.sendall(b"g")
    ev = ep.poll(5)
    check(ev == [(c.fileno(), select.EPOLLIN)], "after the client's byte: %r" % ev)
    check(c.recv(1) == b"x", "client's byte")
    c.setblocking(True)


def c_epoll_released(c):
    check(recv_exact(c, 1) == b"g", "go")
    c.sendall(b"x")


def s_fclose_reuse(c):
    # fdopen + fclose close the socket behind the hooks' back; the number's
    # next owner (a pipe) must work as a pipe, not as the connection
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fclose.argtypes = [ctypes.c_void_p]
    fd = c.detach()
    fp = libc.fdopen(fd, b"r+")
    check(fp, "fdopen failed")
    libc.fputs(b"hello\n", ctypes.c_void_p(fp))
    check(libc.fclose(ctypes.c_void_p(fp)) == 0, "fclose failed")
    for _ in range(16):             # lower free numbers go first
        r, w = os.pipe()
        if fd in (r, w):
            break
    check(fd in (r, w), "the number was not reused (%d: %d, %d)" % (fd, r, w))
    os.write(w, b"pipe data")
    check(os.read(r, 100) == b"pipe data", "the reused number does not read as a pipe")


def s_raw_close(c):
    # a paired connection closed through syscall(SYS_close) (libuv does
    # this); the number's next owner (a pipe) must work as a pipe, and the
    # client sees the data, then EOF
    c.sendall(pattern(48, 300000))
    fd = c.detach()
    libc = ctypes.CDLL(None, use_errno=True)
    import platform
    nr = {"x86_64": 3, "aarch64": 57, "riscv64": 57}[platform.machine()]     # SYS_close
    check(libc.syscall(nr, fd) == 0, "syscall(SYS_close) failed")
    for _ in range(16):
        r, w = os.pipe()
        if fd in (r, w):
            break
    check(fd in (r, w), "the number was not reused (%d: %d, %d)" % (fd, r, w))
    os.write(w, b"pipe data")
    check(os.read(r, 100) == b"pipe data", "the reused number does not read as a pipe")


def c_raw_close(c):
    check(recv_exact(c, 300000) == pattern(48, 300000), "data before the close")
    expect_eof(c)


def c_fclose_reuse(c):
    check(recv_exact(c, 6) == b"hello\n", "line written through stdio")
    expect_eof(c)


def s_exec_plain(c):
    # exec of a program that does not load the library, with data unread both ways
    s_handback_common(c, lambda c: fork_exec_with(
        c, [sys.executable, HERE, "echo_plain"], env_without_lib()))


def s_spawn_dup2(c):
    # posix_spawn with a file action that dup2()s our close-on-exec socket
    # to a number the child keeps (Rust's Command does this for stdio): the
    # child, without the library, must read every byte from the kernel
    def give(c):
        pid = os.posix_spawn(sys.executable, [sys.executable, HERE, "echo_plain", "50"],
                             env_without_lib(),
                             file_actions=[(os.POSIX_SPAWN_DUP2, c.fileno(), 50)])
        c.close()
        _, st = os.waitpid(pid, 0)
        check(st == 0, "spawned echo failed")
    s_handback_common(c, give)
    if os.environ.get("T_MODE") == "both":
        check(zc_stat("local.handed_back.posix_spawn"), "the spawn was not counted as a hand-back")


def s_exec_badlib(c):
    # exec with LD_PRELOAD naming the library by a path that does not exist:
    # the loader goes on without it, so the connection must be handed back
    e = env_without_lib()
    e["LD_PRELOAD"] = "/nonexistent/zcsock/libzcsock.so"
    s_handback_common(c, lambda c: fork_exec_with(c, [sys.executable, HERE, "echo_plain"], e))


def s_exec_static(c):
    # exec of a statically linked program, with LD_PRELOAD still naming the
    # library: the loader never runs, so the connection must be handed back
    s_handback_common(c, lambda c: fork_exec_with(
        c, [os.environ["T_STATIC_ECHO"]], dict(os.environ)))


def s_scm_plain(c):
    # SCM_RIGHTS to a process without the library (connected over a named socket)
    def give(c):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "w")
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(path)
        ls.listen(1)
        w = subprocess.Popen([sys.executable, HERE, "scm_worker", path], env=env_without_lib())
        a, _ = ls.accept()
        squat = mailbox_squatter(w.pid, os.environ.get("T_SQUAT"))
        socket.send_fds(a, [b"x"], [c.fileno()])
        c.close()
        a.close()
        ls.close()
        check(w.wait(timeout=120) == 0, "worker without the library failed")
        if squat:
            check(squat() == b"", "the squatter of the worker's mailbox name got a hand-over")
    s_handback_common(c, give)


def mailbox_squatter(pid, who):
    """T_SQUAT=other (another user) or same (this user, not the receiver):
    bind the receiver's mailbox name before the hand-over and report whether
    anything came.  Returns a function giving what it received, or None."""
    if not who:
        return None
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        try:
            if who == "other":
                os.setgid(65534)
                os.setuid(65534)
            ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            ls.bind(b"\0zcsock/v1/M/%d" % pid)
            ls.listen(8)
            os.write(w, b"R")
            ls.settimeout(3)
            got = b""
            try:
                while True:
                    a, _ = ls.accept()
                    msg, fds, _, _ = socket.recv_fds(a, 256, 4)
                    if msg or fds:      # a connection that brings nothing is no leak
                        got += msg + b"+%d fds;" % len(fds)
            except (socket.timeout, OSError):
                pass
            os.write(w, got)
        finally:
            os._exit(0)
    os.close(w)
    check(os.read(r, 1) == b"R", "squatter did not start")

    def result():
        os.waitpid(child, 0)
        out = b""
        while True:
            b = os.read(r, 4096)
            if not b:
                break
            out += b
        os.close(r)
        return out
    return result


def s_scm_spawned(c):
    # SCM_RIGHTS over a socketpair whose other end went to an exec'd child
    # (subprocess), with or without the library (T_CHILD_LIB=1): the record
    # must not go to our own mailbox, which that child cannot read
    def give(c):
        a, b = socket.socketpair()
        e = dict(os.environ) if os.environ.get("T_CHILD_LIB") else env_without_lib()
        w = subprocess.Popen([sys.executable, HERE, "scm_worker_fd", str(b.fileno())],
                             pass_fds=[b.fileno()], env=e)
        b.close()
        socket.send_fds(a, [b"x"], [c.fileno()])
        c.close()
        a.close()
        check(w.wait(timeout=120) == 0, "spawned worker failed")
    s_handback_common(c, give)


def echo_plain_main(fd):
    check(zc_stat("local.inherited") is None, "the library is loaded in the plain image")
    echo_main(fd, plain=True)


def scm_worker_main(path=None, fd=None):
    if fd is not None:
        a = socket.socket(fileno=fd)
    else:
        a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        a.connect(path)
    _, fds, _, _ = socket.recv_fds(a, 16, 4)
    check(len(fds) == 1, "no descriptor received")
    echo_main(fds[0], plain=True)


def s_anc(c):
    # SCM_RIGHTS and SO_PASSCRED on the paired AF_UNIX connection itself
    c.sendall(pattern(22, 200000))
    r, w = os.pipe()
    os.write(w, b"through the pipe")
    os.close(w)
    socket.send_fds(c, [b"F" + pattern(23, 5000)], [r])
    os.close(r)
    if os.environ.get("T_MODE") == "both":
        check(zc_stat("local.handed_back"), "ancillary data did not hand the connection back")
    c.sendall(pattern(24, 300000))
    s_passcred(c)


def echo_loop(c):
    while True:
        n = struct.unpack("I", recv_exact(c, 4))[0]
        if not n:
            break
        c.sendall(recv_exact(c, n))


def c_anc(c):
    check(recv_exact(c, 200000) == pattern(22, 200000), "data before the descriptor")
    msg, fds, _, _ = socket.recv_fds(c, 5001, 4)
    got = msg
    check(len(fds) == 1, "descriptor not received (got %d bytes first: %r)" % (len(msg), msg[:8]))
    check(os.read(fds[0], 100) == b"through the pipe", "the descriptor is not the pipe")
    os.close(fds[0])
    got += recv_exact(c, 5001 - len(got))
    check(got == b"F" + pattern(23, 5000), "data sent with the descriptor")
    check(recv_exact(c, 300000) == pattern(24, 300000), "data after the descriptor")
    c_passcred(c, after_anc=True)


def s_passcred(c):
    c.sendall(pattern(25, 100000))
    check(recv_exact(c, 1) == b"C", "client's go")
    c.sendall(b"after creds")
    echo_loop(c)


def c_passcred(c, after_anc=False):
    check(recv_exact(c, 100000) == pattern(25, 100000), "data before SO_PASSCRED")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    c.sendall(b"C")
    data, anc, _, _ = c.recvmsg(11, socket.CMSG_SPACE(12))
    check(data == b"after creds"[:len(data)] and data, "data with credentials")
    creds = [a for a in anc if a[0] == socket.SOL_SOCKET and a[1] == socket.SCM_CREDENTIALS]
    check(creds, "no SCM_CREDENTIALS with SO_PASSCRED set")
    pid, uid, gid = struct.unpack("iII", creds[0][2][:12])
    check(uid == os.getuid() and pid > 0 and pid != os.getpid(), "credentials %r" % ((pid, uid),))
    check(data + recv_exact(c, 11 - len(data)) == b"after creds", "data with credentials")
    # the echo protocol of c_exec, now on a plain connection
    for i in range(12):
        m = bytes([97 + i]) * (1 << i)
        c.sendall(struct.pack("I", len(m)) + m)
        check(recv_exact(c, len(m)) == m, "echo %d" % i)
    c.sendall(struct.pack("I", 0))
    expect_eof(c)
    if os.environ.get("T_MODE") == "both" and not after_anc:
        check(zc_stat("local.handed_back"), "SO_PASSCRED did not hand the connection back")


def echo_main(fd, out_fd=None, plain=False):
    c = socket.socket(fileno=fd)
    o = socket.socket(fileno=out_fd) if out_fd is not None else c
    while True:
        n = struct.unpack("I", recv_exact(c, 4))[0]
        if not n:
            break
        o.sendall(recv_exact(c, n))
    if out_fd is not None:
        check(zc_stat("local.inherited") in (None, 1), "one connection, one hand-over")
        o.close()
    if os.environ.get("T_MODE") == "both" and not plain:
        check(paired(), "the exec'd image did not take the connection over")
    check("ZCSOCK_INHERIT" not in os.environ, "hand-over variable left in the environment")
    c.close()
    os._exit(0)


def s_sendfile(c):
    with tempfile.TemporaryFile() as f:
        data = pattern(11, 3 << 20) + b"tail"
        f.write(data)
        f.flush()
        f.seek(0)
        c.sendfile(f)
        c.sendall(hashlib.sha256(data).digest())
    check(recv_exact(c, 2) == b"ok", "no ok")


def c_sendfile(c):
    recv_stream(c, (3 << 20) + 4)
    c.sendall(b"ok")


def s_splice(c):
    # pipe -> socket and socket -> pipe through splice(2)
    data = pattern(12, 1 << 20)
    r, w = os.pipe()
    sent = 0
    while sent < len(data):
        n = os.write(w, data[sent:sent + 65536])
        k = 0
        while k < n:
            k += os.splice(r, c.fileno(), n - k)
        sent += n
    got = b""
    while len(got) < len(data):
        n = os.splice(c.fileno(), w, 65536)
        check(n > 0, "splice from the socket: EOF")
        got += os.read(r, n)
    check(got == data[::-1], "spliced echo differs")


def c_splice(c):
    data = recv_exact(c, 1 << 20)
    c.sendall(data[::-1])


def s_threads(c):
    def sender(tid):
        for i in range(300):
            c.sendall(struct.pack("II", tid, i) + bytes([tid]) * 1016)
    ts = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    c.shutdown(socket.SHUT_WR)
    check(recv_exact(c, 2) == b"ok", "no ok")


def c_threads(c):
    seen = {t: 0 for t in range(4)}
    for k in range(1200):
        rec = recv_exact(c, 1024)
        tid, i = struct.unpack("II", rec[:8])
        check(tid in seen and seen[tid] == i, "record out of order: %d %d" % (tid, i))
        check(rec[8:] == bytes([tid]) * 1016, "record torn")
        seen[tid] += 1
    expect_eof(c)
    c.sendall(b"ok")


def s_dup(c):
    d = socket.socket(fileno=os.dup(c.fileno()))
    d.sendall(b"via dup;")
    c.close()
    d.sendall(b"after close")
    check(recv_exact(d, 2) == b"ok", "no ok")


def c_dup(c):
    check(recv_exact(c, 19) == b"via dup;after close", "dup data")
    c.sendall(b"ok")


CASES = {
    "stream_both": (s_stream_both, c_stream_both),
    "sizes": (s_sizes, c_sizes),
    "peek": (s_peek, c_peek),
    "lowat": (s_lowat, c_lowat),
    "epoll": (s_epoll, c_epoll),
    "epoll_readd": (s_epoll_readd, c_epoll),
    "epoll_excl": (s_epoll_excl, c_epoll),
    "pollout": (s_pollout, c_pollout),
    "poll_truth": (s_poll_truth, c_poll_truth),
    "halfclose": (s_halfclose, c_halfclose),
    "epipe": (s_epipe, c_epipe),
    "reset": (s_reset, c_reset),
    "unread_close": (s_unread_close, c_unread_close),
    "fork": (s_fork, c_fork),
    "exec": (s_exec, c_exec),
    "exec2": (s_exec2, c_exec),
    "scm": (s_scm, c_exec),
    "sendfile": (s_sendfile, c_sendfile),
    "splice": (s_splice, c_splice),
    "threads": (s_threads, c_threads),
    "dup": (s_dup, c_dup),
    "subprocess": (s_subprocess, c_subprocess),
    "exec_plain": (s_exec_plain, c_handback),
    "exec_unswitched": (s_exec_unswitched, c_exec_late),
    "stdio_filter": (s_stdio_filter, c_stdio_filter),
    "fdopen": (s_fdopen, c_fdopen),
    "seccomp": (s_seccomp, c_seccomp),
    "scribble": (s_scribble, c_scribble),
    "oob": (s_oob, c_oob),
    "shut_rd": (s_shut_rd, c_shut_rd),
    "reset": (s_reset, c_reset),
    "scm_plain": (s_scm_plain, c_handback),
    "spawn_dup2": (s_spawn_dup2, c_handback),
    "exec_badlib": (s_exec_badlib, c_handback),
    "closefrom": (s_closefrom, c_closefrom),
    "fclose_reuse": (s_fclose_reuse, c_fclose_reuse),
    "raw_close": (s_raw_close, c_raw_close),
    "epoll_released": (s_epoll_released, c_epoll_released),
    "exec_static": (s_exec_static, c_handback),
    "scm_spawned": (s_scm_spawned, c_handback),
    "anc": (s_anc, c_anc),
    "passcred": (s_passcred, c_passcred),
}

# Cases for one family only (run.sh runs them there).
UNIX_ONLY = ("anc", "passcred")
# Cases run.sh gives their own line (they need something from it).
OWN_LINE = ("exec_static",)


# Cases that start streaming at once, so the switch to the ring happens in
# the middle of the data; the others first exchange one byte each way, after
# which both directions of a paired connection use the ring.
UNSETTLED = ("stream_both", "sizes", "fork", "exec_unswitched", "fclose_reuse",
             "epoll_released")
# Cases whose connection leaves the hooks' sight before the server's first
# data call: with both ends preloaded they must not pair.
NEVER_PAIRED = ("fclose_reuse",)
# Cases whose server gives the connection away right after it offered: the
# client refuses an offer whose sender no longer holds the server socket by
# the time it looks (lp_offer_proof), or takes it if it looked in time.
CLIENT_MAY_DECLINE = ("exec_unswitched",)


# --- roles ----------------------------------------------------------------------

def family_of(name):
    return {"tcp": socket.AF_INET, "tcp6": socket.AF_INET6, "unix": socket.AF_UNIX}[name]


def serve(case, fam):
    f = family_of(fam)
    ls = socket.socket(f, socket.SOCK_STREAM)
    if f == socket.AF_UNIX:
        path = os.path.join(tempfile.mkdtemp(), "s")
        ls.bind(path)
        addr = path
    else:
        ls.bind(("::1" if f == socket.AF_INET6 else "127.0.0.1", 0))
        addr = str(ls.getsockname()[1])
    ls.listen(4)
    print(addr, flush=True)
    c, _ = ls.accept()
    ls.close()
    if case not in UNSETTLED:
        c.sendall(b"G")
        check(recv_exact(c, 1) == b"H", "handshake")
    CASES[case][0](c)
    print("paired=%d" % paired(), flush=True)


def connect(case, fam, addr):
    f = family_of(fam)
    c = socket.socket(f, socket.SOCK_STREAM)
    if os.environ.get("T_NONBLOCK_CONNECT"):
        c.setblocking(False)
        target = addr if f == socket.AF_UNIX else \
            (("::1" if f == socket.AF_INET6 else "127.0.0.1"), int(addr))
        rc = c.connect_ex(target)
        check(rc in (0, errno.EINPROGRESS, errno.EAGAIN), "connect_ex: %d" % rc)
        p = select.poll()
        p.register(c, select.POLLOUT)
        check(p.poll(5000), "non-blocking connect never completed")
        check(c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0, "SO_ERROR")
        c.setblocking(True)
    elif f == socket.AF_UNIX:
        c.connect(addr)
    else:
        c.connect(("::1" if f == socket.AF_INET6 else "127.0.0.1", int(addr)))
    if case not in UNSETTLED:
        check(recv_exact(c, 1) == b"G", "handshake")
        c.sendall(b"H")
    CASES[case][1](c)
    print("paired=%d" % paired(), flush=True)


def self_main(case, fam):
    """One process, connected to itself: the two ends run in two threads."""
    f = family_of(fam)
    ls = socket.socket(f, socket.SOCK_STREAM)
    ls.bind(("::1" if f == socket.AF_INET6 else "127.0.0.1", 0))
    ls.listen(1)
    c = socket.create_connection(ls.getsockname()[:2])
    s, _ = ls.accept()
    err = []

    def server():
        try:
            CASES[case][0](s)
        except BaseException as e:      # reported below
            err.append(e)
    t = threading.Thread(target=server)
    t.start()
    CASES[case][1](c)
    t.join()
    check(not err, "server thread: %r" % (err[:1],))
    check(zc_stat("local.paired.accepted") and zc_stat("local.paired.connected"),
          "a process connected to itself did not pair")
    print("ok self %s %s" % (case, fam))


def launch(case, mode, fam):
    lib = os.environ["ZC_LIB"]
    if mode == "self":
        e = dict(os.environ, LD_PRELOAD=lib)
        r = subprocess.run([sys.executable, HERE, "selfrun", case, fam], env=e, timeout=240)
        check(r.returncode == 0, "self %s failed" % case)
        return

    def env(preloaded, role):
        e = dict(os.environ, T_MODE=mode)
        e.pop("LD_PRELOAD", None)
        if preloaded:
            e["LD_PRELOAD"] = lib
            e["ZCSOCK_LOCAL_UNIX"] = "1"
        return e
    srv = subprocess.Popen([sys.executable, HERE, "serve", case, fam], stdout=subprocess.PIPE,
                           env=env(mode in ("both", "server"), "server"), text=True)
    addr = srv.stdout.readline().strip()
    if not addr:
        srv.kill()
        fail("server did not start")
    cli = subprocess.Popen([sys.executable, HERE, "connect", case, fam, addr],
                           stdout=subprocess.PIPE, env=env(mode in ("both", "client"), "client"),
                           text=True)
    try:
        cout, _ = cli.communicate(timeout=240)
        sout, _ = srv.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        cli.kill()
        srv.kill()
        fail("%s/%s timed out" % (case, mode))
    check(cli.returncode == 0 and srv.returncode == 0,
          "%s/%s: server %d client %d" % (case, mode, srv.returncode, cli.returncode))
    sp, cp = "paired=1" in sout, "paired=1" in cout
    if mode == "both" and case in NEVER_PAIRED:
        check(not sp and not cp, "%s/%s: paired, though handed away before its first data call"
              % (case, mode))
    elif mode == "both":
        check(sp and (cp or case in CLIENT_MAY_DECLINE),
              "%s/%s: not paired (server %s, client %s)" % (case, mode, sp, cp))
    else:
        check(not sp and not cp, "%s/%s: paired with a peer without zcsock" % (case, mode))
    print("ok %s %s %s" % (case, mode, fam))


def killed_peer(fam):
    """A client killed mid-transfer: the server's sends fail like TCP's, and
    nothing of the channel is left behind."""
    lib = os.environ["ZC_LIB"]
    e = dict(os.environ, LD_PRELOAD=lib, ZCSOCK_LOCAL_UNIX="1")
    code = r'''
import socket, sys, os, time
f = {"tcp": socket.AF_INET, "unix": socket.AF_UNIX}[sys.argv[1]]
ls = socket.socket(f)
if f == socket.AF_UNIX:
    p = "/tmp/zct-kill-%d" % os.getpid(); ls.bind(p); a = p
else:
    ls.bind(("127.0.0.1", 0)); a = str(ls.getsockname()[1])
ls.listen(); print(a, flush=True)
c, _ = ls.accept()
sent = 0; t0 = time.time()
try:
    while time.time() - t0 < 20:
        sent += c.send(b"k" * 65536)
    print("never failed", flush=True)
except (BrokenPipeError, ConnectionResetError) as e:
    print("failed %s after %d" % (type(e).__name__, sent), flush=True)
import ctypes
v = ctypes.c_uint64(); ctypes.CDLL(None).zcsock_stat_get(b"local.paired.accepted", ctypes.byref(v))
print("paired=%d" % (v.value > 0), flush=True)
c.close()
fds = [os.readlink("/proc/self/fd/" + x) for x in os.listdir("/proc/self/fd") if os.path.exists("/proc/self/fd/" + x)]
print("memfds=%d" % sum("memfd:zcsock-ring" in x for x in fds), flush=True)
'''
    srv = subprocess.Popen([sys.executable, "-c", code, fam], stdout=subprocess.PIPE, env=e,
                           text=True)
    addr = srv.stdout.readline().strip()
    cli_code = r'''
import socket, sys, time
f = {"tcp": socket.AF_INET, "unix": socket.AF_UNIX}[sys.argv[1]]
c = socket.socket(f)
c.connect(sys.argv[2] if f == socket.AF_UNIX else ("127.0.0.1", int(sys.argv[2])))
n = 0
while n < (8 << 20):
    n += len(c.recv(1 << 20))
print("ready", flush=True)
time.sleep(60)
'''
    cli = subprocess.Popen([sys.executable, "-c", cli_code, fam, addr], stdout=subprocess.PIPE,
                           env=e, text=True)
    if cli.stdout.readline().strip() != "ready":
        cli.kill()
        srv.kill()
        fail("client did not start")
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    try:
        out, _ = srv.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        srv.kill()
        fail("the server hangs after its peer was killed")
    # ("never failed" must not match: the line starts with "failed ")
    check(any(l.startswith("failed ") for l in out.splitlines()),
          "server never saw the peer die: %r" % out)
    check("paired=1" in out, "not paired: %r" % out)
    check("memfds=0" in out, "channel memfd left open: %r" % out)
    print("ok killed_peer %s (%s)" % (fam, out.split("\n")[0]))


def main():
    if sys.argv[1] == "run":
        if sys.argv[2] == "killed_peer":
            killed_peer(sys.argv[4] if len(sys.argv) > 4 else "tcp")
        else:
            launch(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "tcp")
    elif sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "connect":
        connect(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "selfrun":
        self_main(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "echo":
        echo_main(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None)
    elif sys.argv[1] == "echo_plain":
        echo_plain_main(int(sys.argv[2]))
    elif sys.argv[1] == "scm_worker":
        scm_worker_main(path=sys.argv[2])
    elif sys.argv[1] == "scm_worker_fd":
        scm_worker_main(fd=int(sys.argv[2]))
    elif sys.argv[1] == "list":
        print(" ".join(c for c in CASES if c not in UNIX_ONLY + OWN_LINE))


if __name__ == "__main__":
    signal.alarm(300)
    main()
