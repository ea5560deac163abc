"""`lactchain bench motif`: the LLM-judged reward line end to end, as one results table.

Captioned Blackjack hands from a random and the optimal policy (the same seeded deals),
judged by each judge (the rule judge is the calibration reference), a Bradley-Terry
reward model per judge, and Q-learning agents on the extrinsic, intrinsic and mixed
reward, all scored on the same seeded hands as the exact optimum and random play.
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
    from lactchain.captions import captioned_episodes, collect_runs
    from lactchain.envs.catalog import make_env
    from lactchain.judge import LLMJudge, RuleJudge, agreement, judge_in_batches, label_rows, pair_episodes
    from lactchain.motif import CaptionReward, train_and_score_agents
    from lactchain.registry import Registry
    from lactchain.train.reward_model import RewardModel, caption_report, labelled_pairs, train_reward_model

    env = make_env("blackjack")
    result: dict[str, Any] = {"env": "blackjack", "episodes_per_policy": episodes, "pairs": pairs,
                              "pairing": pairing, "critic": critic, "judges": {}, "reward_models": {}}
    with tempfile.TemporaryDirectory() as folder:
        reg = Registry(Path(folder) / "bench.db")
        runs = collect_runs(reg, env, ("random", "optimal"), episodes, seed=seed)
        all_episodes = captioned_episodes(reg, runs)
        chosen = pair_episodes(all_episodes, pairs, pairing, seed)
        captions = {e.caption: e.true_return for e in all_episodes}
        intrinsic: dict[str, CaptionReward] = {}
        for name in names:
            err_console.print(f"judging {len(chosen)} pairs with {name}")
            if name == "rule":
                judge: Any = RuleJudge()
            else:
                from lactchain.models.actor import Actor

                judge = LLMJudge(Actor.load(name), seed=seed)
            rows = label_rows(chosen, judge_in_batches(judge, chosen, "blackjack"), judge, "blackjack")
            result["judges"][name] = agreement(rows)
            usable = labelled_pairs(rows)
            if len(usable) < 2:
                result["reward_models"][name] = {"skipped": f"{len(usable)} usable labels"}
                continue
            err_console.print(f"training the reward model on {name}'s {len(usable)} labels")
            model = RewardModel(critic)
            fit = train_reward_model(model, usable, epochs=epochs, seed=seed)
            report = caption_report(model, list(captions), list(captions.values()))
            fit["rank_correlation"] = report["rank_correlation"]
            result["reward_models"][name] = fit
            intrinsic[name] = CaptionReward(model, report["score_mean"], report["score_std"])
        err_console.print(f"training and scoring agents ({train_episodes} training hands, {eval_episodes} scored)")
        agents = train_and_score_agents(env, None, train_episodes=train_episodes, eval_episodes=eval_episodes,
                                        seed=seed, kinds=("extrinsic",))["agents"]
        for name, reward in intrinsic.items():
            more = train_and_score_agents(env, reward, train_episodes=train_episodes, eval_episodes=eval_episodes,
                                          seed=seed, kinds=("intrinsic", "mixed"), references=False)["agents"]
            agents[f"intrinsic ({name})"], agents[f"mixed ({name})"] = more["intrinsic"], more["mixed"]
        result["agents"] = agents
        solver = env.solver()
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
