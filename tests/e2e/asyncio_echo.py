#!/usr/bin/env python3
"""asyncio echo server and clients for the end-to-end transparency tier.

  asyncio_echo.py server --unix PATH
      Listens on 127.0.0.1 (a port the kernel picks) and on the unix stream
      socket PATH, prints "ready tcp=<port>" once both listen, echoes every
      byte back, answers the client's half-close with its own (write_eof)
      and exits 0 on SIGTERM with a one-line summary.

  asyncio_echo.py client --port PORT --unix PATH [--clients N] [--seed S]
      N concurrent clients, alternating TCP and unix, each in one of these
      modes, with message sizes mixed from 1 byte to 1 MiB:
        stream    writes all its messages while reading concurrently, then
                  write_eof(); reads until EOF; must get back every byte
        pingpong  writes one message, reads exactly its echo (while the write
                  drains), and so on;
                  then write_eof() and expects EOF
        abort     writes up to 60 KiB and closes (or aborts) without reading
                  the echo: the server must survive the reset
      Every echoed byte is compared with what was sent; a mismatch reports
      the connection and the first differing offset.  Exit 0 when every
      client succeeded.
"""
import argparse
import asyncio
import os
import random
import signal
import sys
import time

SIZES = [1, 7, 100, 1460, 4096, 65535, 65536, 65537, 262144, 1 << 20]
CHUNK = 256 * 1024


class Server:
    def __init__(self):
        self.conns = 0
        self.resets = 0
        self.bytes = 0

    async def handle(self, reader, writer):
        self.conns += 1
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                self.bytes += len(data)
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
            await writer.drain()
        except (ConnectionResetError, BrokenPipeError):
            self.resets += 1
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionResetError, BrokenPipeError):
                pass

    async def run(self, unix_path):
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        tcp = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        unix = await asyncio.start_unix_server(self.handle, unix_path)
        port = tcp.sockets[0].getsockname()[1]
        print(f"ready tcp={port}", flush=True)
        await stop.wait()
        for srv in (tcp, unix):
            srv.close()
            await srv.wait_closed()
        print(f"server: {self.conns} connections, {self.resets} reset, "
              f"{self.bytes} bytes echoed", flush=True)


def messages(rng, count):
    out = []
    for _ in range(count):
        size = rng.choice(SIZES) if rng.random() < 0.7 else rng.randint(1, 1 << 20)
        out.append(rng.randbytes(size))
    return out


def first_diff(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class Client:
    def __init__(self, idx, seed, args):
        self.idx = idx
        self.rng = random.Random(seed * 100003 + idx)
        self.args = args
        self.transport = "tcp" if idx % 2 == 0 else "unix"
        self.mode = ("stream", "pingpong", "stream", "pingpong", "abort")[idx % 5]
        self.sent = 0
        self.echoed = 0

    def tag(self):
        return f"client {self.idx} ({self.transport}, {self.mode})"

    async def connect(self):
        if self.transport == "tcp":
            return await asyncio.open_connection("127.0.0.1", self.args.port)
        return await asyncio.open_unix_connection(self.args.unix)

    async def run(self):
        reader, writer = await self.connect()
        try:
            await getattr(self, "run_" + self.mode)(reader, writer)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionResetError, BrokenPipeError):
                pass

    async def run_stream(self, reader, writer):
        msgs = messages(self.rng, self.rng.randint(2, 8))
        expect = b"".join(msgs)

        async def send():
            for m in msgs:
                writer.write(m)
                self.sent += len(m)
                await writer.drain()
            writer.write_eof()

        async def receive():
            got = bytearray()
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    return bytes(got)
                got += data
                if len(got) > len(expect):
                    return bytes(got)

        _, got = await asyncio.gather(send(), receive())
        self.echoed = len(got)
        if got != expect:
            raise AssertionError(f"echo differs: sent {len(expect)} bytes, got {len(got)}, "
                                 f"first difference at offset {first_diff(got, expect)}")

    async def run_pingpong(self, reader, writer):
        for m in messages(self.rng, self.rng.randint(4, 16)):
            writer.write(m)
            self.sent += len(m)
            # Drain while reading the echo: a message larger than the socket
            # buffers cannot be drained before its echo is read (the server
            # blocks writing it back), which deadlocked this client on AF_UNIX.
            try:
                _, got = await asyncio.gather(writer.drain(), reader.readexactly(len(m)))
            except asyncio.IncompleteReadError as e:
                raise AssertionError(f"EOF after {self.echoed + len(e.partial)} echoed bytes, "
                                     f"sent {self.sent}")
            if got != m:
                raise AssertionError(f"message of {len(m)} bytes at stream offset {self.echoed} "
                                     f"differs at offset {first_diff(got, m)}")
            self.echoed += len(got)
        writer.write_eof()
        rest = await reader.read(CHUNK)
        if rest:
            raise AssertionError(f"{len(rest)} unexpected bytes after the last echo")

    async def run_abort(self, reader, writer):
        # At most 60 KiB, so that the unread echo fits in the socket buffers
        # and neither side blocks; then close with the echo unread (half of
        # them by aborting the transport): the server sees a reset or EOF.
        for _ in range(self.rng.randint(1, 4)):
            m = self.rng.randbytes(self.rng.randint(1, 15 * 1024))
            writer.write(m)
            self.sent += len(m)
        await writer.drain()
        await asyncio.sleep(self.rng.random() / 50)
        if self.idx % 2:
            writer.transport.abort()


async def clients_main(args):
    clients = [Client(i, args.seed, args) for i in range(args.clients)]
    t0 = time.monotonic()
    tasks = [asyncio.create_task(c.run()) for c in clients]
    done, pending = await asyncio.wait(tasks, timeout=args.timeout)
    failed = 0
    for c, t in zip(clients, tasks):
        if t in pending:
            failed += 1
            print(f"FAIL {c.tag()}: not finished after {args.timeout:.0f}s, "
                  f"{c.sent} bytes sent, {c.echoed} echoed", flush=True)
            t.cancel()
        elif t.exception() is not None:
            failed += 1
            r = t.exception()
            print(f"FAIL {c.tag()}: {type(r).__name__}: {r}", flush=True)
    sent = sum(c.sent for c in clients)
    echoed = sum(c.echoed for c in clients)
    modes = {}
    for c in clients:
        modes[c.mode] = modes.get(c.mode, 0) + 1
    print(f"clients: {len(clients) - failed} ok, {failed} failed "
          f"({', '.join(f'{k} {v}' for k, v in sorted(modes.items()))}), "
          f"{sent} bytes sent, {echoed} bytes echoed and checked, "
          f"{time.monotonic() - t0:.1f}s", flush=True)
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("role", choices=("server", "client"))
    p.add_argument("--unix", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    if args.role == "server":
        asyncio.run(Server().run(args.unix))
        return 0
    return asyncio.run(clients_main(args))


if __name__ == "__main__":
    sys.exit(main())
