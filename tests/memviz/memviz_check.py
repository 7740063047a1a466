#!/usr/bin/env python3
"""memviz_check.py: checks a pickle written by `gpureplay --export-snapshot` the way torch
writes memory snapshots (torch/csrc/cuda/memory_snapshot.cpp: keys and types) and the way
memory_viz reads them (torch/utils/viz/MemoryViz.js), with the standard library only.

  memviz_check.py SNAPSHOT.pickle        prints one line per device, exit 1 at the first fault

memory_viz draws the state at any entry by walking each device's trace backwards from the final
`segments`, so the final state must be the end of the trace, and at every step each live block
must lie in a segment (the page looks up each block's segment and fails on none), a
free_requested must find its block, and a segment_map walked back must find the segment it
grew. Walked back to the start, nothing may remain: the replay starts with an empty device.
Forward, the reserved bytes (segments) peak where the 'snapshot' entry is, at the figure the
export's gpumem_replay block gives."""
import pickle
import sys

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot"}
STATES = {"active_allocated", "active_pending_free", "inactive"}


def fail(msg):
    print(f"memviz_check: FAIL: {msg}")
    sys.exit(1)


def want(cond, msg):
    if not cond:
        fail(msg)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_frames(frames, where):
    want(isinstance(frames, list), f"{where}: frames is not a list")
    for f in frames:
        want(isinstance(f, dict) and set(f) == {"filename", "line", "name"}, f"{where}: frame {f!r}")
        want(isinstance(f["filename"], str) and isinstance(f["name"], str) and is_int(f["line"]),
             f"{where}: frame types {f!r}")


def check_types(d):
    want(isinstance(d, dict), "the root is not a dict")
    for k, t in (("segments", list), ("device_traces", list), ("allocator_settings", dict)):
        want(isinstance(d.get(k), t), f"'{k}' is not a {t.__name__}")
    for dev, trace in enumerate(d["device_traces"]):
        want(isinstance(trace, list), f"device_traces[{dev}] is not a list")
        for i, e in enumerate(trace):
            where = f"device_traces[{dev}][{i}]"
            want(isinstance(e, dict) and e.get("action") in ACTIONS, f"{where}: action {e!r}")
            addr_key = "device_free" if e["action"] == "oom" else "addr"
            for k in (addr_key, "size", "stream", "time_us"):
                want(is_int(e.get(k)) and e[k] >= 0, f"{where}: {k} = {e.get(k)!r}")
            check_frames(e.get("frames"), where)
    for i, s in enumerate(d["segments"]):
        where = f"segments[{i}]"
        for k in ("device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream"):
            want(is_int(s.get(k)), f"{where}: {k} = {s.get(k)!r}")
        want(s.get("segment_type") in ("large", "small"), f"{where}: segment_type")
        want(s.get("segment_pool_id") == (0, 0), f"{where}: segment_pool_id {s.get('segment_pool_id')!r}")
        want(isinstance(s.get("is_expandable"), bool), f"{where}: is_expandable")
        check_frames(s.get("frames"), where)
        at, allocated, active, requested = s["address"], 0, 0, 0
        for k, b in enumerate(s["blocks"]):
            w = f"{where}.blocks[{k}]"
            want(b.get("address") == at, f"{w}: address {b.get('address')} where the blocks before end at {at}")
            want(b.get("state") in STATES, f"{w}: state {b.get('state')!r}")
            want(is_int(b.get("size")) and b["size"] > 0, f"{w}: size")
            want(is_int(b.get("requested_size")) and b["requested_size"] <= b["size"], f"{w}: requested_size")
            check_frames(b.get("frames"), w)
            if b["state"] != "inactive":
                active += b["size"]
                requested += b["requested_size"]
            if b["state"] == "active_allocated":
                allocated += b["size"]
            at += b["size"]
        want(at == s["address"] + s["total_size"], f"{where}: blocks cover {at - s['address']} of {s['total_size']} bytes")
        want((allocated, active, requested) == (s["allocated_size"], s["active_size"], s["requested_size"]),
             f"{where}: allocated/active/requested sizes do not add up")


