"""Fake torch.cuda: lazy initialisation as torch does it (a module-level _lazy_init)."""
from . import memory  # noqa: F401

_initialized = False


def is_initialized():
    return _initialized


def _lazy_init():
    global _initialized
    _initialized = True
