"""Cases of the localpath tier where a connection leaves the hooks' sight or
meets what only the kernel can answer: hand-back to programs without the
library (exec, SCM_RIGHTS, posix_spawn), stdio, seccomp, a hostile peer,
urgent data, SHUT_RD, descriptors closed behind the hooks' back."""
from lp_util import *  # noqa: F401,F403
import zc_dir  # noqa: E402  (tests/lib, on the path lp_util set)

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
    a ring's worth, or what a kernel socket's buffer holds), put one of ours
    in flight unread, then give the connection away (give(c))."""
    check(wait_fionread(c, min(4 + pre_a(), 1 << 20), 10, settle=1.0),
          "client's first message never arrived")
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
    if os.environ.get("T_MODE") == "both" and not os.environ.get("T_FORKED_PEER") and \
            os.environ.get("ZCSOCK_LOCAL_PUMP_MS") == "0":
        # without the server's pump (with it, the pump gives them back while
        # we sleep; with a forked reader, whichever process came first)
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


def s_uring_dlopen(c):
    # a paired connection, then a library that links liburing is dlopen'ed:
    # liburing's inline system calls would pass no hook, so the next socket
    # the process makes (here a listener) hands every connection back first;
    # the echo goes on byte for byte
    for i in range(20):
        n = struct.unpack("I", recv_exact(c, 4))[0]
        c.sendall(recv_exact(c, n))
        if i == 9:
            if os.environ.get("T_URING_FFI"):
                # liburing itself, as an FFI binding loads it (ctypes)
                ring = ctypes.create_string_buffer(512)
                uring = ctypes.CDLL("liburing.so.2")
                if uring.io_uring_queue_init(4, ring, 0) == 0:
                    uring.io_uring_queue_exit(ring)
            else:
                lib = os.environ.get("T_NEEDS_URING", "")
                if not os.path.exists(lib):
                    fail("T_NEEDS_URING (build/tests/localpath/libneeds_uring.so) not built")
                check(ctypes.CDLL(lib).needs_uring_probe() in (0, -1), "probe")
            l2 = socket.socket()
            l2.bind(("127.0.0.1", 0))
            l2.listen(1)
            l2.close()
            if os.environ.get("T_MODE") == "both":
                check(zc_stat("local.handed_back.io_uring") == 1, "not handed back at dlopen")
                check(zc_stat("local.declined.io_uring") >= 1, "the listener was not declined")


def c_uring_dlopen(c):
    for i in range(20):
        msg = bytes([i]) * (1000 + 99991 * i)
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
    # a live thread id that is neither end's (the launcher's): a process
    # that alone holds its end knows no thread of its own holds the lock
    word = struct.pack("I", os.getppid())
    rnd = random.Random(5)
    m[0:4096] = word * 1024
    m[4096:4096 + 65536] = rnd.randbytes(65536)
    # one byte on the kernel stream, past this process's own library (a
    # hostile peer controls its system calls): the client wakes and must
    # answer at once, whatever the words it then reads say
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    check(libc.syscall(1, c.fileno(), b"s", 1) == 1, "raw write")    # SYS_write
    try:
        c.sendall(b"s")             # through whatever the channel now is
    except OSError:
        pass                        # our own library may call the channel broken
    time.sleep(8)                   # stay alive: the lock words name us


def c_scribble(c):
    # with the library on both ends the first three calls answer at once
    # (the server's bytes are there, and a forged lock holder is no thread of
    # the client's); the last receive may find nothing left to read and wait
    # for the server to close (8 s), as without the library
    fast = 2.5 if os.environ.get("T_MODE") == "both" else 10
    c.settimeout(20)
    check(c.recv(1) == b"h", "no greeting")     # pairs here when both ends run the library
    c.sendall(b"a")
    t0 = time.time()
    outcomes = []
    for op, limit in (("recv", fast), ("send", fast), ("poll", fast), ("recv", 10)):
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
        check(time.time() - t < limit, "%s took %.1f s (%r)" % (op, time.time() - t, outcomes))
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


def s_reset_soerror(c):
    # the server resets the connection (SO_LINGER {1, 0}); the client's poll
    # sees it, and getsockopt(SO_ERROR) still says ECONNRESET after the
    # library's own reads of the socket
    c.sendall(pattern(44, 70000))
    check(recv_exact(c, 1) == b"r", "client's go")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def c_reset_soerror(c):
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


# --- a peer that closed first: its unread ring bytes linger for a hand-back ----

CLOSED_N = (1 << 20) + 7


def closed_marker(addr):
    """A file the client makes once it has closed (the server waits for it)."""
    key = addr if isinstance(addr, str) else "%s-%d" % addr[:2]
    return os.path.join(tempfile.gettempdir(),
                        "zcsock-t-closed-%s" % hashlib.sha256(key.encode()).hexdigest()[:16])


def c_closed_peer(c):
    # send a header and CLOSED_N bytes, close at once (the server has read
    # none of it), then say so; with the library both ends are paired and
    # the bytes sit in the ring when the server hands the connection back
    m = closed_marker(c.getpeername())
    if os.environ.get("T_EXIT"):
        # a child sends and leaves through exit() with the socket open (the
        # kernel closes it, no hook runs; the library's destructor does)
        pid = os.fork()
        if pid == 0:
            c.sendall(struct.pack("I", CLOSED_N) + pattern(41, CLOSED_N))
            ctypes.CDLL(None).exit(0)
        c.close()
        _, st = os.waitpid(pid, 0)
        check(st == 0, "sending child failed")
        open(m, "w").close()
        return
    c.sendall(struct.pack("I", CLOSED_N) + pattern(41, CLOSED_N))
    c.close()
    if not os.environ.get("T_RACE"):
        open(m, "w").close()        # (with T_RACE the server waits for no marker)
    if os.environ.get("T_MODE") == "both" and squat_takes(os.environ.get("T_SQUAT_SELF")):
        # the server's mailbox name was someone else's: nothing posted there
        check(zc_stat("local.lingered") == 0, "a lingering socket went to a squatter")
    elif os.environ.get("T_MODE") == "both" and not os.environ.get("T_RACE"):
        check(zc_stat("local.lingered") == 1, "the close left no lingering socket: %r"
              % zc_stat("local.lingered"))


def s_closed_common(c):
    """The header through the ring, then wait until the client has closed."""
    m = closed_marker(c.getsockname())
    check(struct.unpack("I", recv_exact(c, 4))[0] == CLOSED_N, "header")
    if os.environ.get("T_RACE"):
        return      # hand back while the client may be closing: who gives the bytes back races
    end = time.time() + 20
    while not os.path.exists(m):
        check(time.time() < end, "the client never closed")
        time.sleep(0.01)
    os.unlink(m)


def s_closed_exec(c):
    # a program without the library reads the rest from the kernel stream
    s_closed_common(c)
    fork_exec_with(c, [sys.executable, HERE, "sink_plain", str(CLOSED_N)], env_without_lib())


def sink_plain_main(n, fd):
    c = socket.socket(fileno=fd)
    got = b""
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        got += b
    check(len(got) == n and got == pattern(41, n), "the exec'd reader got %d of %d bytes%s"
          % (len(got), n, " (wrong)" if len(got) == n else ""))
    os._exit(0)


def stdio_reader(c):
    """A copy of c read through glibc's stdio (fdopen, fread), which no hook
    sees: returns (read(k) -> bytes, b"" at EOF; close())."""
    libc = ctypes.CDLL(None)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fread.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    libc.fread.restype = ctypes.c_size_t
    libc.fclose.argtypes = [ctypes.c_void_p]
    fp = libc.fdopen(os.dup(c.fileno()), b"r")
    check(fp, "fdopen")
    buf = ctypes.create_string_buffer(1 << 16)

    def read(k):
        n = libc.fread(buf, 1, min(k, len(buf)), fp)
        return buf.raw[:n]
    return read, lambda: libc.fclose(ctypes.c_void_p(fp))


def s_closed_fdopen(c):
    # the server itself goes on through stdio (fdopen + fread), which no hook sees
    s_closed_common(c)
    read, _ = stdio_reader(c)
    got = b""
    end = time.time() + 30
    while time.time() < end:
        b = read(1 << 16)
        if not b:
            break
        got += b
    check(len(got) == CLOSED_N and got == pattern(41, CLOSED_N),
          "fread got %d of %d bytes" % (len(got), CLOSED_N))
    if os.environ.get("T_MODE") == "both" and not os.environ.get("T_RACE"):
        check(zc_stat("local.linger_pumps") == 1, "no pump gave the ring back: %r"
              % zc_stat("local.linger_pumps"))
        check(not zc_stat("local.handback_lost_bytes"), "bytes lost")


def s_closed_write(c):
    # writing to the closed client: the kernel resets, so a send fails
    # (EPIPE / ECONNRESET) instead of filling a lingering socket for ever;
    # what the client sent before closing still reads, then the reset
    s_closed_common(c)
    chunk = b"w" * 65536
    end = time.time() + 20
    err = None
    while err is None:
        check(time.time() < end, "sends to the closed peer never failed")
        try:
            c.send(chunk)
        except (BrokenPipeError, ConnectionResetError) as e:
            err = e
    got = b""
    try:
        while len(got) < CLOSED_N:
            b = c.recv(1 << 16)
            if not b:
                break
            got += b
    except ConnectionResetError:
        pass
    check(got == pattern(41, CLOSED_N)[:len(got)], "data before the reset")


def c_closed_peer_switched(c):
    # read the server's greeting first: the server's sending direction is in
    # the ring, and the client closes with nothing unread (so it lingers)
    check(recv_exact(c, 5) == b"hello", "greeting")
    c_closed_peer(c)


def s_closed_write_switched(c):
    # closed_write with our sending direction already in the ring: the send
    # to the closed peer goes to the kernel from the ring send loop, which
    # must drop the peer's lingering socket too (it filled it and blocked
    # for ever: CPython's test_ssl test_nonblocking_send hung so).  A send
    # that blocks 10 s raises here instead of hanging the case.
    c.sendall(b"hello")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 10, 0))
    s_closed_write(c)


# --- an idle peer: its unread ring bytes reach a hand-back without its help ---

IDLE_N = (1 << 20) + 11


def c_idle_peer(c):
    # send a header and IDLE_N bytes, then wait without any call on the
    # socket until the server's reader says it has them all (a file), then
    # read its answer; with both ends paired the bytes sit in the ring when
    # the server hands the connection back, and only a pump can give them
    # to the kernel while this side stays idle
    done = closed_marker(c.getpeername()) + "-idle"
    c.sendall(struct.pack("I", IDLE_N) + pattern(43, IDLE_N))
    both = os.environ.get("T_MODE") == "both"
    if os.environ.get("T_IDLE_MOVED"):
        # the connection moves to another number and another socket takes
        # the one our side named (dup2 over it): the side names the new one,
        # and the pump fetches that
        fd = c.detach()
        c = socket.socket(fileno=os.dup(fd))
        other = socket.socket(c.family, socket.SOCK_STREAM)
        os.dup2(other.fileno(), fd)
        open(done + "-moved", "w").close()
    if os.environ.get("T_IDLE_FORKED"):
        # the process that paired closes its copy and waits; a forked child
        # holds the connection: no socket is left where the side points, so
        # nothing is pumped and the bytes wait for the child's next call
        # (the fallback)
        pid = os.fork()
        if pid:
            c.close()
            open(done + "-moved", "w").close()
            _, st = os.waitpid(pid, 0)
            check(st == 0, "the forked holder failed")
            return
        try:
            if both:
                time.sleep(1.5)
                check(not os.path.exists(done), "the reader got the bytes while no socket "
                      "could be fetched")
                check(recv_exact(c, 2) == b"ok", "answer")      # our call moves them
                check(zc_stat("local.returned_bytes") >= IDLE_N, "we did not move the bytes: "
                      "%r" % zc_stat("local.returned_bytes"))
                check(os.path.exists(done), "the reader's marker")
                os.unlink(done)
                expect_eof(c)
                os._exit(0)
        except BaseException as e:
            print("FAIL: %s" % e, flush=True)
            os._exit(1)
    end = time.time() + 30
    while not os.path.exists(done):
        check(time.time() < end, "the reader never got the bytes an idle peer left in the ring")
        time.sleep(0.01)
    os.unlink(done)
    if both:
        check(not zc_stat("local.returned_bytes"), "the idle side moved the bytes itself: %r"
              % zc_stat("local.returned_bytes"))
    check(recv_exact(c, 2) == b"ok", "answer")
    expect_eof(c)


def idle_read(read, n):
    """n bytes through read(k) (which returns b"" at EOF), checked."""
    got = b""
    end = time.time() + 30
    while len(got) < n and time.time() < end:
        b = read(min(1 << 16, n - len(got)))
        if not b:
            break
        got += b
    check(len(got) == n and got == pattern(43, n), "the reader got %d of %d bytes%s"
          % (len(got), n, " (wrong)" if len(got) == n else ""))


def s_idle_header(c):
    """The header through the ring (and, with T_IDLE_MOVED, the client's
    socket moved); returns the reader's marker file."""
    done = closed_marker(c.getsockname()) + "-idle"
    check(struct.unpack("I", recv_exact(c, 4))[0] == IDLE_N, "header")
    moved = os.environ.get("T_IDLE_MOVED") or os.environ.get("T_IDLE_FORKED")
    end = time.time() + 20
    while moved and not os.path.exists(done + "-moved"):
        check(time.time() < end, "the client never moved its socket")
        time.sleep(0.01)
    if moved:
        os.unlink(done + "-moved")
    return done