def walk_back(d, dev):
    """MemoryView.simulate_memory over the whole trace, checking what the page relies on."""
    segs = []  # [addr, size, stream]
    blocks = {}
    for s in d["segments"]:
        if s["device"] != dev:
            continue
        segs.append([s["address"], s["total_size"], s["stream"]])
        at = s["address"]
        for b in s["blocks"]:
            if b["state"] != "inactive":
                blocks[at] = [b["size"], b["state"] == "active_pending_free"]
            at += b["size"]

    def seg_of(addr):
        for s in segs:
            if s[0] <= addr < s[0] + s[1]:
                return s
        return None

    for addr, (size, _) in blocks.items():
        want(seg_of(addr) is not None, f"device {dev}: final block {addr:#x} in no segment")
    trace = d["device_traces"][dev]
    for i in range(len(trace) - 1, -1, -1):
        e = trace[i]
        a, n, where = e.get("addr"), e["size"], f"device {dev} entry {i} ({e['action']})"
        if e["action"] == "free_completed":
            want(seg_of(a) is not None, f"{where}: the block comes back outside every segment")
            blocks[a] = [n, True]
        elif e["action"] == "free_requested":
            want(a in blocks, f"{where}: no block at {a:#x} (memory_viz reads its free_requested flag)")
            blocks[a][1] = False
        elif e["action"] == "alloc":
            want(a in blocks, f"{where}: walked back, no block at {a:#x} to take away")
            del blocks[a]
        elif e["action"] in ("segment_free", "segment_unmap"):
            if e["action"] == "segment_unmap":  # joins a neighbour of the same stream
                segs.append([a, n, e["stream"]])
                segs.sort()
                merged = []
                for s in segs:
                    if merged and merged[-1][0] + merged[-1][1] == s[0] and merged[-1][2] == s[2]:
                        merged[-1][1] += s[1]
                    else:
                        merged.append(s)
                segs[:] = merged
            else:
                segs.append([a, n, e["stream"]])
        elif e["action"] in ("segment_alloc", "segment_map"):
            if e["action"] == "segment_alloc":
                hit = [s for s in segs if s[0] == a]
                want(hit, f"{where}: walked back, no segment at {a:#x}")
                segs.remove(hit[0])
            else:
                hit = [s for s in segs if s[0] <= a and a + n <= s[0] + s[1]]
                want(hit, f"{where}: walked back, no segment holds {a:#x}+{n}")
                s = hit[0]
                if s[0] == a:
                    s[0] += n
                    s[1] -= n
                    if s[1] == 0:
                        segs.remove(s)
                elif s[0] + s[1] == a + n:
                    s[1] -= n
                else:
                    segs.append([a + n, s[0] + s[1] - a - n, s[2]])
                    s[1] = a - s[0]
            for b, (bs, _) in blocks.items():
                want(seg_of(b) is not None, f"{where}: walked back, the live block {b:#x} is left in no segment")
    want(not segs and not blocks, f"device {dev}: walked back to the start, {len(segs)} segments and "
         f"{len(blocks)} blocks remain (the replay starts empty)")


def walk_forward(d, dev):
    reserved = peak = 0
    at_marker = None
    for e in d["device_traces"][dev]:
        if e["action"] in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        elif e["action"] == "snapshot":
            want(at_marker is None, f"device {dev}: two peak markers")
            at_marker = reserved
        peak = max(peak, reserved)
    return peak, at_marker


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    with open(sys.argv[1], "rb") as f:
        d = pickle.load(f)
    check_types(d)
    info = {x["device"]: x for x in d.get("gpumem_replay", {}).get("devices", [])}
    for dev, trace in enumerate(d["device_traces"]):
        if not trace:
            continue
        walk_back(d, dev)
        peak, at_marker = walk_forward(d, dev)
        want(dev in info and info[dev]["peak_reserved_bytes"] == peak,
             f"device {dev}: the trace's reserved peak {peak} is not the export's {info.get(dev)}")
        want(at_marker == peak, f"device {dev}: the 'snapshot' entry is at {at_marker} reserved bytes, the peak is {peak}")
        acts = {}
        for e in trace:
            acts[e["action"]] = acts.get(e["action"], 0) + 1
        print(f"ok: device {dev}: {len(trace)} entries {dict(sorted(acts.items()))}, "
              f"{sum(1 for s in d['segments'] if s['device'] == dev)} segments at the end, peak reserved {peak}")


if __name__ == "__main__":
    main()
