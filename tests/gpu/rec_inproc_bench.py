"""rec_inproc_bench.py: what each part of gpurec's default recording costs a host-bound PyTorch
loop, measured step by step in ONE process (issue 15's "+1 % at most"), because the same variant
moves 10-20 % between processes on the device machine and no between-process figure can settle
one percent.

Run under gpurec's default (gpurec -q -o T -- python3 rec_inproc_bench.py): gpurec's sitecustomize
has turned PyTorch's memory history on (context=None, stacks='python', max_entries=
GPUMEM_TORCH_MAX_ENTRIES) and hooked PyTorch's per-request report; the injection library's CUPTI
callbacks capture the driver's memory calls. The host-bound loop of bench/recorder/rec_overhead.py
(48 x Linear+LayerNorm+GELU, AdamW foreach=False: ~1000 allocations per ~17 ms step) then runs in
cycles of five steps, one per state, the order rotated from cycle to cycle:
  none:          history off, CUPTI's memory callbacks disabled (gpumem_bench_cupti(0)), hook off
                 (gpumem_torch_sites_off); CUPTI stays loaded and subscribed (resource callbacks);
  hist:          PyTorch's history on, as the default mode turns it on;
  hist_dispatch: and CUPTI's memory callbacks enabled but returning at once
                 (gpumem_bench_cupti(2)): CUPTI's own dispatch;
  hist_cupti:    and the callbacks capturing (gpumem_bench_cupti(1));
  default:       and the callsite hook on (gpumem_torch_sites): the default recording.
Each state's figure is the median over cycles of (its step - that cycle's none step): paired
differences in ms, % of none's median step and ns per allocation, with a 95 % interval; so are
the increments dispatch (hist_dispatch - hist), capture (hist_cupti - hist_dispatch), cupti
(hist_cupti - hist) and hook (default - hist_cupti). The same for a tight loop of cached
allocations (torch.empty of 4 KiB + free, blocks of --block-iters, one block per state per
cycle). Then --steady steps in the default without any switching (PyTorch's history then grows
as in a real run instead of being cleared at each none step: their median against the rotated
default's says whether the clearing flattered it).
Prints one RESULT line (JSON).

The trace of such a run lacks what happened while paused (each pause is counted as a dropped
record in it, see recorder/rec_pause.c): it is for nothing but this benchmark; the GPU script
checks it says so and discards it."""
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

STATES = ["none", "hist", "hist_dispatch", "hist_cupti", "default"]
# history, gpumem_bench_cupti mode (0 disabled, 2 dispatched but empty, 1 capturing), hook
SETTING = {"none": (False, 0, False), "hist": (True, 0, False), "hist_dispatch": (True, 2, False),
           "hist_cupti": (True, 1, False), "default": (True, 1, True)}
# paired differences reported: name -> (reference state, state)
PAIRS = {"hist": ("none", "hist"), "hist_dispatch": ("none", "hist_dispatch"),
         "hist_cupti": ("none", "hist_cupti"), "default": ("none", "default"),
         "dispatch": ("hist", "hist_dispatch"), "capture": ("hist_dispatch", "hist_cupti"),
         "cupti": ("hist", "hist_cupti"), "hook": ("hist_cupti", "default")}


def med_ci(xs):
    """Median and its ~95 % confidence interval from order statistics (no normality assumed)."""
    s = sorted(xs)
    n = len(s)
    k = max(0, int(math.floor(n / 2 - 0.98 * math.sqrt(n))))
    return statistics.median(s), s[k], s[min(n - 1, n - 1 - k)]


class Switch:
    """The three parts of the recording, switched only when they change (outside the timing)."""

    def __init__(self, lib, entries):
        self.lib, self.entries = lib, entries
        self.cur = SETTING["default"]  # what gpurec's default leaves on
        self.pauses = 0  # CUPTI paused this often: the trace's dropped count says as much

    def set(self, state):
        want = SETTING[state]
        hist, cupti, hook = want
        if hist != self.cur[0]:
            if hist:
                torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                         max_entries=self.entries)
            else:
                torch.cuda.memory._record_memory_history(enabled=None)
        if cupti != self.cur[1] and self.lib.gpumem_bench_cupti(cupti) != 1:
            sys.exit("rec_inproc_bench: gpumem_bench_cupti(%d) switched nothing" % cupti)
        self.pauses += self.cur[1] == 1 and cupti != 1
        if hook != self.cur[2]:
            r = self.lib.gpumem_torch_sites() if hook else self.lib.gpumem_torch_sites_off()
            if r <= 0:
                sys.exit("rec_inproc_bench: the callsite hook did not switch %s (%d)" % ("on" if hook else "off", r))
        self.cur = want


