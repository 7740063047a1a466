"""callsite_summary.py TRACE.csv [TOP]: what the callsites of a recording say (trace_csv output).

Prints one JSON line: allocations with and without a callsite, distinct callsites, the TOP
callsites by allocations and by bytes, and for the VMM reserves/maps and synchronous allocations
(the calls whose owner the recorder unwinds) the callsites by count. Standard library only."""
import collections
import json
import sys


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    strings = {}
    n = collections.Counter()
    nbytes = collections.Counter()
    other = collections.Counter()
    allocs = with_cs = 0
    for line in open(path, errors="replace"):
        if line.startswith("#string."):
            k, _, v = line[8:].rstrip("\n").partition("=")
            strings[k] = v
            continue
        if line.startswith("#") or line.startswith("ts_ns"):
            continue
        f = line.rstrip("\n").split(",")
        if len(f) < 11:
            continue
        kind, size, cs = f[1], f[5], f[9]
        name = strings.get(cs, "(none)") if cs not in ("", "0") else "(none)"
        if kind == "alloc":
            allocs += 1
            with_cs += name != "(none)"
            n[name] += 1
            nbytes[name] += int(size or 0)
        if kind in ("vmm_reserve", "vmm_map") or (kind == "alloc" and name.startswith("[")):
            other[kind + " " + name] += 1
    print(json.dumps({
        "allocs": allocs, "allocs_with_callsite": with_cs, "distinct_strings": len(strings),
        "top_by_allocs": n.most_common(top),
        "top_by_bytes": nbytes.most_common(top),
        "owner_calls": other.most_common(top),
    }, indent=1))


if __name__ == "__main__":
    main()
