"""Runs rec_steps.py under every variant, interleaved over rounds, and writes the figures.

  python3 rec_steps_run.py --gpurec .dist/gpurec --trace-csv .dist/trace_csv --out DIR [--rounds 3]
Variants (each a fresh process per round, the order rotated every round so no variant always
runs first or last; all pinned to --cpus with taskset):
  requests_base       PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, no recorder
  gpurec_callbacks    gpurec (requests mode, callback capture: the default)
  gpurec_activity     gpurec --capture=activity
  native_base         the caching allocator, no recorder
  history_nostacks    _record_memory_history(context=None)
  history_python      _record_memory_history(context="all", stacks="python")
  gpurec_empty        gpurec with GPUMEM_DIAG=empty_callbacks: CUPTI callbacks subscribed and
                      enabled but recording nothing (CUPTI's own cost; not in the default set)
Per loop and variant: the median step time of each round, the median of those, their spread,
and against the same mode's reference: the per-round paired difference (variant minus
reference of the same round), its median in ms and %, and that divided by the recorded events
per step (gpurec: events between the loop's marker allocations in round 1's trace / steps;
history: entries per allocation from a snapshot x allocations per step) = ns per event.
Writes DIR/steps.jsonl (every RESULT line, tagged), DIR/steps_summary.json, DIR/steps_summary.md.
Stops starting processes once --budget-s has passed (what ran is still summarised).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ["requests_base", "gpurec_callbacks", "gpurec_activity",
            "native_base", "history_nostacks", "history_python"]
EXTRA_VARIANTS = ["gpurec_empty"]
REFERENCE = {"gpurec_callbacks": "requests_base", "gpurec_activity": "requests_base",
             "gpurec_empty": "requests_base",
             "history_nostacks": "native_base", "history_python": "native_base"}


def command(a, variant, rnd, script_args):
    """argv and environment of one variant's process."""
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.pop("GPUMEM_CAPTURE", None)
    env["PYTHONUNBUFFERED"] = "1"
    py = [a.python, os.path.join(HERE, "rec_steps.py")] + script_args
    trace = None
    if variant == "requests_base":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    elif variant.startswith("gpurec_"):
        cap = variant.split("_", 1)[1]
        trace = os.path.join(a.work, "steps_%s_%d.zst" % (cap, rnd))
        if cap == "empty":
            env["GPUMEM_DIAG"] = "empty_callbacks"
            cap, trace = "callbacks", None  # records nothing: no events to count
        py = [a.gpurec, "-o", trace or os.path.join(a.work, "steps_empty.zst"), "--capture=" + cap, "--"] + py
    elif variant.startswith("history_"):
        py += ["--history", variant.split("_", 1)[1]]
        if rnd == 1:
            py += ["--count-history"]
    argv = (["taskset", "-c", a.cpus] if a.cpus and shutil.which("taskset") else []) + py
    return argv, env, trace


def events_between_marks(trace_csv, trace, marks):
    """{loop: events between the loop's two marker allocations (the first marker's free excluded)}."""
    p = subprocess.Popen([trace_csv, trace], stdout=subprocess.PIPE, text=True)
    cols, pos, counts, dropped = None, {}, {}, 0
    want = {}
    for loop, (m0, m1) in marks.items():
        want[str(m0)] = (loop, 0)
        want[str(m1)] = (loop, 1)
    n = 0
    for line in p.stdout:
        if line.startswith("#"):
            if line.startswith("#stats "):
                kv = dict(x.split("=") for x in line[7:].split())
                dropped = int(kv.get("dropped", 0))
            continue
        if cols is None:
            cols = line.rstrip("\n").split(",")
            ik, isz = cols.index("kind"), cols.index("size")
            continue
        n += 1
        f = line.split(",", isz + 1)
        if f[ik] == "alloc" and f[isz] in want:
            loop, which = want[f[isz]]
            pos.setdefault(loop, [None, None])[which] = n
    p.wait()
    for loop, (i0, i1) in pos.items():
        if i0 is not None and i1 is not None:
            counts[loop] = i1 - i0 - 2  # rows strictly between, less the first marker's free
    return {"events_between_marks": counts, "trace_events": n, "trace_dropped": dropped,
            "rc": p.returncode}


