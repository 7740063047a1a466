"""Checks for tests/gpu/recorder_gpu.sh (runs on the GPU machine, plain Python, no torch).

  recorder_check.py csv TRACE.csv              -> JSON summary of a trace's CSV text form
  recorder_check.py sequence APP.out TRACE.csv -> compares alloc_sequence's EXPECT lines with
                                                  the trace; exit 1 and a diff on mismatch
  recorder_check.py same A.csv B.csv           -> the same job recorded two ways (callback vs
                                                  activity capture): alloc/free sequences of
                                                  (kind, size, memory kind) must be equal
"""
import collections
import json
import sys

RELEVANT = {"alloc", "free", "alloc_failed", "vmm_reserve", "vmm_map", "vmm_unmap",
            "vmm_release", "empty_cache"}


def read_csv(path):
    cols, rows, stats, header = None, [], {}, {}
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("#stats "):
            stats = dict(kv.split("=") for kv in line[7:].split())
            stats = {k: int(v) for k, v in stats.items()}
        elif line.startswith("#"):
            if "=" in line:
                k, v = line[1:].split("=", 1)
                header[k] = v
        elif cols is None:
            cols = line.split(",")
        elif line:
            rows.append(dict(zip(cols, line.split(","))))
    return header, rows, stats


def summary(path):
    header, rows, stats = read_csv(path)
    kinds = collections.Counter((r["kind"], r.get("mem_kind", "")) for r in rows)
    streams = collections.Counter(r["stream"] for r in rows if r["kind"] in ("alloc", "free"))
    frees = [r for r in rows if r["kind"] == "free"]
    return {"stats": stats, "header": header,
            "frees_without_size": sum(1 for r in frees if int(r["size"]) == 0),
            "kinds": {"%s/%s" % k: v for k, v in sorted(kinds.items())},
            "async_streams": len([s for s in streams if s != "-"]),
            "first_rows": rows[:3]}


def sequence(app_out, trace_csv):
    exp = [l.split()[1:] for l in open(app_out) if l.startswith("EXPECT ")]
    _, rows, stats = read_csv(trace_csv)
    got = [r for r in rows if r["kind"] in RELEVANT and r.get("mem_kind") != "device_static"]
    problems = []
    smap = {}
    for i in range(max(len(exp), len(got))):
        e = exp[i] if i < len(exp) else None
        g = got[i] if i < len(got) else None
        if e is None or g is None:
            problems.append("event %d: expected %s, got %s" % (i, e, g and [g["kind"], g["addr"], g["size"], g["stream"]]))
            continue
        kind, addr, size, tag = e
        ok = g["kind"] == kind and int(g["size"]) == int(size)
        if kind not in ("alloc_failed", "empty_cache"):
            ok = ok and int(g["addr"], 16) == int(addr, 16)
        if tag == "-":
            ok = ok and g["stream"] == "-"
        else:
            if g["stream"] == "-":
                ok = False
            elif smap.setdefault(tag, g["stream"]) != g["stream"]:
                ok = False
        if not ok:
            problems.append("event %d: expected %s, got %s" % (i, e, [g["kind"], g["addr"], g["size"], g["stream"], g.get("mem_kind")]))
    if len(set(smap.values())) != len(smap):
        problems.append("streams s1 and s2 share one trace stream id: %s" % smap)
    res = {"expected": len(exp), "got": len(got), "problems": problems, "stats": stats,
           "stream_ids": smap, "other_events": collections.Counter(
               "%s/%s" % (r["kind"], r.get("mem_kind")) for r in rows if r not in got)}
    print(json.dumps(res, indent=1, default=str))
    return 0 if not problems and stats.get("truncated") == 0 else 1


def same(a_csv, b_csv):
    def seq(path):
        _, rows, stats = read_csv(path)
        return [(r["kind"], int(r["size"]), r.get("mem_kind")) for r in rows
                if r["kind"] in ("alloc", "free", "alloc_failed")
                and r.get("mem_kind") != "device_static"], stats
    a, sa = seq(a_csv)
    b, sb = seq(b_csv)
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    res = {"a_events": len(a), "b_events": len(b), "first_difference": first,
           "a_at": a[first:first + 3] if first is not None else None,
           "b_at": b[first:first + 3] if first is not None else None,
           "a_kinds": collections.Counter("%s/%s" % (k, m) for k, _, m in a),
           "b_kinds": collections.Counter("%s/%s" % (k, m) for k, _, m in b),
           "a_stats": sa, "b_stats": sb}
    print(json.dumps(res, default=str))
    return 0 if first is None and len(a) == len(b) else 1


if __name__ == "__main__":
    if sys.argv[1] == "csv":
        print(json.dumps(summary(sys.argv[2]), default=str))
    elif sys.argv[1] == "same":
        sys.exit(same(sys.argv[2], sys.argv[3]))
    elif sys.argv[1] == "sequence":
        sys.exit(sequence(sys.argv[2], sys.argv[3]))
