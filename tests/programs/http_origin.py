#!/usr/bin/env python3
"""HTTP/1.1 origin server for the proxy cases (haproxy, varnish): a
threaded http.server on 127.0.0.1.

  http_origin.py PORT DIR
    GET/HEAD /NAME     the file DIR/NAME (keep-alive, Content-Length); a
                       query containing "nostore" adds
                       "Cache-Control: no-store" (a cache must not keep it)
    POST /ANY          reads the body (Content-Length or chunked) and
                       answers the sha256 of it, hex, and a newline
  prints "listening"; stops on SIGTERM (a clean exit: statistics reports
  get written).
"""
import hashlib, http.server, shutil, signal, sys


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True     # headers and body are two writes

    def log_message(self, fmt, *args):     # 2,000-request ab runs: quiet
        pass

    def log_error(self, fmt, *args):
        sys.stderr.write("error: %s %s\n" % (self.address_string(), fmt % args))

    def end_headers(self):
        if self.command in ("GET", "HEAD") and "?" in self.path and "nostore" in self.path.split("?", 1)[1]:
            self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def copyfile(self, src, dst):
        shutil.copyfileobj(src, dst, 1 << 20)

    def do_POST(self):
        h = hashlib.sha256()
        n = 0
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                left = size
                while left:
                    b = self.rfile.read(min(left, 1 << 20))
                    if not b:
                        raise ConnectionError("body cut short")
                    h.update(b)
                    left -= len(b)
                n += size
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length", 0))
            while left:
                b = self.rfile.read(min(left, 1 << 20))
                if not b:
                    raise ConnectionError("body cut short")
                h.update(b)
                n += len(b)
                left -= len(b)
        out = (h.hexdigest() + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.send_header("X-Body-Bytes", str(n))
        self.end_headers()
        self.wfile.write(out)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def main():
    port, root = int(sys.argv[1]), sys.argv[2]
    srv = Server(("127.0.0.1", port),
                 lambda *a, **k: Handler(*a, directory=root, **k))
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    print("listening", flush=True)
    try:
        srv.serve_forever(poll_interval=0.5)
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
