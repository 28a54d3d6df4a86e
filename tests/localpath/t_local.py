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
import resource  # noqa: E402
from lp_util import *  # noqa: F401,F403  (helpers shared by the case modules)
from lp_handback import *  # noqa: F401,F403  (hand-back and visibility cases)

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
    check(recv_exact(c, 2) == b"pw", "no pw")
    # MSG_PEEK | MSG_WAITALL waits for the whole length, as the kernel does
    c.sendall(b"x" * 1000)
    time.sleep(0.2)
    c.sendall(b"y" * 1000)
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
    c.sendall(b"pw")
    b = c.recv(1500, socket.MSG_PEEK | socket.MSG_WAITALL)
    check(b == b"x" * 1000 + b"y" * 500, "MSG_PEEK|MSG_WAITALL returned %d bytes" % len(b))
    check(recv_exact(c, 2000) == b"x" * 1000 + b"y" * 1000, "read after the waiting peek")
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


def s_sendfile(c):
    with tempfile.TemporaryFile() as f:
        data = pattern(11, 3 << 20) + b"tail"
        f.write(data)
        f.flush()
        f.seek(0)
        c.sendfile(f)
        # a source the kernel refuses (a pipe) stays refused, untouched
        r, w = os.pipe()
        os.write(w, b"pipe")
        try:
            os.sendfile(c.fileno(), r, None, 4)
            fail("sendfile from a pipe succeeded")
        except OSError as e:
            check(e.errno == errno.EINVAL, "sendfile from a pipe: %r" % e)
        check(os.read(r, 4) == b"pipe", "sendfile took bytes from the pipe")
        os.close(r)
        os.close(w)
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


def spin_check(role):
    """The spin counters against the knobs (library on this end only)."""
    if zc_stat("local.sleeps") is None:
        return
    sleeps, paid, slept = (zc_stat("local.sleeps"), zc_stat("local.spins_paid"),
                           zc_stat("local.spins_slept"))
    sys.stderr.write("%s: sleeps %d, spins paid %d, spins slept %d\n" % (role, sleeps, paid, slept))
    if os.environ.get("ZCSOCK_SPIN_US", "0") not in ("", "0"):
        check(slept == sleeps, "a fixed spin precedes every sleep")
    elif os.environ.get("ZCSOCK_SPIN") == "0":
        check(paid == 0 and slept == 0, "ZCSOCK_SPIN=0 spun")
    else:
        check(slept <= sleeps, "more failed spins than sleeps")


def spin_idle_wait(c, role):
    # a blocking receive on a connection that goes quiet for a second (after
    # 300 quick round trips taught the adaptive spin to spin) uses next to
    # no CPU: the spin decays, the wait sleeps
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    check(recv_exact(c, 1) == b"z", "idle wake-up byte")
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    sys.stderr.write("%s: idle wait %.2f s, cpu %.3f s\n" % (role, t1 - t0, cpu))
    check(t1 - t0 > 0.5, "the peer did not keep the connection quiet")
    check(cpu < 0.1 * (t1 - t0), "an idle blocking wait burnt %.3f s of CPU in %.2f s"
          % (cpu, t1 - t0))


def s_spin_idle(c):
    for _ in range(300):
        check(recv_exact(c, 1) == b"p", "ping")
        c.sendall(b"q")
    spin_idle_wait(c, "server")
    time.sleep(1.0)
    c.sendall(b"z")
    spin_check("server")


def c_spin_idle(c):
    for _ in range(300):
        c.sendall(b"p")
        check(recv_exact(c, 1) == b"q", "pong")
    time.sleep(1.0)
    c.sendall(b"z")
    spin_idle_wait(c, "client")
    spin_check("client")


def s_pipelined(c):
    # the receiver is busy (not in any call on the socket) while 1000
    # messages arrive: with the library none of them needs a wake-up signal
    check(recv_exact(c, 1) == b"a", "first byte")
    c.sendall(b"b")
    time.sleep(0.5)
    got = recv_exact(c, 1000 * 100)
    check(got == pattern(21, 1000 * 100), "pipelined messages differ")
    c.sendall(b"c")


