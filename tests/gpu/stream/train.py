"""A nanoGPT-style training run written from a config (random tokens): GPT (6 layers, 768 wide,
block 256), AdamW, bf16 autocast, gradient accumulation 2, an evaluation every EVAL iterations
and a checkpoint (torch.save) every CKPT, for SECONDS of wall time. Prints the job's own
max_memory_reserved at the end."""
import json, math, os, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 40
EVAL, CKPT = 40, 80
torch.manual_seed(0)
V, L, H, D, T, B = 8192, 6, 12, 768, 256, 16
class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.ln1 = nn.LayerNorm(D); s.attn = nn.Linear(D, 3 * D); s.proj = nn.Linear(D, D)
        s.ln2 = nn.LayerNorm(D); s.fc = nn.Linear(D, 4 * D); s.fc2 = nn.Linear(4 * D, D)
    def forward(s, x):
        q, k, v = s.attn(s.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(x.size(0), T, H, D // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(x.shape)
        x = x + s.proj(y)
        return x + s.fc2(F.gelu(s.fc(s.ln2(x))))
class GPT(nn.Module):
    def __init__(s):
        super().__init__(); s.wte = nn.Embedding(V, D); s.wpe = nn.Embedding(T, D)
        s.blocks = nn.ModuleList(Block() for _ in range(L)); s.lnf = nn.LayerNorm(D); s.head = nn.Linear(D, V, bias=False)
    def forward(s, idx, tgt=None):
        x = s.wte(idx) + s.wpe(torch.arange(T, device=idx.device))
        for b in s.blocks: x = b(x)
        logits = s.head(s.lnf(x))
        return logits, (F.cross_entropy(logits.view(-1, V), tgt.view(-1)) if tgt is not None else None)
m = GPT().cuda()
opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
def batch():
    x = torch.randint(0, V, (B, T), device="cuda"); return x, torch.roll(x, -1, 1)
t0, it = time.time(), 0
while time.time() - t0 < SECONDS:
    if it % EVAL == 0:
        m.eval()
        with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
            for _ in range(5): m(*batch())
        m.train()
    if it % CKPT == 0 and it:
        torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, "/tmp/stream_ckpt.pt")
    for _ in range(2):
        with torch.autocast("cuda", torch.bfloat16):
            _, loss = m(*batch())
        (loss / 2).backward()
    opt.step(); opt.zero_grad(set_to_none=True); it += 1
torch.cuda.synchronize()
print("RESULT " + json.dumps({"max_memory_reserved": torch.cuda.max_memory_reserved(), "iters": it,
                              "allocs": torch.cuda.memory_stats()["allocation.all.allocated"]}))
