#!/usr/bin/env python3
"""range_table.py: the tables of timing-dependent figures (issue 11), prediction against reality.

Two kinds of figure depend on timing, and gpureplay reports each as a range (never as exact):
  - frees that wait on stream events (record_stream): a torch-mode trace of a job
    (`<job>.<setting>.<timing>.torch.zst`) replayed under that setting; the range is the
    recorded timing, every event early, and every event late by 1 malloc and until the end of
    the run ("late all": the side stream never catches up; the widest range);
  - the async pool: a requests trace (`<workload>.requests.zst`) replayed under `async` on the
    simulator (ideal packing .. chunked same-stream reuse).
Each row sets the real runs (RUNS.jsonl, lines of tests/gpu/exact_gpu.sh's results.jsonl:
{"job", "variant", "rep", "rc", "result": {"max_memory_reserved", ...}}) beside the range and
says whether every one falls inside.

    range_table.py GPUREPLAY DIR RUNS.jsonl              print the tables
    range_table.py GPUREPLAY DIR RUNS.jsonl --check DOC [--min-inside N]
                                                       fail (exit 1, with a diff) if the block
                                                         between DOC's range-table markers is
                                                         not what the committed traces give today
"""
import difflib
import glob
import json
import os
import subprocess
import re
import sys

LATE_WIDE = 1000000  # "late all": every event pending until the run's end (or an empty_cache)
SETTINGS = {"default": "pytorch", "expandable": "pytorch:expandable_segments:True"}
MIB = 1 << 20


def load_runs(path):
    runs = {}
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        res = r.get("result") or {}
        if r.get("rc", 0) == 0 and "max_memory_reserved" in res:
            runs.setdefault((r["job"], r["variant"]), []).append(res["max_memory_reserved"])
    return runs


def load_recorded(path):
    """The reservation each recorded run itself reported (runs whose source says so)."""
    rec = {}
    for line in open(path):
        r = json.loads(line)
        if "the recorded run itself" in r.get("source", "") and r.get("rc", 0) == 0:
            rec[r["job"]] = r["result"]["max_memory_reserved"]
    return rec


def replay(gr, trace, spec, *extra):
    out = subprocess.run([gr, trace, "--policy=" + spec, "--json", "-q", *extra], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def mib(b):
    return "%.0f" % (b / MIB) if b % MIB == 0 else "%.2f" % (b / MIB)


def verdict(real, lo, hi):
    if not real:
        return "no real runs"
    inside = sum(1 for x in real if lo <= x <= hi)
    return "%d of %d inside" % (inside, len(real))


def events_rows(gr, d, runs):
    rows = []
    for trace in sorted(glob.glob(os.path.join(d, "*.torch.zst"))):
        parts = os.path.basename(trace)[: -len(".torch.zst")].split(".")
        if len(parts) != 3 or parts[1] not in SETTINGS:
            continue
        job, setting, timing = parts
        spec = SETTINGS[setting]
        r1 = replay(gr, trace, spec)
        rw = replay(gr, trace, spec, "--late-mallocs=%d" % LATE_WIDE)
        rng1 = r1.get("peak_reserved_range") or {}
        rngw = rw.get("peak_reserved_range") or {}
        point = r1["peak_reserved_bytes"]
        lo1, hi1 = rng1.get("low_bytes", point), rng1.get("high_bytes", point)
        low, high = rngw.get("low_bytes", point), rngw.get("high_bytes", point)
        real = sorted(runs.get((job, "%s.%s" % (setting, timing)), []))
        rows.append("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            job, setting, timing, r1["event_frees"], mib(point), mib(rng1.get("early_bytes", point)),
            mib(rng1.get("late_bytes", point)), mib(rngw.get("late_bytes", point)),
            ", ".join(mib(x) for x in real) or "-", verdict(real, lo1, hi1), verdict(real, low, high)))
    return rows


def async_rows(gr, d, runs, recorded):
    rows = []
    for trace in sorted(glob.glob(os.path.join(d, "*.requests.zst"))):
        job = os.path.basename(trace)[: -len(".requests.zst")]
        real = sorted(runs.get((job, "async"), []))
        if not real:
            continue
        r = replay(gr, trace, "async")
        rng = r.get("peak_reserved_range") or {}
        point = r["peak_reserved_bytes"]
        lo, hi = rng.get("low_bytes", point), rng.get("high_bytes", point)
        own = r.get("recorded_pool_reserved_bytes", 0)
        rec = recorded.get(job)
        check = "-" if not own or rec is None else ("equal" if own == rec else "differs (%s)" % mib(rec))
        rows.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            job, mib(lo), mib(point), mib(hi), ", ".join(mib(x) for x in real), verdict(real, lo, hi),
            mib(own) if own else "-", check))
    return rows


def table(gr, d, runs_path):
    runs = load_runs(runs_path)
    out = []
    ev = events_rows(gr, d, runs)
    if ev:
        out += ["Frees that wait on stream events (MiB; late = events still pending at the next N "
                "mallocs; range = min..max of recorded, early and late):", "",
                "| job | setting | timing | event frees | recorded | early | late 1 | late all | "
                "real max_memory_reserved | inside [early..late 1] | inside [early..late all] |",
                "|---|---|---|---:|---:|---:|---:|---:|---|---|---|"] + ev + [""]
    asy = async_rows(gr, d, runs, load_recorded(runs_path))
    if asy:
        out += ["The async pool, simulated (MiB; low: ideal packing, figure: one heap, best fit, "
                "any-stream reuse; high: 32 MiB chunks, same-stream reuse):", "",
                "| workload | low | figure | high | real max_memory_reserved (backend:cudaMallocAsync) | inside "
                "| the recorded run's pool, from its addresses | vs that run's max_memory_reserved |",
                "|---|---:|---:|---:|---|---|---:|---|"] + asy + [""]
    return "\n".join(out)


def inside_counts(text):
    """(real runs inside their widest range, real runs) over the table's rows: what the document
    claims, counted from what the traces give now."""
    inside = total = 0
    for line in text.splitlines():
        found = re.findall(r"(\d+) of (\d+) inside", line) if line.startswith("|") else []
        if found:  # a row's last verdict is its widest range's
            inside += int(found[-1][0])
            total += int(found[-1][1])
    return inside, total


def main(argv):
    min_inside = None
    if len(argv) == 8 and argv[6] == "--min-inside":
        min_inside = int(argv[7])
        argv = argv[:6]
    if len(argv) not in (4, 6) or (len(argv) == 6 and argv[4] != "--check"):
        sys.stderr.write(__doc__)
        return 2
    got = table(argv[1], argv[2], argv[3])
    if len(argv) == 4:
        print(got)
        return 0
    doc = open(argv[5]).read().splitlines()
    try:
        a = doc.index("<!-- range table begin -->")
        b = doc.index("<!-- range table end -->")
    except ValueError:
        print("FAIL: %s has no range-table markers" % argv[5])
        return 1
    want = "\n".join(doc[a + 1:b])
    if want.strip() != got.strip():
        sys.stdout.writelines(difflib.unified_diff(want.strip().splitlines(True), got.strip().splitlines(True),
                                                   "document", "now"))
        print("\nFAIL: the range table drifted from what the traces give (- the document, + now)")
        return 1
    inside, total = inside_counts(got)
    if min_inside is not None and inside < min_inside:
        print("FAIL: %d of %d real runs inside their range, fewer than the %d this test holds the table to"
              % (inside, total, min_inside))
        return 1
    print("PASS (%d of %d real runs inside their widest range)" % (inside, total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
