"""predict_job.py: a small GPT-2-like training job for gpurec predict (tests/gpu/predict_gpu.sh).

6 blocks, width 768, 12 heads, sequence 512, vocabulary 16384, AdamW, fp32, attention written
out (q k^T, softmax, v) so that its allocations are the job's own; random tokens, --steps steps
(default 3). --batch sets the batch. Prints one line `GPUMEM_RESULT {json}` with torch's
max_memory_reserved / max_memory_allocated, the batch and the allocator setting in force.
--cap-bytes B: the allocator may hold at most B (torch.cuda.set_per_process_memory_fraction, a
smaller card emulated); an out-of-memory error is then caught and reported ("oom": true), with
num_alloc_retries (tests/gpu/predict_corpus.py's largest-fit runs)."""
import argparse
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(s, s, device=x.device, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=16384, seq=512, d=768, layers=6, heads=12):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--cap-bytes", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    if a.cap_bytes:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.cap_bytes / total), 0)
    try:
        train(a, dev)
        oom = False
    except torch.cuda.OutOfMemoryError:
        oom = True
    st = torch.cuda.memory_stats()
    print("GPUMEM_RESULT " + json.dumps({
        "batch": a.batch, "value": a.batch, "steps": a.steps, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "num_alloc_retries": st.get("num_alloc_retries", 0), "num_ooms": st.get("num_ooms", 0),
        "cap_bytes": a.cap_bytes, "oom": oom,
        "device": torch.cuda.get_device_name(0), "total_memory": torch.cuda.get_device_properties(0).total_memory,
        "torch": torch.__version__}), flush=True)


def train(a, dev):
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    for _ in range(a.steps):
        x = torch.randint(0, 16384, (a.batch, 512), generator=g).to(dev)
        y = torch.randint(0, 16384, (a.batch, 512), generator=g).to(dev)
        loss = F.cross_entropy(model(x).view(-1, 16384), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