def c_pipelined(c):
    c.sendall(b"a")
    check(recv_exact(c, 1) == b"b", "first answer")
    data = pattern(21, 1000 * 100)
    before = zc_stat("local.wakes_avoided")
    for i in range(1000):
        c.sendall(data[i * 100:(i + 1) * 100])
    avoided = zc_stat("local.wakes_avoided")
    check(recv_exact(c, 1) == b"c", "last answer")
    if paired():
        check(before is not None and avoided is not None, "no local.wakes_avoided counter")
        sys.stderr.write("client: %d of 1000 messages needed no wake-up\n" % (avoided - before))
        check(avoided - before >= 900, "only %d of 1000 messages to a busy receiver went "
              "without a wake-up signal" % (avoided - before))


def ready_waiter(c):
    """A one-socket readiness wait through epoll or poll (T_READY)."""
    if os.environ.get("T_READY") == "poll":
        p = select.poll()
        p.register(c, select.POLLIN)
        return lambda t: p.poll(t * 1000)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN)
    return ep.poll


def ready_recv(c, wait, n, what):
    """n bytes from non-blocking c, waiting through wait (ready_waiter) for
    each part; a wait that reports nothing within 5 s fails (a lost
    wake-up would otherwise hang)."""
    got = b""
    while len(got) < n:
        if not wait(5):
            fail("%s: no event within 5 s (lost wake-up)" % what)
        try:
            got += c.recv(n - len(got))
        except BlockingIOError:
            pass
    return got


def echo_until_eagain(c, wait, n, request):
    """An event-driven echo on non-blocking c: n requests of 100 bytes
    (request(i) each), every one read through wait (ready_waiter), then
    read again until EAGAIN as event loops do (which arms the wake-up),
    and answered reversed."""
    for i in range(n):
        got = ready_recv(c, wait, 100, "request %d" % i)
        check(got == request(i), "request %d" % i)
        try:
            c.recv(1)
            fail("request %d: a byte the client did not send" % i)
        except BlockingIOError:
            pass
        check(c.send(got[::-1]) == 100, "answer %d" % i)


def s_ready_spin(c):
    # an event-driven echo (non-blocking, epoll or poll, reading until
    # EAGAIN) answering a client that asks at once: with a spin before the
    # arming look, most waits end while spinning (ready.spins_paid) and the
    # client sends no wake-up signal for them (the spin withdrew the one the
    # EAGAIN armed); then an idle wait that spins at most briefly
    c.setblocking(False)
    wait = ready_waiter(c)
    echo_until_eagain(c, wait, 300, lambda i: pattern(30 + i % 7, 100))
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    check(wait(10), "idle wake-up")
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    check(c.recv(1) == b"z", "idle wake-up byte")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    sys.stderr.write("server: idle wait %.2f s, cpu %.3f s\n" % (t1 - t0, cpu))
    check(cpu < 0.1 * (t1 - t0), "an idle readiness wait burnt %.3f s of CPU in %.2f s"
          % (cpu, t1 - t0))
    c.setblocking(True)
    c.sendall(b"e")
    if not paired():
        return
    paid, slept = zc_stat("ready.spins_paid"), zc_stat("ready.spins_slept")
    sys.stderr.write("server: ready spins paid %r, slept %r\n" % (paid, slept))
    check(paid is not None and slept is not None, "no ready.spins_* counters")
    if os.environ.get("ZCSOCK_SPIN_US", "0") not in ("", "0"):
        check(paid >= 100, "a fixed spin ended only %d of 300 quick waits" % paid)
    elif os.environ.get("ZCSOCK_SPIN") == "0":
        check(paid == 0 and slept == 0, "ZCSOCK_SPIN=0 spun")


