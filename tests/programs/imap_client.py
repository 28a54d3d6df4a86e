#!/usr/bin/env python3
"""IMAP client for case_dovecot.sh (imaplib, plain LOGIN, no TLS).
Usage: imap_client.py PORT USER PASSWORD MAILBOX OUTDIR MSGFILE..

First connection: LOGIN, CREATE MAILBOX, APPEND every MSGFILE (messages
with CRLF line ends, as Dovecot hands them back), LOGOUT.  Second
connection: LOGIN, SELECT MAILBOX, FETCH each message's BODY[] by
sequence number, one by one, into OUTDIR/<n> (n = 1..), then all of them
again in one FETCH 1:* into OUTDIR/all.<n>, LOGOUT.  The caller compares
the hashes.  Exits non-zero with a reason on any protocol error."""
import imaplib, os, re, sys

port, user, password, mbox, outdir = sys.argv[1:6]
files = sys.argv[6:]


def ok(what, res):
    typ, data = res
    if typ != "OK":
        sys.exit("%s: %s %r" % (what, typ, data[:1]))
    return data


def logout(c):
    typ, data = c.logout()
    if typ not in ("OK", "BYE"):
        sys.exit("LOGOUT: %s %r" % (typ, data[:1]))


def conn():
    c = imaplib.IMAP4("127.0.0.1", int(port), timeout=30)
    ok("LOGIN", c.login(user, password))
    return c


c = conn()
ok("CREATE", c.create(mbox))
for f in files:
    with open(f, "rb") as fh:
        msg = fh.read()
    ok("APPEND " + f, c.append(mbox, None, None, msg))
logout(c)

c = conn()
data = ok("SELECT", c.select(mbox))
if int(data[0]) != len(files):
    sys.exit("SELECT: %s messages, %d appended" % (data[0], len(files)))


def bodies(data):
    """the literal of every FETCH response in data, by sequence number"""
    out = {}
    for item in data:
        if isinstance(item, tuple):
            m = re.match(rb"(\d+) \(", item[0])
            if not m:
                sys.exit("FETCH: unexpected %r" % item[0][:80])
            out[int(m.group(1))] = item[1]
    return out


for i in range(1, len(files) + 1):
    got = bodies(ok("FETCH %d" % i, c.fetch(str(i), "(BODY.PEEK[])")))
    if i not in got:
        sys.exit("FETCH %d: no body" % i)
    with open(os.path.join(outdir, str(i)), "wb") as fh:
        fh.write(got[i])
got = bodies(ok("FETCH 1:*", c.fetch("1:*", "(BODY.PEEK[])")))
for i in range(1, len(files) + 1):
    if i not in got:
        sys.exit("FETCH 1:*: no body %d" % i)
    with open(os.path.join(outdir, "all.%d" % i), "wb") as fh:
        fh.write(got[i])
ok("CLOSE", c.close())
logout(c)
print("ok %d messages" % len(files))
