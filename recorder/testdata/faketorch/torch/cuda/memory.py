"""Fake torch.cuda.memory: remembers how history was enabled; the dump copies a real snapshot
(FAKE_TORCH_SNAPSHOT) so gpurec's conversion runs on genuine data."""
import os
import shutil

history = []
contexts = []


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=0, **kw):
    history.append((max_entries, stacks))
    contexts.append(context)


def _dump_snapshot(path):
    shutil.copy(os.environ["FAKE_TORCH_SNAPSHOT"], path)


fraction = []


def set_per_process_memory_fraction(f, device=None):
    fraction.append((f, device))
