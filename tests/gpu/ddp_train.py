"""Two-rank DDP training loop for gpurec's torchrun check (one CUDA process per GPU).
Run: torchrun --nproc_per_node=2 tests/gpu/ddp_train.py  (NCCL, NVLink multicast off).
Each rank prints `GPUMEM_RESULT {json}` with its own max_memory_reserved / max_memory_allocated
(tests/gpu/defmode_gpu.sh compares them with the replay of that rank's trace)."""
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda(), device_ids=[rank])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(5):
        x = torch.randn(64, 1024, device="cuda")
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print("rank", dist.get_rank(), "device", torch.cuda.current_device(), "ok", flush=True)
    print("GPUMEM_RESULT " + json.dumps({
        "rank": dist.get_rank(), "pid": os.getpid(), "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
