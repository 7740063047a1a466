"""stream_jobs.py: the jobs of tests/gpu/stream_gpu.sh (issue 24), each a plain PyTorch script
that prints its own figures as `GPUMEM_RESULT {json}` at the end.

  bigfirst [N]   8 GiB first, freed, then N small allocations (default 2.2 M) with 64 live:
                 a history ring of 10^6 entries keeps only the tail and misses the 8 GiB peak
  train [STEPS]  a GPT-style language model from a config (random weights and tokens) trained
                 for STEPS steps (default 600) with gradient accumulation 2, AdamW, an evaluation
                 every 200 steps and a checkpoint (torch.save) after each: well over 10^6 entries
  killme         allocates in a loop for ever, logging every 0.1 s how many allocations are
                 done (count, CLOCK_MONOTONIC ns) to $KILLME_LOG; the caller SIGKILLs it
  loop SECONDS   torch.empty in a loop with 50 live, for SECONDS: allocations per second
  capped         torch.cuda.set_per_process_memory_fraction(0.02) in code, then 512 MiB tensors
                 kept until PyTorch refuses one: dies of the uncaught OutOfMemoryError (issue 25:
                 the OOM verdict must replay within the limit the job set itself)
"""
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


T0 = time.monotonic()


def result(**kw):
    kw.setdefault("seconds", round(time.monotonic() - T0, 1))
    kw["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    kw["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    kw["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    print("GPUMEM_RESULT " + json.dumps(kw), flush=True)


def bigfirst(n):
    dev = torch.device("cuda")
    big = torch.empty(8 << 30, dtype=torch.uint8, device=dev)
    big.fill_(1)
    del big
    live = [None] * 64
    sizes = [512, 4096, 65536, 1 << 20, 3 << 20, 12345]
    for i in range(n):
        live[i % 64] = torch.empty(sizes[i % len(sizes)], dtype=torch.uint8, device=dev)
    torch.cuda.synchronize()
    result(job="bigfirst", allocations=n + 1)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=8192, block=256, d=384, layers=6, heads=6):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((block, block), -math.inf), 1))

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for b in self.blocks:
            x = b(x, self.mask[:t, :t])
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def train(steps):
    dev = torch.device("cuda")
    torch.manual_seed(1)
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(1)

    def batch(bs=16):
        x = torch.randint(0, 8192, (bs, 256), generator=g)
        return x.to(dev, non_blocking=True), torch.roll(x, -1, 1).to(dev, non_blocking=True)

    ckpt = os.path.join(os.environ.get("TMPDIR", "/tmp"), "stream_ckpt.pt")
    for step in range(steps):
        for _ in range(2):  # gradient accumulation
            x, y = batch()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x, y) / 2
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (step + 1) % 200 == 0:
            model.eval()
            with torch.no_grad():
                for _ in range(5):
                    x, y = batch(32)
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        model(x, y)
            model.train()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, ckpt)
    torch.cuda.synchronize()
    result(job="train", steps=steps)


def killme():
    dev = torch.device("cuda")
    log = open(os.environ["KILLME_LOG"], "w", buffering=1)
    live = [None] * 50
    n = 0
    last = 0.0
    while True:
        live[n % 50] = torch.empty(4096 + (n % 7) * 512, device=dev)
        n += 1
        if n % 256 == 0:
            t = time.monotonic()
            if t - last >= 0.1:
                log.write("%d %d\n" % (n, time.monotonic_ns()))
                last = t


def loop(seconds):
    """torch.empty(1024) with 50 live for `seconds`: allocations per second over the whole run
    and over its second half alone (what warm-up, if any, does not touch)."""
    dev = torch.device("cuda")
    live = [None] * 50
    n = 0
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    half_n, half_t = None, None
    while True:
        for _ in range(1000):
            live[n % 50] = torch.empty(1024, device=dev)
            n += 1
        t = time.perf_counter()
        if half_n is None and t - t0 >= seconds / 2:
            half_n, half_t = n, t
        if t - t0 >= seconds:
            break
    dt = time.perf_counter() - t0
    result(job="loop", allocations=n, seconds=dt, per_second=n / dt,
           per_second_second_half=(n - half_n) / (t0 + dt - half_t))


def capped():
    dev = torch.device("cuda")
    torch.cuda.set_per_process_memory_fraction(0.02, 0)
    total = torch.cuda.get_device_properties(0).total_memory
    print("GPUMEM_CAP %d" % int(0.02 * total), flush=True)
    keep = []
    while True:
        keep.append(torch.empty(512 << 20, dtype=torch.uint8, device=dev))


if __name__ == "__main__":
    what = sys.argv[1]
    arg = sys.argv[2] if len(sys.argv) > 2 else None
    if what == "bigfirst":
        bigfirst(int(arg or 2200000))
    elif what == "train":
        train(int(arg or 600))
    elif what == "killme":
        killme()
    elif what == "capped":
        capped()
    elif what == "loop":
        loop(float(arg or 4))
    else:
        sys.exit("stream_jobs.py: unknown job %r" % what)
