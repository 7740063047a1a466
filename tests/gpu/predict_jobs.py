"""predict_jobs.py: the corpus jobs of gpurec predict beside predict_job.py (tests/gpu/predict_corpus.py runs them).

  python3 predict_jobs.py JOB --value N [--steps 3] [--cap-bytes B]

JOB (the value is what differs between runs):
  gpt_seq     the GPT-2-like training job of predict_job.py at batch 4, sequence length N: its attention is
              written out (softmax(q k^T), not SDPA/flash), so the scores are quadratic in N
  conv_batch  ResNet-18 (torchvision, random weights, 100 classes) training, SGD momentum, 128 x 128 images, batch N
  conv_image  the same at batch 16, N x N images
  infer_batch generate-like inference without grad: a 6 x 768 decoder serves five rounds of N prompts of
              different lengths (96, 200, 40, 160, 128 tokens), each followed by 16 decoding steps with a KV
              cache grown by torch.cat (no static cache)

--cap-bytes: torch.cuda.set_per_process_memory_fraction(B / total), the allocator may hold at most B (a smaller
card, emulated; or a share of the GPU for runs side by side). An out-of-memory error is caught and reported.
Prints one line `GPUMEM_RESULT {json}`: max_memory_reserved/allocated, num_alloc_retries, num_ooms, oom, the value,
the allocator setting in force, the device."""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from predict_job import GPT  # noqa: E402  (the same model as the batch job)

VOCAB = 16384


def gpt_seq(n, steps, dev):
    model = GPT(seq=n).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x = torch.randint(0, VOCAB, (4, n), generator=g).to(dev)
        y = torch.randint(0, VOCAB, (4, n), generator=g).to(dev)
        loss = F.cross_entropy(model(x).view(-1, VOCAB), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def conv(batch, image, steps, dev):
    import torchvision
    model = torchvision.models.resnet18(num_classes=100).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x = torch.randn(batch, 3, image, image, generator=g).to(dev)
        y = torch.randint(0, 100, (batch,), generator=g).to(dev)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


class DecBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, cache):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        if t > 1:
            T = k.shape[2]
            mask = torch.ones(t, T, device=x.device, dtype=torch.bool).tril(T - t)
            att = att.masked_fill(~mask, float("-inf"))
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)))), (k, v)


class Decoder(nn.Module):
    def __init__(self, d=768, layers=6, heads=12, max_pos=1024):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList(DecBlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, idx, start, caches):
        pos = torch.arange(start, start + idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        new = []
        for blk, c in zip(self.blocks, caches):
            x, kv = blk(x, c)
            new.append(kv)
        return self.head(self.ln(x[:, -1:])), new  # the next token's logits only, as generate does


def infer_batch(n, steps, dev):
    model = Decoder().to(dev).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for plen in (96, 200, 40, 160, 128)[: max(steps, 1) + 2]:
            idx = torch.randint(0, VOCAB, (n, plen), generator=g).to(dev)
            logits, caches = model(idx, 0, [None] * len(model.blocks))
            for i in range(16):
                nxt = logits.argmax(dim=-1)
                logits, caches = model(nxt, plen + i, caches)
            del logits, caches, idx


JOBS = {
    "gpt_seq": lambda n, s, d: gpt_seq(n, s, d),
    "conv_batch": lambda n, s, d: conv(n, 128, s, d),
    "conv_image": lambda n, s, d: conv(16, n, s, d),
    "infer_batch": lambda n, s, d: infer_batch(n, s, d),
}


def report(extra):
    st = torch.cuda.memory_stats()
    res = {"max_memory_reserved": torch.cuda.max_memory_reserved(), "max_memory_allocated": torch.cuda.max_memory_allocated(),
           "num_alloc_retries": st.get("num_alloc_retries", 0), "num_ooms": st.get("num_ooms", 0),
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "device": torch.cuda.get_device_name(0),
           "total_memory": torch.cuda.get_device_properties(0).total_memory, "torch": torch.__version__}
    res.update(extra)
    print("GPUMEM_RESULT " + json.dumps(res), flush=True)


def cap_memory(cap_bytes):
    """The allocator may hold at most cap_bytes (0: no cap)."""
    if cap_bytes:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total), 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("job", choices=sorted(JOBS))
    ap.add_argument("--value", type=int, required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--cap-bytes", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    cap_memory(a.cap_bytes)
    oom = False
    try:
        JOBS[a.job](a.value, a.steps, dev)
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError:
        oom = True
    report({"job": a.job, "value": a.value, "steps": a.steps, "cap_bytes": a.cap_bytes, "oom": oom})


if __name__ == "__main__":
    main()
