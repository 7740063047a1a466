"""Workload 1: training loop of a small transformer language model with AdamW under bf16
autocast (mixed precision). Random weights from a config, random tokens, 4 steps. Run with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for the corpus's expandable-segments snapshot."""
import torch
import torch.nn as nn

import _common


class LM(nn.Module):
    def __init__(self, vocab=8192, d=512, layers=4, heads=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)))


def main():
    dev = _common.start(seed=1)
    model = LM().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    for step in range(4):
        x = torch.randint(0, 8192, (12, 256), generator=g).to(dev)
        y = torch.randint(0, 8192, (12, 256), generator=g).to(dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = nn.functional.cross_entropy(logits.float().view(-1, 8192), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    _common.finish("train_amp")


if __name__ == "__main__":
    main()
