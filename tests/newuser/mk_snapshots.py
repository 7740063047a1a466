#!/usr/bin/env python3
"""mk_snapshots.py: PyTorch memory snapshots (torch.cuda.memory._dump_snapshot pickles, plain
data: what torch writes) for the new-user tests, made without torch.

  oom.pickle     a job that ran out of memory: variable-length batches whose activations grow
                 while a small tensor kept from each step lands in the segment of the step
                 before (fragmentation), then a 1000 MiB request (train.py:42:big_matmul)
                 fails. The final segments (what the allocator held at the failure, 1744 MiB,
                 what gpureplay's pytorch model holds there after its retry) and PyTorch's
                 record of the device's free memory (970 MiB) are in it, as in a snapshot
                 dumped from an OOM handler.
  nohist.pickle  a snapshot taken without _record_memory_history(): segments, no history.

Usage: mk_snapshots.py DIR"""
import os
import pickle
import sys

MiB = 1 << 20
GiB = 1 << 30


def frames(f, line, name):
    return [{"filename": f, "line": line, "name": name}]


def oom_snapshot():
    tr = []
    clock = [1_795_000_000_000_000]
    nxt = [0x7F0000000000]

    def at():
        clock[0] += 500
        return clock[0]

    def alloc(size, where):
        a = nxt[0]
        nxt[0] += size + 2 * MiB
        tr.append(dict(action="alloc", addr=a, size=size, stream=0, time_us=at(), frames=frames(*where)))
        return a

    def free(a, size):
        tr.append(dict(action="free_requested", addr=a, size=size, stream=0, time_us=at(), frames=[]))
        tr.append(dict(action="free_completed", addr=a, size=size, stream=0, time_us=at(), frames=[]))

    alloc(1 * GiB, ("train.py", 12, "load_weights"))
    for length in range(200, 200 + 20 * 40, 40):
        a = alloc(length * MiB, ("train.py", 30, "forward"))
        free(a, length * MiB)
        alloc(24 * MiB, ("train.py", 35, "keep_stats"))
    # torch records the device's free bytes in the OOM entry's addr.
    tr.append(dict(action="oom", addr=970 * MiB, size=1000 * MiB, stream=0, time_us=at(),
                   frames=frames("train.py", 42, "big_matmul")))
    seg = 0x7E0000000000
    segments = [{"device": 0, "address": seg, "total_size": 1744 * MiB, "stream": 0,
                 "segment_type": "large", "allocated_size": 0, "active_size": 0,
                 "blocks": [{"address": seg, "size": 1744 * MiB, "state": "inactive"}]}]
    return {"segments": segments, "device_traces": [tr], "allocator_settings": {}}


def nohist_snapshot():
    seg = 0x7E0000000000
    segments = [{"device": 0, "address": seg, "total_size": 2 * GiB, "stream": 0,
                 "segment_type": "large", "allocated_size": 512 * MiB, "active_size": 512 * MiB,
                 "blocks": [{"address": seg, "size": 512 * MiB, "state": "active_allocated"},
                            {"address": seg + 512 * MiB, "size": 1536 * MiB, "state": "inactive"}]}]
    return {"segments": segments, "device_traces": [[]], "allocator_settings": {}}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    for name, snap in (("oom.pickle", oom_snapshot()), ("nohist.pickle", nohist_snapshot())):
        with open(os.path.join(out, name), "wb") as f:
            pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
