"""inject_sites.py LIB FAKEDIR: stands in for a PyTorch program under gpurec's default mode (no
GPU, no torch): loads the injection library (self-test mode) as the driver would, asks it to hook
PyTorch's per-request report before and after a stand-in libc10_cuda.so is loaded, then makes
that library report requests as PyTorch's caching allocator does, from a line of this file.
Prints what the hook calls returned, what reached the stand-in libc10.so, and the line."""
import ctypes
import os
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.InitializeInjection()
print("before %d" % lib.gpumem_torch_sites())  # libc10_cuda.so not loaded yet
fake = sys.argv[2]
c10 = ctypes.CDLL(os.path.join(fake, "libc10.so"), mode=ctypes.RTLD_GLOBAL)
cuda = ctypes.CDLL(os.path.join(fake, "libc10_cuda.so"))
print("hook %d" % lib.gpumem_torch_sites())
print("again %d" % lib.gpumem_torch_sites())
report = cuda.fake_c10_cuda_report
report.argtypes = [ctypes.c_uint64, ctypes.c_int64, ctypes.c_int, ctypes.c_int]


def forward():
    line = sys._getframe().f_lineno + 1
    report(0x7F0000001000, 4096, 1, 3)  # a CUDA tensor on device 3
    report(0x7F0000001000, -4096, 1, 3)  # its free
    report(0x5000, 512, 0, 0)  # a CPU tensor (the profiler's CPU allocator reports too)
    return line


line = forward()
last = (ctypes.c_uint64 * 5).in_dll(c10, "fake_c10_last")
print("reports %d last %s" % (ctypes.c_int.in_dll(c10, "fake_c10_reports").value, ",".join("%d" % v for v in last)))
print("off %d" % lib.gpumem_torch_sites_off())
report(0x7F0000002000, 8192, 1, 3)  # unhooked: no note
print("on %d" % lib.gpumem_torch_sites())
report(0x7F0000003000, 8192, 1, 3)  # hooked again: a note
print("SITE %s:%d:forward" % (__file__, line))
