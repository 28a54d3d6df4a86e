"""The library's counters, read from a Python test through its public API
(zcsock_stat_get): zc_stat(name) is the counter's value in this process,
None when the library is not loaded (a run without it) or has no such
counter."""
import ctypes


def zc_stat(name):
    try:
        f = ctypes.CDLL(None).zcsock_stat_get
    except AttributeError:
        return None
    v = ctypes.c_uint64()
    if f(name.encode(), ctypes.byref(v)) != 0:
        return None
    return v.value
