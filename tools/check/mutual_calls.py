#!/usr/bin/env python3
"""mutual_calls.py [--allow FILE] [ROOT]: pairs of C files of one folder that call each other.

For each folder under ROOT (default: the repository), reads its .c files (tests, fuzz targets
and third_party left out), finds the non-static functions each one defines (a definition starts
at column 0, is not `static`, and its `{` follows its parameter list), and which of those names
each other file of the same folder uses. A pair "a.c <-> b.c" is printed when a uses a name b
defines and b uses a name a defines, with the names either way. Genuine mutual recursion is
listed in the allow file (one "dir/a.c dir/b.c" a line, # comments); those pairs are printed
as "allowed". Exit 1 when a pair not allowed is found (a test can run it), else 0.

Reads text only: a name in a comment or string counts as a use (comments and strings are
dropped first, well enough for this code base); macros and function pointers are not followed.
"""
import os
import re
import sys

SKIP_DIRS = {"third_party", "bazel-bin", "bazel-out", "bazel-testlogs", ".git", "fuzz"}
DEF_RE = re.compile(r"^(?!static\b)(?![ \t#/*])[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(([^;{}]*?)\)\s*\{", re.M)
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "else", "do", "main"}


def strip(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\\n])'", "''", text)
    return text


def is_test(name):
    return name.endswith("_test.c") or "fuzz" in name or name.endswith("_main_test.c")


def main(argv):
    allow_file = None
    if len(argv) > 1 and argv[1] == "--allow":
        allow_file = argv[2]
        argv = argv[:1] + argv[3:]
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..")
    root = os.path.abspath(root)
    allowed = set()
    if allow_file:
        for line in open(allow_file):
            line = line.split("#", 1)[0].split()
            if len(line) == 2:
                allowed.add(tuple(sorted(line)))
    bad = 0
    for d, dirs, files in sorted(os.walk(root)):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("bazel-"))
        cfiles = sorted(f for f in files if f.endswith(".c") and not is_test(f))
        if len(cfiles) < 2:
            continue
        defs, text = {}, {}
        for f in cfiles:
            t = strip(open(os.path.join(d, f), errors="replace").read())
            text[f] = t
            defs[f] = {m.group(1) for m in DEF_RE.finditer(t) if m.group(1) not in KEYWORDS}
        uses = {}
        for a in cfiles:
            words = set(re.findall(r"\b[A-Za-z_]\w*\b", text[a]))
            uses[a] = {b: sorted(words & defs[b]) for b in cfiles if b != a and words & defs[b]}
        rel = os.path.relpath(d, root)
        for i, a in enumerate(cfiles):
            for b in cfiles[i + 1:]:
                if b in uses[a] and a in uses[b]:
                    pa, pb = os.path.join(rel, a), os.path.join(rel, b)
                    tag = "allowed" if tuple(sorted((pa, pb))) in allowed else "pair"
                    if tag == "pair":
                        bad += 1
                    print("%s %s <-> %s: %s uses %s; %s uses %s" % (tag, pa, pb, a, ", ".join(uses[a][b][:6]),
                                                                   b, ", ".join(uses[b][a][:6])))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
