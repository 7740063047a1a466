"""sites_bench.py: what the callsite hook costs (issue 15, item 3), measured step by step in one
process, so the 10-20 % that separate two processes on the device machine do not blur it.

Run under gpurec's default mode (gpurec -q -o T -- python3 sites_bench.py): PyTorch's history
is on without stacks and gpurec has hooked PyTorch's per-request report. The host-bound loop of
bench/recorder/rec_overhead.py (48 x Linear+LayerNorm+GELU, AdamW foreach=False: ~1000
allocations per ~17 ms step) then runs with each step in one of three states, rotated step by
step (A B C A B C ...):
  nohook:  the hook's GOT slot restored (gpumem_torch_sites_off): the default before callsites;
  hook:    the hook on (gpumem_torch_sites): the default now;
  stacks:  the hook off and PyTorch's history switched to context='alloc', stacks='python' (its
           own stack per allocation, the other way to get callsites; switched back after);
and also a tight loop of cached allocations (torch.empty of 4 KiB + free, 1 per iteration) in
blocks alternating nohook / hook. Prints one RESULT line: per state the median step (and block)
time, the paired differences against nohook (each step against the mean of its two nohook
neighbours), in ms and ns per allocation."""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "recorder"))
from rec_overhead import Block  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=240)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--block-iters", type=int, default=2000)
    a = ap.parse_args()
    lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(256) for _ in range(48)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(32, 256, device=dev)
    entries = int(os.environ.get("GPUMEM_TORCH_MAX_ENTRIES", "1000000"))
    hooked0 = lib.gpumem_torch_sites()  # 0: gpurec's sitecustomize hooked already

    def state(s):
        if s == "hook":
            return lib.gpumem_torch_sites()
        lib.gpumem_torch_sites_off()
        if s == "stacks":
            torch.cuda.memory._record_memory_history(context="alloc", stacks="python", max_entries=entries)
        return 0

    def unstate(s):
        if s == "stacks":
            torch.cuda.memory._record_memory_history(context=None, stacks="python", max_entries=entries)

    states = ["nohook", "hook", "stacks"]
    times = {s: [] for s in states}
    seq = []
    allocs = []
    for step in range(a.warmup + a.steps):
        s = states[step % 3]
        state(s)
        torch.cuda.synchronize()
        n0 = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
        t0 = time.perf_counter()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        unstate(s)
        if step >= a.warmup:
            times[s].append((t1 - t0) * 1e3)
            seq.append((s, (t1 - t0) * 1e3))
            allocs.append(torch.cuda.memory_stats().get("allocation.all.allocated", 0) - n0)
    apst = statistics.median(allocs)
    # each non-control step against the mean of its nearest control steps before and after
    paired = {s: [] for s in states[1:]}
    for i, (s, t) in enumerate(seq):
        if s == "nohook":
            continue
        prev = next((seq[j][1] for j in range(i - 1, -1, -1) if seq[j][0] == "nohook"), None)
        nxt = next((seq[j][1] for j in range(i + 1, len(seq)) if seq[j][0] == "nohook"), None)
        if prev is not None and nxt is not None:
            paired[s].append(t - (prev + nxt) / 2)
    res = {"allocs_per_step": apst, "steps_per_state": a.steps // 3, "hooked_by_sitecustomize": hooked0 == 0}
    for s in states:
        res["step_ms_median_" + s] = statistics.median(times[s])
    for s in states[1:]:
        d = statistics.median(paired[s])
        res["paired_ms_" + s] = d
        res["paired_pct_" + s] = 100 * d / res["step_ms_median_nohook"]
        res["ns_per_alloc_" + s] = d * 1e6 / apst
    # cached allocations in a tight loop: blocks alternating nohook / hook
    blk = {"nohook": [], "hook": []}
    for b in range(a.blocks + 2):
        s = "hook" if b % 2 else "nohook"
        state(s)
        t0 = time.perf_counter()
        for _ in range(a.block_iters):
            t = torch.empty(1024, device=dev)
            del t
        t1 = time.perf_counter()
        if b >= 2:
            blk[s].append((t1 - t0) * 1e9 / a.block_iters)
    lib.gpumem_torch_sites()
    res["tight_ns_per_alloc_nohook"] = statistics.median(blk["nohook"])
    res["tight_ns_per_alloc_hook"] = statistics.median(blk["hook"])
    res["tight_ns_added"] = res["tight_ns_per_alloc_hook"] - res["tight_ns_per_alloc_nohook"]
    res["torch"] = torch.__version__
    res["gpu"] = torch.cuda.get_device_name(0)
    print("RESULT " + json.dumps(res, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