def c_ready_spin(c):
    for i in range(300):
        c.sendall(pattern(30 + i % 7, 100))
        check(recv_exact(c, 100) == pattern(30 + i % 7, 100)[::-1], "answer %d" % i)
    bells = zc_stat("local.doorbells")
    time.sleep(1.0)
    c.sendall(b"z")
    check(recv_exact(c, 1) == b"e", "end")
    if paired() and os.environ.get("ZCSOCK_SPIN_US", "0") not in ("", "0"):
        # the server's spins that paid needed no doorbell
        sys.stderr.write("client: %r doorbells for 300 requests\n" % bells)
        check(bells is not None and bells <= 200, "%r doorbells for 300 requests to a "
              "spinning server" % bells)


def s_busy_poll(c):
    # an echo that busy-polls (poll or epoll with a zero timeout, as MPI
    # progress engines do) until the request is readable, then reads exactly
    # it: a wait that cannot sleep must not arm the client's wake-up
    c.setblocking(False)
    wait = ready_waiter(c)
    for i in range(300):
        got = b""
        t_end = time.monotonic() + 5
        while len(got) < 100:
            if wait(0):
                got += c.recv(100 - len(got))
            elif time.monotonic() > t_end:
                fail("request %d: not readable within 5 s" % i)
        check(got == pattern(50 + i % 3, 100), "request %d" % i)
        check(c.send(got[::-1]) == 100, "answer %d" % i)
    c.setblocking(True)
    check(recv_exact(c, 1) == b"z", "end")


def c_busy_poll(c):
    for i in range(300):
        if i == 20:
            base = sum(zc_stat(k) or 0 for k in ("local.efd_wakes", "local.doorbells",
                                                 "local.futex_wakes"))
        c.sendall(pattern(50 + i % 3, 100))
        check(recv_exact(c, 100) == pattern(50 + i % 3, 100)[::-1], "answer %d" % i)
    c.sendall(b"z")
    if not paired():
        return
    sig = sum(zc_stat(k) or 0 for k in ("local.efd_wakes", "local.doorbells",
                                        "local.futex_wakes")) - base
    sys.stderr.write("client: %d wake-up signals for 280 requests to a busy-polling server\n"
                     % sig)
    check(sig <= 5, "%d wake-up signals for 280 requests to a server that never sleeps" % sig)


class _SigWake(Exception):
    pass


def _sig_wake(signum, frame):
    raise _SigWake()


def s_sig_wait(c):
    # A readiness wait (T_READY: epoll or poll; recv: a blocking receive,
    # which the kernel does not restart after a handler without SA_RESTART)
    # over a paired connection
    # that nothing will make readable, and a SIGUSR1 (handler without
    # SA_RESTART, raising) sent by the client 300 us after we said we are
    # about to wait: with ZCSOCK_SPIN_US=2000 it lands while the wait spins
    # in the library's own code.  The kernel would end the wait with EINTR;
    # a wait that let the handler run and then slept on returns only at its
    # 5 s timeout.  Sends run with the signal blocked.
    usr1 = {signal.SIGUSR1}
    old = signal.signal(signal.SIGUSR1, _sig_wake)
    signal.siginterrupt(signal.SIGUSR1, True)
    signal.pthread_sigmask(signal.SIG_BLOCK, usr1)
    blocking = os.environ.get("T_READY") == "recv"     # a blocking receive instead
    try:
        c.sendall(struct.pack("=i", os.getpid()))
        wait = (lambda t: c.recv(1)) if blocking else ready_waiter(c)
        for k in range(30):
            c.setblocking(True)
            c.sendall(b"r")
            c.setblocking(blocking)
            t0 = time.monotonic()
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, usr1)
                r = wait(5)
                signal.pthread_sigmask(signal.SIG_BLOCK, usr1)
                fail("wait %d: returned %r after %.2f s; the handler never ended it"
                     % (k, r, time.monotonic() - t0))
            except _SigWake:
                signal.pthread_sigmask(signal.SIG_BLOCK, usr1)
            dt = time.monotonic() - t0
            check(dt < 1.0, "wait %d: ended %.2f s after it began: the handler ran and the "
                  "wait slept on" % (k, dt))
            c.setblocking(True)
            c.sendall(b"!")
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, usr1)
        signal.signal(signal.SIGUSR1, old)


