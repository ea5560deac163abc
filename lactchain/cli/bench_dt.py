"""`lactchain bench dt`: generated from its job (`lactchain.jobs.bench_dt`); this module
draws its table of mean rates and the targets."""

from __future__ import annotations

from typing import Any

from lactchain.cli.common import console

COLUMNS = ("bd_reached_heldout_bds", "order_match_heldout_instructions", "order_match_unseen_instructions",
           "goal_success", "baseline_bd_reached", "baseline_order_match_instructions", "planner_bd_reached")


def render_dt(result: dict[str, Any]) -> None:
    from rich.table import Table

    seeds = ",".join(str(s) for s in result["seeds"])
    table = Table(title=f"bench dt: {result['archive'].get('elites')} elites, {result['minutes']:g} min per model, "
                        f"seeds {seeds}")
    table.add_column("encoder")
    for col in COLUMNS:
        table.add_column(col.replace("_", " "))
    for encoder, values in result["mean"].items():
        table.add_row(encoder, *("-" if values.get(c) is None else f"{values[c]:.3f}" for c in COLUMNS))
    console.print(table)
    for encoder, checks in result["met"].items():
        console.print(f"{encoder}: " + ", ".join(f"{k} {'met' if ok else 'NOT met'} (target {result['targets'][k]:.2f})"
                                                  for k, ok in checks.items()))
    console.print(f"report: {result['report']}", highlight=False)
