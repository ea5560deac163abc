"""Where a run's log is: its own (a detached run writes `runs/<id>/log.txt`), or, for a
phase or cell run in its parent's process, the parent's. `runs logs` and the console's
Log tab say the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run_log(registry: Any, run: dict[str, Any]) -> Path:
    """The path the run recorded for its log, else `runs/<id>/log.txt` (which may not exist)."""
    return Path(run.get("log_path") or registry.run_dir(run["id"]) / "log.txt")


def holding_log(registry: Any, run: dict[str, Any]) -> dict[str, Any] | None:
    """For a run without a log of its own: its parent when the parent's log exists (it ran
    inside the parent's process, whose log holds its lines), else None."""
    if not run.get("parent_id") or run_log(registry, run).exists():
        return None
    try:
        parent = registry.get_run(run["parent_id"])
    except (KeyError, ValueError):  # the parent was deleted
        return None
    return parent if run_log(registry, parent).exists() else None
