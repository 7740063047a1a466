"""Shared start/end for the gpumem workload scripts (traces/workloads/).

Every workload: seeds everything, optionally records PyTorch's allocator history from the very
first CUDA allocation (env GPUMEM_SNAPSHOT=path: _record_memory_history before anything touches
the GPU, _dump_snapshot at the end), and prints one JSON line with torch's own peaks
(max_memory_allocated / max_memory_reserved), which the cross-policy table compares against.
The allocator settings come from PYTORCH_CUDA_ALLOC_CONF, set by the caller.
"""
import json
import os
import random
import sys

import torch


def start(seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    path = os.environ.get("GPUMEM_SNAPSHOT")
    if path:
        # Before any CUDA allocation, so the history starts from an empty allocator.
        # GPUMEM_SNAPSHOT_MAX_ENTRIES: a small ring buffer keeps only the last entries, as a
        # history that started late would (tests the importer's initial state).
        n = int(os.environ.get("GPUMEM_SNAPSHOT_MAX_ENTRIES", "1000000"))
        torch.cuda.memory._record_memory_history(max_entries=n, stacks="python")
    frac = os.environ.get("GPUMEM_MEMORY_FRACTION")
    if frac:
        torch.cuda.set_per_process_memory_fraction(float(frac))
    return torch.device("cuda:0")


def finish(name):
    torch.cuda.synchronize()
    res = {
        "workload": name,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "num_alloc_retries": torch.cuda.memory_stats().get("num_alloc_retries", 0),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "total_memory": torch.cuda.get_device_properties(0).total_memory,
    }
    path = os.environ.get("GPUMEM_SNAPSHOT")
    if path:
        torch.cuda.memory._dump_snapshot(path)
        torch.cuda.memory._record_memory_history(enabled=None)
        res["snapshot"] = path
    print("GPUMEM_RESULT " + json.dumps(res, sort_keys=True))
    sys.stdout.flush()
