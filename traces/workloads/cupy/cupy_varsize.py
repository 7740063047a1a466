"""CuPy workload: arrays of varied sizes created and dropped in a loop (an FFT, elementwise
temporaries, a reduction), with a few kept alive. Prints one GPUMEM_RESULT line with the
allocator CuPy ran with and its default pool's figures (used/total bytes at the end, and the
peak of total_bytes sampled after each step)."""
import json
import sys

import cupy as cp


def main():
    # For the corpus script only: switch the allocator the way gpurec's hook does.
    import os
    how = os.environ.get("GPUMEM_TEST_CUPY_ALLOCATOR")
    if how == "none":
        cp.cuda.set_allocator(None)
    elif how == "async":
        cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
    rs = cp.random.RandomState(7)
    keep = []
    pool = cp.get_default_memory_pool()
    peak_total = 0
    for i in range(40):
        n = (1 << 18) * (1 + (i * 13) % 37)  # 1..37 MiB of float32
        a = rs.standard_normal(n, dtype=cp.float32)
        b = cp.fft.rfft(a)
        c = cp.abs(b) * 2.0 + 1.0
        s = float(c.sum())
        if i % 7 == 0:
            keep.append(c)
        del a, b, c
        peak_total = max(peak_total, pool.total_bytes())
    cp.cuda.Device().synchronize()
    alloc = cp.cuda.get_allocator()
    res = {"workload": "cupy_varsize", "cupy": cp.__version__,
           "allocator": getattr(alloc, "__qualname__", None) or repr(alloc),
           "pool_used_bytes": pool.used_bytes(), "pool_total_bytes": pool.total_bytes(),
           "pool_peak_total_bytes_sampled": peak_total, "checksum": s}
    print("GPUMEM_RESULT " + json.dumps(res, sort_keys=True))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
