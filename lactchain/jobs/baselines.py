"""`baselines train` as a job: a classic agent (one move per action) trained on an env and
evaluated greedily from every start state; its run (kind baseline) feeds the leaderboard."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lactchain.config import SEED_MAX, Config, option
from lactchain.jobs.output import LineLog
from lactchain.envs.catalog import env_field, normalize_env_field
from lactchain.jobs.spec import Job


def agent_choices() -> tuple[str, ...]:
    from lactchain.baselines.train import AGENTS

    return tuple(AGENTS)


@dataclass
class BaselineConfig(Config):
    agent: str = option("q-learning", "random, value-iteration (exact DP), q-learning, sarsa, mc (Monte-Carlo "
                                      "control), reinforce or actor-critic.", short="-a", choices=agent_choices)
    episodes: int = option(3000, "Training episodes, from uniformly random start states.", short="-n", min=1,
                           max=10_000_000)
    gamma: float = option(0.9, "Discount per move.", min=0.0, max=1.0)
    alpha: str = option("0.5", "Tabular step size in (0, 1]: a VALUE, or a schedule of START, END and STEPS "
                               "joined by colons (linear; add :exp for exponential), e.g. 0.5 or 0.5:0.05:20000.")
    epsilon: str = option("1:0.05:20000", "Tabular exploration in [0, 1] over the agent's steps: a VALUE, or a "
                                          "schedule of START, END and STEPS joined by colons (linear; add :exp for "
                                          "exponential), e.g. 1:0.05:20000.")
    seed: int = option(0, "Seed.", min=0, max=SEED_MAX)
    env: str = env_field(form=False)

    def check(self) -> None:
        from lactchain.baselines.td import Schedule

        normalize_env_field(self)
        for name, low_open, text in (("alpha", True, self.alpha), ("epsilon", False, self.epsilon)):
            try:
                schedule = Schedule.parse(text)
            except ValueError as exc:
                self.refuse(name, str(exc))
            for value in (schedule.start, schedule.end):
                bad = not math.isfinite(value) or value > 1 or (value <= 0 if low_open else value < 0)
                if bad:
                    self.refuse(name, f"{value:g} is out of range: {name} must be in "
                                      f"{'(0, 1]' if low_open else '[0, 1]'}")


def run_baseline(handle: Any, config: BaselineConfig) -> dict[str, Any]:
    from lactchain.baselines.train import train_baseline

    line = LineLog()
    line(f"baselines train: {config.agent} on {config.env}, {config.episodes} episodes", force=True)
    return train_baseline(handle, config.env, config.agent, config.episodes, seed=config.seed, gamma=config.gamma,
                          alpha=config.alpha, epsilon=config.epsilon,
                          on_progress=lambda i, m: line(f"episode {i}/{config.episodes}: env steps "
                                                        f"{int(m['train/env_steps'])}, mean return "
                                                        f"{m['train/mean_return']:.2f}"))


BASELINES_TRAIN = Job(kind="baseline", command="baselines train", config=BaselineConfig, run=run_baseline,
                      title="Classic agent", name=lambda c: f"{c.agent} on {c.env}",
                      doc="""Train a classic agent (one move per action) and evaluate it greedily from every
    start state of the env; the run (kind baseline) feeds `lactchain leaderboard`.""")
