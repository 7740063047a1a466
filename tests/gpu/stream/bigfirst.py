"""Issue 24's first job: the largest allocation first (8 GiB, freed), then N small allocations
(50 live): a history ring of 10^6 entries keeps only the tail. Prints the job's own figures."""
import json, sys, time
import torch
n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_100_000
x = torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
del x
sizes = [512, 4096, 65536, 1 << 20, 3 << 20, 700, 12345, 2 << 20]
live = []
t0 = time.time()
for i in range(n):
    live.append(torch.empty(sizes[i % len(sizes)] + (i % 7) * 512, dtype=torch.uint8, device="cuda"))
    if len(live) > 50:
        live.pop(0)
torch.cuda.synchronize()
st = torch.cuda.memory_stats()
print("RESULT " + json.dumps({"max_memory_reserved": torch.cuda.max_memory_reserved(),
                              "allocs": st["allocation.all.allocated"], "s": time.time() - t0}))
