"""stream_gpu.sh's checks over its work folder: replay == the job's max_memory_reserved, the
killed trace's allocations, the cost figures. Prints one line per check and a total."""
import csv, glob, json, os, statistics, sys
W = sys.argv[1]
n = bad = 0
def check(what, ok, detail=""):
    global n, bad
    n += 1; bad += not ok
    print("%s %s %s" % ("PASS" if ok else "FAIL", what, detail))
def result(path):
    try:
        for l in open(path):
            if l.startswith("RESULT "): return json.loads(l[7:])
    except OSError: pass
    return None
def replay(name):
    try: return json.load(open(os.path.join(W, name + ".replay.json")))
    except (OSError, ValueError): return None
for name in ("smoke", "big", "big_exp", "train", "train_exp"):
    r, rp = result(os.path.join(W, name + ".out")), replay(name)
    if r is None: continue
    got = rp and rp.get("peak_reserved_bytes")
    err = open(os.path.join(W, name + ".err")).read() if os.path.exists(os.path.join(W, name + ".err")) else ""
    check("%s: streamed" % name, "streamed" in err)
    check("%s: replay peak reserved == max_memory_reserved" % name, got == r["max_memory_reserved"],
          "%s vs %s (%s)" % (got, r["max_memory_reserved"], json.dumps({k: v for k, v in r.items() if k != "max_memory_reserved"})))
if os.path.exists(os.path.join(W, "killed.log")):
    kt = float(open(os.path.join(W, "killed.killtime")).read())
    rows = [l.split() for l in open(os.path.join(W, "killed.log")) if len(l.split()) == 2]
    before = [int(c) for t, c in rows if float(t) <= kt - 1.0]
    want = before[-1] if before else 0
    allocs, stats = 0, ""
    with open(os.path.join(W, "killed.csv")) as f:
        lines = [l for l in f if not l.startswith("#") or l.startswith("#stats")]
    stats = [l for l in lines if l.startswith("#stats")]
    rd = csv.DictReader(l for l in lines if not l.startswith("#"))
    for row in rd:
        fl = row.get("flags") or ""
        ext = "external" in fl or (fl.isdigit() and int(fl) & 8)
        if row.get("kind") == "alloc" and not ext: allocs += 1
    check("killed: trace allocations >= the job's count 1 s before the kill", allocs >= want,
          "%d in the trace, %d at kill-1s, %d logged last" % (allocs, want, int(rows[-1][1]) if rows else -1))
    rp = replay("killed")
    check("killed: the trace replays", bool(rp), (stats[0].strip() if stats else ""))
def col(pat, key):
    out = []
    for p in sorted(glob.glob(os.path.join(W, pat))):
        r = result(p)
        if r and key in r: out.append(r[key])
    return out
pa, ra = col("cost.plain.*.out", "allocs"), col("cost.rec.*.out", "allocs")
if pa and ra:
    print("cost: allocation-bound loop, allocations in 4 s: plain %s recorded %s; ratio of medians %.3f"
          % (pa, ra, statistics.median(ra) / statistics.median(pa)))
    check("cost: allocation-bound >= 0.9x plain", statistics.median(ra) >= 0.9 * statistics.median(pa))
ps, rs = col("step.plain.*.out", "step_ms_median"), col("step.rec.*.out", "step_ms_median")
if ps and rs:
    print("cost: host-bound step median ms: plain %s recorded %s; +%.2f %%"
          % (ps, rs, 100.0 * (statistics.median(rs) / statistics.median(ps) - 1)))
    check("cost: host-bound step <= +1 %", statistics.median(rs) <= 1.01 * statistics.median(ps))
print("%d checks, %d failed" % (n, bad))