def s_idle_exec(c):
    # a program without the library reads the rest while the client is idle
    done = s_idle_header(c)
    fork_exec_with(c, [sys.executable, HERE, "sink_idle", str(IDLE_N), done], env_without_lib())


def sink_idle_main(n, done, fd):
    c = socket.socket(fileno=fd)
    idle_read(c.recv, n)
    open(done, "w").close()
    c.sendall(b"ok")
    os._exit(0)


def s_idle_fdopen(c):
    # the server itself goes on through stdio (fread) while the client is idle
    done = s_idle_header(c)
    read, close = stdio_reader(c)
    idle_read(read, IDLE_N)
    open(done, "w").close()
    if os.environ.get("T_MODE") == "both":
        want = 0 if os.environ.get("T_IDLE_FORKED") else 1
        check(zc_stat("local.peer_pumps") == want, "pumps for the idle peer: %r, not %d"
              % (zc_stat("local.peer_pumps"), want))
        check(not zc_stat("local.handback_lost_bytes"), "bytes lost")
    c.sendall(b"ok")
    close()
    c.close()       # the client waits for the end of the stream


# --- doorbells behind unread kernel bytes: the peer's switch-over after data ---

PRE_X = (200 << 10) + 3        # sent before the connection paired (kernel bytes)
PRE_Y = (300 << 10) + 5        # sent after (the ring, and a doorbell behind PRE_X)


