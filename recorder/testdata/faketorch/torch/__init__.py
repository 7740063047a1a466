"""A stand-in for torch in gpurec's torch-mode CI test (no torch, no GPU there): only what
gpurec's sitecustomize touches."""
from . import cuda  # noqa: F401
from .cuda import OutOfMemoryError  # noqa: F401 (torch.OutOfMemoryError is torch.cuda's)