def c_sig_wait(c):
    pid = struct.unpack("=i", recv_exact(c, 4))[0]
    c.settimeout(10)            # a wait that sleeps on fails here, not at the tier's limit
    for k in range(30):
        check(recv_exact(c, 1) == b"r", "wait %d announced" % k)
        t_kill = time.perf_counter() + 300e-6
        while time.perf_counter() < t_kill:
            pass
        os.kill(pid, signal.SIGUSR1)
        check(recv_exact(c, 1) == b"!", "wait %d ended" % k)


def s_wake_efd(c):
    # an event-driven echo (non-blocking, epoll or poll, reading until
    # EAGAIN) with no spin, so every wait sleeps: the client says through
    # its counters how it woke the server (wake-up eventfd or doorbell byte)
    c.setblocking(False)
    echo_until_eagain(c, ready_waiter(c), 300, lambda i: pattern(40 + i % 5, 100))
    c.setblocking(True)
    check(recv_exact(c, 1) == b"z", "end")


def c_wake_efd(c):
    # T_WAKE: "efd" (the server's waits are woken through its eventfd after
    # the first doorbell), "bells" (doorbell bytes only: eventfds off on one
    # side), "fork" (eventfds until the client forks at request 150, which
    # retires its copy: doorbell bytes after that)
    want = os.environ.get("T_WAKE", "efd")
    marks = {}
    for i in range(300):
        if i == 150:
            marks["mid"] = (zc_stat("local.efd_wakes"), zc_stat("local.doorbells"))
            if want == "fork":
                pid = os.fork()
                if pid == 0:
                    os._exit(0)
                os.waitpid(pid, 0)
        c.sendall(pattern(40 + i % 5, 100))
        check(recv_exact(c, 100) == pattern(40 + i % 5, 100)[::-1], "answer %d" % i)
        time.sleep(0.0005)      # the server's next wait sleeps before the request
    c.sendall(b"z")
    if not paired():
        return
    efd, bells, fetched = (zc_stat("local.efd_wakes"), zc_stat("local.doorbells"),
                           zc_stat("local.efd_fetched"))
    sys.stderr.write("client: efd wakes %r, doorbells %r, fetched %r, at 150: %r\n"
                     % (efd, bells, fetched, marks.get("mid")))
    check(efd is not None and bells is not None, "no local.efd_wakes / doorbells counters")
    if want == "efd":
        check(fetched == 1, "the server's eventfd fetched %r times" % fetched)
        check(efd >= 250 and bells <= 30, "%d eventfd wakes and %d doorbells for 300 "
              "requests to a sleeping server" % (efd, bells))
    elif want == "bells":
        check(efd == 0 and fetched == 0, "eventfds used although one side turned them off")
        check(bells >= 250, "only %d doorbells for 300 requests" % bells)
    else:
        e150, b150 = marks["mid"]
        check(e150 >= 120, "only %d eventfd wakes before the fork" % e150)
        check(bells - b150 >= 120, "only %d doorbells after the fork retired the "
              "eventfd" % (bells - b150))


