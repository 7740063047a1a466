"""overhead_table.py RESULTS.jsonl [CALLS.txt]: the tables of tests/gpu/recorder_overhead.sh.

Input lines: 'RESULT {json}' where json has the tags the script adds (stage "c" or "py",
variant, round, for "c" also loop) and the benchmark's own figures (alloc_churn:
ns_per_event_median; rec_overhead.py: step_ms_median, allocs_per_step). Every variant is paired
with its reference in the same round (C: "base" of the same loop; Python: "requests_base" for
the requests-mode variants, "native_base" for the others), and the figure is the median over
rounds of that paired difference, so slow drift between rounds cancels.
CALLS.txt (optional): lines 'steps=N calls=C mem=M' from GPUMEM_DIAG=count_calls runs of the
Python loop at two step counts; their difference gives driver calls per step.
Prints markdown on stdout. Standard library only (runs with any python3)."""
import json
import os
import re
import statistics
import sys
from collections import defaultdict

C_ORDER = ["base", "inert", "subscribed", "empty", "full_nocs", "full"]
C_WHAT = {
    "base": "no recorder",
    "inert": "gpurec, injection returns at once (GPUMEM_DIAG=inert): no CUPTI",
    "subscribed": "CUPTI subscribed, no driver callback enabled (GPUMEM_DIAG=subscribe_only)",
    "empty": "memory callbacks enabled, returning at once (GPUMEM_DIAG=empty_callbacks)",
    "full_nocs": "full recording, --callsites=none",
    "full": "full recording, default (--callsites=user)",
}
PY_ORDER = ["requests_base", "requests_inert", "requests_subscribed", "requests_empty",
            "requests_full_nocs", "requests_full_user", "requests_full_stack",
            "native_base", "native_history_nostacks"]
PY_WHAT = {
    "requests_base": "`backend:cudaMallocAsync`, no recorder",
    "requests_inert": "gpurec, injection inert: no CUPTI",
    "requests_subscribed": "CUPTI subscribed, no driver callback",
    "requests_empty": "memory callbacks enabled, empty",
    "requests_full_nocs": "gpurec --callsites=none",
    "requests_full_user": "gpurec (default: --callsites=user)",
    "requests_full_stack": "gpurec --callsites=stack",
    "native_base": "caching allocator, no recorder",
    "native_history_nostacks": "`_record_memory_history(context=None)`",
}


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            i = line.find("RESULT ")
            if i < 0:
                continue
            body = line[i + 7:].strip()
            # the script prepends its tags as a JSON object: 'RESULT {tags} {figures}'
            dec = json.JSONDecoder()
            try:
                tags, end = dec.raw_decode(body)
                rest = body[end:].strip()
                figs = dec.raw_decode(rest)[0] if rest else {}
            except ValueError:
                continue
            tags.update(figs)
            rows.append(tags)
    return rows


def fmt(x, nd=1):
    return "-" if x is None else ("%+.*f" % (nd, x))


def paired(by_round, ref_by_round):
    """median over rounds of (variant - reference) in the same round, and the per-round list"""
    d = [by_round[r] - ref_by_round[r] for r in sorted(by_round) if r in ref_by_round]
    return (statistics.median(d) if d else None), d


def c_tables(rows, out):
    by = defaultdict(dict)  # (loop, variant) -> round -> ns
    for r in rows:
        if r.get("stage") == "c" and "ns_per_event_median" in r:
            by[(r["loop"], r["variant"])][r["round"]] = r["ns_per_event_median"]
    loops = sorted({k[0] for k in by}, key=lambda l: ["alloc", "launch", "query", "sync"].index(l)
                   if l in ["alloc", "launch", "query", "sync"] else 9)
    for loop in loops:
        base = by.get((loop, "base"), {})
        out.append("\n**%s loop** (alloc_churn %s): ns per call, median block per process\n" % (loop, loop))
        out.append("| variant | rounds (ns per call) | median | added per call vs no recorder (median of paired rounds) |")
        out.append("|---|---|---|---|")
        for v in C_ORDER:
            d = by.get((loop, v))
            if not d:
                continue
            med, diffs = paired(d, base) if v != "base" else (None, [])
            vals = " / ".join("%.1f" % d[k] for k in sorted(d))
            out.append("| %s: %s | %s | %.1f | %s%s |" % (
                v, C_WHAT.get(v, v), vals, statistics.median(d.values()),
                fmt(med), (" (" + ", ".join("%+.1f" % x for x in diffs) + ")") if diffs else ""))


