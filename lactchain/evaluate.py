"""Evaluation against the exact optimum: success, return, optimal ratio, parse failures.

Every non-goal start state is played once, greedily, so two actors are compared
on the same 60 (for 4x4) problems; `states=N` samples N of them instead.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Sequence

from lactchain.envs import GridWorldEnv, State, all_states
from lactchain.prompts import PromptSpec
from lactchain.rollout import RolloutConfig, RolloutSummary, run_rollouts


def eval_states(env: GridWorldEnv, states: str | int = "all", seed: int = 0) -> list[State]:
    """All non-goal states (a start at the goal would be a free success), or N sampled."""
    pool = [s for s in all_states(env.size) if (s.x, s.y) != env.goal]
    if states == "all":
        return pool
    n = int(states)
    if n < 1:
        raise ValueError(f"states must be 'all' or a positive number, got {states!r}")
    return random.Random(seed).sample(pool, min(n, len(pool)))


def evaluate_actor(
    actor: Any,
    *,
    states: str | int = "all",
    constrained: bool = True,
    n_envs: int = 16,
    max_actions: int = 10,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    prompt: PromptSpec | None = None,
    registry: Any | None = None,
    run_id: str | None = None,
    should_stop: Any = None,
) -> dict[str, Any]:
    """Greedy episodes from each evaluation state; returns the summary metrics, with
    the collapse check (how many start states share the most common greedy answer).
    `env_kwargs` changes the grid (e.g. {"size": 5, "goal": (4, 4)} for transfer)."""
    kwargs = {**(env_kwargs or {}), "max_actions": max_actions}
    starts = eval_states(GridWorldEnv(**{**kwargs, "moves": tuple(actor.moves)}), states, seed)
    cfg = RolloutConfig(episodes=len(starts), n_envs=n_envs, constrained=constrained, temperature=0.0,
                        seed=seed, env_kwargs=kwargs)
    summary: RolloutSummary = run_rollouts(actor, cfg, prompt=prompt, registry=registry, run_id=run_id,
                                           starts=starts, should_stop=should_stop)
    return {**summary.as_dict(), "states": len(starts), **answer_diversity(summary.episodes)}


def answer_diversity(episodes: Sequence[Any]) -> dict[str, Any]:
    """The collapse alarm's inputs: distinct greedy answers at the start states and the
    share of the most common one (a state-independent actor scores 1.0)."""
    answers = Counter(tuple(e.first_moves) for e in episodes if e.first_moves is not None)
    if not answers:
        return {"distinct_answers": 0, "top_answer_share": 0.0, "top_answer": None}
    top, count = answers.most_common(1)[0]
    return {"distinct_answers": len(answers), "top_answer_share": count / sum(answers.values()),
            "top_answer": list(top)}
