"""Step time of two PyTorch training loops, one process per variant (run by rec_steps_run.py).

The caller runs this under gpurec or not, with the allocator it wants; this process only times.
  python3 rec_steps.py [--history none|nostacks|python] [--loops mlp,lm] [--device cuda]
Two loops, one after the other in the same process (so every variant pays one interpreter start):
- mlp: host-bound on purpose (the loop of rec_overhead.py): 48 x (Linear + LayerNorm + GELU +
  residual), d=256, batch 32, AdamW(foreach=False); ~1000 tensor allocations in ~17 ms. Here a
  recorder's per-event cost shows in full, since the host is the critical path.
- lm: a GPU-bound step as real training has: a GPT-style decoder (pre-LN, causal flash
  attention through scaled_dot_product_attention, GELU MLP, untied LM head), bf16 autocast,
  AdamW with its default (foreach) implementation, fixed random tokens. The host issues the
  step's kernels well ahead of the GPU, so host-side costs hide behind GPU work unless they
  exceed it.
Per step: GPU synchronised before and after; step time = wall time between; host time = until
the last kernel was issued (before the final synchronize). Allocations per step come from the
native allocator's counter (allocation.all.allocated); under the async backend that counter may
be absent, and the recorder's trace gives the count instead: an allocation of a marker size
(unique per loop) is made just before the first and just after the last timed step, so the
trace's events between the two markers are exactly the timed steps' events.
--history: torch.cuda.memory._record_memory_history from the start (stacks off: context=None;
python: context="all", stacks="python"); with --count-history the process takes one snapshot at
the end (after all timing) and reports its entries per action and per allocation.
Prints one line "RESULT {json}" per loop (and one for the history count).
"""
import argparse
import collections
import json
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Marker allocation sizes in bytes (odd, so no tensor of the loops has them); see the docstring.
MARKS = {"mlp": (3333331, 3333337), "lm": (5555551, 5555557)}


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def alloc_count(dev):
    if dev.type != "cuda":
        return 0
    try:
        return int(torch.cuda.memory_stats(dev).get("allocation.all.allocated", 0))
    except Exception:  # an allocator backend without statistics
        return 0


def peak_allocated(dev):
    if dev.type != "cuda":
        return 0
    try:
        return int(torch.cuda.max_memory_allocated(dev))
    except Exception:
        return 0


def marker(nbytes, dev):
    sync(dev)
    t = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    del t
    sync(dev)


class MlpBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return x + F.gelu(self.norm(self.lin(x)))


class DecoderBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class DecoderLM(nn.Module):
    def __init__(self, vocab, d, heads, layers, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([DecoderBlock(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def make_mlp(a, dev):
    model = nn.Sequential(*[MlpBlock(a.mlp_d) for _ in range(a.mlp_blocks)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(a.mlp_batch, a.mlp_d, device=dev)

    def step():
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    desc = {"blocks": a.mlp_blocks, "d": a.mlp_d, "batch": a.mlp_batch, "optimizer": "AdamW(foreach=False)",
            "params": sum(p.numel() for p in model.parameters())}
    return step, desc, (model, opt, x)


def make_lm(a, dev):
    with torch.device(dev):  # parameters made on the GPU directly (no host init and copy)
        model = DecoderLM(a.lm_vocab, a.lm_d, a.lm_heads, a.lm_layers, a.lm_seq)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    gen = torch.Generator(device=dev).manual_seed(0)
    tokens = torch.randint(0, a.lm_vocab, (a.lm_batch, a.lm_seq + 1), device=dev, generator=gen)
    idx, tgt = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    vocab = a.lm_vocab

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = model(idx)
            loss = F.cross_entropy(logits.view(-1, vocab), tgt.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    desc = {"layers": a.lm_layers, "d": a.lm_d, "heads": a.lm_heads, "seq": a.lm_seq,
            "batch": a.lm_batch, "vocab": a.lm_vocab, "autocast": "bf16",
            "optimizer": "AdamW (default: foreach)",
            "params": sum(p.numel() for p in model.parameters())}
    return step, desc, (model, opt, idx, tgt)


def q(xs, f):
    s = sorted(xs)
    return s[min(len(s) - 1, int(f * len(s)))]


def time_loop(name, step, steps, warmup, dev):
    for _ in range(warmup):
        step()
    sync(dev)
    if dev.type == "cuda":
        try:
            torch.cuda.reset_peak_memory_stats(dev)
        except Exception:  # an allocator backend without statistics
            pass
    marker(MARKS[name][0], dev)
    step_ms, host_ms, allocs = [], [], []
    for _ in range(steps):
        sync(dev)
        n0 = alloc_count(dev)
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        sync(dev)
        t2 = time.perf_counter()
        step_ms.append((t2 - t0) * 1e3)
        host_ms.append((t1 - t0) * 1e3)
        allocs.append(alloc_count(dev) - n0)
    marker(MARKS[name][1], dev)
    return {"loop": name, "steps": steps, "warmup": warmup,
            "step_ms_median": statistics.median(step_ms), "step_ms_mean": statistics.mean(step_ms),
            "step_ms_p10": q(step_ms, 0.1), "step_ms_p90": q(step_ms, 0.9),
            "host_ms_median": statistics.median(host_ms),
            "allocs_per_step": statistics.median(allocs),
            "peak_allocated": peak_allocated(dev),
            "marks": MARKS[name]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--history", default="none", choices=["none", "nostacks", "python"])
    ap.add_argument("--count-history", action="store_true")
    ap.add_argument("--loops", default="mlp,lm")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--mlp-steps", type=int, default=120)
    ap.add_argument("--mlp-warmup", type=int, default=15)
    ap.add_argument("--mlp-blocks", type=int, default=48)
    ap.add_argument("--mlp-d", type=int, default=256)
    ap.add_argument("--mlp-batch", type=int, default=32)
    ap.add_argument("--lm-steps", type=int, default=25)
    ap.add_argument("--lm-warmup", type=int, default=6)
    ap.add_argument("--lm-layers", type=int, default=24)
    ap.add_argument("--lm-d", type=int, default=1024)
    ap.add_argument("--lm-heads", type=int, default=16)
    ap.add_argument("--lm-seq", type=int, default=2048)
    ap.add_argument("--lm-batch", type=int, default=6)
    ap.add_argument("--lm-vocab", type=int, default=32000)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    if a.history == "nostacks":
        torch.cuda.memory._record_memory_history(enabled="all", context=None, max_entries=20_000_000)
    elif a.history == "python":
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                 max_entries=20_000_000)
    n_start = alloc_count(dev)
    common = {"history": a.history, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
              "under_gpurec": bool(os.environ.get("CUDA_INJECTION64_PATH")),
              "capture": os.environ.get("GPUMEM_CAPTURE", ""), "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}
    for name in a.loops.split(","):
        if name == "mlp":
            step, desc, keep = make_mlp(a, dev)
            res = time_loop(name, step, a.mlp_steps, a.mlp_warmup, dev)
        elif name == "lm":
            step, desc, keep = make_lm(a, dev)
            res = time_loop(name, step, a.lm_steps, a.lm_warmup, dev)
        else:
            raise SystemExit("rec_steps.py: unknown loop %r" % name)
        res.update(common)
        res["model"] = desc
        print("RESULT " + json.dumps(res, sort_keys=True), flush=True)
        del step, keep
    if a.count_history and a.history != "none":
        n_end = alloc_count(dev)
        t0 = time.perf_counter()
        snap = torch.cuda.memory._snapshot()
        snap_s = time.perf_counter() - t0
        traces = snap.get("device_traces", [])
        actions = collections.Counter(e.get("action", "?") for t in traces for e in t)
        entries = sum(actions.values())
        allocs = n_end - n_start
        print("RESULT " + json.dumps({"loop": "history_count", "history": a.history,
                                      "entries": entries, "actions": dict(actions),
                                      "allocations": allocs, "snapshot_s": snap_s,
                                      "entries_per_allocation": entries / allocs if allocs else None},
                                     sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
