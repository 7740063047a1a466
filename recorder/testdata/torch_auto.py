"""An unmodified "training script" for gpurec's default-mode test: imports torch, touches CUDA,
says what it saw (the allocator setting in force, how history was enabled), then optionally
sleeps (FAKE_SLEEP seconds: time for a signal) and exits with FAKE_EXIT, or kills itself with
FAKE_KILL (a signal number) as an out-of-memory killer would; FAKE_FRACTION sets a memory
fraction in code, FAKE_OOM raises an uncaught OutOfMemoryError with that message. With FAKE_TORCH_C10 it first makes
the stand-in libc10_cuda.so report each allocation of the snapshot as PyTorch's allocator would
(from step(): the callsite gpurec must give them) and says that line."""
import os
import sys
import time

import torch

torch.cuda._lazy_init()  # what the first CUDA tensor does
print("PYTORCH_CUDA_ALLOC_CONF=%s" % os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "<unset>"))
print("history=%r context=%r" % (torch.cuda.memory.history, torch.cuda.memory.contexts))
if os.environ.get("FAKE_TORCH_C10"):
    import ctypes
    import pickle

    c10_cuda = ctypes.CDLL(os.path.join(os.environ["FAKE_TORCH_C10"], "libc10_cuda.so"))
    c10_cuda.fake_c10_cuda_report.argtypes = [ctypes.c_uint64, ctypes.c_int64, ctypes.c_int, ctypes.c_int]

    def step(addr, size, dev):
        c10_cuda.fake_c10_cuda_report(addr, size, 1, dev)

    with open(os.environ["FAKE_TORCH_SNAPSHOT"], "rb") as f:
        snap = pickle.load(f)
    for dev, entries in enumerate(snap["device_traces"]):
        for e in entries:
            if e["action"] == "alloc":
                step(e["addr"], e["size"], dev)
    print("SITE %s:%d:step" % (__file__, step.__code__.co_firstlineno + 1))
if os.environ.get("FAKE_FRACTION"):  # a limit set in code, as torch.cuda's own function sets it
    torch.cuda.set_per_process_memory_fraction(float(os.environ["FAKE_FRACTION"]), 0)
    print("fraction=%r" % torch.cuda.memory.fraction)
sys.stdout.flush()
if os.environ.get("FAKE_OOM"):  # the job dies of an OOM nobody catches
    raise torch.OutOfMemoryError(os.environ["FAKE_OOM"])
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
if os.environ.get("FAKE_KILL"):
    os.kill(os.getpid(), int(os.environ["FAKE_KILL"]))
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
