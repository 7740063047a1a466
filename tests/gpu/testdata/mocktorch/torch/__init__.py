"""A stand-in for torch, enough for tests/gpu/rec_inproc_bench.py to run without a GPU
(rec_inproc_bench_test.sh). "CUDA" comes up as gpurec's would: the injection library initialised
as the driver would (CUPTI is the stand-in libcupti.so), PyTorch's history turned on and the
callsite hook set as gpurec's sitecustomize does (on the stand-in libc10_cuda.so). A training step
sleeps 1 ms, plus MOCK_HIST_MS while the history is on and MOCK_CUPTI_MS while CUPTI's memory
callbacks are enabled (and makes one driver allocation: the trace has events): the bench must
find those costs back as its paired differences."""
import ctypes
import os
import sys
import time
import types

__version__ = "0.0-mock"
_lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
_cupti = ctypes.CDLL(os.environ["GPUMEM_CUPTI"])
_cupti.fake_cupti_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
_fake = os.environ["MOCK_FAKEC10"]
ctypes.CDLL(os.path.join(_fake, "libc10.so"), mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(os.path.join(_fake, "libc10_cuda.so"))
_lib.InitializeInjection()
_state = {"history": True, "allocs": 0, "history_calls": 0}
if _lib.gpumem_torch_sites() <= 0:
    raise RuntimeError("mock torch: the hook was not set")


def _cost():
    ms = 1.0
    if _state["history"]:
        ms += float(os.environ.get("MOCK_HIST_MS", "0"))
    if _cupti.fake_cupti_enabled(1) > 0:  # CUPTI_CB_DOMAIN_DRIVER_API
        ms += float(os.environ.get("MOCK_CUPTI_MS", "0"))
    return ms / 1e3


class _T:
    def __init__(self, *a, **k):
        pass

    def __call__(self, x):
        return self

    def to(self, dev):
        return self

    def square(self):
        return self

    def mean(self):
        return self

    def backward(self):
        time.sleep(_cost())
        _cupti.fake_cupti_alloc(0x7F0000000000 + 4096 * (_state["allocs"] // 1000 % 256), 4096)  # seen if enabled
        _state["allocs"] += 1000

    def parameters(self):
        return []


def device(name):
    return name


def manual_seed(s):
    pass


def randn(*a, **k):
    return _T()


def empty(*a, **k):
    return _T()


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=0):
    _state["history"] = enabled is not None
    _state["history_calls"] += 1


nn = types.SimpleNamespace(Module=_T, Sequential=_T, Linear=_T, LayerNorm=_T,
                           functional=types.SimpleNamespace(gelu=lambda x: x))
sys.modules[__name__ + ".nn"] = nn  # import torch.nn as nn
optim = types.SimpleNamespace(AdamW=lambda *a, **k: types.SimpleNamespace(step=lambda: None, zero_grad=lambda **k: None))
cuda = types.SimpleNamespace(
    synchronize=lambda: None, get_device_name=lambda i: "mock",
    memory_stats=lambda: {"allocation.all.allocated": _state["allocs"]},
    memory=types.SimpleNamespace(_record_memory_history=_record_memory_history))
_C = types.SimpleNamespace(_cuda_isHistoryEnabled=lambda: _state["history"])
