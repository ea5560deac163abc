"""`lactchain baselines train` and `lactchain leaderboard`: classic RL beside the LLM."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from lactchain.cli.common import DbOption, EnvOption, JsonOption, console, fail, open_existing, print_json, shown

app = typer.Typer(help="Classic RL agents (tabular, policy gradient) on the lab's envs, one move per action.",
                  no_args_is_help=True)


def _register_train() -> None:
    """`baselines train`: generated from the job's config (lactchain.jobs.baselines)."""
    from lactchain.cli.generate import make_command
    from lactchain.jobs.table import JOBS

    app.command("train")(make_command(JOBS["baselines train"], render=_render_train))


def _render_train(result: dict[str, Any]) -> None:
    table = Table(title=f"{result['agent']} on {result['env']} ({result['run_id']})", show_header=False)
    table.add_row("training env steps", str(result["train"]["env_steps"]))
    for key, value in result["eval"].items():
        if isinstance(value, (int, float)):
            table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)


def leaderboard_cmd(
    env: EnvOption = "grid",
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every agent the registry has evaluated on --env (classic baselines, zero-shot and
    trained LLM actors) beside random play and the exact optimum (an oracle), greedy from
    every start state: success, mean return, optimal-move ratio, the exact expected
    return where the env's solver values a policy (Blackjack), env steps spent training."""
    from lactchain.leaderboard import COLUMNS, format_cell, leaderboard

    with open_existing(db, reading=True) as registry:  # a read: never writes a schema into the file
        try:
            rows = leaderboard(registry, env)
        except ValueError as exc:
            fail(str(exc))
            raise
    if as_json:
        print_json({"env": env, "rows": rows})
        return
    table = Table(title=f"leaderboard: {env} (greedy from every start state)")
    for title, _ in COLUMNS:
        table.add_column(title, justify="left" if title in ("agent", "run") else "right",
                         no_wrap=title in ("agent", "run"))
    for row in rows:
        table.add_row(*(shown(format_cell(row[key])) for _, key in COLUMNS))
    console.print(table)