def c_prefix_peer(c):
    # the first message goes before the server's first data call (no offer
    # yet: kernel bytes); once the server has read its header, the second
    # pairs the connection and goes into the ring, with a doorbell for the
    # server behind the first's unread bytes; then idle until the reader
    # has all of it
    done = closed_marker(c.getpeername()) + "-prefix"
    c.sendall(struct.pack("I", PRE_X + PRE_Y) + pattern(47, PRE_X + PRE_Y)[:PRE_X])
    end = time.time() + 20
    while not os.path.exists(done + "-go"):
        check(time.time() < end, "the server never read the header")
        time.sleep(0.01)
    os.unlink(done + "-go")
    c.sendall(pattern(47, PRE_X + PRE_Y)[PRE_X:])
    open(done + "-sent", "w").close()
    if os.environ.get("T_ACTIVE"):
        # a call of ours at once: it waits for the server's pump to have
        # written the first message back, then the ring (none of it ours)
        check(recv_exact(c, 2) == b"ok", "answer")
        check(os.path.exists(done), "the answer before the reader had all the bytes")
        os.unlink(done)
        expect_eof(c)
        return
    end = time.time() + 30
    while not os.path.exists(done):
        check(time.time() < end, "the reader never got the bytes")
        time.sleep(0.01)
    os.unlink(done)
    check(recv_exact(c, 2) == b"ok", "answer")
    expect_eof(c)


