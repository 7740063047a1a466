"""Shared start/end for the JAX workload scripts (traces/workloads/jax/).

Every workload seeds its RNG, runs, blocks until the device is idle, and prints one JSON line
(GPUMEM_RESULT) with JAX's own allocator figures (`jax.devices()[0].memory_stats()`: the BFC's
peak_pool_bytes, pool_bytes, peak_bytes_in_use, num_allocs, largest_free_block_bytes,
bytes_limit), the allocator environment in force, and whether a request failed (OOM): the
corpus table compares the replay against these. Under XLA_PYTHON_CLIENT_ALLOCATOR=platform or
cuda_async memory_stats() is None (no BFC); the line says so.
"""
import json
import os
import sys

ENV_KEYS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
            "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")


def finish(name, oom=None, extra=None):
    import jax
    dev = jax.devices()[0]
    try:
        stats = dev.memory_stats()
    except Exception as e:  # some allocators have no stats
        stats = {"error": str(e)}
    res = {
        "workload": name,
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
        "stats": stats,
        "oom": oom,
        "jax": jax.__version__,
        "device": dev.device_kind,
    }
    if extra:
        res.update(extra)
    print("GPUMEM_RESULT " + json.dumps(res, sort_keys=True))
    sys.stdout.flush()


def is_oom(e):
    s = str(e)
    return "RESOURCE_EXHAUSTED" in s or "Out of memory" in s or "out of memory" in s
