"""Where a run's adapter lies: a run's newest `adapter` artifact, or (an old pipeline's)
the adapter its saved loop state goes on from. Unchecked lookups for labels and notes;
`lactchain.jobs.checks.resolve_adapter` is the checked one a run starts from."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def adapter_path(registry: Any, spec: str) -> str | None:
    """The folder `spec` names as an adapter, unchecked (a list row's label, not a load): a
    folder as given, or a run's newest adapter; None where neither is."""
    if Path(spec).is_dir():
        return str(Path(spec))
    try:
        return run_adapter(registry, registry.get_run(spec))
    except (KeyError, ValueError):  # no such run, an ambiguous prefix
        return None


def run_adapter(registry: Any, run: dict[str, Any]) -> str | None:
    """A run's newest `adapter` artifact (an old pipeline's: its saved state's)."""
    art = registry.latest_artifact(run["id"], "adapter") or saved_state_adapter(registry, run)
    return art["path"] if art else None


def saved_state_adapter(registry: Any, run: dict[str, Any]) -> dict[str, Any] | None:
    """A pipeline run made before pipelines named their adapter (an `adapter` artifact): the
    adapter its saved loop state goes on from, where that folder is still there."""
    if run["kind"] != "pipeline":
        return None
    from lactchain.loop.bookkeeping import load_state

    try:
        adapter = (load_state(registry, run["id"]) or {}).get("adapter")
    except ValueError:  # an unreadable state file: as if it named none
        return None
    return {"path": adapter} if adapter and Path(adapter).is_dir() else None
