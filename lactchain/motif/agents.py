"""Agents trained on an LLM-judged reward (Motif), compared with the true reward.

The reward model was fitted on whole-episode captions (what the judge compared), so
the intrinsic reward is its score of the episode's caption, given when the episode
ends (0 before: scoring a single step's caption would feed it text unlike anything it
was trained on, and a dense score on every "hit and drew ..." pays for hitting).
Motif normalises the intrinsic reward (here: standardised by the mean and std of the
reward model's scores over the episode captions it was trained on) and mixes it with
the environment's reward:
    r = extrinsic_coef * r_env + intrinsic_coef * r_int.
Tabular Q-learning is trained with extrinsic only, intrinsic only and the mix, and each
is scored on the same seeded hands as the exact optimum (oracle) and a random policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from lactchain.baselines.tabular import QLearner, RandomPolicy, RewardFn, SolverPolicy, score_policy

AGENT_REWARDS = ("extrinsic", "intrinsic", "mixed")


@dataclass
class CaptionReward:
    """r_int(caption): the reward model's score, standardised; each caption scored once."""

    model: Any
    mean: float = 0.0
    std: float = 1.0
    cache: dict[str, float] = field(default_factory=dict)

    def __call__(self, caption: str) -> float:
        if caption not in self.cache:
            self.prefetch([caption])
        return self.cache[caption]

    def prefetch(self, captions: list[str]) -> None:
        """Score the captions not seen yet in batches (the embedding model's fast path)."""
        new = [c for c in dict.fromkeys(captions) if c not in self.cache]
        for caption, score in zip(new, self.model.score(new)):
            self.cache[caption] = (score - self.mean) / (self.std or 1.0)


@dataclass
class _CaptionRewardFn:
    """extrinsic_coef * r_env + intrinsic_coef * r_int(caption); `prefetch` lets a learner
    score a chunk's captions in one batch."""

    intrinsic: CaptionReward
    intrinsic_coef: float
    extrinsic_coef: float

    def __call__(self, reward: float, info: dict[str, Any]) -> float:
        r_int = self.intrinsic(info["episode_caption"]) if info.get("done") else 0.0
        return self.extrinsic_coef * reward + self.intrinsic_coef * r_int

    def prefetch(self, captions: list[str]) -> None:
        self.intrinsic.prefetch(captions)


def reward_fn(kind: str, intrinsic: CaptionReward | None, intrinsic_coef: float = 1.0,
              extrinsic_coef: float = 1.0) -> RewardFn | None:
    """What the learner sees for `kind` (None: the env's reward unchanged)."""
    if kind == "extrinsic":
        return None
    if intrinsic is None:
        raise ValueError(f"a {kind} agent needs a reward model")
    if kind == "intrinsic":
        return _CaptionRewardFn(intrinsic, intrinsic_coef, 0.0)
    if kind == "mixed":
        return _CaptionRewardFn(intrinsic, intrinsic_coef, extrinsic_coef)
    raise ValueError(f"unknown agent reward {kind!r}; use one of {', '.join(AGENT_REWARDS)}")


def train_and_score_agents(env: Any, intrinsic: CaptionReward | None, *, train_episodes: int, eval_episodes: int,
                           seed: int = 0, kinds: tuple[str, ...] = AGENT_REWARDS, intrinsic_coef: float = 1.0,
                           extrinsic_coef: float = 1.0, references: bool = True,
                           on_agent: Callable[[str, dict[str, float]], None] | None = None,
                           on_progress: Callable[[str, int], None] | None = None) -> dict[str, Any]:
    """Win rate and mean return of each agent on the same `eval_episodes` seeded hands
    (evaluation seeds differ from training's), plus (`references`) the optimum and random play."""
    results: dict[str, dict[str, float]] = {}
    eval_seed = seed + 10_007
    for kind in kinds:
        learner = QLearner(env.moves, seed=seed, name=f"q-learning ({kind})")
        learner.train(env, train_episodes, seed=seed + 1,
                      reward_fn=reward_fn(kind, intrinsic, intrinsic_coef, extrinsic_coef),
                      on_progress=None if on_progress is None else (lambda n, k=kind: on_progress(k, n)))
        results[kind] = score_policy(env, learner, eval_episodes, seed=eval_seed)
        if on_agent is not None:
            on_agent(kind, results[kind])
    solver = env.solver()
    if references and solver is not None and hasattr(solver, "action"):
        results["optimal (oracle)"] = score_policy(env, SolverPolicy(solver), eval_episodes, seed=eval_seed)
    if references:
        results["random"] = score_policy(env, RandomPolicy(env.moves, seed=seed), eval_episodes, seed=eval_seed)
    return {"agents": results, "train_episodes": train_episodes, "eval_episodes": eval_episodes,
            "intrinsic_coef": intrinsic_coef, "extrinsic_coef": extrinsic_coef,
            "distinct_captions_scored": len(intrinsic.cache) if intrinsic is not None else 0}
