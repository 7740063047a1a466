"""nccl_owner.py: memory that no framework request explains, for the owner attribution (issue
17 item 3): a one-rank NCCL process group (NCCL maps its buffers through the VMM API) and, with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, PyTorch's own mapped segments. Run under
`gpurec --mode=native`; the trace's VMM events then name their owner ("[libnccl.so.2] < ...")."""
import os

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29555")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
x = torch.ones(64 << 20, device="cuda")  # 256 MiB: a segment of its own
for _ in range(3):
    dist.all_reduce(x)
torch.cuda.synchronize()
print("GPUMEM_RESULT nccl_owner sum=%d" % int(x[0].item()))
dist.destroy_process_group()
