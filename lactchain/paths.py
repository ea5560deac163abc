"""Where runs, the registry and prepared model weights live on disk.

Defaults are relative to the working directory (`runs/`), so a clone is
self-contained; environment variables move them (tests point them at tmp dirs).
"""

from __future__ import annotations

import os
from pathlib import Path


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