def s_multi_wait(c):
    # one connection in two epoll sets (one edge-triggered) while another
    # thread waits on it with poll(): the main thread answers each request
    # after a wait in the sets in turn; every wait is bounded (a waiter
    # that is never woken fails after 5 s) and every byte checked; with no
    # spin every wait sleeps (wake-up eventfd or doorbell byte)
    c.setblocking(False)
    e1, e2 = select.epoll(), select.epoll()
    e1.register(c.fileno(), select.EPOLLIN)
    e2.register(c.fileno(), select.EPOLLIN | select.EPOLLET)
    stop = threading.Event()
    polls = [0]

    def poller():
        p = select.poll()
        p.register(c, select.POLLIN)
        while not stop.is_set():
            if p.poll(200):
                polls[0] += 1
                time.sleep(0.001)     # level-triggered: let the main thread read
    t = threading.Thread(target=poller)
    t.start()
    try:
        for i in range(200):
            ep = e1 if i % 2 else e2
            got = b""
            while len(got) < 100:
                if not ep.poll(5):
                    fail("request %d: no event from set %d within 5 s" % (i, 1 + (i % 2 == 0)))
                try:
                    while len(got) < 100:
                        b = c.recv(100 - len(got))
                        if not b:
                            fail("request %d: EOF" % i)
                        got += b
                except BlockingIOError:
                    pass
            check(got == pattern(50 + i % 3, 100), "request %d" % i)
            check(c.send(got[::-1]) == 100, "answer %d" % i)
    finally:
        stop.set()
        t.join()
    c.setblocking(True)
    check(recv_exact(c, 1) == b"z", "end")
    sys.stderr.write("server: the poll() thread woke %d times\n" % polls[0])
    check(polls[0] > 0, "the poll() thread never woke")


def c_multi_wait(c):
    for i in range(200):
        c.sendall(pattern(50 + i % 3, 100))
        check(recv_exact(c, 100) == pattern(50 + i % 3, 100)[::-1], "answer %d" % i)
        time.sleep(0.0005)
    c.sendall(b"z")


def s_mixed_wait(c):
    # a thread blocked in a receive (MSG_PEEK, blocking) and the main thread
    # waiting in poll() or epoll on the same socket: data wakes both, as the
    # kernel does (a peek consumes nothing, so both must see it); each wait
    # is bounded (a waiter that is never woken fails after 5 s)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN)
    pl = select.poll()
    pl.register(c, select.POLLIN)
    go, peeked = threading.Semaphore(0), threading.Semaphore(0)
    errs = []

    def peeker():
        try:
            for i in range(ROUNDS_MIXED):
                if not go.acquire(timeout=10):
                    return
                b = c.recv(1, socket.MSG_PEEK)
                if b != pattern(60 + i % 3, 100)[:1]:
                    errs.append("round %d: the blocked peek got %r" % (i, b))
                peeked.release()
        except Exception as e:      # reported by the main thread
            errs.append("peeker: %r" % e)
            peeked.release()
    t = threading.Thread(target=peeker)
    t.start()
    try:
        for i in range(ROUNDS_MIXED):
            go.release()
            time.sleep(0.0002 * (i % 4))     # either waiter may announce first
            if i % 2:
                ok = pl.poll(5000)
            else:
                ok = ep.poll(5)
            check(ok, "round %d: %s never woke (the blocked receive did)"
                  % (i, "poll" if i % 2 else "epoll"))
            check(peeked.acquire(timeout=5), "round %d: the blocked receive never woke" % i)
            check(not errs, "; ".join(errs))
            check(recv_exact(c, 100) == pattern(60 + i % 3, 100), "round %d bytes" % i)
            check(c.send(b"k") == 1, "answer %d" % i)
    finally:
        for _ in range(ROUNDS_MIXED):
            go.release()
        t.join()
    check(recv_exact(c, 1) == b"z", "end")


def c_mixed_wait(c):
    for i in range(ROUNDS_MIXED):
        time.sleep(0.003)       # both server waiters are asleep by now
        c.sendall(pattern(60 + i % 3, 100))
        check(recv_exact(c, 1) == b"k", "answer %d" % i)
    c.sendall(b"z")


ROUNDS_MIXED = 60


