"""Checkpoints that prove themselves: every checkpoint folder a job records gets a
manifest (each file's size and SHA-256), written last and atomically, so a resume can
tell a whole checkpoint from one a crash, a full disk or a stray edit damaged, and fall
back to the newest whole one (`runs.resume.latest_checkpoint`). A folder without a
manifest (saved before manifests existed) is trusted as before: its loader's own checks
(`lactchain.runs.files`) are what stand between it and a traceback."""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
TRAINER_CHECKPOINTS = "checkpoints"  # a train-actor run's trainer checkpoints: `<run folder>/checkpoints/checkpoint-N`


class DamagedCheckpoint(ValueError):
    """Every checkpoint a resume could use is damaged: a refusal, never a silent fresh start."""


def whole(folder: str | os.PathLike, what: str = "checkpoint") -> None:
    """Refuse (DamagedCheckpoint, one line) a sealed folder whose files changed since."""
    problem = damage(folder)
    if problem is not None:
        raise DamagedCheckpoint(f"{what} {folder} is damaged ({problem}); train it again, restore its files, or "
                                "point at another run")


def sha256_file(path: Path) -> str:
    """A file's SHA-256, read in 1 MiB blocks (a checkpoint, a dataset's data file)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@lru_cache(maxsize=256)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    """A file's SHA-256 once per version of it: one resume verifies the same checkpoint
    from several places (the CLI's checks, `runs resume`, the trainer's start point)."""
    return sha256_file(Path(path))


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST and not p.name.endswith(".tmp"))


def seal(folder: str | os.PathLike) -> Path:
    """Write the folder's manifest (relative path -> size, sha256), atomically, last."""
    folder = Path(folder)
    files = {str(p.relative_to(folder)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in _files(folder)}
    path = folder / MANIFEST
    tmp = path.with_name(MANIFEST + ".tmp")
    tmp.write_text(json.dumps({"files": files}, indent=1))
    os.replace(tmp, path)
    return path


def damage(folder: str | os.PathLike) -> str | None:
    """What is wrong with a sealed checkpoint folder, in words ('optimizer.pt: 812 bytes,
    sealed with 4096'); None when it is whole, or was never sealed."""
    folder = Path(folder)
    if not folder.is_dir():
        return f"{folder} is gone"
    path = folder / MANIFEST
    if not path.is_file():
        return None  # saved before manifests: trusted as before
    try:
        files: dict[str, Any] = json.loads(path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{path} is not a manifest"
    for name, want in files.items():
        file = folder / name
        if not file.is_file():
            return f"{name} is missing"
        size = file.stat().st_size
        if size != want.get("bytes"):
            return f"{name}: {size} bytes, sealed with {want.get('bytes')}"
        if _sha256_of(str(file), size, file.stat().st_mtime_ns) != want.get("sha256"):
            return f"{name}: its content changed since it was sealed"
    return None
