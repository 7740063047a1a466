"""GPU-machine driver for the snapshot corpus and the cross-policy table (issue 6).

For every workload in traces/workloads/ and every allocator setting below, runs the workload
twice in a fresh process: once with GPUMEM_SNAPSHOT set (the pickle goes to the corpus) and
once without (torch's max_memory_reserved, the "real" column of PREDICTION.md). The default
runs go first: the garbage-collection setting needs a memory fraction, chosen per workload
from its default peak (fraction = 1.25 x default peak / total memory), so GC really runs.
Runs are independent processes, several at a time on the one GPU (their memory is small).

Writes to OUT: results.jsonl (one line per run), snapshots-core.tar.xz (default runs plus the
two corpus settings), snapshots-extra.tar.xz (every other setting), env.txt.
Usage: python3 tests/gpu/snapshot_runs.py OUTDIR [late]   (late: only the late-history snapshots)
"""
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WL = os.path.join(ROOT, "traces", "workloads")
WORKLOADS = ["train_amp", "infer_varlen", "train_ckpt", "two_streams", "train_cnn"]
SETTINGS = {
    "default": "",
    "expandable": "expandable_segments:True",
    "maxsplit64": "max_split_size_mb:64",
    "roundup4": "roundup_power2_divisions:4",
    "roundup_list": "roundup_power2_divisions:[64:8,256:4,>:2]",
    "gc06": "garbage_collection_threshold:0.6",
}
CORE = {("train_amp", "expandable"), ("infer_varlen", "maxsplit64")}


def run(out, wl, setting, snap, fraction=None):
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    conf = SETTINGS[setting]
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    else:
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if fraction:
        env["GPUMEM_MEMORY_FRACTION"] = "%.6f" % fraction
    tag = "%s.%s" % (wl, setting)
    if snap:
        env["GPUMEM_SNAPSHOT"] = os.path.join(out, "snap", tag + ".pickle")
    else:
        env.pop("GPUMEM_SNAPSHOT", None)
    cmd = [sys.executable, os.path.join(WL, wl + ".py")]
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    res = {"workload": wl, "setting": setting, "snapshot": bool(snap), "rc": p.returncode,
           "wall_s": round(time.time() - t0, 2), "memory_fraction": fraction,
           "command": "PYTORCH_CUDA_ALLOC_CONF='%s'%s%s python3 traces/workloads/%s.py" % (
               conf, " GPUMEM_MEMORY_FRACTION=%.6f" % fraction if fraction else "",
               " GPUMEM_SNAPSHOT=%s.pickle" % tag if snap else "", wl)}
    for line in p.stdout.splitlines():
        if line.startswith("GPUMEM_RESULT "):
            res.update(json.loads(line[len("GPUMEM_RESULT "):]))
            res["workload"], res["setting"] = wl, setting
    if p.returncode != 0:
        res["stderr_tail"] = p.stderr[-1500:]
    return res


def late(out):
    """Snapshots whose ring buffer (max_entries=400) dropped the start of the history: the
    importer must rebuild the memory that existed before the first kept entry."""
    res = []
    for wl, setting in (("train_amp", "default"), ("train_amp", "expandable"),
                        ("two_streams", "default"), ("train_ckpt", "default")):
        env = dict(os.environ, PYTHONUNBUFFERED="1", GPUMEM_SNAPSHOT_MAX_ENTRIES="400",
                   GPUMEM_SNAPSHOT=os.path.join(out, "%s.%s.late400.pickle" % (wl, setting)))
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if SETTINGS[setting]:
            env["PYTORCH_CUDA_ALLOC_CONF"] = SETTINGS[setting]
        p = subprocess.run([sys.executable, os.path.join(WL, wl + ".py")], env=env,
                           capture_output=True, text=True, timeout=300)
        r = {"workload": wl, "setting": setting, "max_entries": 400, "rc": p.returncode}
        for line in p.stdout.splitlines():
            if line.startswith("GPUMEM_RESULT "):
                r.update(json.loads(line[len("GPUMEM_RESULT "):]))
        if p.returncode:
            r["stderr_tail"] = p.stderr[-1500:]
        res.append(r)
        print(json.dumps(r))
    with open(os.path.join(out, "late.jsonl"), "w") as f:
        for r in res:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def main():
    out = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "late":
        return late(out)
    os.makedirs(os.path.join(out, "snap"), exist_ok=True)
    results = []
    jobs = int(os.environ.get("SNAP_JOBS", "6"))
    with cf.ThreadPoolExecutor(jobs) as ex:
        first = [ex.submit(run, out, wl, "default", snap) for wl in WORKLOADS for snap in (1, 0)]
        results += [f.result() for f in first]
        peak = {r["workload"]: r.get("max_memory_reserved", 0) for r in results
                if not r["snapshot"] and r["rc"] == 0}
        total = {r["workload"]: r.get("total_memory", 0) for r in results if r["rc"] == 0}
        futs = []
        for wl in WORKLOADS:
            for s in SETTINGS:
                if s == "default":
                    continue
                frac = None
                if s == "gc06":
                    if not peak.get(wl) or not total.get(wl):
                        continue
                    frac = 1.25 * peak[wl] / total[wl]
                for snap in (1, 0):
                    futs.append(ex.submit(run, out, wl, s, snap, frac))
        results += [f.result() for f in futs]
    with open(os.path.join(out, "results.jsonl"), "w") as f:
        for r in results:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    for r in results:
        print(r["workload"], r["setting"], "snap" if r["snapshot"] else "real", r["rc"],
              r.get("max_memory_reserved"), r.get("wall_s"), r.get("stderr_tail", "")[-300:])
    snapdir = os.path.join(out, "snap")
    names = sorted(os.listdir(snapdir))
    core = [n for n in names if n.endswith(".default.pickle") or
            tuple(n[:-len(".pickle")].split(".")) in CORE]
    extra = [n for n in names if n not in core]
    for arch, members in (("snapshots-core.tar.xz", core), ("snapshots-extra.tar.xz", extra)):
        with tarfile.open(os.path.join(out, arch), "w:xz") as t:
            for n in members:
                t.add(os.path.join(snapdir, n), arcname=n)
        print(arch, os.path.getsize(os.path.join(out, arch)), members)
    for n in names:
        print(n, os.path.getsize(os.path.join(snapdir, n)))
        os.remove(os.path.join(snapdir, n))
    os.rmdir(snapdir)


if __name__ == "__main__":
    main()
