"""An unmodified "training script" for gpurec's torch-mode test: imports torch, touches CUDA."""
import torch

torch.cuda._lazy_init()  # what the first CUDA tensor does
assert torch.cuda.memory.history == [(1234, "python")], torch.cuda.memory.history
print("history enabled by gpurec")
