"""context_job.py torch|cupy: a small job that measures, inside itself, what is on the device
beside its framework's memory, for tests/gpu/context_check.sh (issue 17 item 3): right after
CUDA starts and at the end (after cuBLAS has run), the driver's whole-device count
(mem_get_info: total - free; the process is alone on the GPU) and nvidia-smi's per-process
count, each less the framework's own reserve then. Prints one GPUMEM_RESULT JSON line."""
import json
import os
import subprocess
import sys
import time

MiB = 1 << 20


def smi_used():
    """nvidia-smi's figure for this process (MiB, as bytes), or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=20).stdout
    except Exception:
        return None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(os.getpid()):
            return int(parts[1]) * MiB
    return None


def torch_job():
    import torch
    t0 = time.perf_counter()
    torch.zeros(1, device="cuda")
    init_s = time.perf_counter() - t0
    def probe():
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        return total - free, smi_used(), torch.cuda.memory_reserved()
    start = probe()
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(5):
        loss = model(torch.randn(1024, 2048, device="cuda")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    end = probe()
    return init_s, start, end, torch.__version__


def cupy_job():
    import cupy
    t0 = time.perf_counter()
    cupy.zeros(1)
    init_s = time.perf_counter() - t0
    def reserve():
        # gpurec's auto mode sets MemoryAsyncPool: the driver pool's reserve; else CuPy's pool
        alloc = cupy.cuda.get_allocator()
        pool = getattr(alloc, "__self__", None)
        for name in ("total_bytes",):
            if pool is not None and hasattr(pool, name):
                try:
                    return int(getattr(pool, name)())
                except Exception:
                    pass
        return cupy.get_default_memory_pool().total_bytes()
    def probe():
        cupy.cuda.Device().synchronize()
        free, total = cupy.cuda.runtime.memGetInfo()
        return total - free, smi_used(), reserve()
    start = probe()
    a = cupy.random.random((4096, 4096), dtype=cupy.float32)
    for _ in range(5):
        a = (a @ a) / 4096.0
    float(a.sum())
    end = probe()
    return init_s, start, end, cupy.__version__


def main():
    fw = sys.argv[1]
    init_s, (s_dev, s_smi, s_res), (e_dev, e_smi, e_res), ver = torch_job() if fw == "torch" else cupy_job()
    sub = lambda a, b: None if a is None else a - b
    print("GPUMEM_RESULT " + json.dumps({
        "job": fw, "version": ver, "first_cuda_call_s": round(init_s, 3),
        "start": {"device_used": s_dev, "smi_process": s_smi, "framework_reserved": s_res,
                  "device_beyond_reserved": s_dev - s_res, "smi_beyond_reserved": sub(s_smi, s_res)},
        "end": {"device_used": e_dev, "smi_process": e_smi, "framework_reserved": e_res,
                "device_beyond_reserved": e_dev - e_res, "smi_beyond_reserved": sub(e_smi, e_res)}}),
        flush=True)


if __name__ == "__main__":
    main()
