#!/usr/bin/env python3
"""make_csv.py: the hand-made CSV traces of recorder/predict's tests (run here to remake them).

A tiny training job whose truth is known: 4 weights of 1 MiB (constant), per step and layer an
activation of 100000*b+512 bytes (affine in the batch b), attention scores of 200000*b bytes (or
30000*b*b with quad, quadratic; 30000*b*b+200000*b with parab), a temporary of 6400*b; backward allocates a gradient per saved
tensor. Variants: a workspace of 500000*b (or extra_size*b) only at b >= extra_at, a buffer of 300000*b held
through the backward only at b >= late_at, a second stream, a fourth
step, the scores from another callsite at small b (another algorithm choice), no callsites, a
failed allocation, and header changes (another job, setting, device)."""
import sys


def trace(b, steps=3, extra_at=None, quad=False, parab=False, streams=1, attn_site=None, callsites=True, oom=False, late_at=None, extra_size=500000,
          job="train.py", conf="", gpu="H100", tune=False, tune_rotate=False, tune_off=False):
    out = ["# gpumem trace, text form 1", "#capture_mode=torch", "#gpu_name=" + gpu, "#gpu_total_mem=85899345920",
           "#command_line=python %s --batch=%d" % (job, b), "#kv.PYTORCH_CUDA_ALLOC_CONF=" + conf,
           "ts_ns,kind,device,stream,addr,size,mem_kind,callsite"]
    strs = {}
    ts = [0]
    addr = [0x10000000]

    def cs(name):
        if not name:  # no callsite
            return 0
        if not callsites and ":" in name:
            return 0
        if name not in strs:
            strs[name] = len(strs) + 1
            out.append("#string.%d=%s" % (strs[name], name))
        return strs[name]

    def ev(kind, a, size, site, stream=0):
        ts[0] += 1000
        out.append("%d,%s,0,%d,0x%x,%d,device,%d" % (ts[0], kind, stream, a, size, site))

    def alloc(size, site, stream=0):
        a = addr[0]
        addr[0] += size + (1 << 24)
        ev("alloc", a, size, cs(site), stream)
        return (a, size)

    def free(t, stream=0):
        ev("free", t[0], t[1], 0, stream)

    for _ in range(4):
        alloc(1 << 20, "model.py:10:init")
    for s in range(steps):
        ev("marker", 0, s, cs("step"))
        acts = []
        late = []
        for _ in range(4):
            acts.append(alloc(100000 * b + 512, "model.py:20:forward"))
            acts.append(alloc(b * b * 30000 + (200000 * b if parab else 0) if quad or parab else 200000 * b,
                              attn_site or "model.py:21:attn"))
            free(alloc(6400 * b, "model.py:22:tmp"))
        if tune:  # an autotuner's scratch after the forward, no callsite: A B A B A B C C C, held together
            sizes = [40000 * b, 1000000] * 3 + [90000 * b] * 2 + [(100000 if tune_off else 90000) * b]
            if tune_rotate:  # another order: C C C A B A B A B
                sizes = sizes[6:] + sizes[:6]
            for t in [alloc(z, "") for z in sizes]:
                free(t)
        if extra_at is not None and b >= extra_at:
            free(alloc(extra_size * b, "model.py:30:workspace"))
        if late_at is not None and b >= late_at:
            late.append(alloc(300000 * b, "model.py:35:saved"))
        if streams > 1:
            free(alloc(12800 * b, "model.py:40:copy", stream=7), stream=7)
        if oom and s == steps - 1:
            ev("alloc_failed", 0, 1 << 40, cs("model.py:20:forward"))
        for a in reversed(acts):
            free(alloc(a[1], "model.py:50:backward"))
            free(a)
        for a in late:
            free(a)
    return "\n".join(out) + "\n"


SETS = {
    "affine": ([4, 8, 16, 32], {}),
    "quad": ([4, 8, 16, 32], {"quad": True}),
    "parab": ([4, 8, 16, 32], {"parab": True}),
    "extra": ([8, 16, 32], {"extra_at": 12}),
    "late": ([8, 16, 32, 64], {"late_at": 12}),
    "ws": ([4, 8, 16], {"extra_at": 12, "extra_size": 5000}),
    "steps": ([16], {"steps": 4}),
    "streams": ([16], {"streams": 2}),
    "algo": ([4], {"attn_site": "model.py:25:attn_math"}),
    "nocs": ([8, 16, 32], {"callsites": False}),
    "tune": ([8, 32, 64], {"tune": True}),
    "tunerot": ([16], {"tune": True, "tune_rotate": True}),
    "tuneoff": ([16], {"tune": True, "tune_rotate": True, "tune_off": True}),
    "nocsextra": ([8], {"callsites": False, "extra_at": 8}),
    "oom": ([16], {"oom": True}),
    "job": ([16], {"job": "eval.py"}),
    "setting": ([16], {"conf": "expandable_segments:True"}),
    "device": ([16], {"gpu": "A100"}),
}

if __name__ == "__main__":
    for name, (values, kw) in SETS.items():
        for b in values:
            with open("%s%d.csv" % (name, b), "w") as f:
                f.write(trace(b, **kw))
