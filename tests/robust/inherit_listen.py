"""A listener inherited across exec pairs (issue 29: uvicorn's workers
inherit the listening socket, made by the parent, and call listen() on it;
the library never saw it being made, bound no beacon, and nothing paired).
The parent binds a socket and starts a worker (exec) that inherits it; the
worker listens, says so through a pipe, accepts one connection and answers
100 bytes with 100 KB.  Under the library both ends must pair."""
import os, socket, subprocess, sys


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from zc_stat import zc_stat as stat  # noqa: E402


if sys.argv[1:2] == ["worker"]:
    lst = socket.socket(fileno=int(sys.argv[2]))
    lst.listen(8)
    os.write(int(sys.argv[3]), b"L")
    c, _ = lst.accept()
    d = c.recv(100)
    c.sendall(d * 1000)
    c.recv(1)                       # the client's end: it closes first
    c.close()
    acc = stat("local.paired.accepted")
    sys.exit(0 if acc is None or acc >= 1 else 1)
lst = socket.socket()
lst.bind(("127.0.0.1", 0))
port = lst.getsockname()[1]
r, w = os.pipe()
p = subprocess.Popen([sys.executable, __file__, "worker", str(lst.fileno()), str(w)],
                     pass_fds=(lst.fileno(), w))
lst.close()
os.close(w)
if os.read(r, 1) != b"L":
    sys.exit("the worker did not listen")
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"q" * 100)
got = bytearray()
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
    if len(got) == 100000:
        break
con = stat("local.paired.connected")
s.close()
print("received %d bytes, local.paired.connected=%s, worker exit %d" % (len(got), con, p.wait()))
sys.exit(0 if got == b"q" * 100000 and (con is None or con >= 1) and p.returncode == 0 else 1)
