"""`lactchain bench motif`: the LLM-judged reward line end to end, as one results table.

Captioned Blackjack hands from a random and the optimal policy (the same seeded deals),
judged by each judge (the rule judge is the calibration reference), a Bradley-Terry
reward model per judge, and Q-learning agents on the extrinsic, intrinsic and mixed
reward, all scored on the same seeded hands as the exact optimum and random play.
Every step is the lab's own job (collect, judge, train-reward, reward-agents from
lactchain.jobs.motif), run in this process on a temporary registry.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from lactchain.cli.common import JsonOption, check_models, console, err_console, fail, print_json


def bench_motif(
    judges: Annotated[str, typer.Option("--judges", help="Comma-separated judges: 'rule' and/or actor presets.")] = "rule,smollm2-135m",
    critic: Annotated[str, typer.Option("--critic", help="Embedding backbone of the reward models (critic preset).")] = "minilm-l6",
    episodes: Annotated[int, typer.Option("--episodes", min=10, max=1_000_000, help="Hands collected per policy (random, optimal).")] = 300,
    pairs: Annotated[int, typer.Option("--pairs", min=2, max=1_000_000, help="Caption pairs per judge.")] = 200,
    pairing: Annotated[str, typer.Option("--pairing", help="state (same dealt hand) or random.")] = "state",
    train_episodes: Annotated[int, typer.Option("--train-episodes", min=1, max=100_000_000)] = 100_000,
    eval_episodes: Annotated[int, typer.Option("--eval-episodes", min=1, max=100_000_000)] = 100_000,
    epochs: Annotated[int, typer.Option("--epochs", min=1, max=10_000, help="Reward-model epochs.")] = 40,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1)] = 0,
    as_json: JsonOption = False,
) -> None:
    """Judge agreement with the true preference, reward-model accuracy and rank
    correlation, and agent win rates (extrinsic / intrinsic / mixed / optimal / random)."""
    names = [j.strip() for j in judges.split(",") if j.strip()]
    if not names:
        fail("--judges: name at least one judge (rule, or an actor preset)")
    for name in names:
        if name != "rule":
            check_models(name)
    check_models(critic=critic)  # before any job: a bad backbone would skip every reward model silently
    from lactchain.config import ConfigError
    from lactchain.envs.catalog import make_env
    from lactchain.jobs.control import run_job
    from lactchain.runs.registry import Registry

    result: dict[str, Any] = {"env": "blackjack", "episodes_per_policy": episodes, "pairs": pairs,
                              "pairing": pairing, "critic": critic, "judges": {}, "reward_models": {}}
    with tempfile.TemporaryDirectory() as folder, Registry(Path(folder) / "bench.db") as registry:

        def job(command: str, **values: Any) -> dict[str, Any]:
            """One Motif job (lactchain.jobs.motif), run here with its own config and checks."""
            return run_job(registry, command, {**values, "seed": seed})

        collected = [job("collect", policy=policy, episodes=episodes, env="blackjack")["run_id"]
                     for policy in ("random", "optimal")]  # the same seeded deals: episodes pair by start state
        reward_runs: dict[str, str] = {}
        for name in names:
            err_console.print(f"judging {pairs} pairs with {name}")
            judged = job("judge", from_runs=collected, judge=name, pairs=pairs, pairing=pairing)
            result["judges"][name] = {k: v for k, v in judged.items() if k not in ("run_id", "judge", "episodes")}
            err_console.print(f"training the reward model on {name}'s labels")
            try:
                fit = job("train-reward", pairs_from=judged["run_id"], critic=critic, epochs=epochs)
            except ConfigError as exc:  # fewer than two usable labels
                result["reward_models"][name] = {"skipped": str(exc)}
                continue
            result["reward_models"][name] = {k: v for k, v in fit.items() if k not in ("run_id", "reward_model")}
            reward_runs[name] = fit["run_id"]
        err_console.print(f"training and scoring agents ({train_episodes} training hands, {eval_episodes} scored)")
        budget = {"train_episodes": train_episodes, "eval_episodes": eval_episodes}
        agents = dict(job("reward-agents", **budget)["agents"])  # extrinsic, the optimum (oracle) and random
        for name, run in reward_runs.items():  # each judge's reward: the intrinsic and mixed agents only
            more = job("reward-agents", reward_run=run, agents=["intrinsic", "mixed"], references=False,
                       **budget)["agents"]
            agents[f"intrinsic ({name})"], agents[f"mixed ({name})"] = more["intrinsic"], more["mixed"]
        result["agents"] = agents
        solver = make_env("blackjack").solver()
        result["optimal_win_rate_exact"] = solver.win_rate()
        result["optimal_expected_return_exact"] = solver.expected_return()
    if as_json:
        print_json(result)
        return
    from rich.table import Table

    table = Table(title="bench motif (Blackjack)")
    for column in ("row", "value"):
        table.add_column(column)
    for name, stats in result["judges"].items():
        table.add_row(f"judge {name}", f"agreement {stats['agreement']:.3f}, answered {stats['answered_rate']:.3f}")
    for name, fit in result["reward_models"].items():
        table.add_row(f"reward model ({name})", str(fit) if "skipped" in fit else
                      f"held-out accuracy {fit['held_out_accuracy']:.3f}, Spearman {fit['rank_correlation']:.3f}")
    for name, score in result["agents"].items():
        table.add_row(f"agent {name}", f"win rate {score['win_rate']:.4f}, mean return {score['mean_return']:+.4f}")
    console.print(table)