def s_prefix_exec(c):
    # hand the connection to a program without the library before reading
    # the first message: it must read both messages, and no doorbell
    done = closed_marker(c.getsockname()) + "-prefix"
    check(struct.unpack("I", recv_exact(c, 4))[0] == PRE_X + PRE_Y, "header")
    open(done + "-go", "w").close()
    end = time.time() + 20
    while not os.path.exists(done + "-sent"):
        check(time.time() < end, "the client never sent the second message")
        time.sleep(0.01)
    os.unlink(done + "-sent")
    time.sleep(0.1)                 # its doorbell in flight
    fork_exec_with(c, [sys.executable, HERE, "sink_prefix", str(PRE_X + PRE_Y), done],
                   env_without_lib())


def sink_prefix_main(n, done, fd):
    c = socket.socket(fileno=fd)
    got = b""
    end = time.time() + 30
    while len(got) < n and time.time() < end:
        b = c.recv(min(1 << 16, n - len(got)))
        if not b:
            break
        got += b
    want = pattern(47, n)
    bad = next((i for i in range(len(got)) if got[i] != want[i]), None)
    check(len(got) == n and got == want, "the exec'd reader got %d of %d bytes%s"
          % (len(got), n, "" if bad is None else ", the first wrong at %d" % bad))
    open(done, "w").close()
    c.sendall(b"ok")
    os._exit(0)


