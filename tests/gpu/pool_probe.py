"""pool_probe.py: how the driver's stream-ordered pool (cudaMallocAsync) grows, measured.

Issue 11 ("the async pool is a range"): replay/engine/sim_pool.c models the pool with 32 MiB chunks;
one real run (train_ckpt, 928 MiB) was above the model's high end (864). This probe asks the
driver directly, through CuPy's runtime bindings, with the release threshold at UINT64_MAX as
PyTorch sets it, and prints one JSON line per observation (reserved = the pool's
ReservedMemCurrent after the step, synchronised):

  single   one request of each size into an empty pool: the chunk a request of that size gets
  series   n requests of one size, one after another: when the pool grows, and by how much
  hole     a freed block between two live ones, then a larger request: is the hole reused, does
           the pool grow by the request or by a chunk
  stream   a block freed on stream 1, then the same size on stream 2 without a sync (and with
           one): does another stream reuse it

Run on the GPU machine: python3 tests/gpu/pool_probe.py > pool_probe.jsonl
"""
import json
import sys

import cupy
from cupy.cuda import runtime as rt

MiB = 1 << 20
RESERVED_CURRENT = 5  # cudaMemPoolAttrReservedMemCurrent
USED_CURRENT = 7      # cudaMemPoolAttrUsedMemCurrent
RELEASE_THRESHOLD = 4  # cudaMemPoolAttrReleaseThreshold


def out(**kw):
    print(json.dumps(kw), flush=True)


def main():
    dev = 0
    pool = rt.deviceGetDefaultMemPool(dev)
    rt.memPoolSetAttribute(pool, RELEASE_THRESHOLD, (1 << 64) - 1)
    s1 = cupy.cuda.Stream(non_blocking=True)
    s2 = cupy.cuda.Stream(non_blocking=True)

    def reserved():
        rt.deviceSynchronize()
        return int(rt.memPoolGetAttribute(pool, RESERVED_CURRENT))

    def used():
        rt.deviceSynchronize()
        return int(rt.memPoolGetAttribute(pool, USED_CURRENT))

    def empty():
        rt.deviceSynchronize()
        rt.memPoolTrimTo(pool, 0)
        return reserved()

    out(test="start", reserved=empty(), device=rt.getDeviceProperties(dev)["name"].decode())

    sizes = [512, 4096, MiB, 2 * MiB, 3 * MiB, 8 * MiB, 16 * MiB, 31 * MiB, 32 * MiB,
             32 * MiB + 512, 33 * MiB, 40 * MiB, 48 * MiB, 63 * MiB, 64 * MiB, 65 * MiB,
             100 * MiB, 128 * MiB, 129 * MiB, 200 * MiB, 256 * MiB, 500 * MiB, 1024 * MiB]
    for s in sizes:
        empty()
        p = rt.mallocAsync(s, s1.ptr)
        r = reserved()
        rt.freeAsync(p, s1.ptr)
        out(test="single", size=s, reserved=r)

    for s in [MiB, 5 * MiB, 20 * MiB, 24 * MiB, 48 * MiB, 100 * MiB]:
        empty()
        ps, steps = [], []
        for i in range(12):
            ps.append(rt.mallocAsync(s, s1.ptr))
            steps.append(reserved())
        for p in ps:
            rt.freeAsync(p, s1.ptr)
        out(test="series", size=s, reserved=steps)

    # A hole between two live blocks, then requests of several sizes.
    for a, want in [(20 * MiB, 24 * MiB), (20 * MiB, 20 * MiB), (8 * MiB, 12 * MiB),
                    (40 * MiB, 60 * MiB), (10 * MiB, 18 * MiB)]:
        empty()
        x = rt.mallocAsync(a, s1.ptr)
        y = rt.mallocAsync(a, s1.ptr)
        z = rt.mallocAsync(a, s1.ptr)
        r0 = reserved()
        rt.freeAsync(y, s1.ptr)
        r1 = reserved()
        w = rt.mallocAsync(want, s1.ptr)
        r2 = reserved()
        out(test="hole", block=a, request=want, reserved_three=r0, after_free=r1, after_request=r2,
            reused_hole=(w == y), used=used())
        for p in (x, z, w):
            rt.freeAsync(p, s1.ptr)

    # Another stream: freed on s1, the same size asked on s2.
    for sync in (False, True):
        empty()
        a = rt.mallocAsync(16 * MiB, s1.ptr)
        r0 = reserved()
        # keep s1 busy so the free is not complete when s2 asks (without sync)
        big = cupy.zeros(64 * MiB, dtype=cupy.uint8)
        with s1:
            for _ in range(20):
                big += 1
        rt.freeAsync(a, s1.ptr)
        if sync:
            s1.synchronize()
        b = rt.mallocAsync(16 * MiB, s2.ptr)
        r1 = reserved()
        out(test="stream", synced=sync, reserved_before=r0, reserved_after=r1, reused=(a == b))
        rt.freeAsync(b, s2.ptr)
        del big

    # Which hole a request takes (best fit or first fit), whether a hole is split, whether
    # two adjacent freed blocks coalesce: live separators of 2 MiB between blocks.
    def layout(blocks):
        empty()
        ps = []
        for b in blocks:
            ps.append(rt.mallocAsync(b, s1.ptr))
            ps.append(rt.mallocAsync(2 * MiB, s1.ptr))  # separator
        return ps

    for holes, want in [([30 * MiB, 10 * MiB, 20 * MiB], 8 * MiB),
                        ([30 * MiB, 10 * MiB, 20 * MiB], 18 * MiB),
                        ([40 * MiB], 24 * MiB)]:
        ps = layout(holes)
        r0 = reserved()
        for i in range(len(holes)):
            rt.freeAsync(ps[2 * i], s1.ptr)
        w = rt.mallocAsync(want, s1.ptr)
        r1 = reserved()
        took = [i for i in range(len(holes)) if ps[2 * i] <= w < ps[2 * i] + holes[i]]
        out(test="fit", holes=holes, request=want, reserved_before=r0, reserved_after=r1,
            took_hole=took[0] if took else None, offset=(w - ps[2 * took[0]]) if took else None)
        for i in range(len(holes)):
            rt.freeAsync(ps[2 * i + 1], s1.ptr)
        rt.freeAsync(w, s1.ptr)

    empty()
    a = rt.mallocAsync(20 * MiB, s1.ptr)
    b = rt.mallocAsync(20 * MiB, s1.ptr)
    c = rt.mallocAsync(2 * MiB, s1.ptr)
    r0 = reserved()
    rt.freeAsync(a, s1.ptr)
    rt.freeAsync(b, s1.ptr)
    w = rt.mallocAsync(36 * MiB, s1.ptr)
    r1 = reserved()
    out(test="coalesce", reserved_before=r0, reserved_after=r1, reused=(w == a))
    for p in (c, w):
        rt.freeAsync(p, s1.ptr)

    # The same stream while the GPU is behind: freed, asked again at once.
    empty()
    big = cupy.zeros(64 * MiB, dtype=cupy.uint8)
    a = rt.mallocAsync(16 * MiB, s1.ptr)
    r0 = reserved()
    with s1:
        for _ in range(50):
            big += 1
    rt.freeAsync(a, s1.ptr)
    b = rt.mallocAsync(16 * MiB, s1.ptr)
    out(test="same_stream_busy", reserved_before=r0, reserved_after=reserved(), reused=(a == b))
    rt.freeAsync(b, s1.ptr)
    del big

    out(test="end", reserved=empty())


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one line, so the runner's log says what failed
        print(json.dumps({"test": "error", "error": repr(e)}), flush=True)
        sys.exit(1)
