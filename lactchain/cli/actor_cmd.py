"""How `lactchain train-actor` prints its result (the job: lactchain.jobs.training)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from lactchain.cli.common import console


def render_summary(result: dict[str, Any]) -> None:
    table = Table(title=f"train-actor {result['run_id']} ({result['loss_type']})", show_header=False)
    table.add_row("steps", str(result["steps"]))
    table.add_row("pairs", str(result["pairs"]))
    for key, value in result["final_metrics"].items():
        table.add_row(key, f"{value:.4g}")
    if result.get("s_per_step"):
        table.add_row("s / step", f"{result['s_per_step']:.3f}")
    table.add_row("adapter", result["adapter"])
    console.print(table)
    for w in result["warnings"]:
        console.print(f"[bold yellow]warning[/] [{w['code']}] at step {w['step']}: {w['message']}")
