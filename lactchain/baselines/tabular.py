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
                      "next_state": env.state, "done": terminated or truncated, "terminated": terminated})
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
              on_progress: Callable[[int], None] | None = None, chunk: int = 1000) -> "QLearner":
        """Learn from `episodes` episodes dealt from one seeded stream (reseeding every
        episode would cost as much as playing it; evaluation reseeds per episode).

        `reward_fn(reward, info)` sees the step's info plus `episode_caption` (the
        episode's captions so far, joined with '; ') and `done`. One with a
        `prefetch(captions)` method (a learned reward that scores captions in batches)
        gets its rewards a chunk of episodes at a time: the chunk is played with the
        policy as it was at its start, the episodes' captions are scored in one batch,
        then every transition updates Q in order."""
        prefetch = getattr(reward_fn, "prefetch", None)
        size = chunk if prefetch is not None else 1
        env.reset(seed=episode_seed(seed, 0))
        first = True
        for start in range(0, episodes, size):
            played = []
            for _ in range(start, min(start + size, episodes)):
                if not first:
                    env.reset()
                first = False
                played.append(self._play(env))
            if prefetch is not None:
                prefetch(["; ".join(t[4]["caption"] for t in ep) for ep in played])
            for episode in played:
                captions = []
                for state, move, reward, next_state, info, done in episode:
                    captions.append(info["caption"])
                    if reward_fn is not None:  # it also sees the episode's captions so far, joined
                        reward = reward_fn(reward, {**info, "episode_caption": "; ".join(captions), "done": done})
                    self.update(state, move, reward, next_state, done)
            done_count = min(start + size, episodes)
            if on_progress is not None and done_count // 10_000 != start // 10_000:
                on_progress(done_count)
        return self

    def _play(self, env: Any) -> list[tuple]:
        """One exploring episode from the env's current deal: (s, a, r, s', info, done) per step."""
        out = []
        for _ in range(100):
            state = env.state
            move = self._explore(state)
            _, reward, terminated, truncated, info = env.step([move])
            out.append((state, move, reward, env.state, info, terminated or truncated))
            if terminated or truncated:
                break
        return out

    def update(self, state: Hashable, move: str, reward: float, next_state: Hashable, done: bool) -> None:
        """One Q-learning step with a 1/visits step size (gamma 1)."""
        target = reward if done else reward + max(self.q[(next_state, m)] for m in self.moves)
        key = (state, move)
        self.visits[key] += 1
        self.q[key] += (target - self.q[key]) / self.visits[key]
