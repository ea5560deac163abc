"""`lactchain bench motif`: generated from its job (`lactchain.jobs.bench_motif`); this
module draws its table."""

from __future__ import annotations

from typing import Any

from lactchain.cli.common import console
from lactchain.motif.judge import agreement_text


def render_motif(result: dict[str, Any]) -> None:
    """One row per judge, reward model and agent."""
    from rich.table import Table

    table = Table(title="bench motif (Blackjack)")
    for column in ("row", "value"):
        table.add_column(column)
    for name, stats in result["judges"].items():
        table.add_row(f"judge {name}", agreement_text(stats))
    for name, fit in result["reward_models"].items():
        table.add_row(f"reward model ({name})", str(fit) if "skipped" in fit else
                      f"held-out accuracy {fit['held_out_accuracy']:.3f}, Spearman {fit['rank_correlation']:.3f}")
    for name, score in result["agents"].items():
        table.add_row(f"agent {name}", f"win rate {score['win_rate']:.4f}, mean return {score['mean_return']:+.4f}")
    console.print(table)
    console.print(f"table: {result['report']}", highlight=False)
