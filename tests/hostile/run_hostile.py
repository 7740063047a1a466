#!/usr/bin/env python3
"""run_hostile.py: the hostile-input corpus against every tool and subcommand that reads input.

    run_hostile.py --gpurec P --gpureplay P --gpuanalyze P --cases DIR --manifest FILE
                   --gen gen_corpus.py [--no-large] [--report FILE]

Each MANIFEST line runs one command (tests/RELIABILITY.md says what each case is) and checks:
  - the exit code (a number, or '*': 0 or 1, for inputs whose verdict another issue decides);
  - no crash (no signal), no hang (TIMEOUT seconds);
  - on failure, exactly one error line on stderr (a usage error's "try '... --help'" aside)
    matching the case's pattern; on success, the pattern somewhere in the output;
  - nothing in stdout or stderr that a terminal acts on: no control character but newline,
    nothing that is not UTF-8, no C1 control;
  - where the case gives them (after its inputs, `;seconds=N;out=N;bytes=PATH:N`): a time
    bound (not under ASan), a bound on stdout + stderr bytes, and on the bytes of each file or
    folder the command writes (issue 14 "Bad input": no output grows with the input where it
    must not);
  - a memory ceiling (ulimit -v, i.e. RLIMIT_AS) of 64 x the size of the case's inputs plus
    256 MiB, or the case's own ceiling where RELIABILITY.md explains why. ASan builds reserve
    terabytes of address space for their shadow memory, so there the ceiling is not set (the
    sanitizers check what they check; the optimized build checks the ceiling).
The small cases are checked in (tests/hostile/cases); the generator must reproduce them byte
for byte, and makes the large ones at test time. Peak memory (RSS) of every run is printed.
"""
import argparse
import os
import re
import resource
import shlex
import subprocess
import sys
import threading
import time

MiB = 1 << 20
TIMEOUT = int(os.environ.get("HOSTILE_TIMEOUT", "120"))  # seconds before a run counts as hung
# Distinct callsites (and RMM threads) of the bad_callsites_1m / bad_rmm_threads_1m cases: 10^6 in
# the optimized build, where their time bounds catch anything quadratic; .bazelrc scales them
# down under --config=san, asan and ubsan (they only measure size there, and 10^6 under a sanitizer
# took ~8 min of CI). More than ANA_DIFF_CSV_MAX_SITES (10000), so the cut paths still run.
CALLSITES = int(os.environ.get("HOSTILE_CALLSITES", "1000000"))
# The size bombs ({b}/strings_bomb.zst, {b}/live_bomb.zst, results_wide.json) at 1/BOMB_SCALE of
# their size: 1 (the checked-in traces, {b} = cases) in the optimized build; .bazelrc scales them
# under the sanitizers, where they only measure size (~75 s of ASan CI at full size). Scaled,
# the generator writes their text and the gpurec under test imports it ({b} = a work folder).
BOMB_SCALE = int(os.environ.get("HOSTILE_BOMB_SCALE", "1"))
KEEP = 4 * MiB  # bytes of each stream kept for the pattern; all of it is scanned


def is_asan(path):
    """gcc links libasan dynamically (its symbols' names are in the binary), clang statically
    (the runtime's own strings are)."""
    with open(path, "rb") as f:
        b = f.read()
    return b"__asan_" in b or b"AddressSanitizer" in b


class Stream:
    """Drains a pipe, keeps its head, and finds what a terminal would act on."""

    def __init__(self, pipe):
        self.head = bytearray()
        self.bad = None
        self.tail = b""  # an incomplete UTF-8 sequence at a chunk's end
        self.size = 0
        self.t = threading.Thread(target=self.run, args=(pipe,))
        self.t.start()

    def check(self, data, offset):
        data = self.tail + data
        cut = len(data)
        # keep up to 3 trailing bytes of a sequence that may continue in the next chunk
        for k in range(1, 4):
            if k <= len(data) and (data[-k] & 0xC0) == 0xC0:
                need = 2 if data[-k] < 0xE0 else 3 if data[-k] < 0xF0 else 4
                if need > k:
                    cut = len(data) - k
                break
        body, self.tail = data[:cut], data[cut:]
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            return "bytes that are not UTF-8 at offset %d: %r" % (offset + e.start, body[e.start:e.start + 8])
        m = re.search(r"[\x00-\x09\x0b-\x1f\x7f\x80-\x9f]", text)
        if m:
            return "control character %r at offset %d: %r" % (m.group(0), offset + m.start(), text[max(0, m.start() - 20):m.start() + 20])
        return None

    def run(self, pipe):
        offset = 0
        while True:
            data = pipe.read(1 << 16)
            if not data:
                break
            if len(self.head) < KEEP:
                self.head += data[:KEEP - len(self.head)]
            if self.bad is None:
                self.bad = self.check(data, offset)
            offset += len(data)
        self.size = offset
        if self.bad is None and self.tail:
            self.bad = "output ends inside a UTF-8 sequence"

    def text(self):
        self.t.join()
        return self.head.decode("utf-8", "replace")


