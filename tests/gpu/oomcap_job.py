"""oomcap_job.py: a PyTorch job that runs out of memory under a limit it sets itself (issue 25).

The job calls torch.cuda.set_per_process_memory_fraction(F) (default 0.02: 2.80 GiB of an H200),
so PyTorch refuses a segment past F x cuMemGetInfo's total however much the device has free.
Then, five times, a big tensor B is allocated and freed and a kept tensor K = B - 40 MiB is
allocated: under PyTorch's default the kept tensor splits the big one's cached segment, so each
round pins a new segment of B; the sixth B does not fit (6 B > the limit) and the job dies of an
uncaught torch.OutOfMemoryError ("... N GiB allowed"). A setting that keeps K out of B's
segments (max_split_size_mb below K, or expandable_segments) serves it: 5 K + B is within the
limit. B = the limit / 5.7, rounded up to 2 MiB: the same plan on any GPU where the limit is
below 3.8 GiB.

Prints "GPUMEM_CAP <bytes>" (the limit, int(F x total) as PyTorch computes it) and "GPUMEM_PLAN
{...}" first, and "GPUMEM_RESULT {...}" (max_memory_reserved) when it gets through.

  python3 oomcap_job.py [--fraction F]
  python3 oomcap_job.py --csv FILE [--total BYTES]   the same plan as a trace in CSV text form
      (what gpurec would record, for a dry run of oomcap_check.sh on a machine without a GPU)
"""
import argparse
import json
import os
import sys

MiB = 1 << 20
ROUNDS = 5


def plan(cap):
    big = -(-int(cap / 5.7) // (2 * MiB)) * 2 * MiB
    return big, big - 40 * MiB


def write_csv(path, fraction, total):
    cap = int(fraction * total)
    big, keep = plan(cap)
    rows, t = [], 0

    def ev(kind, addr, size, site):
        nonlocal t
        t += 1000
        rows.append("%d,%s,0,0,0x%x,%d,device,%d" % (t, kind, addr, size, site))

    base = 0x7F0000000000
    for i in range(ROUNDS):
        ev("alloc", base + (2 * i) * (1 << 32), big, 1)
        ev("free", base + (2 * i) * (1 << 32), big, 0)
        ev("alloc", base + (2 * i + 1) * (1 << 32), keep, 2)
    ev("alloc_failed", 0, big, 1)
    hdr = ["# gpumem trace, text form 1", "#capture_mode=torch", "#gpu_name=dry run",
           "#gpu_total_mem=%d" % total, "#kv.gpu_mem_info_total=%d" % total,
           "#kv.framework.pytorch=dry", "#kv.torch.per_process_memory_fraction=%s" % fraction,
           "#kv.torch.per_process_memory_fraction.0=%s" % fraction,
           "#kv.oom.message=CUDA out of memory. Tried to allocate %.2f MiB. %.2f GiB allowed (dry run)"
           % (big / MiB, cap / (1 << 30)),
           "ts_ns,kind,device,stream,addr,size,mem_kind,callsite",
           "#string.1=oomcap_job.py:big", "#string.2=oomcap_job.py:keep"]
    with open(path, "w") as f:
        f.write("\n".join(hdr + rows) + "\n")
    print("GPUMEM_CAP %d" % cap, flush=True)
    print("GPUMEM_PLAN " + json.dumps({"big": big, "keep": keep, "rounds": ROUNDS, "total": total}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fraction", type=float, default=0.02)
    ap.add_argument("--csv", help="write the plan as a CSV trace instead of running it")
    ap.add_argument("--total", type=int, default=150109880320, help="--csv: the device's total memory")
    a = ap.parse_args()
    if a.csv:
        write_csv(a.csv, a.fraction, a.total)
        return
    import torch

    dev = torch.device("cuda", 0)
    torch.cuda.set_per_process_memory_fraction(a.fraction, 0)
    free, total = torch.cuda.mem_get_info(0)
    cap = int(a.fraction * total)
    big, keep = plan(cap)
    print("GPUMEM_CAP %d" % cap, flush=True)
    print("GPUMEM_PLAN " + json.dumps({"big": big, "keep": keep, "rounds": ROUNDS, "total": total,
                                       "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}), flush=True)
    kept = []
    for _ in range(ROUNDS):
        b = torch.empty(big, dtype=torch.uint8, device=dev)
        del b
        kept.append(torch.empty(keep, dtype=torch.uint8, device=dev))
    last = torch.empty(big, dtype=torch.uint8, device=dev)  # the default refuses this one: uncaught
    torch.cuda.synchronize()
    print("GPUMEM_RESULT " + json.dumps({"max_memory_reserved": torch.cuda.max_memory_reserved(0),
                                         "cap": cap, "kept": len(kept), "last": last.numel(),
                                         "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}),
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