def s_mixed_wait_tx(c):
    # a thread blocked in a send (the peer reads nothing yet) and the main
    # thread waiting for POLLOUT in poll() or epoll on the same socket: when
    # the peer has read everything both must have woken (the send done, the
    # wait reporting room); each wait bounded (5 s)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLOUT)
    pl = select.poll()
    pl.register(c, select.POLLOUT)
    blob = pattern(70, 8 << 20)
    for i in range(6):
        done = []
        t = threading.Thread(target=lambda: done.append(c.sendall(blob)))
        t.start()
        time.sleep(0.05)        # the send blocks on a full buffer by now
        t0 = time.monotonic()
        if i % 2:
            ok = pl.poll(5000)
        else:
            ok = ep.poll(5)
        took = time.monotonic() - t0
        check(ok, "round %d: %s never reported room" % (i, "poll" if i % 2 else "epoll"))
        # the peer starts reading 0.15 s after this wait began: room comes
        # at once then, not from a timer
        check(took < 1.5, "round %d: room reported after %.2f s" % (i, took))
        t.join(10)
        check(done and not t.is_alive(), "round %d: the blocked send never finished" % i)
        check(recv_exact(c, 1) == b"k", "round %d: answer" % i)


def c_mixed_wait_tx(c):
    blob = pattern(70, 8 << 20)
    for i in range(6):
        time.sleep(0.2)         # both server waiters are asleep by now
        check(recv_exact(c, len(blob)) == blob, "round %d bytes" % i)
        c.sendall(b"k")


def s_arm_race(c):
    # an event-driven receiver that arms its wake-up and sleeps in epoll
    # while the sender writes at every possible moment around the arming
    # (the client varies its delay): a lost wake-up leaves a wait with
    # nothing reported, which fails here after 5 s instead of hanging
    c.setblocking(False)
    wait = ready_waiter(c)
    for i in range(2000):
        got = ready_recv(c, wait, 8, "round %d" % i)
        check(got == struct.pack("Q", i), "round %d: wrong bytes" % i)
        check(c.send(b"k") == 1, "answer %d" % i)


def c_arm_race(c):
    rnd = random.Random(9)
    for i in range(2000):
        spin_until = time.perf_counter() + rnd.random() * 100e-6
        while time.perf_counter() < spin_until:
            pass
        c.sendall(struct.pack("Q", i))
        check(recv_exact(c, 1) == b"k", "answer %d" % i)


def s_epoll_shared(c):
    # one epoll set waited in by three threads at once (level-triggered),
    # then by a forked child on the set it inherited: every byte arrives
    # once, in order per reader, and nothing hangs (each wait is bounded)
    c.setblocking(False)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN)
    total = 300 * 100
    lock = threading.Lock()
    got = bytearray()
    deadline = time.monotonic() + 60

    def reader():
        while time.monotonic() < deadline:
            with lock:
                if len(got) >= total:
                    return
            if not ep.poll(0.2):
                continue
            with lock:
                try:
                    got.extend(c.recv(total - len(got)))
                except BlockingIOError:
                    pass        # another thread took it
    ts = [threading.Thread(target=reader) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(len(got) == total, "threads read %d of %d bytes" % (len(got), total))
    check(bytes(got) == pattern(40, total), "threads: bytes differ")
    c.setblocking(True)
    c.sendall(b"t")
    c.setblocking(False)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            data = b""
            end = time.monotonic() + 20
            while len(data) < 5000 and time.monotonic() < end:
                if ep.poll(1):
                    try:
                        data += c.recv(5000 - len(data))
                    except BlockingIOError:
                        pass
            if data == pattern(41, 5000):
                c.setblocking(True)
                c.sendall(b"c")
                code = 0
        finally:
            os._exit(code)
    _, st = os.waitpid(pid, 0)
    check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0,
          "the forked child did not read the message through the inherited set")
    c.setblocking(True)
    check(recv_exact(c, 1) == b"e", "end")


def c_epoll_shared(c):
    data = pattern(40, 300 * 100)
    for i in range(300):
        c.sendall(data[i * 100:(i + 1) * 100])
        if i % 10 == 0:
            time.sleep(0.001)
    check(recv_exact(c, 1) == b"t", "threads done")
    c.sendall(pattern(41, 5000))
    check(recv_exact(c, 1) == b"c", "the child's answer")
    c.sendall(b"e")


SPLICE_FULL = 16 << 20


