"""Workload 5: training a torchvision ResNet-18 (random weights, built from the constructor)
on random 160x160 images with changing batch sizes, Adam, bf16 autocast. cuDNN workspaces
come through the caching allocator too."""
import torch
import torch.nn as nn
import torchvision

import _common


def main():
    dev = _common.start(seed=5)
    model = torchvision.models.resnet18(num_classes=100).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(5)
    for bs in [32, 64, 48, 64]:
        x = torch.randn(bs, 3, 160, 160, generator=g).to(dev)
        y = torch.randint(0, 100, (bs,), generator=g).to(dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    _common.finish("train_cnn")


if __name__ == "__main__":
    main()