def run_one(a, variant, rnd, script_args, log):
    argv, env, trace = command(a, variant, rnd, script_args)
    t0 = time.time()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.time() - t0
    log.write("== round %d %s rc=%d %.1f s: %s\n" % (rnd, variant, p.returncode, wall, " ".join(argv)))
    log.write(p.stderr[-3000:] if p.returncode else "".join(
        l + "\n" for l in p.stderr.splitlines() if l.startswith("gpurec:")))
    log.flush()
    out = []
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r.update({"variant": variant, "round": rnd, "rc": p.returncode, "wall_s": wall})
            out.append(r)
    if p.returncode and not out:
        out.append({"variant": variant, "round": rnd, "rc": p.returncode, "wall_s": wall,
                    "loop": "failed", "stderr_tail": p.stderr[-1500:]})
    return out, trace


def pct(x, ref):
    return 100.0 * x / ref if ref else None


def summarise(results, counts, loops, variants=VARIANTS):
    """{loop: {variant: figures}} from the tagged RESULT lines and the event counts."""
    hist_ratio = {}
    for r in results:
        if r.get("loop") == "history_count" and r.get("entries_per_allocation"):
            hist_ratio[r["history"]] = r["entries_per_allocation"]
    out = {}
    for loop in loops:
        rows = [r for r in results if r.get("loop") == loop]
        by = {}
        for r in rows:
            by.setdefault(r["variant"], {})[r["round"]] = r
        allocs_native = [r["allocs_per_step"] for r in rows if r["variant"] == "native_base"]
        allocs = statistics.median(allocs_native) if allocs_native else None
        fig = {}
        for v in variants:
            if v not in by:
                continue
            med = {k: x["step_ms_median"] for k, x in sorted(by[v].items())}
            f = {"rounds": len(med), "step_ms_by_round": list(med.values()),
                 "step_ms_median_of_rounds": statistics.median(med.values()),
                 "spread_ms": max(med.values()) - min(med.values()),
                 "host_ms_median_of_rounds": statistics.median(x["host_ms_median"] for x in by[v].values()),
                 "allocs_per_step": statistics.median(x["allocs_per_step"] for x in by[v].values())}
            ref = REFERENCE.get(v)
            if ref and ref in by:
                paired = [med[k] - by[ref][k]["step_ms_median"] for k in med if k in by[ref]]
                paired_pct = [100.0 * (med[k] / by[ref][k]["step_ms_median"] - 1) for k in med if k in by[ref]]
                if paired:
                    d = statistics.median(paired)
                    f.update({"reference": ref, "delta_ms_by_round": paired, "pct_by_round": paired_pct,
                              "delta_ms": d, "pct": statistics.median(paired_pct)})
                    ev = None
                    if v.startswith("gpurec_"):
                        cap = v.split("_", 1)[1]
                        # the empty variant records nothing: it runs the callback capture's events
                        ev = counts.get("callbacks" if cap == "empty" else cap, {}).get(loop)
                        if ev is not None:
                            ev = ev / by[v][min(by[v])]["steps"]
                        f["events_per_step"] = ev
                        f["events_source"] = "trace, between markers"
                    elif v.startswith("history_") and allocs is not None:
                        ratio = hist_ratio.get(v.split("_", 1)[1])
                        if ratio:
                            ev = ratio * allocs
                            f["events_per_step"] = ev
                            f["events_source"] = "entries/allocation %.4f x %g allocations/step" % (ratio, allocs)
                    if ev is None and v.startswith("gpurec_") and allocs is not None:
                        ev = 2.0 * allocs  # one alloc and one free event per tensor allocation
                        f["events_per_step"] = ev
                        f["events_source"] = "2 x allocations/step (no markers in the trace)"
                    if ev:
                        f["ns_per_event"] = d * 1e6 / ev
                        f["ns_per_event_by_round"] = [x * 1e6 / ev for x in paired]
            fig[v] = f
        out[loop] = fig
    return out


