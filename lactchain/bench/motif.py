"""`bench motif`: the LLM-judged reward line end to end, as one results table.

Captioned Blackjack hands from a random and the optimal policy (the same seeded deals),
judged by each judge (the rule judge is the calibration reference), a Bradley-Terry
reward model per judge, and Q-learning agents on the extrinsic, intrinsic and mixed
reward, all scored on the same seeded hands as the exact optimum and random play.
Every step is the lab's own job (collect, judge, train-reward, reward-agents from
lactchain.jobs.motif), run in this process as a child run of the bench's run.
No torch at the top: the CLI and the job table import the config at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from lactchain.config import Config, ConfigError, option
from lactchain.envs.catalog import make_env

PAIRINGS = ("state", "random")


@dataclass
class MotifBenchConfig(Config):
    """The judges, the reward models' backbone and every step's budget."""

    judges: str = option("rule,smollm2-135m", "Comma-separated judges: 'rule' and/or actor presets.")
    critic: str = option("minilm-l6", "Embedding backbone of the reward models (critic preset).")
    episodes: int = option(300, "Hands collected per policy (random, optimal).", min=10, max=1_000_000)
    pairs: int = option(200, "Caption pairs per judge.", min=2, max=1_000_000)
    pairing: str = option("state", "state (same dealt hand) or random.", choices=PAIRINGS)
    train_episodes: int = option(100_000, "Hands each agent trains on.", min=1, max=100_000_000)
    eval_episodes: int = option(100_000, "Hands each agent is scored on.", min=1, max=100_000_000)
    epochs: int = option(40, "Reward-model epochs.", min=1, max=10_000)
    seed: int = option(0, "Seed of the deals, the pairs and the agents.", min=0, max=2**32 - 1)

    def check(self) -> None:
        names = [j.strip() for j in self.judges.split(",") if j.strip()]
        if not names:
            self.refuse("judges", "name at least one judge (rule, or an actor preset)")
        self.judges = ",".join(dict.fromkeys(names))

    @property
    def judge_names(self) -> list[str]:
        return self.judges.split(",")


Step = Callable[[str, dict[str, Any]], dict[str, Any]]  # (job command, values) -> {"run_id", **result}


def run_motif_bench(cfg: MotifBenchConfig, step: Step, say: Callable[[str], None]) -> dict[str, Any]:
    """The table: each judge's agreement, each reward model's fit, every agent's score.
    `step` runs one Motif job (the caller's child run)."""
    def job(command: str, **values: Any) -> dict[str, Any]:
        return step(command, {**values, "seed": cfg.seed})

    result: dict[str, Any] = {"env": "blackjack", "episodes_per_policy": cfg.episodes, "pairs": cfg.pairs,
                              "pairing": cfg.pairing, "critic": cfg.critic, "judges": {}, "reward_models": {}}
    say(f"collecting {cfg.episodes} hands of the random and the optimal policy")
    collected = [job("collect", policy=policy, episodes=cfg.episodes, env="blackjack")["run_id"]
                 for policy in ("random", "optimal")]  # the same seeded deals: episodes pair by start state
    reward_runs: dict[str, str] = {}
    for name in cfg.judge_names:
        say(f"judging {cfg.pairs} pairs with {name}")
        judged = job("judge", from_runs=collected, judge=name, pairs=cfg.pairs, pairing=cfg.pairing)
        result["judges"][name] = {k: v for k, v in judged.items() if k not in ("run_id", "judge", "episodes")}
        say(f"training the reward model on {name}'s labels")
        try:
            fit = job("train-reward", pairs_from=judged["run_id"], critic=cfg.critic, epochs=cfg.epochs)
        except ConfigError as exc:  # fewer than two usable labels
            result["reward_models"][name] = {"skipped": str(exc)}
            continue
        result["reward_models"][name] = {k: v for k, v in fit.items() if k not in ("run_id", "reward_model")}
        reward_runs[name] = fit["run_id"]
    say(f"training and scoring agents ({cfg.train_episodes} training hands, {cfg.eval_episodes} scored)")
    budget = {"train_episodes": cfg.train_episodes, "eval_episodes": cfg.eval_episodes}
    agents = dict(job("reward-agents", **budget)["agents"])  # extrinsic, the optimum (oracle) and random
    for name, run in reward_runs.items():  # each judge's reward: the intrinsic and mixed agents only
        more = job("reward-agents", reward_run=run, agents=["intrinsic", "mixed"], references=False, **budget)["agents"]
        agents[f"intrinsic ({name})"], agents[f"mixed ({name})"] = more["intrinsic"], more["mixed"]
    result["agents"] = agents
    solver = make_env("blackjack").solver()
    result["optimal_win_rate_exact"] = solver.win_rate()
    result["optimal_expected_return_exact"] = solver.expected_return()
    return result