def tcp_states(port):
    """States (hex) of the TCP sockets whose local port is port."""
    out = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in open(name).read().splitlines()[1:]:
                f = line.split()
                if int(f[1].rsplit(":", 1)[1], 16) == port:
                    out.append(f[3])
        except OSError:
            pass
    return out


def s_closed_read(c):
    # no hand-back: the server reads everything from the ring and closes;
    # the client's lingering socket must go with that close (no socket of
    # the client's left open: ESTABLISHED 01 / CLOSE_WAIT 08)
    s_closed_common(c)
    check(recv_exact(c, CLOSED_N) == pattern(41, CLOSED_N), "data")
    expect_eof(c)
    peer = c.getpeername()
    c.close()
    if c.family != socket.AF_UNIX:
        end = time.time() + 5
        while any(st in ("01", "08") for st in tcp_states(peer[1])):
            check(time.time() < end, "the client's socket is still open: %r"
                  % tcp_states(peer[1]))
            time.sleep(0.05)


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


def private_dir(make=False):
    """The library's private directory (tests/lib/zc_dir.py)."""
    return zc_dir.private_dir(make=make)


def squat_takes(who):
    """Does a squatter of kind who (T_SQUAT, T_SQUAT_SELF) take a mailbox
    name?  Only a same-user one: the name is in this user's private
    directory, closed to everyone else."""
    return who == "same"


def mailbox_squatter(pid, who):
    """T_SQUAT=other (another user) or same (this user, not the receiver):
    bind the receiver's mailbox name before the hand-over, in the private
    directory (which must be denied to another user) and the public
    fallback name, and report whether anything came.  Returns a function
    giving what it received (b"BOUND" when another user could bind in the
    private directory), or None."""
    if not who:
        return None
    zc_dir.ensure_key()
    private = private_dir(make=True) + "/mbox/" + zc_dir.mailbox_name(pid)
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        try:
            if who == "other":
                os.setgid(65534)
                os.setuid(65534)
            got = b""
            lss = []
            for name in (private, b"\0zcsock/v1/M/%d" % pid):
                ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                try:
                    ls.bind(name)
                except PermissionError:
                    ls.close()
                    continue
                if who == "other" and name == private:
                    got += b"BOUND in the private directory;"
                ls.listen(8)
                ls.setblocking(False)
                lss.append(ls)
            os.write(w, b"R")
            end = time.time() + 3
            while time.time() < end:
                for ls in lss:
                    try:
                        a, _ = ls.accept()
                    except (BlockingIOError, OSError):
                        continue
                    a.settimeout(1)
                    try:
                        msg, fds, _, _ = socket.recv_fds(a, 256, 4)
                    except OSError:
                        continue
                    if msg or fds:      # a connection that brings nothing is no leak
                        got += msg + b"+%d fds;" % len(fds)
                time.sleep(0.01)
            if who == "same" and os.path.exists(private):
                os.unlink(private)      # (the receiver is gone or declined)
            os.write(w, got)
        finally:
            os._exit(0)
    os.close(w)
    check(os.read(r, 1) == b"R", "squatter did not start")

    def result():
        os.waitpid(child, 0)
        out = read_all(r)
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


