"""placement_probe.py: where the CUDA driver puts cuMemAlloc allocations (issue 11, address ties).

The simulator's driver model (replay/engine/va_model.c) was read off PyTorch snapshots, where the
process's other users of the address space (the context, libraries, CPU-side mmaps) hide part of
the picture. This script asks the driver directly, through ctypes on libcuda.so.1 (no torch, no
CuPy), in a fresh process per experiment, and prints one JSON object per experiment:
{"exp": NAME, "ops": [[op, size_MiB, addr_hex], ...], "maps": [...]} where maps are the
process's /proc/self/maps lines inside the driver's ranges at the end (CPU-side neighbours).

Questions each experiment settles (va_model.c rule):
  first_area  R0: is there a ~400 MiB area below the first allocation that later allocations fill
              bottom up, and when does it open (after how many allocations / after a kernel
              launch with local memory)?
  regions     R2/R3: new region = next 32 MiB multiple, right below the lowest? (2, 20, 26, 44,
              76, 206, 474 MiB, and 1 GiB, 4 GiB)
  holes       R4: which hole first (lowest, highest, best fit) and where inside it?
  release     R5: is an empty region given back, and does a later region reuse its addresses?
  cpu_mmap    do CPU mmaps (64 MiB anonymous) between cuMemAllocs move regions down?
  small       do sub-2 MiB allocations share 2 MiB pages, and where do those pages go?
Run: bash tests/gpu/placement_probe.sh > placement.jsonl
"""
import ctypes
import json
import mmap
import sys

MiB = 1 << 20


def driver():
    cu = ctypes.CDLL("libcuda.so.1")
    for name in ("cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent"):
        getattr(cu, name).restype = ctypes.c_int
    cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    assert cu.cuInit(0) == 0
    dev = ctypes.c_int()
    assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    return cu


class Probe:
    def __init__(self, name):
        self.name, self.cu, self.ops, self.live = name, driver(), [], {}

    def a(self, mib, tag=None):
        p = ctypes.c_uint64()
        r = self.cu.cuMemAlloc_v2(ctypes.byref(p), int(mib * MiB))
        self.ops.append(["alloc", mib, hex(p.value) if r == 0 else "err%d" % r])
        if r == 0 and tag is not None:
            self.live[tag] = p.value
        return p.value

    def f(self, tag):
        addr = self.live.pop(tag)
        self.ops.append(["free", None, hex(addr), self.cu.cuMemFree_v2(addr)])

    def done(self):
        maps = [l.strip() for l in open("/proc/self/maps") if l.startswith("7f")]
        print(json.dumps({"exp": self.name, "ops": self.ops, "maps": maps}))


def first_area(p):
    for k in range(24):  # 2, 20, 20, 26, ... as PyTorch's first segments come
        p.a([2, 20, 20, 26, 38, 26, 14, 14][k % 8])


def regions(p):
    for s in (2, 20, 26, 44, 76, 206, 474, 1024, 4096, 20, 20, 2):
        p.a(s)


def holes(p):
    for k, s in enumerate((44, 50, 76, 50, 20, 20)):
        p.a(s, k)
    for s in (2, 14, 20, 12, 2):
        p.a(s)
    p.f(1)
    p.f(3)
    for s in (20, 20, 50, 14):
        p.a(s)


def release(p):
    for k in range(6):
        p.a(20, k)
    p.f(4)
    p.a(50)
    p.f(1)
    p.f(2)
    p.a(50)
    p.a(20)


def cpu_mmap(p):
    keep = []
    for k in range(6):
        p.a(20)
        keep.append(mmap.mmap(-1, 64 * MiB))
        p.ops.append(["cpu_mmap", 64, None])
    del keep[1:3]
    p.ops.append(["cpu_munmap", 128, None])
    p.a(96)
    p.a(20)


def small(p):
    for s in (0.001, 1, 0.5, 0.1875, 1.5, 3, 0.5, 20, 0.25):
        p.a(s)


EXPS = {f.__name__: f for f in (first_area, regions, holes, release, cpu_mmap, small)}

if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name not in EXPS:
        sys.exit("usage: placement_probe.py {%s}" % "|".join(EXPS))
    pr = Probe(name)
    EXPS[name](pr)
    pr.done()
