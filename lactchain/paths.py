"""Where runs, the registry and prepared model weights live on disk.

Defaults are relative to the working directory (`runs/`), so a clone is
self-contained; environment variables move them (tests point them at tmp dirs).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def runs_root() -> Path:
    """Root of run folders: $LACTCHAIN_RUNS, else ./runs."""
    return Path(os.environ.get("LACTCHAIN_RUNS", "runs")).expanduser().absolute()


def default_db_path() -> Path:
    """Registry file: $LACTCHAIN_DB, else <runs root>/registry.db."""
    env = os.environ.get("LACTCHAIN_DB")
    return Path(env).expanduser().absolute() if env else runs_root() / "registry.db"


def models_dir() -> Path:
    """Prepared (converted) model weights: $LACTCHAIN_MODELS, else <runs root>/models."""
    env = os.environ.get("LACTCHAIN_MODELS")
    return Path(env).expanduser().absolute() if env else runs_root() / "models"


# What a refused write looks like once it has passed through torch or the OS.
_DISK_FAULT_ERRNOS = {28, 27, 122}  # ENOSPC, EFBIG, EDQUOT
_DISK_FAULT_WORDS = ("inline_container", "PytorchStreamWriter", "file write failed", "No space left",
                     "File too large", "Disk quota exceeded")


def disk_fault(exc: BaseException) -> str | None:
    """One line for an error that is a refused write (a full disk, a file size limit, a
    quota), wherever it was raised; None for any other error. The CLI's last resort for
    saves that no `writing` block wraps (a trainer's own checkpoints)."""
    if isinstance(exc, OSError) and exc.errno in _DISK_FAULT_ERRNOS or \
            isinstance(exc, (RuntimeError, OSError)) and any(w in str(exc) for w in _DISK_FAULT_WORDS):
        cause = " ".join(str(exc).split())[:160]
        return (f"a write was refused ({cause}): a full disk or a file size limit? free space, then "
                "`lactchain runs resume` the run")
    return None


@contextmanager
def writing(path: str | os.PathLike[str], what: str) -> Iterator[None]:
    """Around a save (torch.save, save_pretrained, a state file): a failed write (a full
    disk, a file size limit, a folder gone) becomes one OSError naming the file and the
    fix, not a long RuntimeError from deep inside torch; the run then ends FAILED with
    its earlier checkpoints intact, and `runs resume` continues from the newest."""
    try:
        yield
    except (RuntimeError, OSError) as exc:
        cause = " ".join(str(exc).split())[:160]
        raise OSError(f"could not write {what} {path} ({cause}): a full disk or a file size limit? free space, "
                      "then `lactchain runs resume` the run") from None
