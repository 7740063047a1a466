"""sites_job.py: a small PyTorch job whose allocations come from lines this file names, for
tests/gpu/sites_gpu.sh (issue 15: callsites by default). Lines marked "# SITE:<name>" are where
the recorder must say the memory was allocated:
  big:   one 256 MiB buffer, live to the end (the peak's largest holder),
  loop:  40 x 1 MiB scratch tensors kept in a list, made in a loop (40 allocations, one line),
  model: the model's forward, whose allocations happen inside torch.nn (library frames: the
         innermost frame of this file is the call line).
Prints the allocator setting it ran under and one RESULT line: max_memory_reserved/allocated
and how many allocations each marked line made (counted by the native allocator's stats)."""
import json
import os

import torch
import torch.nn as nn


def make_big(dev):
    return torch.empty(256 << 20, dtype=torch.uint8, device=dev)  # SITE:big


def make_scratch(dev):
    keep = []
    for i in range(40):
        keep.append(torch.ones(1 << 18, dtype=torch.float32, device=dev))  # SITE:loop
    return keep


def train(model, opt, x, steps):
    for _ in range(steps):
        y = model(x)  # SITE:model
        loss = y.square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def allocs():
    return torch.cuda.memory_stats().get("allocation.all.allocated", 0)


def main():
    print("PYTORCH_CUDA_ALLOC_CONF=%s" % os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "<unset>"), flush=True)
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(512, 512), nn.GELU()) for _ in range(8)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(64, 512, device=dev)
    n = {}
    a0 = allocs()
    big = make_big(dev)
    n["big"] = allocs() - a0
    a0 = allocs()
    scratch = make_scratch(dev)
    n["loop"] = allocs() - a0
    train(model, opt, x, 20)
    torch.cuda.synchronize()
    res = {"max_memory_reserved": torch.cuda.max_memory_reserved(),
           "max_memory_allocated": torch.cuda.max_memory_allocated(),
           "allocs": n, "total_allocs": allocs(), "live": big.numel() + 4 * sum(t.numel() for t in scratch),
           "torch": torch.__version__}
    print("RESULT " + json.dumps(res, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
