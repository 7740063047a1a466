"""What a periodic dump of PyTorch's memory history would cost (issue 15: bound what SIGKILL
loses). Runs bench/recorder/rec_overhead.py's host-bound loop with the history on without stacks
(context=None, as gpurec's default records it), and after 10, 100 and 300 steps times
torch.cuda.memory._snapshot() (the in-memory snapshot a periodic dump would take; 3 calls, the
median) and one _dump_snapshot() (pickle to disk). Prints `RESULT {json}` per point:
entries, seconds per call, ns per entry, and the loop's step time for scale."""
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../bench/recorder"))
from rec_overhead import Block  # noqa: E402


def main():
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    torch.cuda.memory._record_memory_history(enabled="all", context=None, max_entries=1_000_000)
    model = nn.Sequential(*[Block(256) for _ in range(48)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(32, 256, device=dev)
    done, times = 0, []
    for target in (10, 100, 300):
        while done < target:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            done += 1
        calls = []
        for _ in range(3):
            t0 = time.perf_counter()
            snap = torch.cuda.memory._snapshot()
            calls.append(time.perf_counter() - t0)
        entries = sum(len(t) for t in snap["device_traces"])
        with tempfile.NamedTemporaryFile(suffix=".pickle") as f:
            t0 = time.perf_counter()
            torch.cuda.memory._dump_snapshot(f.name)
            dump_s = time.perf_counter() - t0
            size = os.path.getsize(f.name)
        s = statistics.median(calls)
        print("RESULT " + json.dumps({
            "steps": done, "entries": entries, "snapshot_s": s, "snapshot_ns_per_entry": s * 1e9 / max(entries, 1),
            "dump_s": dump_s, "dump_bytes": size, "step_ms_median": statistics.median(times) * 1e3,
            "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