def tree_size(path):
    """Bytes of a file, or of every file under a folder; None if there is none."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    if not os.path.isdir(path):
        return None
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def run_case(argv, ceiling, env, cwd):
    def limit():
        if ceiling:
            resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=limit, env=env, cwd=cwd)  # in {w}: what a command writes beside it stays there
    out, err = Stream(p.stdout), Stream(p.stderr)
    killer = threading.Timer(TIMEOUT, p.kill)
    killer.start()
    _, status, ru = os.wait4(p.pid, 0)
    killer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else (
        -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
    secs = time.monotonic() - t0
    return p.returncode, out, err, ru.ru_maxrss * 1024, secs, secs >= TIMEOUT


def main():
    ap = argparse.ArgumentParser()
    for k in ("gpurec", "gpureplay", "gpuanalyze", "cases", "manifest", "gen"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--no-large", action="store_true")
    ap.add_argument("--report")
    a = ap.parse_args()
    tools = {k: os.path.abspath(getattr(a, k)) for k in ("gpurec", "gpureplay", "gpuanalyze")}
    cases = os.path.abspath(a.cases)
    work = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "hostile")
    gen = os.path.join(work, "gen")
    wdir = os.path.join(work, "w")
    os.makedirs(wdir, exist_ok=True)
    failures = []

    # the checked-in small cases are what the generator makes
    subprocess.run([sys.executable, a.gen, os.path.join(gen, "small")], check=True)
    for name in sorted(os.listdir(os.path.join(gen, "small"))):
        with open(os.path.join(gen, "small", name), "rb") as f1:
            mine = f1.read()
        try:
            with open(os.path.join(cases, name), "rb") as f2:
                if f2.read() != mine:
                    failures.append("cases/%s differs from what gen_corpus.py makes (regenerate it)" % name)
        except FileNotFoundError:
            failures.append("cases/%s is missing (gen_corpus.py makes it)" % name)
    if not a.no_large:
        subprocess.run([sys.executable, a.gen, os.path.join(gen, "large"), "--large",
                        "--callsites=%d" % CALLSITES, "--bomb-scale=%d" % BOMB_SCALE], check=True)
    bombs = cases
    if BOMB_SCALE > 1:
        bombs = os.path.join(gen, "bombs")
        subprocess.run([sys.executable, a.gen, bombs, "--by-tools", "--bomb-scale=%d" % BOMB_SCALE], check=True)
        for b in ("strings_bomb", "live_bomb"):
            r = subprocess.run([tools["gpurec"], "import", os.path.join(bombs, b + ".csv"), "-o",
                                os.path.join(bombs, b + ".zst")], stdout=subprocess.DEVNULL)
            if r.returncode != 0:
                failures.append("gpurec import %s.csv (scaled 1/%d): exit %d" % (b, BOMB_SCALE, r.returncode))

    asan = any(is_asan(t) for t in tools.values())
    subst = dict(tools, c=cases, b=bombs, g=os.path.join(gen, "large"), w=wdir, esc="\x1b")
    env = dict(os.environ, GPUREPLAY=tools["gpureplay"], LC_ALL="C.UTF-8")
    rows = []
    with open(a.manifest) as mf:
        lines = [l.rstrip("\n") for l in mf if l.strip() and not l.startswith("#")]
    for line in lines:
        name, rc_want, pattern, inputs, cmd = line.split("\t")
        # {n}: CALLSITES in a pattern; {n_more}: the callsites diff sums beyond its 15 listed
        pattern = pattern.replace("{n}", str(CALLSITES)).replace("{n_more}", str(CALLSITES - 15))
        # {live_bomb_n}: the live bomb's allocations (10^6 / BOMB_SCALE)
        pattern = pattern.replace("{live_bomb_n}", str(1000000 // BOMB_SCALE))
        # limits after the inputs: ';seconds=N' (time bound), ';out=N' (stdout + stderr bytes),
        # ';bytes=PATH:N' (a file or folder the command writes, at most N bytes)
        inputs, *limits = inputs.split(";")
        max_s, max_out, max_files = None, None, []
        for lim in limits:
            k, v = lim.split("=", 1)
            if k == "seconds":
                max_s = float(v)
            elif k == "out":
                max_out = int(v)
            elif k == "bytes":
                path, n = v.rsplit(":", 1)
                max_files.append((path.format(**subst), int(n)))
        if a.no_large and "{g}" in cmd:
            continue
        argv = [x.format(**subst) for x in shlex.split(cmd)]
        tool = os.path.basename(argv[0])
        if inputs.startswith("ceiling="):
            ceiling = int(inputs.split("=", 1)[1]) * MiB
            in_bytes = 0
        else:
            # an input an earlier case failed to make counts 0 (that case has failed already)
            in_bytes = sum(os.path.getsize(x.format(**subst)) for x in inputs.split(",")
                           if os.path.exists(x.format(**subst))) if inputs != "-" else 0
            ceiling = 64 * in_bytes + 256 * MiB
        rc, out, err, rss, secs, timed_out = run_case(argv, 0 if asan else ceiling, env, wdir)
        o, e = out.text(), err.text()
        why = []
        if timed_out:
            why.append("hung: killed after %d s" % TIMEOUT)
        elif rc < 0:
            why.append("killed by signal %d" % -rc)
        elif rc_want == "*":
            if rc not in (0, 1):
                why.append("exit %d, want 0 or 1" % rc)
        elif rc != int(rc_want):
            why.append("exit %d, want %s" % (rc, rc_want))
        if max_s is not None and secs > max_s and not asan:
            why.append("took %.1f s, more than its bound of %g s" % (secs, max_s))
        if max_out is not None and out.size + err.size > max_out:
            why.append("wrote %d bytes on stdout and stderr, more than %d" % (out.size + err.size, max_out))
        for path, n in max_files:
            got = tree_size(path)
            if got is None:
                why.append("did not write %s" % path)
            elif got > n:
                why.append("%s has %d bytes, more than its bound of %d" % (path, got, n))
        if out.bad:
            why.append("stdout: " + out.bad)
        if err.bad:
            why.append("stderr: " + err.bad)
        errs = [l for l in e.splitlines() if l.strip() and not re.match(r"try '.*--help'$", l)]
        if rc > 0 and not timed_out:
            lines_err = [l for l in errs if re.match(r"(gpurec|gpureplay|gpuanalyze): ", l)]
            if len(errs) != 1:
                why.append("%d lines on stderr, want one error line: %r" % (len(errs), errs[:4]))
            elif pattern != "-" and not re.search(pattern, errs[0]):
                why.append("error line %r does not match %r" % (errs[0], pattern))
            elif not lines_err:
                why.append("error line %r does not name the tool" % errs[0])
        elif rc == 0 and pattern != "-" and not re.search(pattern, o + e):
            why.append("output does not match %r: %r" % (pattern, (o + e)[:300]))
        written = out.size + err.size + sum(tree_size(p) or 0 for p, _ in max_files)
        rows.append((name, tool, rc, rss, ceiling, secs, written))
        status = "ok" if not why else "FAIL"
        print("%-4s %-34s exit %-3s %8.1f MiB peak (ceiling %s) %6.2f s" %
              (status, name, rc, rss / MiB, "off (ASan)" if asan else "%.0f MiB" % (ceiling / MiB), secs))
        for w in why:
            print("       " + w)
            failures.append("%s: %s" % (name, w))
    if a.report:
        with open(a.report, "w") as f:
            f.write("| case | tool | exit | peak RSS MiB | ceiling MiB | seconds | output bytes |\n"
                    "|---|---|---:|---:|---:|---:|---:|\n")
            for n, t, rc, rss, c, s, b in rows:
                f.write("| %s | %s | %d | %.1f | %.0f | %.2f | %d |\n" % (n, t, rc, rss / MiB, c / MiB, s, b))
    print("\n%d cases, %d failures%s; %d distinct callsites in the *_1m cases; size bombs at 1/%d%s" %
          (len(rows), len(failures), " (ASan build: no memory ceiling)" if asan else "", CALLSITES,
           BOMB_SCALE, " (HOSTILE_BOMB_SCALE: the optimized run keeps them whole)" if BOMB_SCALE > 1 else ""))
    for f in failures:
        print("FAIL " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
