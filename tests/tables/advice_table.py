#!/usr/bin/env python3
"""advice_table.py: traces/recorded/advice/runs.jsonl (the report's advice run for real on an H200,
tests/gpu/advice_check.sh) held to what the built tools give today.

For every PyTorch run of a trace in that folder: gpureplay TRACE --policy=POLICY (the run's own
setting; a recorded run's from its PYTORCH_CUDA_ALLOC_CONF) must give the run's real
max_memory_reserved to the byte. For every advised run: gpuanalyze report TRACE must still paste
the line that was run (a changed advice has not been run for real: run advice_check.sh again).
Prints one line per check and "N of M exact, K advice lines as run"; exits 1 when a count is
below MIN_EXACT / MIN_ADVICE (environment) or any check fails.
usage: advice_table.py GPUREPLAY GPUANALYZE RUNS_JSONL"""
import json
import os
import subprocess
import sys
import tempfile


def replay(gpureplay, trace, policy):
    out = subprocess.run([gpureplay, trace, "--policy=" + policy, "--json"], capture_output=True, text=True)
    if out.returncode:
        return None, out.stderr.strip().splitlines()[-1:] or ["exit %d" % out.returncode]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip().startswith("{")]
    return max(r["peak_reserved_bytes"] for r in rows), None


def pasted(gpuanalyze, trace):
    with tempfile.TemporaryDirectory() as d:
        t = os.path.join(d, os.path.basename(trace))
        with open(trace, "rb") as src, open(t, "wb") as dst:
            dst.write(src.read())
        out = subprocess.run([gpuanalyze, "report", t], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        s = line.strip()
        if s.startswith("paste:"):
            return s[len("paste:"):].strip()
        if "keep the default" in s:
            return "(default kept)"
    return "NO ADVICE: " + (out.stderr.strip().splitlines() or [""])[-1]


def main():
    gpureplay, gpuanalyze, runs_path = sys.argv[1:4]
    here = os.path.dirname(os.path.abspath(runs_path))
    runs = [json.loads(line) for line in open(runs_path) if line.strip()]
    exact = total = advice_ok = advice_n = 0
    fails = 0
    for r in runs:
        res = r.get("result") or {}
        name = os.path.basename(r.get("trace", ""))
        trace = os.path.join(here, name)
        if "max_memory_reserved" not in res or not os.path.exists(trace) or r.get("rc"):
            continue  # the corpus jobs' traces and JAX runs are held by their own tables
        conf = res.get("alloc_conf", "")
        policy = r.get("policy") or ("pytorch:" + conf if conf else "pytorch")
        total += 1
        got, err = replay(gpureplay, trace, policy)
        ok = got == res["max_memory_reserved"]
        exact += ok
        fails += not ok
        print("%s %s %s %s: real %d, replay %s" % ("ok  " if ok else "FAIL", r["job"], r["variant"], policy,
                                                   res["max_memory_reserved"], got if err is None else err))
        if r["variant"] == "advised":
            advice_n += 1
            want = r.get("env") or "(default kept)"
            now = pasted(gpuanalyze, trace)
            same = now == want or (want.startswith("unset PYTORCH_CUDA_ALLOC_CONF") and now.startswith("unset PYTORCH_CUDA_ALLOC_CONF"))
            advice_ok += same
            fails += not same
            print("%s %s: the report pastes %r (run for real: %r)" % ("ok  " if same else "FAIL", r["job"], now, want))
    print("%d of %d exact, %d of %d advice lines as run" % (exact, total, advice_ok, advice_n))
    if exact < int(os.environ.get("MIN_EXACT", "0")) or advice_ok < int(os.environ.get("MIN_ADVICE", "0")) or fails:
        sys.exit(1)


if __name__ == "__main__":
    main()
