"""How the Motif jobs' results print (the jobs themselves: lactchain.jobs.motif):
`collect` captioned episodes, `judge` caption pairs, `train-reward` a Bradley-Terry
reward model, `reward-agents`: Q-learning on that reward."""

from __future__ import annotations

from typing import Any, Callable

from lactchain.cli.common import console
from lactchain.cli.loop_cmd import result_table


def render_table(command: str) -> Callable[[dict[str, Any]], None]:
    return lambda result: result_table(f"{command} {result['run_id']}", result)


def render_agents(result: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"reward-agents {result['run_id']} ({result['eval_episodes']} seeded hands)")
    for column in ("agent", "win rate", "mean return", "draws"):
        table.add_column(column)
    for name, score in result["agents"].items():
        table.add_row(name, f"{score['win_rate']:.4f}", f"{score['mean_return']:+.4f}", f"{score['draw_rate']:.4f}")
    console.print(table)
