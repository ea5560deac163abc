"""Library warnings that are not ours to fix, kept out of job logs and the user's terminal."""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def quiet_checkpointing_deprecation() -> Iterator[None]:
    """peft and TRL still read transformers' deprecated `is_gradient_checkpointing` (on every
    adapter load and LoRA wrap): a FutureWarning in every job log that is not ours to fix.
    Like `warnings.catch_warnings` under it, it swaps the process's filter list: a warning
    another thread raises meanwhile may be shown or hidden alike (harmless: it filters
    nothing else)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield
