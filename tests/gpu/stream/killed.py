"""Allocates in a loop (50 live) and logs (monotonic time, allocations so far) every 20 ms to
LOG, flushed, until killed: the trace must hold every request up to 1 s before the kill."""
import os, sys, time
import torch
log = open(sys.argv[1], "w", buffering=1)
live, n, last = [], 0, 0.0
while True:
    live.append(torch.empty(4096 + (n % 13) * 512, dtype=torch.uint8, device="cuda")); n += 1
    if len(live) > 50: live.pop(0)
    t = time.monotonic()
    if t - last > 0.02:
        log.write("%.6f %d\n" % (t, torch.cuda.memory_stats()["allocation.all.allocated"])); last = t
