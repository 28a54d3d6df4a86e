"""ASGI app for case_uvicorn.sh: wsgi_app.py's endpoints (/file, /sendfile,
/sum, /small), the same bytes.  /sendfile asks for the http.response.zerocopysend
extension when the server offers it, else streams like /file."""
import hashlib
import os

FILE = os.environ.get("ZC_APP_FILE", "")
SMALL = bytes((i * 7 + 3) & 0xFF for i in range(1024))
PIECE = 64 << 10
OCTETS = [(b"content-type", b"application/octet-stream")]


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif m["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    path, method = scope.get("path", ""), scope.get("method", "")

    async def reply(status, body, headers=OCTETS):
        await send({"type": "http.response.start", "status": status,
                    "headers": headers + [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    if method == "GET" and path == "/small":
        return await reply(200, SMALL)
    if method == "GET" and path in ("/file", "/sendfile"):
        size = os.path.getsize(FILE)
        await send({"type": "http.response.start", "status": 200,
                    "headers": OCTETS + [(b"content-length", str(size).encode())]})
        with open(FILE, "rb") as f:
            if path == "/sendfile" and "http.response.zerocopysend" in scope.get("extensions", {}):
                return await send({"type": "http.response.zerocopysend", "file": f.fileno()})
            while True:
                b = f.read(PIECE)
                await send({"type": "http.response.body", "body": b, "more_body": bool(b)})
                if not b:
                    return
    if method == "POST" and path == "/sum":
        h = hashlib.sha256()
        while True:
            m = await receive()
            if m["type"] == "http.disconnect":
                return
            h.update(m.get("body", b""))
            if not m.get("more_body"):
                break
        return await reply(200, (h.hexdigest() + "\n").encode(), [(b"content-type", b"text/plain")])
    await reply(404, b"")