def s_splice_full(c):
    # pipe -> socket with SPLICE_F_NONBLOCK into a peer that does not read:
    # each EAGAIN must leave the pipe as it was (a pipe cannot take bytes
    # back); then blocking splices, interrupted by signals, move the rest,
    # ending at the pipe's EOF with every byte counted exactly once
    data = pattern(13, SPLICE_FULL)
    r, w = os.pipe()
    os.set_blocking(w, False)
    held = []
    if os.environ.get("T_SPLICE_EMFILE"):
        # no descriptor left for the library's peek pipe: its fallback
        # (read only what the ring takes at once) must lose nothing either
        import resource
        limits = resource.getrlimit(resource.RLIMIT_NOFILE)
        top = max(int(x) for x in os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (top + 1, limits[1]))
        try:
            while True:
                held.append(os.dup(0))
        except OSError:
            pass
        try:
            os.close(os.dup(0))
            fail("a descriptor is still free")
        except OSError:
            pass
    c.setblocking(False)
    fed = sent = eagain = 0
    wopen = True

    def feed():
        nonlocal fed, wopen
        try:
            while fed < SPLICE_FULL:
                fed += os.write(w, data[fed:fed + 65536])
        except BlockingIOError:
            pass
        if fed == SPLICE_FULL and wopen:
            os.close(w)
            wopen = False
    end = time.time() + 30
    while eagain < 3 and sent < SPLICE_FULL and time.time() < end:
        feed()
        try:
            sent += os.splice(r, c.fileno(), fed - sent, flags=os.SPLICE_F_NONBLOCK)
        except BlockingIOError:
            eagain += 1
            time.sleep(0.01)
    check(eagain == 3, "never got EAGAIN with %d of %d bytes spliced" % (sent, SPLICE_FULL))
    c.setblocking(True)
    # blocking now, interrupted by a timer signal every 20 ms while it waits
    # for the peer (Python retries after EINTR): an interrupted splice must
    # not have taken anything out of the pipe either
    ticks = threading.current_thread() is threading.main_thread()
    if ticks:
        old = signal.signal(signal.SIGALRM, lambda *a: None)
        signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    try:
        while True:
            feed()
            n = os.splice(r, c.fileno(), 1 << 20)
            if n == 0:
                break
            sent += n
    finally:
        if ticks:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    check(sent == SPLICE_FULL, "spliced %d of %d bytes (pipe bytes lost)" % (sent, SPLICE_FULL))
    os.close(r)
    for fd in held:
        os.close(fd)


def c_splice_full(c):
    # start reading once the sender is stuck (what is readable stops growing)
    end, last = time.time() + 30, -1
    while time.time() < end:
        n = fionread(c)
        if n == last and n > 0:
            break
        last = n
        time.sleep(0.2)
    got = recv_exact(c, SPLICE_FULL)
    check(got == pattern(13, SPLICE_FULL), "spliced stream differs")


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
    "splice_full": (s_splice_full, c_splice_full),
    "spin_idle": (s_spin_idle, c_spin_idle),
    "pipelined": (s_pipelined, c_pipelined),
    "ready_spin": (s_ready_spin, c_ready_spin),
    "wake_efd": (s_wake_efd, c_wake_efd),
    "busy_poll": (s_busy_poll, c_busy_poll),
    "sig_wait": (s_sig_wait, c_sig_wait),
    "multi_wait": (s_multi_wait, c_multi_wait),
    "mixed_wait": (s_mixed_wait, c_mixed_wait),
    "mixed_wait_tx": (s_mixed_wait_tx, c_mixed_wait_tx),
    "arm_race": (s_arm_race, c_arm_race),
    "epoll_shared": (s_epoll_shared, c_epoll_shared),
    "threads": (s_threads, c_threads),
    "dup": (s_dup, c_dup),
    "subprocess": (s_subprocess, c_subprocess),
    "exec_plain": (s_exec_plain, c_handback),
    "exec_unswitched": (s_exec_unswitched, c_exec_late),
    "stdio_filter": (s_stdio_filter, c_stdio_filter),
    "fdopen": (s_fdopen, c_fdopen),
    "seccomp": (s_seccomp, c_seccomp),
    "uring_dlopen": (s_uring_dlopen, c_uring_dlopen),
    "scribble": (s_scribble, c_scribble),
    "oob": (s_oob, c_oob),
    "shut_rd": (s_shut_rd, c_shut_rd),
    "reset_soerror": (s_reset_soerror, c_reset_soerror),
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
    "closed_exec": (s_closed_exec, c_closed_peer),
    "closed_fdopen": (s_closed_fdopen, c_closed_peer),
    "closed_read": (s_closed_read, c_closed_peer),
    "closed_write": (s_closed_write, c_closed_peer),
    "closed_write_switched": (s_closed_write_switched, c_closed_peer_switched),
    "idle_exec": (s_idle_exec, c_idle_peer),
    "idle_fdopen": (s_idle_fdopen, c_idle_peer),
    "prefix_exec": (s_prefix_exec, c_prefix_peer),
}

