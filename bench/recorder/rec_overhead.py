"""Step-time overhead of recording on a PyTorch training loop with >1000 allocations per step.

One variant per process (the caller runs this under gpurec or not, with the allocator it wants):
  python3 rec_overhead.py --history none|nostacks|alloc|python [--steps N] [--snapshot PATH]
--history nostacks: torch.cuda.memory._record_memory_history(context=None) (no stack traces);
--history alloc:    _record_memory_history(context="alloc", stacks="python") (a stack per alloc);
--history python:   _record_memory_history(context="all", stacks="python").
Model: a 48-block MLP (Linear + LayerNorm + GELU + residual, d=256, batch 32) with AdamW
(foreach=False, so the optimizer allocates per parameter): small kernels, so the loop is bound
by the host, where a recorder's cost shows. Prints one JSON line: median/mean step ms over the
timed steps (GPU synchronised every step), allocations per step (native allocator's counter),
the snapshot's size and entry count when --snapshot is given.
"""
import argparse
import json
import os
import pickle
import statistics
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return x + nn.functional.gelu(self.norm(self.lin(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--history", default="none", choices=["none", "nostacks", "alloc", "python"])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--snapshot", default="")
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    if a.history == "nostacks":
        torch.cuda.memory._record_memory_history(enabled="all", context=None, max_entries=10_000_000)
    elif a.history == "alloc":
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                                 max_entries=10_000_000)
    elif a.history == "python":
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                 max_entries=10_000_000)
    model = nn.Sequential(*[Block(256) for _ in range(48)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(32, 256, device=dev)
    times = []
    allocs = []
    for step in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        n0 = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
        t0 = time.perf_counter()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if step >= a.warmup:
            times.append((t1 - t0) * 1e3)
            allocs.append(torch.cuda.memory_stats().get("allocation.all.allocated", 0) - n0)
    res = {"history": a.history, "steps": a.steps,
           "step_ms_median": statistics.median(times), "step_ms_mean": statistics.mean(times),
           "step_ms_p10": sorted(times)[len(times) // 10],
           "allocs_per_step": statistics.median(allocs) if allocs else None,
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           "under_gpurec": bool(os.environ.get("CUDA_INJECTION64_PATH")),
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    if a.snapshot and a.history != "none":
        t0 = time.perf_counter()
        torch.cuda.memory._dump_snapshot(a.snapshot)
        res["dump_s"] = time.perf_counter() - t0
        res["snapshot_bytes"] = os.path.getsize(a.snapshot)
        with open(a.snapshot, "rb") as f:
            snap = pickle.load(f)
        res["snapshot_entries"] = sum(len(t) for t in snap.get("device_traces", []))
    print("RESULT " + json.dumps(res, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
