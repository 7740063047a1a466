"""Workload 6 (issue 11): a main-stream tensor handed to a side stream with record_stream.

Each of 30 iterations: the main stream makes `a` (a seeded size between 256 KiB and 16 MiB),
the side stream waits for it, computes its own result from it and allocates a tensor of its
own; `a` is marked used on the side stream (record_stream) and deleted on the main stream,
while the last three side-stream results stay alive. PyTorch keeps `a` until its event on the
side stream has completed, checked only at the next malloc (process_events): whether the next
main-stream tensor can reuse `a` is a race between the CPU and the GPU.

GPUMEM_TIMING picks the race's outcome:
  ontime  nothing added (the side stream's kernels are tiny: the events are usually done);
  late    a long kernel (torch.cuda._sleep, GPUMEM_SLEEP_MS per iteration, default 5) first
          on the side stream, so the CPU runs ahead and the events are still pending;
  sync    the side stream synchronised before `del a` (the events surely done).
Prints the GPUMEM_RESULT line of _common.finish (max_memory_reserved under the
PYTORCH_CUDA_ALLOC_CONF the caller set)."""
import os
import random

import torch

import _common


def main():
    dev = _common.start(seed=11)
    timing = os.environ.get("GPUMEM_TIMING", "ontime")
    if timing not in ("ontime", "late", "sync"):
        raise SystemExit("GPUMEM_TIMING must be ontime, late or sync")
    sleep_ms = float(os.environ.get("GPUMEM_SLEEP_MS", "5"))
    # torch.cuda._sleep spins for a number of GPU clock cycles (~1.7 GHz on an H100; the
    # exact length does not matter, only that the side stream falls behind the CPU).
    rate_khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 0) or 1_700_000
    cycles = int(sleep_ms * rate_khz)
    rng = random.Random(11)
    side = torch.cuda.Stream()
    main_s = torch.cuda.current_stream()
    keep = []
    with torch.no_grad():
        for i in range(30):
            n_a = int(2 ** rng.uniform(18, 24)) // 4          # 256 KiB .. 16 MiB of float32
            n_c = int(2 ** rng.uniform(18, 23)) // 4          # the side stream's own, 256 KiB .. 8 MiB
            a = torch.empty(n_a, device=dev).uniform_()
            side.wait_stream(main_s)
            with torch.cuda.stream(side):
                if timing == "late":
                    torch.cuda._sleep(cycles)
                b = a * 2.0 + 1.0
                c = torch.empty(n_c, device=dev).fill_(float(i))
                r = b[:n_c].sum() + c.sum() if n_c <= n_a else b.sum() + c[:n_a].sum()
                keep.append((c, r))
                if len(keep) > 3:
                    keep.pop(0)
                del b
            a.record_stream(side)
            if timing == "sync":
                side.synchronize()
            del a
    main_s.wait_stream(side)
    total = sum(float(r) for _, r in keep)
    _ = total
    _common.finish("stream_handoff")


if __name__ == "__main__":
    main()
