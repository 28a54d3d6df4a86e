"""WSGI app for case_gunicorn.sh (asgi_app.py is its ASGI twin).

  GET  /file      the file named by $ZC_APP_FILE, streamed in 64 KiB pieces
  GET  /sendfile  the same file through wsgi.file_wrapper (gunicorn: sendfile)
  POST /sum       sha256 (hex) of the request body
  GET  /small     1 KiB, always the same bytes
"""
import hashlib
import os

FILE = os.environ.get("ZC_APP_FILE", "")
SMALL = bytes((i * 7 + 3) & 0xFF for i in range(1024))
PIECE = 64 << 10


def _stream(path):
    with open(path, "rb") as f:
        while True:
            b = f.read(PIECE)
            if not b:
                return
            yield b


def app(environ, start_response):
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    octets = [("Content-Type", "application/octet-stream")]
    if method == "GET" and path == "/small":
        start_response("200 OK", octets + [("Content-Length", str(len(SMALL)))])
        return [SMALL]
    if method == "GET" and path in ("/file", "/sendfile"):
        size = os.path.getsize(FILE)
        start_response("200 OK", octets + [("Content-Length", str(size))])
        if path == "/sendfile" and "wsgi.file_wrapper" in environ:
            return environ["wsgi.file_wrapper"](open(FILE, "rb"), PIECE)
        return _stream(FILE)
    if method == "POST" and path == "/sum":
        left = int(environ.get("CONTENT_LENGTH") or 0)
        inp, h = environ["wsgi.input"], hashlib.sha256()
        while left > 0:
            b = inp.read(min(left, PIECE))
            if not b:
                break
            h.update(b)
            left -= len(b)
        body = (h.hexdigest() + "\n").encode()
        if left:
            start_response("400 Bad Request", [("Content-Length", str(len(body)))])
        else:
            start_response("200 OK", [("Content-Type", "text/plain"),
                                      ("Content-Length", str(len(body)))])
        return [body]
    start_response("404 Not Found", [("Content-Length", "0")])
    return [b""]
