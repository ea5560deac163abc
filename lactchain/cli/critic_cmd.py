"""How `lactchain train-critic` prints its result (the job: lactchain.jobs.training)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from lactchain.cli.common import console


def render_summary(result: dict[str, Any]) -> None:
    table = Table(title=f"train-critic {result['run_id']}", show_header=False)
    for key in ("critic", "episodes", "train_steps", "val_steps", "start_epoch", "epochs"):
        table.add_row(key, str(result[key]))
    for key, value in result["metrics"].items():
        table.add_row(key, "-" if value is None else f"{value:.4f}")
    table.add_row("checkpoint", str(result["checkpoint"]))
    console.print(table)
