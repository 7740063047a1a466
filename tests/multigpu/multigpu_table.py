#!/usr/bin/env python3
"""multigpu_table.py: the two-GPU recordings of traces/recorded/multigpu against their real runs.

  multigpu_table.py GPUREPLAY GPUANALYZE DIR            print DIR's tables (Markdown)
  multigpu_table.py GPUREPLAY GPUANALYZE DIR --check F  (bazel test) the same, diffed with F

DIR holds the traces gpurec wrote (one per rank; one for the two-device process) and runs.jsonl,
PyTorch's own figures per run, rank and device (tests/gpu/multigpu.sh). Every device of every
trace is replayed under the default and under expandable_segments:True and compared with the
unrecorded runs' max_memory_reserved / max_memory_allocated on that rank and device; then the
cross-rank view (gpuanalyze ranks) of the DDP job is printed as a user sees it."""
import difflib
import json
import os
import subprocess
import sys
import tempfile

SETTINGS = [("default", "pytorch", ""), ("expandable", "pytorch:expandable_segments:True", "expandable_segments:True")]
TRACES = [("ddp", "ddp.rank0.zst"), ("ddp", "ddp.rank1.zst"), ("nccl", "nccl.rank0.zst"),
          ("nccl", "nccl.rank1.zst"), ("twodev", "twodev.zst")]
MIB = 1 << 20


def replay(gr, path, policy):
    out = subprocess.run([gr, path, "--policy=" + policy, "--json"], check=True, capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def real(runs, job, variant, device):
    return [r for r in runs if r["job"] == job and r["variant"] == variant and r["device"] == device]


def diff(a, b):
    return "exact" if a == b else "%+d B (%+.2f %%)" % (a - b, 100.0 * (a - b) / b)


def tables(gr, ga, d):
    runs = [json.loads(line) for line in open(os.path.join(d, "runs.jsonl"))]
    ok = total = 0
    lines = ["## Each device's replay against PyTorch's own peak", "",
             "Replay of the default recording (`gpureplay TRACE --policy=P --json`, one result per device)"
             " against the unrecorded runs of the same job on the same rank and device (`unrec.1`, `unrec.2`"
             " under the default; `exp` under `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, a setting"
             " the recording never ran under). `recorded run` is PyTorch's figure inside the recorded run.", "",
             "| trace | rank | device | setting | real max_memory_reserved | recorded run | replay | | real max_memory_allocated | replay | |",
             "|---|---:|---:|---|---:|---:|---:|---|---:|---:|---|"]
    for job, name in TRACES:
        for label, policy, conf in SETTINGS:
            for res in replay(gr, os.path.join(d, name), policy):
                dev = res["device"]
                var = "exp" if conf else "unrec"
                rs = [r for r in runs if r["job"] == job and r["variant"].startswith(var) and r["device"] == dev]
                rec = real(runs, job, "auto", dev) if not conf else []
                if not rs:
                    continue
                resv = sorted({r["max_memory_reserved"] for r in rs})
                allo = sorted({r["max_memory_allocated"] for r in rs})
                rank = rs[0]["rank"] if rs[0]["world_size"] > 1 else "-"
                got_r, got_a = res["peak_reserved_bytes"], res["peak_allocated_bytes"]
                total += 2
                ok += (got_r in resv) + (got_a in allo)
                lines.append("| `%s` | %s | %d | %s | %s | %s | %d | %s | %s | %d | %s |" % (
                    name, rank, dev, label, " / ".join(str(v) for v in resv),
                    rec[0]["max_memory_reserved"] if rec else "-", got_r,
                    diff(got_r, resv[0]) if len(resv) == 1 else ("inside" if resv[0] <= got_r <= resv[-1] else "outside"),
                    " / ".join(str(v) for v in allo), got_a,
                    diff(got_a, allo[0]) if len(allo) == 1 else ("inside" if allo[0] <= got_a <= allo[-1] else "outside")))
    lines += ["", "**%d of %d figures exact** (peak reserved and peak allocated, per device, both settings)." % (ok, total), ""]

    lines += ["## What else is on the device", "",
              "The driver's own count (`cudaMemGetInfo`: total - free, one process per GPU) right after CUDA"
              " started (the CUDA context) and at the end of the unrecorded run, against what the trace"
              " attributes: PyTorch's reserved at its peak (replay) and the other owners' mapped bytes at"
              " their peak (NCCL's buffers through the VMM API: `external_peak_bytes`).", "",
              "| trace | device | context (driver, at start) | PyTorch reserved | other owners (trace) | sum | driver at end | not attributed |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for job, name in TRACES:
        for res in replay(gr, os.path.join(d, name), "pytorch"):
            dev = res["device"]
            r = real(runs, job, "unrec.1", dev)[0]
            ctx, ext, resv = r["device_used_at_start"], res["external_peak_bytes"], res["peak_reserved_bytes"]
            s = ctx + ext + resv
            lines.append("| `%s` | %d | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |" % (
                name, dev, ctx / MIB, resv / MIB, ext / MIB, s / MIB, r["device_used_at_end"] / MIB,
                (r["device_used_at_end"] - s) / MIB))
    lines.append("")

    lines += ["## Requests mode and `backend:cudaMallocAsync` on the DDP job (issue 17 item 4)", "",
              "PyTorch's figures on each rank: the default allocator (unrecorded), `backend:cudaMallocAsync`"
              " unrecorded, and `gpurec --mode=requests` (which sets that backend). Under that backend"
              " `max_memory_allocated` is the driver pool's `cudaMemPoolAttrUsedMemHigh`: a buffer counts"
              " until its stream-ordered free runs on the GPU.", "",
              "| rank | default, unrecorded | cudaMallocAsync, unrecorded | cudaMallocAsync, under gpurec requests | default, under gpurec (auto) |",
              "|---:|---:|---:|---:|---:|"]
    for rank in (0, 1):
        cell = lambda v: str(real(runs, "ddp", v, rank)[0]["max_memory_allocated"])
        lines.append("| %d | %s | %s | %s | %s |" % (rank, cell("unrec.1"), cell("async"), cell("requests"), cell("auto")))
    lines.append("")

    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "ranks.db")
        paths = [os.path.join(d, n) for n in ("ddp.rank0.stacks.zst", "ddp.rank1.stacks.zst")]
        out = subprocess.run([ga, "ranks", "-q", "--db=" + db, "-j", "2"] + paths, check=True, capture_output=True,
                             text=True, cwd=tmp)
    text = out.stdout.replace(d.rstrip("/") + "/", "")
    lines += ["## The cross-rank view of the DDP job", "",
              "`gpuanalyze ranks ddp.rank0.stacks.zst ddp.rank1.stacks.zst` (the recordings with"
              " `--stacks=python`, for the callsites):", "", "```", text.rstrip("\n"), "```", ""]
    return "\n".join(lines), ok, total


def main():
    if len(sys.argv) not in (4, 6):
        sys.exit(__doc__)
    gr, ga, d = sys.argv[1:4]
    text, ok, total = tables(gr, ga, d)
    if len(sys.argv) == 6:
        want = open(sys.argv[5]).read()
        start = want.find("## Each device's replay")
        want = want[start:].rstrip("\n") + "\n" if start >= 0 else want
        got = text.rstrip("\n") + "\n"
        if got != want:
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "PREDICTION.md", "now"))
            sys.exit("multigpu_table: the tables moved (above): regenerate PREDICTION.md's tables if the change is meant")
        if ok != total:
            sys.exit("multigpu_table: %d of %d figures not exact" % (total - ok, total))
        print("multigpu_table: %d of %d figures exact, tables unchanged" % (ok, total))
        return
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
