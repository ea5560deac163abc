"""Tabular policies for text envs with small state spaces (Blackjack): one move per
action, played and scored on seeded episodes so policies meet the same hands.

`SolverPolicy` is the exact optimum, a diagnostic upper bound, never a default.
`QLearner` is tabular Q-learning whose reward can be the env's (extrinsic), a learned
one computed from the step's caption (intrinsic, Motif-style), or a mix.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Protocol, Sequence

# reward_fn(extrinsic reward, info) -> the reward the learner sees
RewardFn = Callable[[float, dict[str, Any]], float]


class Policy(Protocol):
    name: str

    def act(self, state: Hashable) -> str: ...


@dataclass
class RandomPolicy:
    moves: Sequence[str]
    seed: int = 0
    name: str = "random"

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def act(self, state: Hashable) -> str:  # noqa: ARG002
        return self._rng.choice(list(self.moves))


@dataclass
class SolverPolicy:
    """The exact solver's move in every state (oracle: an upper bound for comparison)."""

    solver: Any
    name: str = "optimal (exact DP, oracle)"

    def act(self, state: Hashable) -> str:
        return self.solver.action(state)


def episode_seed(seed: int, index: int) -> int:
    """The seed of episode `index` of a seeded set: the same hands for every policy."""
    return seed * 1_000_003 + index


def play_episode(env: Any, policy: Policy, seed: int, max_steps: int = 100) -> tuple[float, dict[str, Any], list[dict]]:
    """One seeded episode, one move per action. Returns (return, last info, steps)."""
    env.reset(seed=seed)
    total, info, steps = 0.0, {}, []
    for _ in range(max_steps):
        state = env.state
        move = policy.act(state)
        _, reward, terminated, truncated, info = env.step([move])
        total += reward
        steps.append({"state": state, "move": move, "reward": reward, "caption": info["caption"],
                      "next_state": env.state, "done": terminated or truncated})
        if terminated or truncated:
            break
    return total, info, steps


def score_policy(env: Any, policy: Policy, episodes: int, seed: int = 0) -> dict[str, float]:
    """Win rate (the env's `success`), mean return, draws and losses over seeded episodes."""
    wins = draws = 0
    total = 0.0
    for i in range(episodes):
        ret, info, _ = play_episode(env, policy, episode_seed(seed, i))
        total += ret
        wins += bool(info.get("success"))
        draws += ret == 0.0
    return {"episodes": episodes, "win_rate": wins / episodes, "mean_return": total / episodes,
            "draw_rate": draws / episodes, "loss_rate": 1 - (wins + draws) / episodes}


@dataclass
class QLearner:
    """Tabular Q-learning (gamma 1, episodic) with epsilon-greedy exploration and a
    1/visits step size; ties are broken by the move order. `reward_fn` replaces the
    env's reward with what the learner should see (intrinsic or mixed)."""

    moves: Sequence[str]
    epsilon: float = 0.1
    seed: int = 0
    name: str = "q-learning"
    q: dict[tuple[Hashable, str], float] = field(default_factory=lambda: defaultdict(float))
    visits: dict[tuple[Hashable, str], int] = field(default_factory=lambda: defaultdict(int))

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def act(self, state: Hashable) -> str:
        """The greedy move (what is evaluated)."""
        return max(self.moves, key=lambda m: self.q[(state, m)])

    def _explore(self, state: Hashable) -> str:
        return self._rng.choice(list(self.moves)) if self._rng.random() < self.epsilon else self.act(state)

    def train(self, env: Any, episodes: int, seed: int = 0, reward_fn: RewardFn | None = None,
              on_progress: Callable[[int], None] | None = None) -> "QLearner":
        """Learn from `episodes` episodes dealt from one seeded stream (reseeding every
        episode would cost as much as playing it; evaluation reseeds per episode)."""
        for i in range(episodes):
            env.reset(seed=episode_seed(seed, 0) if i == 0 else None)
            for _ in range(100):
                state = env.state
                move = self._explore(state)
                _, reward, terminated, truncated, info = env.step([move])
                if reward_fn is not None:
                    reward = reward_fn(reward, info)
                target = reward if terminated or truncated else reward + max(self.q[(env.state, m)] for m in self.moves)
                key = (state, move)
                self.visits[key] += 1
                self.q[key] += (target - self.q[key]) / self.visits[key]
                if terminated or truncated:
                    break
            if on_progress is not None and (i + 1) % 10_000 == 0:
                on_progress(i + 1)
        return self
