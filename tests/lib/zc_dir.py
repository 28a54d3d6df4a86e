"""The library's private directory, as common/zc_live.h (zc_live_dir) picks
it: $XDG_RUNTIME_DIR/zcsock when that is a directory of ours closed to
others, else /run/user/UID/zcsock, else /dev/shm/zcsock-UID where /dev/shm
is the usual sticky directory of 1 GiB or more, else /tmp/zcsock-UID.  The
live statistics and the local path's mailboxes (mbox/) live there."""
import os
import stat


def _ours(p):
    try:
        st = os.lstat(p)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o77


def shm_base():
    try:
        st, fs = os.lstat("/dev/shm"), os.statvfs("/dev/shm")
    except OSError:
        return "/tmp"
    ok = stat.S_ISDIR(st.st_mode) and st.st_mode & 0o1777 == 0o1777 and \
        fs.f_blocks * fs.f_frsize >= 1 << 30
    return "/dev/shm" if ok else "/tmp"


def private_dir(env=None, make=False):
    uid = os.geteuid()
    x = (env if env is not None else os.environ).get("XDG_RUNTIME_DIR", "")
    if x.startswith("/") and _ours(x):
        d = x + "/zcsock"
    elif _ours("/run/user/%d" % uid):
        d = "/run/user/%d/zcsock" % uid
    else:
        d = shm_base() + "/zcsock-%d" % uid
    if make:
        for p in (d, d + "/mbox"):
            try:
                os.mkdir(p, 0o700)
            except FileExistsError:
                pass
    return d


def _siphash24(key, data):
    """SipHash-2-4 of data under the 16-byte key (common/zc_key.c's)."""
    mask = (1 << 64) - 1

    def rotl(x, b):
        return ((x << b) | (x >> (64 - b))) & mask

    def rounds(v, n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & mask
            v[1] = rotl(v[1], 13) ^ v[0]
            v[0] = rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & mask
            v[3] = rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & mask
            v[3] = rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & mask
            v[1] = rotl(v[1], 17) ^ v[2]
            v[2] = rotl(v[2], 32)

    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:16], "little")
    v = [k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d,
         k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573]
    full = len(data) // 8 * 8
    for i in range(0, full, 8):
        m = int.from_bytes(data[i:i + 8], "little")
        v[3] ^= m
        rounds(v, 2)
        v[0] ^= m
    b = (len(data) << 56) & mask | int.from_bytes(data[full:], "little")
    v[3] ^= b
    rounds(v, 2)
    v[0] ^= b
    v[2] ^= 0xff
    rounds(v, 4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def rendezvous_name(kind, cookie, env=None):
    """The abstract name (bytes, with its leading NUL) of the local path's
    beacon (kind "L", listener cookie) or announcement ("C", client socket
    cookie), as shim/paths/local/local_pair.c (lp_name) makes it: keyed by
    the user's key in the private directory where there is one (zcsock/v2),
    else public (zcsock/v1, the cookie itself).  Raises PermissionError
    where the key exists and cannot be read (another user's)."""
    try:
        with open(private_dir(env) + "/key", "rb") as f:
            key = f.read()
    except FileNotFoundError:
        key = None
    if key is None or len(key) != 16:
        return b"\0zcsock/v1/%s/%016x" % (kind.encode(), cookie)
    h = _siphash24(key, kind.encode() + cookie.to_bytes(8, "little"))
    return b"\0zcsock/v2/%s/%016x" % (kind.encode(), h)


def _pid_hide(key, v):
    """common/zc_key.c's zc_key_hide: a 4-round Feistel network on 32 bits."""
    left, right = v >> 16, v & 0xffff
    for i in range(4):
        f = _siphash24(key, bytes([ord("P"), i, right & 0xff, right >> 8])) & 0xffff
        left, right = right, left ^ f
    return left << 16 | right


def mailbox_name(pid, env=None):
    """The name of pid's mailbox file in <private dir>/mbox, as
    shim/paths/local/scm.c (lp_mbox_file) makes it: "k" and 8 hex digits of
    the pid hidden under the user's key, or the pid where there is no key."""
    try:
        with open(private_dir(env) + "/key", "rb") as f:
            key = f.read()
    except FileNotFoundError:
        key = b""
    if len(key) != 16:
        return "%d" % pid
    return "k%08x" % _pid_hide(key, pid)


def ensure_key(env=None):
    """Make the user's key as the library would (common/zc_key.c: 16 random
    bytes written under another name, then linked), unless it exists: so
    that names computed before any process of the library ran are the
    ones it will use."""
    d = private_dir(env, make=True)
    path = d + "/key"
    if os.path.exists(path):
        return
    tmp = "%s/.key.%d" % (d, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, os.urandom(16))
    os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    os.unlink(tmp)
