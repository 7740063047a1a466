"""stream_cost.py: what each part of gpurec's streamed default costs PyTorch, part by part, in ONE
process (issue 24 item 5), because the same variant moves 10-20 % between processes on the device
machine and no between-process figure can settle a few percent.

Run under gpurec's default (gpurec -q -o T -- python3 stream_cost.py): gpurec's sitecustomize has
attached the recorder's tracker to PyTorch's allocator (every entry streamed, each alloc with its
callsite) and the injection library's CUPTI callbacks capture the driver's memory calls. Then, in
cycles, one block per state, the order rotated from cycle to cycle:
  idle:    the tracker attached but returning at once (gpumem_bench_stream(1)): what PyTorch
           itself pays for having a tracker (it builds each TraceEntry); CUPTI's memory
           callbacks disabled (gpumem_bench_cupti(0));
  entries: each entry streamed, without its callsite (gpumem_bench_stream(2));
  sites:   and each alloc's callsite read (gpumem_bench_stream(0)): the streamed requests;
  default: and CUPTI's callbacks capturing (gpumem_bench_cupti(1)): gpurec's default.
Two loads: a tight loop of cached allocations (torch.empty of 4 KiB, 50 live, as
stream_jobs.py's loop: no driver call, no kernel) in ns per allocation, and the host-bound step of
bench/recorder/rec_overhead.py (48 x Linear+LayerNorm+GELU, AdamW foreach=False) in ms. Each
state's figure is the median over cycles of (its block - that cycle's idle block), with a 95 %
interval; so are the increments entries - idle, sites - entries, default - sites. The idle
state's own cost against no tracker at all is not measurable in one process (a tracker cannot be
detached): stream_gpu.sh's cost stage measures the whole against plain runs.
Also the recorder's clock per call (gpumem_bench_clock: CUPTI's timestamp and the vDSO's).
Prints one RESULT line (JSON). The trace of such a run lacks what was ignored: discard it."""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "recorder"))
from rec_overhead import Block  # noqa: E402

STATES = ["idle", "entries", "sites", "default"]
SETTING = {"idle": (1, 0), "entries": (2, 0), "sites": (0, 0), "default": (0, 1)}  # stream, cupti
PAIRS = {"entries": ("idle", "entries"), "callsite": ("entries", "sites"), "cupti": ("sites", "default"),
         "ours": ("idle", "default")}


def med_ci(xs):
    s = sorted(xs)
    n = len(s)
    k = max(0, int(math.floor(n / 2 - 0.98 * math.sqrt(n))))
    return statistics.median(s), s[k], s[min(n - 1, n - 1 - k)]


class Switch:
    def __init__(self, lib):
        self.lib, self.cur = lib, SETTING["default"]

    def set(self, state):
        stream, cupti = SETTING[state]
        if stream != self.cur[0] and self.lib.gpumem_bench_stream(stream) < 0:
            sys.exit("stream_cost: gpumem_bench_stream(%d): nothing is streamed" % stream)
        if cupti != self.cur[1] and self.lib.gpumem_bench_cupti(cupti) != 1:
            sys.exit("stream_cost: gpumem_bench_cupti(%d) switched nothing" % cupti)
        self.cur = (stream, cupti)


def rotated(n, warmup):
    for i in range(warmup + n):
        r = i % len(STATES)
        yield i >= warmup, STATES[r:] + STATES[:r]


def measure(sw, n, warmup, block):
    per = []
    for timed, order in rotated(n, warmup):
        c = {}
        for s in order:
            sw.set(s)
            c[s] = block()
        if timed:
            per.append(c)
    sw.set("default")
    out = {s: statistics.median([c[s] for c in per]) for s in STATES}
    for name, (ref, s) in PAIRS.items():
        m, lo, hi = med_ci([c[s] - c[ref] for c in per])
        out["added_" + name] = m
        out["ci_" + name] = [lo, hi]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=60)
    ap.add_argument("--blocks", type=int, default=60)
    ap.add_argument("--block-iters", type=int, default=5000)
    a = ap.parse_args()
    if os.environ.get("GPUMEM_MODE") != "auto":
        sys.exit("stream_cost: run me under gpurec's default mode")
    lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    dev = torch.device("cuda:0")
    torch.empty(1, device=dev)
    if lib.gpumem_bench_stream(0) < 0:
        sys.exit("stream_cost: PyTorch's requests are not streamed here")
    sw = Switch(lib)
    res = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    now, mono = ctypes.c_double(), ctypes.c_double()
    lib.gpumem_bench_clock(1000000, ctypes.byref(now), ctypes.byref(mono))
    res["clock_ns_recorder"], res["clock_ns_mono"] = now.value, mono.value

    live = [None] * 50

    def tight():
        t0 = time.perf_counter()
        for i in range(a.block_iters):
            live[i % 50] = torch.empty(1024, device=dev)
        return (time.perf_counter() - t0) * 1e9 / a.block_iters

    res["tight_ns"] = measure(sw, a.blocks, 2, tight)
    for i in range(50):
        live[i] = None

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(256) for _ in range(48)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(32, 256, device=dev)

    def step():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    n0 = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
    step()
    res["allocs_per_step"] = torch.cuda.memory_stats().get("allocation.all.allocated", 0) - n0
    st = measure(sw, a.cycles, 4, step)
    for k in list(st):
        if k.startswith("added_"):
            st["pct_" + k[6:]] = 100 * st[k] / st["idle"]
    res["step_ms"] = st
    print("RESULT " + json.dumps(res, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