def markdown(summary, meta):
    lines = ["# rec_steps_run.py summary", "",
             "```", json.dumps(meta, sort_keys=True), "```", ""]
    for loop, fig in summary.items():
        lines += ["## loop %s" % loop, "",
                  "| variant | step ms by round | median | spread | host ms | allocs/step (counter) | vs ref: ms by round | % by round | median % | events/step | ns/event (median; by round) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for v, f in fig.items():
            def fmt(xs, p=3):
                return " / ".join(("%.*f" % (p, x)) for x in xs) if xs else "-"
            lines.append("| %s | %s | %.3f | %.3f | %.2f | %s | %s | %s | %s | %s | %s |" % (
                v, fmt(f["step_ms_by_round"]), f["step_ms_median_of_rounds"], f["spread_ms"],
                f["host_ms_median_of_rounds"], f["allocs_per_step"],
                fmt(f.get("delta_ms_by_round")), fmt(f.get("pct_by_round"), 2),
                ("%+.2f %%" % f["pct"]) if "pct" in f else "-",
                ("%.1f" % f["events_per_step"]) if f.get("events_per_step") else "-",
                ("%.0f; %s" % (f["ns_per_event"], fmt(f["ns_per_event_by_round"], 0)))
                if "ns_per_event" in f else "-"))
        lines.append("")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpurec", required=True)
    ap.add_argument("--trace-csv", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/recsteps")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpus", default="2-5", help="taskset CPU list ('' for none)")
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--loops", default="mlp,lm")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma list from " + ",".join(VARIANTS + EXTRA_VARIANTS))
    ap.add_argument("script_args", nargs="*", help="passed to rec_steps.py (after --)")
    a = ap.parse_args()
    variants = a.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS + EXTRA_VARIANTS]
    if unknown:
        ap.error("unknown variant(s): " + ",".join(unknown))
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    script_args = ["--loops", a.loops] + a.script_args
    start = time.time()
    results, counts, skipped = [], {}, []
    marks = {"mlp": (3333331, 3333337), "lm": (5555551, 5555557)}  # = rec_steps.py MARKS
    with open(os.path.join(a.out, "steps.jsonl"), "w") as jl, \
            open(os.path.join(a.out, "steps_log.txt"), "w") as log:
        for rnd in range(1, a.rounds + 1):
            k = (rnd - 1) % len(variants)
            order = variants[k:] + variants[:k]
            for v in order:
                if time.time() - start > a.budget_s:
                    skipped.append((rnd, v))
                    continue
                out, trace = run_one(a, v, rnd, script_args, log)
                for r in out:
                    jl.write(json.dumps(r, sort_keys=True) + "\n")
                    print("%s r%d %s: %s" % (v, rnd, r.get("loop"), {x: r.get(x) for x in (
                        "step_ms_median", "host_ms_median", "allocs_per_step", "entries_per_allocation", "rc")}),
                        flush=True)
                jl.flush()
                results += out
                if trace and os.path.exists(trace):
                    c = events_between_marks(a.trace_csv, trace, {l: marks[l] for l in a.loops.split(",")})
                    c.update({"variant": v, "round": rnd, "loop": "trace_count"})
                    jl.write(json.dumps(c, sort_keys=True) + "\n")
                    print("%s r%d trace: %s" % (v, rnd, c), flush=True)
                    results.append(c)
                    if rnd == 1 or v.split("_", 1)[1] not in counts:
                        counts[v.split("_", 1)[1]] = c["events_between_marks"]
                    os.remove(trace)
    summary = summarise(results, counts, a.loops.split(","), variants)
    meta = {"rounds": a.rounds, "cpus": a.cpus if shutil.which("taskset") else "not pinned (no taskset)", "script_args": script_args, "skipped": skipped,
            "wall_s": time.time() - start, "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start))}
    with open(os.path.join(a.out, "steps_summary.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary, "event_counts": counts}, f, indent=1, sort_keys=True)
    md = markdown(summary, meta)
    with open(os.path.join(a.out, "steps_summary.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
