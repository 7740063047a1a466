"""Workload 2: inference of a transformer encoder on batches of random sequence lengths
(64..1536 tokens, seeded), under torch.no_grad: the varying activation sizes fragment the
cache. Run with PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64 for the corpus's max_split snapshot."""
import random

import torch
import torch.nn as nn

import _common


def main():
    dev = _common.start(seed=2)
    d, vocab = 768, 16384
    emb = nn.Embedding(vocab, d).to(dev)
    layer = nn.TransformerEncoderLayer(d, 12, 4 * d, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).to(dev).eval()
    head = nn.Linear(d, vocab).to(dev)
    rng = random.Random(2)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(12):
            seq = rng.randint(64, 1536)
            batch = rng.choice([2, 4, 8])
            x = torch.randint(0, vocab, (batch, seq), generator=g).to(dev)
            out = head(enc(emb(x)))
            probs = torch.softmax(out.float(), dim=-1)
            top = probs.argmax(dim=-1).cpu()
            del out, probs, top, x
    _common.finish("infer_varlen")


if __name__ == "__main__":
    main()
