"""`lactchain play` prints with `render_summary` (the job: lactchain.jobs.rollouts), and
the actor options the hand-written bench commands still declare."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from lactchain.cli.common import console
from lactchain.jobs.parts import ACTOR_HELP
from lactchain.jobs.rollouts import CONSTRAINED_HELP

ActorOption = Annotated[str, typer.Option("--actor", help=ACTOR_HELP)]
ConstrainedOption = Annotated[bool, typer.Option("--constrained/--free", help=CONSTRAINED_HELP)]


def render_summary(result: dict[str, Any]) -> None:
    table = Table(title=f"play {result['run_id']}", show_header=False)
    for key in ("episodes", "success_rate", "mean_return", "mean_optimal_ratio", "parse_failure_rate",
                "lenient_parse_rate", "env_steps_per_s"):
        value = result[key]
        if value is None:  # e.g. Blackjack has no optimal move count to compare with
            continue
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)
