"""inject_pause.py LIB FAKECUPTI: stands in for a benchmark under gpurec's default capture (no GPU):
loads the stand-in libcupti.so, then the injection library as the driver would (GPUMEM_CUPTI
points it at the stand-in), and pauses and resumes the capture (gpumem_bench_cupti) around
driver allocations the stand-in makes, and empties them (mode 2). Prints what each call returned and which allocations
reached the recorder; the trace must hold exactly those, and count the pause."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
cupti = ctypes.CDLL(sys.argv[2])
cupti.fake_cupti_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
DRIVER, RESOURCE = 1, 3  # CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RESOURCE
print("before %d" % lib.gpumem_bench_cupti(0))  # not initialised: nothing to pause
lib.InitializeInjection()
print("enabled %d %d" % (cupti.fake_cupti_enabled(DRIVER), cupti.fake_cupti_enabled(RESOURCE)))
print("alloc1 %d" % cupti.fake_cupti_alloc(0x7F0000001000, 4096))
n = lib.gpumem_bench_cupti(0)
print("pause %d again %d" % (n, lib.gpumem_bench_cupti(0)))
print("paused enabled %d %d" % (cupti.fake_cupti_enabled(DRIVER), cupti.fake_cupti_enabled(RESOURCE)))
print("alloc2 %d" % cupti.fake_cupti_alloc(0x7F0000002000, 8192))  # not seen
print("resume %d again %d" % (lib.gpumem_bench_cupti(1), lib.gpumem_bench_cupti(1)))
print("resumed enabled %d %d" % (cupti.fake_cupti_enabled(DRIVER), cupti.fake_cupti_enabled(RESOURCE)))
print("alloc3 %d" % cupti.fake_cupti_alloc(0x7F0000003000, 12288))
print("empty %d again %d bad %d" % (lib.gpumem_bench_cupti(2), lib.gpumem_bench_cupti(2), lib.gpumem_bench_cupti(3)))
print("empty enabled %d %d" % (cupti.fake_cupti_enabled(DRIVER), cupti.fake_cupti_enabled(RESOURCE)))
print("alloc4 %d" % cupti.fake_cupti_alloc(0x7F0000004000, 16384))  # dispatched, not recorded
print("capture %d" % lib.gpumem_bench_cupti(1))
print("alloc5 %d" % cupti.fake_cupti_alloc(0x7F0000005000, 20480))
for i in range(int(sys.argv[3]) if len(sys.argv) > 3 else 0):  # more pauses: each one counted
    lib.gpumem_bench_cupti(0)
    lib.gpumem_bench_cupti(1)
