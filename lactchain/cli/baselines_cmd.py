"""`lactchain baselines train` and `lactchain leaderboard`: classic RL beside the LLM."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from lactchain.cli.common import (
    DbOption,
    DetachOption,
    EnvOption,
    JsonOption,
    LineLog,
    RunIdOption,
    console,
    fail,
    finite,
    open_registry,
    print_json,
    run_job,
)

app = typer.Typer(help="Classic RL agents (tabular, policy gradient) on the lab's envs, one move per action.",
                  no_args_is_help=True)


def _known_agent(value: str) -> str:
    from lactchain.baselines.train import AGENTS

    if value not in AGENTS:
        raise typer.BadParameter(f"unknown agent {value!r}; known agents: {', '.join(AGENTS)}")
    return value


@app.command("train")
def train_cmd(
    ctx: typer.Context,
    agent: Annotated[str, typer.Option("--agent", "-a", callback=_known_agent,
                                       help="random, value-iteration (exact DP), q-learning, sarsa, mc (Monte-Carlo "
                                            "control), reinforce or actor-critic.")] = "q-learning",
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, max=10_000_000,
                                          help="Training episodes, from uniformly random start states.")] = 3000,
    gamma: Annotated[float, typer.Option("--gamma", callback=finite, min=0.0, max=1.0, help="Discount per move.")] = 0.9,
    alpha: Annotated[str, typer.Option("--alpha", help="Tabular step size: VALUE or START:END:STEPS[:exp].")] = "0.5",
    epsilon: Annotated[str, typer.Option("--epsilon", help="Tabular exploration: VALUE or START:END:STEPS[:exp] "
                                                           "over the agent's steps.")] = "1:0.05:20000",
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1)] = 0,
    env: EnvOption = "grid",
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Train a classic agent (one move per action) and evaluate it greedily from every
    start state of the env; the run (kind baseline) feeds `lactchain leaderboard`."""
    from lactchain.baselines.td import Schedule

    for name, value in (("--alpha", alpha), ("--epsilon", epsilon)):
        try:
            Schedule.parse(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=name) from None
    params = dict(agent=agent, episodes=episodes, gamma=gamma, alpha=alpha, epsilon=epsilon, seed=seed, env=env)

    def body(handle) -> dict[str, Any]:
        from lactchain.baselines.train import train_baseline

        line = LineLog()
        line(f"baselines train: {agent} on {env}, {episodes} episodes", force=True)
        try:
            return train_baseline(handle, env, agent, episodes, seed=seed, gamma=gamma, alpha=alpha, epsilon=epsilon,
                                  on_progress=lambda i, m: line(
                                      f"episode {i}/{episodes}: env steps {int(m['train/env_steps'])}, "
                                      f"mean return {m['train/mean_return']:.2f}"))
        except ModuleNotFoundError as exc:  # pragma: no cover - an agent whose module is missing
            fail(f"--agent {agent}: {exc}")
            raise

    run_job(ctx, kind="baseline", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"{agent} on {env}", render=_render_train)


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

    registry = open_registry(db)
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
        table.add_row(*(format_cell(row[key]) for _, key in COLUMNS))
    console.print(table)