def py_table(rows, out, calls):
    by = defaultdict(dict)
    allocs = []
    for r in rows:
        if r.get("stage") == "py" and "step_ms_median" in r:
            by[r["variant"]][r["round"]] = r["step_ms_median"]
            if r["variant"] == "native_base" and r.get("allocs_per_step"):
                allocs.append(r["allocs_per_step"])
    if not by:
        return
    aps = statistics.median(allocs) if allocs else None
    ev = 2 * aps if aps else None  # an alloc and a free per allocation
    out.append("\n**Python host-bound loop** (bench/recorder/rec_overhead.py, step ms, median step per process)")
    if aps:
        out.append("allocations per step (caching allocator's counter): %d, so %d recorded events per "
                   "step (alloc + free); history entries per step: %d (alloc, free_requested, "
                   "free_completed)\n" % (aps, ev, 3 * aps))
    out.append("| variant | rounds (step ms) | median | vs reference (paired rounds) | overhead | ns per event |")
    out.append("|---|---|---|---|---|---|")
    for v in PY_ORDER:
        d = by.get(v)
        if not d:
            continue
        ref = "requests_base" if v.startswith("requests_") else "native_base"
        vals = " / ".join("%.3f" % d[k] for k in sorted(d))
        if v == ref:
            out.append("| %s: %s | %s | %.3f | - | - | - |" % (v, PY_WHAT[v], vals, statistics.median(d.values())))
            continue
        med, diffs = paired(d, by.get(ref, {}))
        base_med = statistics.median(by[ref].values()) if by.get(ref) else None
        pct = 100 * med / base_med if med is not None and base_med else None
        per = None
        if med is not None and ev:
            per = med * 1e6 / (3 * aps if v == "native_history_nostacks" else ev)
        out.append("| %s: %s | %s | %.3f | %s ms (%s) | %s %% | %s |" % (
            v, PY_WHAT[v], vals, statistics.median(d.values()), fmt(med, 3),
            ", ".join("%+.3f" % x for x in diffs), fmt(pct, 2), fmt(per, 0)))
    if calls:
        out.append("\nDriver calls per step (GPUMEM_DIAG=count_calls, the difference of two runs "
                   "at %d and %d steps): %.0f, of which %.0f memory calls (the rest: kernel launches, "
                   "event records, stream queries, ...)" % calls)


def read_calls(path):
    pts = []
    with open(path) as f:
        for line in f:
            m = re.search(r"steps=(\d+) calls=(\d+) mem=(\d+)", line)
            if m:
                pts.append(tuple(int(x) for x in m.groups()))
    if len(pts) < 2:
        return None
    (s0, c0, m0), (s1, c1, m1) = sorted(pts)[0], sorted(pts)[-1]
    if s1 == s0:
        return None
    return (s0, s1, (c1 - c0) / (s1 - s0), (m1 - m0) / (s1 - s0))


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: overhead_table.py RESULTS.jsonl [CALLS.txt]\n")
        return 2
    rows = load(sys.argv[1])
    calls = read_calls(sys.argv[2]) if len(sys.argv) > 2 and os.path.exists(sys.argv[2]) else None
    out = []
    c_tables(rows, out)
    py_table(rows, out, calls)
    if not out:
        out.append("(no results)")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
