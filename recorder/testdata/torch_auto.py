"""An unmodified "training script" for gpurec's default-mode test: imports torch, touches CUDA,
says what it saw (the allocator setting in force, how history was enabled), then optionally
sleeps (FAKE_SLEEP seconds: time for a signal) and exits with FAKE_EXIT, or kills itself with
FAKE_KILL (a signal number) as an out-of-memory killer would."""
import os
import sys
import time

import torch

torch.cuda._lazy_init()  # what the first CUDA tensor does
print("PYTORCH_CUDA_ALLOC_CONF=%s" % os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "<unset>"))
print("history=%r context=%r" % (torch.cuda.memory.history, torch.cuda.memory.contexts))
sys.stdout.flush()
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
if os.environ.get("FAKE_KILL"):
    os.kill(os.getpid(), int(os.environ["FAKE_KILL"]))
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