# Cases for one family only (run.sh runs them there).
UNIX_ONLY = ("anc", "passcred")
# Cases run.sh gives their own line (they need something from it).
OWN_LINE = ("exec_static",)


# Cases that start streaming at once, so the switch to the ring happens in
# the middle of the data; the others first exchange one byte each way, after
# which both directions of a paired connection use the ring.
UNSETTLED = ("stream_both", "sizes", "fork", "exec_unswitched", "fclose_reuse",
             "epoll_released", "prefix_exec")
# Cases whose server accepts late (the client sends first, unpaired).
LATE_ACCEPT = ("prefix_exec",)
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
    # T_SQUAT_SELF=other|same: our own mailbox name taken before we pair:
    # not paired, said as local.declined.mailbox (a peer's lingering socket
    # would have had nowhere to go; it must not go to the squatter either)
    squat = mailbox_squatter(os.getpid(), os.environ.get("T_SQUAT_SELF"))
    print(addr, flush=True)
    if case in LATE_ACCEPT:
        time.sleep(0.5)             # the client's first bytes go before any offer
    c, _ = ls.accept()
    ls.close()
    if case not in UNSETTLED:
        c.sendall(b"G")
        check(recv_exact(c, 1) == b"H", "handshake")
    CASES[case][0](c)
    if squat:
        got = squat()
        check(not got, "the squatter of our mailbox name received %r" % got[:200])
        if os.environ.get("T_MODE") == "both":
            # only a same-user squatter can take the name (private directory)
            want = 1 if squat_takes(os.environ.get("T_SQUAT_SELF")) else 0
            check(zc_stat("local.declined.mailbox") == want, "declined.mailbox %r, not %d"
                  % (zc_stat("local.declined.mailbox"), want))
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
    if case not in UNSETTLED:
        # the two processes' handshake (serve, connect): paired before the case
        s.sendall(b"G")
        check(recv_exact(c, 1) == b"G", "handshake")
        c.sendall(b"H")
        check(recv_exact(s, 1) == b"H", "handshake")
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
        if role == "client" and "T_CLIENT_WAKE_EVENTFD" in os.environ:
            e["ZCSOCK_WAKE_EVENTFD"] = os.environ["T_CLIENT_WAKE_EVENTFD"]
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
    if mode == "both" and (case in NEVER_PAIRED or squat_takes(os.environ.get("T_SQUAT_SELF"))):
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
    elif sys.argv[1] == "sink_plain":
        sink_plain_main(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "sink_idle":
        sink_idle_main(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "sink_prefix":
        sink_prefix_main(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "scm_worker":
        scm_worker_main(path=sys.argv[2])
    elif sys.argv[1] == "scm_worker_fd":
        scm_worker_main(fd=int(sys.argv[2]))
    elif sys.argv[1] == "list":
        print(" ".join(c for c in CASES if c not in UNIX_ONLY + OWN_LINE))


if __name__ == "__main__":
    signal.alarm(300)
    main()
