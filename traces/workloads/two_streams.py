"""Workload 4: two CUDA streams. A side stream produces feature tensors that the default
stream consumes; the producer's tensors are handed over with record_stream, so their frees
complete only when the consumer's work is done (free_requested before free_completed).
Blocks allocated on the side stream are cached per stream: the allocator cannot reuse them
for default-stream requests."""
import torch
import torch.nn as nn

import _common


def main():
    dev = _common.start(seed=4)
    d = 1024
    prod = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d)).to(dev)
    cons = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d)).to(dev)
    side = torch.cuda.Stream()
    main_s = torch.cuda.current_stream()
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for i in range(10):
            rows = [512, 2048, 1024, 3072, 768][i % 5]
            x = torch.randn(rows, d, generator=g).to(dev)
            side.wait_stream(main_s)
            with torch.cuda.stream(side):
                feats = prod(x)
                extra = torch.empty(rows * 3, d, device=dev).uniform_()
            main_s.wait_stream(side)
            feats.record_stream(main_s)
            extra.record_stream(main_s)
            out = cons(feats) + extra[:rows]
            s = out.sum().item()
            del feats, extra, out, x
            _ = s
    _common.finish("two_streams")


if __name__ == "__main__":
    main()
