"""multigpu_jobs.py: the two-GPU jobs of issue 17, each printing PyTorch's own peaks per device.

  torchrun --nproc_per_node=2 tests/gpu/multigpu_jobs.py ddp     DDP over NCCL, unequal ranks:
      rank 1 takes three times rank 0's batch (the job that rank 1 limits)
  torchrun --nproc_per_node=2 tests/gpu/multigpu_jobs.py nccl    collectives only: all_reduce,
      all_gather, reduce_scatter and broadcast of 256 MiB buffers (NCCL's own buffers and
      channels are most of what else is on the device)
  python3 tests/gpu/multigpu_jobs.py twodev                      one process, half of the model
      on cuda:0 and half on cuda:1 (a pipeline by hand), activations copied across
  torchrun --nproc_per_node=2 tests/gpu/multigpu_jobs.py ddp1    the ddp job with both ranks on
      cuda:0 over gloo (NCCL refuses two ranks on one device): the ranks' recordings where only
      one GPU is lent

Each process prints one `GPUMEM_RESULT {json}` line per device it used, with the device's
max_memory_reserved / max_memory_allocated (PyTorch's figures, the replay's ground truth), the
device memory in use by everything (driver's total - free: the CUDA context, NCCL's buffers and
the framework's segments together) right after CUDA started and at the end, and the
allocator setting it ran under. Deterministic: seeded, fixed shapes, no data loader."""
import json
import os
import sys

import torch
import torch.nn as nn

WIDTH, LAYERS, STEPS = 4096, 6, 6
ROWS = 4096  # rows of rank 0's batch (and of the two-device job)


def block(n):
    layers = []
    for _ in range(n):
        layers += [nn.Linear(WIDTH, WIDTH), nn.GELU()]
    return nn.Sequential(*layers)


def used(dev):
    free, total = torch.cuda.mem_get_info(dev)
    return total - free, total


def result(job, dev, rank, world, used_start):
    used_end, total = used(dev)
    return {"job": job, "rank": rank, "world_size": world, "device": dev, "pid": os.getpid(),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
            "max_memory_allocated": torch.cuda.max_memory_allocated(dev),
            "device_used_at_start": used_start, "device_used_at_end": used_end,
            "device_total": total, "torch": torch.__version__}


def ddp(one_device=False):
    import torch.distributed as dist
    rank = int(os.environ["LOCAL_RANK"])
    dev = 0 if one_device else rank
    torch.cuda.set_device(dev)
    torch.cuda.init()
    used_start, _ = used(dev)
    if one_device:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(block(LAYERS).cuda(), device_ids=[dev])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rows = ROWS * (3 if rank == 1 else 1)
    g = torch.Generator(device="cuda").manual_seed(rank)
    for _ in range(STEPS):
        x = torch.randn(rows, WIDTH, device="cuda", generator=g)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    r = result("ddp1" if one_device else "ddp", dev, dist.get_rank(), dist.get_world_size(), used_start)
    print("GPUMEM_RESULT " + json.dumps(r), flush=True)
    dist.destroy_process_group()


def nccl():
    import torch.distributed as dist
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    torch.cuda.init()
    used_start, _ = used(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    world = dist.get_world_size()
    n = 64 << 20  # 256 MiB of fp32
    for step in range(3):
        x = torch.full((n,), float(rank + step), device="cuda")
        dist.all_reduce(x)
        out = torch.empty(n * world, device="cuda")
        dist.all_gather_into_tensor(out, x)
        part = torch.empty(n // world, device="cuda")
        dist.reduce_scatter_tensor(part, x)
        dist.broadcast(x, src=0)
        del out, part
    torch.cuda.synchronize()
    r = result("nccl", rank, dist.get_rank(), world, used_start)
    print("GPUMEM_RESULT " + json.dumps(r), flush=True)
    dist.destroy_process_group()


def twodev():
    torch.cuda.init()
    starts = [used(d)[0] for d in (0, 1)]
    torch.manual_seed(0)
    first, second = block(LAYERS // 2).to("cuda:0"), block(LAYERS // 2).to("cuda:1")
    opt = torch.optim.AdamW(list(first.parameters()) + list(second.parameters()), lr=1e-4)
    g = torch.Generator(device="cuda:0").manual_seed(0)
    for _ in range(STEPS):
        x = torch.randn(ROWS * 2, WIDTH, device="cuda:0", generator=g)
        y = second(first(x).to("cuda:1"))
        y.square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    for d in (0, 1):
        torch.cuda.synchronize(d)
    for d in (0, 1):
        print("GPUMEM_RESULT " + json.dumps(result("twodev", d, 0, 1, starts[d])), flush=True)


if __name__ == "__main__":
    {"ddp": ddp, "ddp1": lambda: ddp(True), "nccl": nccl, "twodev": twodev}[sys.argv[1]]()
