"""Workload 3: training an MLP-heavy transformer stack with activation checkpointing
(torch.utils.checkpoint, non-reentrant) and a different batch size every step, SGD with
momentum, fp32. Recomputation in backward and the changing shapes stress block reuse."""
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import _common


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 8, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.ln(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


def main():
    dev = _common.start(seed=3)
    d = 512
    blocks = nn.ModuleList([Block(d) for _ in range(6)]).to(dev)
    head = nn.Linear(d, 10).to(dev)
    params = list(blocks.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    g = torch.Generator().manual_seed(3)
    for bs in [8, 24, 16, 32, 12]:
        x = torch.randn(bs, 200, d, generator=g).to(dev)
        y = torch.randint(0, 10, (bs,), generator=g).to(dev)
        h = x
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=False)
        loss = nn.functional.cross_entropy(head(h.mean(dim=1)), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    _common.finish("train_ckpt")


if __name__ == "__main__":
    main()
