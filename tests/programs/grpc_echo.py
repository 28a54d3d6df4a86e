#!/usr/bin/env python3
"""gRPC echo server and client (python3-grpcio, no generated stubs: generic
handlers, payloads as raw bytes).

  grpc_echo.py server TARGET   serve zc.Echo on TARGET ("127.0.0.1:PORT" or
                               "unix:/path"); prints "listening"; stops on
                               SIGTERM (cleanly: statistics reports get
                               written)
  grpc_echo.py client TARGET SEED
                               connect (deadline 10 s), then
                                 Unary      1 KiB, 64 KiB, 1 MiB, 4 MiB echoed,
                                            then 8 calls at once (futures)
                                 Stream     server streaming: 32 MiB in 1 MiB
                                            chunks, pseudo-random from SEED
                                 Upload     client streaming: 16 MiB in
                                            256 KiB chunks, the server
                                            answers their sha256
                                 Bidi       bidirectional echo of 64 messages
                                            of 1 B .. 1 MiB
                               prints "<call> sent <sha256> received <sha256>
                               <seconds>" per call, then "done"; exits 1 on
                               any error
"""
import concurrent.futures, hashlib, random, signal, sys, threading, time

import grpc

MAX = 8 << 20
OPTS = [("grpc.max_send_message_length", MAX),
        ("grpc.max_receive_message_length", MAX)]
ident = lambda b: b


def gen(seed, size):
    return random.Random(seed).randbytes(size)


def server(target):
    def unary(req, ctx):
        return req

    def stream(req, ctx):           # req: b"SEED SIZE CHUNK"
        seed, size, chunk = req.decode().split()
        data = gen(seed, int(size))
        for i in range(0, len(data), int(chunk)):
            yield data[i:i + int(chunk)]

    def upload(it, ctx):
        h = hashlib.sha256()
        for m in it:
            h.update(m)
        return h.hexdigest().encode()

    def bidi(it, ctx):
        for m in it:
            yield m

    h = grpc.method_handlers_generic_handler("zc.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
        "Stream": grpc.unary_stream_rpc_method_handler(stream, ident, ident),
        "Upload": grpc.stream_unary_rpc_method_handler(upload, ident, ident),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi, ident, ident),
    })
    srv = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16),
                      handlers=(h,), options=OPTS)
    if srv.add_insecure_port(target) == 0:
        sys.exit("cannot bind " + target)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    srv.start()
    print("listening", flush=True)
    while not stop.wait(0.5):
        pass
    srv.stop(1).wait(5)


def client(target, seed):
    rnd = random.Random(seed)
    t0 = time.monotonic()
    ch = grpc.insecure_channel(target, options=OPTS)
    try:
        grpc.channel_ready_future(ch).result(timeout=10)
    except grpc.FutureTimeoutError:
        sys.exit("channel to %s not ready after 10 s" % target)
    print("connected in %.2fs" % (time.monotonic() - t0), file=sys.stderr, flush=True)
    last = [time.monotonic()]
    unary = ch.unary_unary("/zc.Echo/Unary", ident, ident)
    stream = ch.unary_stream("/zc.Echo/Stream", ident, ident)
    upload = ch.stream_unary("/zc.Echo/Upload", ident, ident)
    bidi = ch.stream_stream("/zc.Echo/Bidi", ident, ident)
    sha = lambda b: hashlib.sha256(b).hexdigest()

    def report(name, a, b):     # and the seconds since the previous report
        now = time.monotonic()
        print("%s sent %s received %s %.2f" % (name, a, b, now - last[0]), flush=True)
        last[0] = now

    for size in (1 << 10, 64 << 10, 1 << 20, 4 << 20):
        p = rnd.randbytes(size)
        report("unary-%d" % size, sha(p), sha(unary(p, timeout=30)))
    ps = [rnd.randbytes(rnd.choice((1, 100, 5000, 70000, 1 << 20, 3 << 20)))
          for _ in range(8)]
    fs = [unary.future(p, timeout=30) for p in ps]
    report("unary-parallel8", sha(b"".join(ps)),
           sha(b"".join(f.result() for f in fs)))

    size = 32 << 20
    exp = sha(gen(seed, size))
    h = hashlib.sha256()
    n = 0
    for m in stream(("%s %d %d" % (seed, size, 1 << 20)).encode(), timeout=60):
        h.update(m)
        n += 1
    report("stream-32MiB-%dmsgs" % n, exp, h.hexdigest())

    up = rnd.randbytes(16 << 20)
    got = upload(iter([up[i:i + (256 << 10)] for i in range(0, len(up), 256 << 10)]),
                 timeout=60)
    report("upload-16MiB", sha(up), got.decode())

    msgs = [rnd.randbytes(rnd.choice((1, 10, 1000, 16384, 100000, 1 << 20)))
            for _ in range(64)]
    h = hashlib.sha256()
    for m in bidi(iter(msgs), timeout=60):
        h.update(m)
    report("bidi-64msgs", sha(b"".join(msgs)), h.hexdigest())
    ch.close()
    print("done", flush=True)


if __name__ == "__main__":
    try:
        if sys.argv[1] == "server":
            server(sys.argv[2])
        else:
            client(sys.argv[2], sys.argv[3])
    except grpc.RpcError as e:
        sys.exit("rpc failed: %s %s" % (e.code(), e.details()))
