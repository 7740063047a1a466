"""inject_callsites.py [LIB]: stands in for a Python program whose CUDA driver loads the injection
library (no GPU): loads LIB with ctypes (the call runs without the GIL, as PyTorch's operators
do) and calls InitializeInjection, which in self-test mode (GPUMEM_SELFTEST) records synthetic
allocations on this thread: each gets this frame as its callsite. Prints the line it called from.
LIB: $CUDA_INJECTION64_PATH when set (under gpurec), else the argument."""
import ctypes
import os
import sys


def train_step(lib):
    line = sys._getframe().f_lineno + 1
    lib.InitializeInjection()
    return line


print("CALLED_FROM %s:%d:train_step" % (sys._getframe().f_code.co_filename, train_step(ctypes.CDLL(os.environ.get("CUDA_INJECTION64_PATH") or sys.argv[1]))))
