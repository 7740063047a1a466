"""Fake torch.cuda: lazy initialisation as torch does it (a module-level _lazy_init). With
FAKE_TORCH_INJECT=1 it also does what the CUDA driver does at cuInit (loads the injection library
named in CUDA_INJECTION64_PATH, whose GPUMEM_SELFTEST mode then records synthetic events into this
process's CUPTI trace); FAKE_TORCH_LIB names a copy of a shared library laid out as
.../torch/lib/libtorch_cuda.so, loaded first so the recorder sees PyTorch in the process;
FAKE_TORCH_C10 a directory holding stand-ins for libc10.so and libc10_cuda.so (whose per-request
report gpurec hooks for callsites), loaded as torch loads them."""
import ctypes
import os

from . import memory  # noqa: F401
from .memory import set_per_process_memory_fraction  # noqa: F401 (as torch.cuda exports it)


class OutOfMemoryError(RuntimeError):
    pass

_initialized = False


def is_initialized():
    return _initialized


def _lazy_init():
    global _initialized
    if not _initialized and os.environ.get("FAKE_TORCH_LIB"):
        ctypes.CDLL(os.environ["FAKE_TORCH_LIB"])
    if not _initialized and os.environ.get("FAKE_TORCH_C10"):
        ctypes.CDLL(os.path.join(os.environ["FAKE_TORCH_C10"], "libc10.so"), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(os.path.join(os.environ["FAKE_TORCH_C10"], "libc10_cuda.so"))
    if not _initialized and os.environ.get("FAKE_TORCH_INJECT") == "1":
        lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
        lib.InitializeInjection()
    _initialized = True
