#!/usr/bin/env python3
"""jax_prediction_table.py: the JAX corpus's prediction table (traces/recorded/jax/PREDICTION.md).

Each job's requests trace (gpurec's default mode: XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async, one
exact request per XLA buffer) is replayed by gpureplay under the `jax` policy with the settings
of the job's real, unrecorded runs (runs.jsonl: JAX's own memory_stats() and whether the job ran
out of memory), and the two are put side by side.

    jax_prediction_table.py GPUREPLAY DIR              print the table
    jax_prediction_table.py GPUREPLAY DIR --check DOC  fail (exit 1, with a diff) if the table
                                                       between DOC's markers is not what the
                                                       committed traces give today
"""
import difflib
import json
import os
import subprocess
import sys

JOBS = ["jax_train_shapes", "jax_infer_varlen", "jax_free_regrow", "jax_eager_grow", "jax_multi_shard"]
# variant in runs.jsonl -> what it is; the spec is built from the run's own environment
VARIANTS = ["growth", "tightA", "tightB", "pretightA", "pre15", "prealloc", "tuned", "tuned_minus3"]


def load_runs(path):
    runs = {}
    for line in open(path):
        r = json.loads(line)
        runs[(r["job"], r["variant"])] = r
    return runs


def spec_of(run):
    words = [w for w in run["env"].split() if w.startswith("XLA_")]
    return "jax:" + ",".join(words) if words else "jax"


def real_outcome(run):
    """(oom, stats): oom when the job died or caught RESOURCE_EXHAUSTED."""
    res = run.get("result") or {}
    oom = run["rc"] != 0 or bool(res.get("oom"))
    return oom, (res.get("stats") or {})


def replay(gpureplay, trace, spec):
    out = subprocess.run([gpureplay, trace, "--policy=" + spec, "--json", "-q"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def verdict(p_oom, r_oom, p_pool, r_pool, r_allocs, p_allocs):
    if p_oom == r_oom and not r_oom:
        return "exact" if p_pool == r_pool else "pool differs"
    if p_oom == r_oom:
        return "OOM, as the real run"
    if p_oom and not r_oom:
        # XLA compiles another program under a limit it must fit: fewer or other buffers.
        return "upper bound: XLA recompiled to fit (%d buffers, recorded %d)" % (r_allocs, p_allocs) \
            if r_allocs and r_allocs != p_allocs else "upper bound: the real run fit"
    return "MISS: the real run ran out of memory"


def table(gpureplay, d):
    runs = load_runs(os.path.join(d, "runs.jsonl"))
    rows = ["| job | setting (JAX's words) | predicted peak pool (B) | JAX peak_pool_bytes (B) | "
            "predicted peak in use (B) | JAX peak_bytes_in_use (B) | requests recorded / JAX num_allocs | "
            "OOM predicted / real | verdict |",
            "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for job in JOBS:
        trace = os.path.join(d, job + ".requests.zst")
        for v in VARIANTS:
            run = runs.get((job, v))
            if not run:
                continue
            spec = spec_of(run)
            if v == "growth" and "PREALLOCATE" not in spec:
                continue
            r = replay(gpureplay, trace, spec)
            r_oom, st = real_outcome(run)
            p_oom = r["ooms"] > 0
            p_pool, p_use = r["peak_reserved_bytes"], r["peak_allocated_bytes"]
            r_pool = st.get("peak_pool_bytes")
            r_use = st.get("peak_bytes_in_use")
            r_allocs = st.get("num_allocs") or 0
            rec = runs.get((job, "rec.requests"))
            p_allocs = ((rec or {}).get("result") or {}).get("stats", {}).get("num_allocs") or r.get("allocs", 0)
            words = spec[4:].replace(",", " ") if spec != "jax" else "(default)"
            rows.append("| %s | `%s` | %s | %s | %s | %s | %s / %s | %s / %s | %s |" % (
                job, words, "-" if p_oom else p_pool, "-" if r_oom or r_pool is None else r_pool,
                "-" if p_oom else p_use, "-" if r_oom or r_use is None else r_use,
                p_allocs, r_allocs if r_allocs else "-", "yes" if p_oom else "no",
                "yes" if r_oom else "no", verdict(p_oom, r_oom, p_pool, r_pool, r_allocs, p_allocs)))
    return "\n".join(rows) + "\n"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    got = table(sys.argv[1], sys.argv[2])
    if len(sys.argv) == 5 and sys.argv[3] == "--check":
        doc = open(sys.argv[4]).read()
        want = doc.split("<!-- table begin -->\n", 1)[1].split("<!-- table end -->", 1)[0]
        if want != got:
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                       "PREDICTION.md", "now"))
            print("FAIL: traces/recorded/jax/PREDICTION.md drifted from what the traces give")
            sys.exit(1)
        n = got.count("\n") - 2
        # The claims the document publishes, asserted (issue 25): a regenerated document cannot
        # hide a regression. 36 rows: 23 exact, 10 out of memory as the real run, 3 upper bounds.
        rows = [l.split("|") for l in got.splitlines() if l.startswith("| jax_")]
        exact = sum(1 for r in rows if r[9].strip() == "exact")
        oom = sum(1 for r in rows if r[9].strip() == "OOM, as the real run")
        if (len(rows), exact, oom) != (36, 23, 10):
            print("FAIL: %d rows, %d exact, %d OOM as the real run (the document claims 36, 23, 10)"
                  % (len(rows), exact, oom))
            sys.exit(1)
        print("PASS (%d rows, %d exact, %d OOM as the real run)" % (n, exact, oom))
        return
    sys.stdout.write(got)


if __name__ == "__main__":
    main()
