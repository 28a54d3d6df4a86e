#!/usr/bin/env python3
"""The local path's drawing, checked (issue 32): which file of
shim/paths/local/ calls which, by layer.

  L0  leaves        local_ring.c (the ring), local_pair.c (the pairing
                    protocol: sock_diag, rendezvous names)
  L1  the connection conn.c (the object, locks, PARTS), state.c (its one
                    state machine)
  L2  features      bell.c, efd.c (doorbells, wake-up eventfds), handback.c
                    (hand-back, pumps), scm.c (SCM_RIGHTS, the mailbox),
                    xchg.c (page exchange), pairing.c (announce, offer,
                    pickup), ready.c (readiness), adopt.c (a connection's
                    description for exec and SCM_RIGHTS, and its adoption)
  L3  entry points  send.c, recv.c (the data calls), life.c (close, fork,
                    the tables the shim dispatches through), exec.c

A file may call any file of a lower layer.  A call to a higher layer fails
the check (but those listed in KNOWN_UP, each with its reason) (a connection that called its features by name is how the mesh
grew: features hook into its life through lp_parts instead).  Calls between
files of one layer are counted: more than three siblings fails too.  Each
feature's functions are declared in its own header (bell.h for bell.c ...;
the connection's in lp_int.h): a file includes the headers of the files it
calls and no other (an include of a file it does not call, or of a higher
layer's, fails).

    check-layers.py [DIR]      (default shim/paths/local; exit 1 on an upward
                               call or a file with more than three siblings)
Prints one line per file: its layer, the siblings it calls, and any upward
call with the functions called."""
import glob
import os
import re
import sys

LAYERS = {
    "local_ring.c": 0, "local_pair.c": 0,
    "conn.c": 1, "state.c": 1,
    "bell.c": 2, "efd.c": 2, "handback.c": 2, "scm.c": 2, "xchg.c": 2, "pairing.c": 2,
    "adopt.c": 2,
    "ready.c": 2,
    "send.c": 3, "recv.c": 3, "life.c": 3, "exec.c": 3,
}
SIBLINGS_GOAL = 3
# Upward calls known and not undone yet, each with its reason: any other
# fails the check.
KNOWN_UP = set()     # ((caller, callee), ...): none left

DEF = re.compile(r"^(static\s+)?(?:inline\s+)?[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;{]*?\)\s*\{",
                 re.M | re.S)


def strip(text):
    """The code without comments and string literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def declared(d, h):
    """The names header h.h of folder d declares that lp_int.h does not."""
    names = lambda t: set(re.findall(r"\b(?:lp|LP|path_local)_\w+", strip(t)))
    return (names(open(os.path.join(d, h + ".h")).read()) -
            names(open(os.path.join(d, "lp_int.h")).read()) - {"LP_%s_H" % h.upper()})


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "shim/paths/local"
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "*.c")))
    unknown = [f for f in files if f not in LAYERS]
    if unknown:
        print("check-layers: no layer for %s (add it to scripts/check-layers.py)"
              % ", ".join(unknown))
        return 1
    code, public, private = {}, {}, {}
    for f in files:
        code[f] = strip(open(os.path.join(d, f)).read())
        private[f] = set()
        for m in DEF.finditer(code[f]):
            if m.group(1):
                private[f].add(m.group(2))
            else:
                public.setdefault(m.group(2), f)
    bad = crowded = stale = 0
    for f in files:
        same, up, called = set(), {}, set()
        for name, where in public.items():
            if where == f or name in private[f]:
                continue
            if not re.search(r"\b%s\s*\(" % re.escape(name), code[f]):
                continue
            called.add(where)
            if LAYERS[where] == LAYERS[f]:
                same.add(where)
            elif LAYERS[where] > LAYERS[f]:
                up.setdefault(where, []).append(name)
        line = "%-13s L%d  siblings %d%s %s" % (f, LAYERS[f], len(same),
                                                 "*" if len(same) > SIBLINGS_GOAL else " ",
                                                 " ".join(sorted(same)))
        crowded += len(same) > SIBLINGS_GOAL
        if up:
            known = all((f, w) in KNOWN_UP for w in up)
            bad += 0 if known else 1
            line += "  UPWARD%s: " % (" (known)" if known else "")
            line += "; ".join("%s (%s)" % (w, ", ".join(sorted(n)))
                                            for w, n in sorted(up.items()))
        raw = open(os.path.join(d, f)).read()
        for h in re.findall(r'^#include "(\w+)\.h"', raw, re.M):
            hc = h + ".c"
            if hc == f or hc not in LAYERS or LAYERS[hc] < 2:
                continue    # its own, not the path's, or the leaves' and the connection's
            if LAYERS[hc] > LAYERS[f] or not (declared(d, h) & set(re.findall(r"\w+", code[f]))):
                line += "  INCLUDES %s.h (uses nothing of it%s)" % (
                    h, ", a higher layer's" if LAYERS[hc] > LAYERS[f] else "")
                stale += 1
        print(line)
    if stale:
        print("check-layers: %d include(s) of a header whose file is not called" % stale)
    if bad:
        print("check-layers: %d file(s) call a higher layer" % bad)
    if crowded:
        print("check-layers: %d file(s) (*) call more than %d siblings of their layer"
              % (crowded, SIBLINGS_GOAL))
    return 1 if bad or crowded or stale else 0


if __name__ == "__main__":
    sys.exit(main())
