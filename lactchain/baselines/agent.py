"""The classic-RL agent contract (seed 004) and the one loop every baseline runs in.

An agent owns its randomness (`rng`, a numpy Generator, reseeded by `reset(seed)`),
picks an action from an observation (`get_action`) and learns from what followed
(`observe(action, reward, info)`). The seed's bandit agents take no observation; MDP
agents read theirs, and `run_agent` hands them the rest in `info`: `obs` (the state
the action was taken in), `next_obs`, `terminated`, `truncated`. `training` is set
by the loop: False means act greedily and do not learn (evaluation).

On a LactChain text env (the grid, Blackjack) a classic agent plays one move per
action: `run_agent` wraps it as a one-move list and gives the env's hashable state
as the observation, so the rewards, episodes and registry rows are the same as the
LLM actor's and the leaderboard compares them directly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from lactchain.baselines.tabular import episode_seed  # the same seeded starts/deals as every other policy


@runtime_checkable
class Agent(Protocol):
    name: str
    rng: np.random.Generator
    training: bool

    def get_action(self, obs: Any = None) -> Any: ...

    def observe(self, action: Any, reward: float, info: dict[str, Any]) -> None: ...

    def reset(self, seed: int) -> None: ...


class RandomAgent:
    """Uniform over the env's moves: the floor every learner must beat."""

    def __init__(self, moves: Sequence[Any], seed: int = 0) -> None:
        self.name, self.moves, self.training = "random", list(moves), True
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def get_action(self, obs: Any = None) -> Any:  # noqa: ARG002
        return self.moves[int(self.rng.integers(len(self.moves)))]

    def observe(self, action: Any, reward: float, info: dict[str, Any]) -> None:
        pass


class SolverAgent:
    """The env's exact solver, one move at a time (an oracle: the upper bound, never a default)."""

    def __init__(self, env: Any) -> None:
        self.name, self.training = "optimum (exact solver, oracle)", False
        self.solver = env.solver()
        self.reset(0)

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def get_action(self, obs: Any = None) -> Any:
        action = getattr(self.solver, "action", None)
        return action(obs) if action is not None else self.solver.plan(obs)[0]

    def observe(self, action: Any, reward: float, info: dict[str, Any]) -> None:
        pass


@dataclass
class RunSummary:
    """What a batch of episodes did: the leaderboard's and the registry's numbers."""

    episodes: int = 0
    env_steps: int = 0
    returns: list[float] = field(default_factory=list)
    successes: int = 0
    ratios: list[float] = field(default_factory=list)  # shortest / used moves of each successful episode
    has_distance: bool = False  # the env's solver gives shortest move counts
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The same keys and definitions as the LLM's rollouts (`RolloutSummary.as_dict`)."""
        n = max(self.episodes, 1)
        ratio = (sum(self.ratios) / len(self.ratios) if self.ratios else 0.0) if self.has_distance else None
        return {"episodes": self.episodes, "env_steps": self.env_steps,
                "success_rate": self.successes / n, "mean_return": sum(self.returns) / n,
                "mean_optimal_ratio": ratio, "seconds": self.seconds}


def is_text_env(env: Any) -> bool:
    return hasattr(env, "parse_state") and hasattr(env, "moves")


def run_agent(env: Any, agent: Agent, episodes: int, seed: int = 0, *, learn: bool = True,
              starts: Sequence[Any] | None = None, max_steps: int = 10_000, registry: Any = None,
              run_id: str | None = None, record_steps: bool = False,
              on_episode: Callable[[int, RunSummary], None] | None = None) -> RunSummary:
    """Play `episodes` seeded episodes (start state `starts[i]` where given), the agent
    learning from each step when `learn`. With a registry and run id every episode is a
    row (and every step with `record_steps`), as the LLM's rollouts are."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if starts is not None and len(starts) < episodes:
        raise ValueError(f"{episodes} episodes need {episodes} start states, got {len(starts)}")
    env = getattr(env, "unwrapped", env)
    text = is_text_env(env)
    solver = env.solver() if text else None
    distance = getattr(solver, "distance", None)
    agent.training = learn
    out, t0 = RunSummary(has_distance=distance is not None), time.perf_counter()
    for i in range(episodes):
        ep_seed = episode_seed(seed, i)
        options = {"state": starts[i].as_dict()} if starts is not None else None
        obs, info = env.reset(seed=ep_seed, options=options)
        if text:
            obs = env.state
        start, ret, length, moves, success, rows = obs, 0.0, 0, 0, False, []
        for _ in range(max_steps):
            action = agent.get_action(obs)
            nxt, reward, terminated, truncated, info = env.step([action] if text else action)
            if text:
                nxt = env.state
            agent.observe(action, float(reward), {**info, "obs": obs, "next_obs": nxt,
                                                  "terminated": terminated, "truncated": truncated})
            if record_steps:
                rows.append({"t": length, "state": _as_row(obs), "moves": [action] if text else [int(action)],
                             "reward": float(reward), "next_state": _as_row(nxt), "done": terminated or truncated,
                             "terminated": terminated, "caption": info.get("caption"), "seed": ep_seed})
            ret += float(reward)
            length += 1
            moves += int(info.get("moves_executed", 1))
            success = success or bool(info.get("success"))
            obs = nxt
            if terminated or truncated:
                break
        out.episodes += 1
        out.env_steps += length
        out.returns.append(ret)
        out.successes += success
        if distance is not None and success:
            out.ratios.append(distance(start) / moves if moves else 1.0)
        if registry is not None and run_id is not None:
            episode_id = registry.add_episode(run_id, idx=i, seed=ep_seed, start_state=_as_row(start), return_=ret,
                                              length=length, success=success, moves_used=moves,
                                              optimal_moves=distance(start) if distance is not None else None)
            if rows:
                registry.add_steps(run_id, [{**r, "episode_id": episode_id} for r in rows])
        if on_episode is not None:
            on_episode(i, out)
    out.seconds = time.perf_counter() - t0
    return out


def _as_row(state: Any) -> Any:
    as_dict = getattr(state, "as_dict", None)
    if as_dict is not None:
        return as_dict()
    return state.tolist() if isinstance(state, np.ndarray) else state