def cycles(n, warmup):
    """Cycle i's order: the states rotated by i (each takes each place in turn)."""
    for i in range(warmup + n):
        r = i % len(STATES)
        yield i >= warmup, STATES[r:] + STATES[:r]


def paired(per_cycle):
    """per-cycle dicts state -> value: the medians (with CIs) of the PAIRS' differences."""
    out = {}
    for name, (ref, s) in PAIRS.items():
        out[name] = med_ci([c[s] - c[ref] for c in per_cycle])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=120)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--blocks", type=int, default=40, help="tight loop: cycles of one block per state")
    ap.add_argument("--block-iters", type=int, default=2000)
    ap.add_argument("--steady", type=int, default=80)
    a = ap.parse_args()
    if os.environ.get("GPUMEM_MODE") != "auto" or os.environ.get("GPUMEM_TORCH_STACKS") != "none":
        sys.exit("rec_inproc_bench: run me under gpurec's default mode (GPUMEM_MODE=%s GPUMEM_TORCH_STACKS=%s)"
                 % (os.environ.get("GPUMEM_MODE"), os.environ.get("GPUMEM_TORCH_STACKS")))
    lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(256) for _ in range(48)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(32, 256, device=dev)
    entries = int(os.environ.get("GPUMEM_TORCH_MAX_ENTRIES", "1000000"))
    res = {"hooked_by_sitecustomize": lib.gpumem_torch_sites() == 0,  # 0: already hooked
           "cupti_on_at_start": lib.gpumem_bench_cupti(1) == 0,  # 0: already capturing
           "history_on_at_start": getattr(torch._C, "_cuda_isHistoryEnabled", lambda: None)()}
    sw = Switch(lib, entries)

    def step():
        torch.cuda.synchronize()
        n0 = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
        t0 = time.perf_counter()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        return (t1 - t0) * 1e3, torch.cuda.memory_stats().get("allocation.all.allocated", 0) - n0

    per_cycle, allocs, times = [], [], {s: [] for s in STATES}
    for timed, order in cycles(a.cycles, a.warmup):
        c = {}
        for s in order:
            sw.set(s)
            c[s], n = step()
            if timed:
                times[s].append(c[s])
                allocs.append(n)
        if timed:
            per_cycle.append(c)
    sw.set("default")
    steady = [step()[0] for _ in range(a.steady)]
    apst = statistics.median(allocs)
    ref = statistics.median(times["none"])
    res.update({"allocs_per_step": apst, "cycles": a.cycles, "step_ms_steady_default": statistics.median(steady)})
    for s in STATES:
        res["step_ms_median_" + s] = statistics.median(times[s])
    for name, (m, lo, hi) in paired(per_cycle).items():
        res["paired_ms_" + name] = m
        res["paired_ms_ci_" + name] = [lo, hi]
        res["paired_pct_" + name] = 100 * m / ref
        res["ns_per_alloc_" + name] = m * 1e6 / apst
    # the tight loop: cached allocations only (no driver call, no kernel), ns per allocation
    blk = []
    for timed, order in cycles(a.blocks, 2):
        c = {}
        for s in order:
            sw.set(s)
            t0 = time.perf_counter()
            for _ in range(a.block_iters):
                t = torch.empty(1024, device=dev)
                del t
            c[s] = (time.perf_counter() - t0) * 1e9 / a.block_iters
        if timed:
            blk.append(c)
    sw.set("default")
    for s in STATES:
        res["tight_ns_" + s] = statistics.median([c[s] for c in blk])
    for name, (m, lo, hi) in paired(blk).items():
        res["tight_ns_added_" + name] = m
        res["tight_ns_ci_" + name] = [lo, hi]
    res["cupti_pauses"] = sw.pauses
    res["torch"] = torch.__version__
    res["gpu"] = torch.cuda.get_device_name(0)
    print("RESULT " + json.dumps(res, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
