#!/usr/bin/env python3
"""Per-test outcomes of a CPython regrtest run, and their comparison.

  cpython_outcomes.py parse JUNIT_XML VERBOSE_LOG OUT
      Writes "<test id>\t<outcome>" lines to OUT, outcome one of ok, FAIL,
      ERROR, skipped, and UNFINISHED (a test the verbose log shows started
      but not finished: the interpreter crashed or regrtest's --timeout
      killed it).  Reads the JUnit XML regrtest wrote; when that is missing
      or broken (a crash), reads the -v log instead.  Prints one line of
      counts.

  cpython_outcomes.py diff PLAIN WITH OUT
      Writes the ids of the tests that did not fail in PLAIN but failed
      (FAIL, ERROR, UNFINISHED, or missing) in WITH, one a line, to OUT, and
      prints them.  Exit 0 always; the caller counts the lines.

  cpython_outcomes.py failed OUTCOMES
      Prints the ids of the failed tests in an outcomes file.
"""
import re
import sys
import xml.etree.ElementTree as ET

BAD = ("FAIL", "ERROR", "UNFINISHED")
VERBOSE_RE = re.compile(r"^(\w+) \(([\w.]+)\)(?: \S.*)? \.\.\. ?(.*)$")


def from_junit(path):
    outcomes = {}
    root = ET.parse(path).getroot()
    for tc in root.iter("testcase"):
        name = tc.get("name")
        tags = {c.tag for c in tc}
        if "error" in tags:
            outcomes[name] = "ERROR"
        elif "failure" in tags:
            outcomes[name] = "FAIL"
        elif "skipped" in tags:
            outcomes[name] = "skipped"
        else:
            outcomes[name] = "ok"
    return outcomes


def word(rest):
    rest = rest.strip()
    if rest == "ok" or rest.startswith("expected failure") or rest == "unexpected success":
        return "ok"
    if rest.startswith("skipped"):
        return "skipped"
    if rest in ("FAIL", "ERROR"):
        return rest
    return None


def from_verbose(path):
    outcomes = {}
    current = None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = VERBOSE_RE.match(line)
            if m:
                current = m.group(2)
                w = word(m.group(3))
                outcomes[current] = w or "UNFINISHED"
                if w:
                    current = None
                continue
            if current is not None:
                w = word(line)
                if w:
                    outcomes[current] = w
                    current = None
    return outcomes


def counts(outcomes):
    c = {k: 0 for k in ("ok", "FAIL", "ERROR", "skipped", "UNFINISHED")}
    for v in outcomes.values():
        c[v] += 1
    return c


def read(path):
    out = {}
    with open(path) as f:
        for line in f:
            tid, _, oc = line.rstrip("\n").partition("\t")
            out[tid] = oc
    return out


RANK = {"ok": 0, "skipped": 1, "UNFINISHED": 2, "FAIL": 3, "ERROR": 4}


def merge(verbose, junit):
    """The -v log sees crashes and empty skip reasons; the XML is immune to
    output interleaved with the result words.  A test the XML finished is
    never UNFINISHED; otherwise the worse of the two outcomes wins."""
    out = dict(verbose)
    for tid, oc in junit.items():
        v = out.get(tid)
        if v is None or v == "UNFINISHED" or RANK[oc] > RANK[v]:
            out[tid] = oc
    return out


def cmd_parse(junit, log, out):
    verbose = from_verbose(log)
    try:
        xml = from_junit(junit)
        source = "-v log and junit xml"
    except (OSError, ET.ParseError):
        xml = {}
        source = "-v log only, no junit xml (crash?)"
    outcomes = merge(verbose, xml)
    with open(out, "w") as f:
        for tid in sorted(outcomes):
            f.write(f"{tid}\t{outcomes[tid]}\n")
    c = counts(outcomes)
    print(f"ran {len(outcomes)}, ok {c['ok']}, failed {c['FAIL']}, errors {c['ERROR']}, "
          f"skipped {c['skipped']}, unfinished {c['UNFINISHED']} ({source})")


def cmd_diff(plain, with_, out):
    p, w = read(plain), read(with_)
    added = [t for t, oc in p.items()
             if oc not in BAD and (w.get(t) in BAD or (oc == "ok" and t not in w))]
    added += [t for t, oc in w.items() if oc in BAD and t not in p]
    # what failed first (a crash or hang shows as UNFINISHED), then the
    # tests that never ran after it
    added.sort(key=lambda t: (t not in w, -RANK.get(w.get(t), 0), t))
    with open(out, "w") as f:
        for t in added:
            f.write(t + "\n")
            print(f"  {t}: {p.get(t, 'absent')} without, {w.get(t, 'absent')} with the library")


def cmd_failed(path):
    for t, oc in sorted(read(path).items()):
        if oc in BAD:
            print(t)


def main(argv):
    if len(argv) == 5 and argv[1] == "parse":
        cmd_parse(*argv[2:])
    elif len(argv) == 5 and argv[1] == "diff":
        cmd_diff(*argv[2:])
    elif len(argv) == 3 and argv[1] == "failed":
        cmd_failed(argv[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
