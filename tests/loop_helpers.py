"""The loop on the tiny models in a scratch registry, for tests that assert on its curve."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run_tiny_loop(tmp_path: Path, cfg: Any, name: str) -> tuple[dict[str, Any], dict[str, Any], list[float], Any]:
    """Run `cfg` (a PipelineConfig) under a fresh pipeline run: (result, recorded params,
    [success before, after each iteration], the registry, still open for more checks)."""
    from lactchain.runs.lifecycle import run_context
    from lactchain.loop.pipeline import run_pipeline
    from lactchain.runs.registry import Registry

    reg = Registry(tmp_path / "registry.db")
    with run_context(reg, "pipeline", name=name, params=cfg.params(), quiet=True) as handle:
        out = run_pipeline(handle, cfg)
    return out, reg.params(handle.run_id), [row["success_rate"] for row in out["curve"]], reg
