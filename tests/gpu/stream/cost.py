"""Allocation-bound loop: torch.empty with 50 live for SECONDS; prints allocations made."""
import json, sys, time
import torch
S = float(sys.argv[1]) if len(sys.argv) > 1 else 4
torch.empty(1, device="cuda"); torch.cuda.synchronize()
live, n = [], 0
t0 = time.perf_counter()
while time.perf_counter() - t0 < S:
    for _ in range(1000):
        live.append(torch.empty(4096, device="cuda")); n += 1
        if len(live) > 50: live.pop(0)
torch.cuda.synchronize()
print("RESULT " + json.dumps({"allocs": n, "s": time.perf_counter() - t0}))
