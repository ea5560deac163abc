"""The leaderboard's protocol: the env a classic agent plays, and its greedy evaluation
from every start state of that env (seeded alike), so every row is measured the same way.

Used by `baselines.train` (a baseline run's own evaluation) and by `lactchain.leaderboard`
(the random and optimum reference rows), which sits above the baselines.
"""

from __future__ import annotations

from typing import Any

from lactchain.baselines.agent import run_agent
from lactchain.envs.catalog import env_class, make_env


def classic_env(name: str) -> Any:
    """The env a classic agent plays: one move per action, under the env's own
    `classic_kwargs` (the grid: room for the moves)."""
    return make_env(name, **env_class(name).classic_kwargs)


def greedy_policy_return(env: Any, agent: Any) -> float | None:
    """The exact expected return of an agent's greedy move in every start state, where the
    env's solver can value a fixed answer per state (Blackjack); else None."""
    solver = env.solver()
    exact = getattr(solver, "policy_return", None)
    if exact is None:
        return None
    agent.training = False
    starts = list(env.start_states())
    answers = {s: [agent.get_action(s)] for s in starts}
    return sum(exact(s, answers, env.max_actions, env.max_moves_per_action) for s in starts) / len(starts)


def evaluate_agent(env: Any, agent: Any, seed: int = 0) -> dict[str, Any]:
    """Greedy from every start state of `env` (the leaderboard's protocol)."""
    starts = list(env.start_states())
    out = run_agent(env, agent, len(starts), seed=seed, learn=False, starts=starts).as_dict()
    exact = greedy_policy_return(env, agent)
    return {**out, "states": len(starts), **({"greedy_expected_return": exact} if exact is not None else {})}
