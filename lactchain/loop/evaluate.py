"""Evaluation against the exact optimum: success, return, optimal ratio, parse failures.

Every start state of the env is played once, greedily, so two actors are compared
on the same problems (the 60 non-goal poses of the 4x4 grid, the 270 Blackjack deals
with seeded hole cards); `states=N` samples N of them instead. Where the env's exact
solver names the optimal move (Blackjack), the actor's first move is scored against
it and the optimal expected return over the same starts is reported beside its own.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Sequence

from lactchain.envs.catalog import DEFAULT_ENV, TextEnv, make_env
from lactchain.prompts import PromptSpec
from lactchain.loop.rollout import RolloutConfig, RolloutSummary, make_rollout_env, run_rollouts


def eval_states(env: TextEnv, states: str | int = "all", seed: int = 0) -> list[Any]:
    """All of the env's start states (never a terminal one: that would be a free success), or N sampled."""
    return sample_states(list(env.start_states()), states, seed)


def sample_states(pool: list[Any], states: str | int = "all", seed: int = 0) -> list[Any]:
    """`pool` itself ("all"), or N of it drawn with `seed`."""
    if states == "all":
        return pool
    n = int(states)
    if n < 1:
        raise ValueError(f"states must be 'all' or a positive number, got {states!r}")
    return random.Random(seed).sample(pool, min(n, len(pool)))


def evaluation_starts(env: TextEnv, states: str | int = "all", seed: int = 0) -> list[Any]:
    """The start of every evaluation episode. A dealt env (`evaluation_deals`, Blackjack)
    is measured on the real deal distribution: "all" is that many seeded deals, N is N
    deals (None: each episode's seeded reset deals its hand), not the uniform start
    states, over-weighting rare hands. Other envs: `eval_states`."""
    deals = getattr(env, "evaluation_deals", None)
    if not deals:
        return eval_states(env, states, seed)
    n = deals if states == "all" else int(states)
    if n < 1:
        raise ValueError(f"states must be 'all' or a positive number, got {states!r}")
    return [None] * n


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
    env: str = DEFAULT_ENV,
    **rollout: Any,
) -> dict[str, Any]:
    """Greedy episodes from each evaluation state; returns the summary metrics, with
    the collapse check (how many start states share the most common greedy answer).
    `env_kwargs` changes the grid (e.g. {"size": 5, "goal": (4, 4)} for transfer);
    `rollout`: `run_rollouts`'s should_stop and on_progress."""
    kwargs = {**(env_kwargs or {}), "max_actions": max_actions}
    cfg = RolloutConfig(episodes=1, n_envs=n_envs, constrained=constrained, temperature=0.0,
                        seed=seed, env_kwargs=kwargs, env=env)
    probe = make_rollout_env(cfg, actor.moves)
    starts = evaluation_starts(probe, states, seed)
    cfg.episodes = len(starts)
    summary: RolloutSummary = run_rollouts(actor, cfg, prompt=prompt, registry=registry, run_id=run_id,
                                           starts=starts, **rollout)
    return {**summary.as_dict(), "states": len(starts), **answer_diversity(summary.episodes),
            **against_solver(probe, summary.episodes)}


def against_solver(env: TextEnv, episodes: Sequence[Any]) -> dict[str, Any]:
    """Where the solver names one optimal move per state: how often the actor's first
    move is it, and the optimal expected return over the same start states; where it
    can value a whole policy (Blackjack), the greedy actor's exact expected return
    too (its answer at each start state is its answer whenever it holds that hand)."""
    solver = env.solver()
    if solver is None or not hasattr(solver, "action") or not episodes:
        return {}
    starts = [env.parse_state(e.start_state) for e in episodes]
    agree = [bool(e.first_moves) and e.first_moves[0] == solver.action(s) for e, s in zip(episodes, starts)]
    out = {"optimal_move_rate": sum(agree) / len(agree),
           "optimal_mean_return": sum(getattr(solver, "start_value", solver.value)(s) for s in starts) / len(starts)}
    if getattr(env, "evaluation_deals", None):
        out.update(solver_on_the_same_deals(env, solver, episodes))
    exact = getattr(solver, "policy_return", None)
    if exact is not None:  # the greedy actor's own exact expected return over the same start states
        answers = {s: e.first_moves or [] for e, s in zip(episodes, starts)}
        out["greedy_expected_return"] = sum(exact(s, answers, env.max_actions, env.max_moves_per_action)
                                            for s in starts) / len(starts)
    return out


def solver_on_the_same_deals(env: TextEnv, solver: Any, episodes: Sequence[Any]) -> dict[str, float]:
    """The exact optimum replayed on the very deals the actor played (each episode's seed
    deals the same cards): its win rate there, beside the actor's, so the gap is the
    actor's decisions, not the luck of the deals."""
    wins = 0
    for e in episodes:
        env.reset(seed=e.seed)
        done = False
        reward = 0.0
        while not done:
            _, reward, terminated, truncated, _ = env.step([solver.action(env.state)])
            done = terminated or truncated
        wins += reward > 0
    n = len(episodes)
    return {"deals": float(n), "win_rate": sum(e.success for e in episodes) / n,
            "optimal_win_rate_same_deals": wins / n}


def answer_diversity(episodes: Sequence[Any]) -> dict[str, Any]:
    """The collapse alarm's inputs: distinct greedy answers at the start states and the
    share of the most common one (a state-independent actor scores 1.0)."""
    answers = Counter(tuple(e.first_moves) for e in episodes if e.first_moves is not None)
    if not answers:
        return {"distinct_answers": 0, "top_answer_share": 0.0, "top_answer": None}
    top, count = answers.most_common(1)[0]
    return {"distinct_answers": len(answers), "top_answer_share": count / sum(answers.values()),
            "top_answer": list(top)}
