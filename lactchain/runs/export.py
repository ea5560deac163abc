"""Runs out of the registry, to where people look: TensorBoard event files (every logged
metric as a scalar at its step and wall time, the params and a run's note as hparams
beside the final metrics) or CSV (one row per logged value, and the params and tags as JSON).

    lactchain runs export RUN... --format tensorboard --out exports/
    tensorboard --logdir exports/

Each run gets its own folder, `<out>/<run id>/`, so TensorBoard shows runs side by side;
exporting a run again replaces what its folder held.
Writing goes through TensorBoard's own writer (`torch.utils.tensorboard.SummaryWriter`).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Sequence

from lactchain.runs.schema import NOTE_TAG

FORMATS = ("tensorboard", "csv")


def _hparam(value: Any) -> Any:
    """A param as TensorBoard's hparams take it: numbers and bools as they are, the rest as text."""
    if isinstance(value, bool) or (isinstance(value, (int, float)) and math.isfinite(value)):
        return value
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _history(registry: Any, run_id: str) -> dict[str, list[dict[str, Any]]]:
    return {key: registry.metric_history(run_id, key) for key in registry.metric_keys(run_id)}


def export_run(registry: Any, run_id: str, out: Path, fmt: str) -> Path:
    """One run into `out/<run id>/`; returns that folder."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    run = registry.get_run(run_id)
    folder = out / run["id"]
    folder.mkdir(parents=True, exist_ok=True)
    params, tags = registry.params(run["id"]), registry.tags(run["id"])
    history = _history(registry, run["id"])
    if fmt == "csv":
        with (folder / "metrics.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["key", "step", "value", "time_ms"])
            for key, rows in history.items():
                for r in rows:
                    writer.writerow([key, r["step"], r["value"], r["ts_ms"]])
        (folder / "params.json").write_text(json.dumps({"run": run["id"], "kind": run["kind"], "name": run["name"],
                                                        "status": run["status"], "params": params, "tags": tags},
                                                       indent=2,
                                                       default=str) + "\n")
        return folder
    from torch.utils.tensorboard import SummaryWriter

    for earlier in folder.glob("events.out.tfevents.*"):  # an export again replaces the last (not 2 curves)
        earlier.unlink()
    writer = SummaryWriter(log_dir=str(folder))
    try:
        for key, rows in history.items():
            for r in rows:
                if r["value"] is not None and math.isfinite(r["value"]):
                    walltime = r["ts_ms"] / 1000 if r["ts_ms"] is not None else None
                    writer.add_scalar(key, r["value"], global_step=r["step"], walltime=walltime)
        final = {f"final/{k}": v for k, v in registry.latest_metrics(run["id"]).items()
                 if v is not None and math.isfinite(v)}
        hparams = {k: _hparam(v) for k, v in params.items() if v is not None}
        note = {NOTE_TAG: tags[NOTE_TAG]} if tags.get(NOTE_TAG) else {}  # a column in TensorBoard's HParams table
        writer.add_hparams({"kind": run["kind"], "status": run["status"], **note, **hparams}, final, run_name=".")
    finally:
        writer.close()
    return folder


def export_runs(registry: Any, run_ids: Sequence[str], out: Path, fmt: str) -> list[Path]:
    """Every run of `run_ids` (ids or unique prefixes), each into its own folder."""
    resolved = [registry.resolve_run_id(r) for r in run_ids]  # every id checked before anything is written
    return [export_run(registry, run_id, out, fmt) for run_id in resolved]
