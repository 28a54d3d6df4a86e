"""A process under an address-space limit works under the library as it
does without (issue 29, item 3: vsftpd's session process sets RLIMIT_AS to
200 MiB, and a process under the library held 64 GiB of address space, so
every later mmap failed).  Usage: aslimit.py inherited|lowered: the limit
comes from the parent (ulimit -v), or the process lowers its own to 200 MiB
first (setrlimit, as vsftpd does); then it maps 16 MiB, allocates two
8 MiB buffers, and streams 8 MiB each way over a loopback connection to a thread
of its own (both ends pair under the library), every byte hashed."""
import hashlib, mmap, os, resource, socket, sys, threading

LIMIT = 200 << 20
N = 8 << 20


def echo(srv):
    c, _ = srv.accept()
    buf = bytearray(1 << 20)
    while True:
        k = c.recv_into(buf)
        if not k:
            break
        c.sendall(buf[:k])
    c.close()


def main():
    if sys.argv[1] == "lowered":    # ("none": no limit, for vm.overcommit_memory 2)
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, resource.RLIM_INFINITY))
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    print("RLIMIT_AS soft:", "unlimited" if soft == resource.RLIM_INFINITY else "%d MiB" % (soft >> 20))
    m = mmap.mmap(-1, 2 * N)        # must not fail for want of address space
    m[2 * N - 1:2 * N] = b"x"
    bufs = [bytearray(N) for _ in range(2)]
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    t = threading.Thread(target=echo, args=(srv,), daemon=True)
    t.start()
    s = socket.create_connection(srv.getsockname())
    data = os.urandom(1 << 20) * (N >> 20)
    back = bytearray()

    def reader():
        while len(back) < N:
            b = s.recv(1 << 20)
            if not b:
                break
            back.extend(b)
    r = threading.Thread(target=reader, daemon=True)
    r.start()
    s.sendall(data)
    r.join()
    s.close()
    t.join()
    if hashlib.sha256(back).digest() != hashlib.sha256(data).digest():
        print("FAIL: %d of %d bytes came back, or they differ" % (len(back), N))
        sys.exit(1)
    with open("/proc/self/status") as f:
        vm = [l.split()[1] for l in f if l.startswith("VmSize")][0]
    print("ok: 8 MiB echoed, mmap and buffers fine, VmSize %s kB" % vm)
    del bufs, m


main()
