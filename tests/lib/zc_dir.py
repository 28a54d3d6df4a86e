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
