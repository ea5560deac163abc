"""Tabular agents on the lab's text envs, one move per action (Sutton & Barto ch. 4-6).

- `value_iteration`: dynamic programming with the env itself as the model (deterministic
  envs: each (state, move) executed once); equals the planner's V* on the grid.
- `TabularAgent`: epsilon-greedy over a Q table, learning by
  Q-learning  Q(s,a) += alpha [r + gamma max_a' Q(s',a') - Q(s,a)]    (off-policy),
  SARSA       Q(s,a) += alpha [r + gamma Q(s',a') - Q(s,a)], a' the move it then plays,
  Monte Carlo Q(s,a) += alpha [G_t - Q(s,a)] at the end of each episode (every visit).
  A terminal step does not bootstrap; a truncated one does (the state was not an end).
`Schedule` decays epsilon (and alpha) linearly or exponentially over the agent's steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Hashable, Sequence

import numpy as np

from lactchain.envs.replay import execute_from, reachable_states

METHODS = ("q-learning", "sarsa", "mc")


@dataclass(frozen=True)
class Schedule:
    """start -> end over `steps` agent steps, linear or exponential, then held at `end`."""

    start: float
    end: float
    steps: int = 1
    kind: str = "linear"

    def __post_init__(self) -> None:
        if self.kind not in ("linear", "exp"):
            raise ValueError(f"schedule kind must be linear or exp, got {self.kind!r}")
        if self.steps < 1:
            raise ValueError(f"schedule steps must be >= 1, got {self.steps}")
        if self.kind == "exp" and (self.start <= 0 or self.end <= 0):
            raise ValueError("an exponential schedule needs start and end > 0")

    def __call__(self, t: int) -> float:
        f = min(1.0, t / self.steps)
        if self.kind == "linear":
            return self.start + f * (self.end - self.start)
        return self.start * math.exp(f * math.log(self.end / self.start))

    @classmethod
    def parse(cls, text: str) -> "Schedule":
        """'0.1' (constant), 'START:END:STEPS' (linear) or 'START:END:STEPS:exp'."""
        parts = str(text).split(":")
        try:
            if len(parts) == 1:
                return cls(float(parts[0]), float(parts[0]))
            if len(parts) in (3, 4):
                return cls(float(parts[0]), float(parts[1]), int(parts[2]), parts[3] if len(parts) == 4 else "linear")
        except ValueError as exc:
            if "schedule" in str(exc):
                raise
        raise ValueError(f"schedule {text!r}: give VALUE, START:END:STEPS or START:END:STEPS:exp (e.g. 1:0.05:20000)")


def value_iteration(env: Any, gamma: float = 0.9, tol: float = 1e-9) -> tuple[dict[Hashable, float], dict]:
    """V*(s) and a greedy move per state, one move per action, the env as its own model
    (each (state, move) executed once: deterministic envs only). Returns (V, policy)."""
    if getattr(env, "stochastic", False):
        raise ValueError(f"value_iteration executes each move once: {env.name} is stochastic (use its solver)")
    states = reachable_states(env)  # the start states, then any other state a move reaches (the grid: none)
    model = {s: [(m, *execute_from(env, s, [m])) for m in env.moves] for s in states}
    v: dict[Hashable, float] = {s: 0.0 for s in states}
    for _ in range(100_000):
        delta = 0.0
        for s, outs in model.items():
            best = max(r + (0.0 if done else gamma * v.get(n, 0.0)) for _, r, n, done in outs)
            delta = max(delta, abs(best - v[s]))
            v[s] = best
        if delta < tol:
            break
    policy = {s: max(outs, key=lambda o: o[1] + (0.0 if o[3] else gamma * v.get(o[2], 0.0)))[0]
              for s, outs in model.items()}
    return v, policy


class ValueIterationAgent:
    """Plays the greedy policy of `value_iteration` (or, on a stochastic env, its exact
    solver's: Blackjack's DP is value iteration over the deck's probabilities)."""

    def __init__(self, env: Any, gamma: float = 0.9, seed: int = 0) -> None:
        self.name, self.training = "value-iteration", False
        if getattr(env, "stochastic", False):
            solver = env.solver()
            self.policy = {s: solver.action(s) for s in env.start_states()}
            self.model_calls = 0
        else:
            self.values, self.policy = value_iteration(env, gamma)
            self.model_calls = len(self.policy) * len(env.moves)
        self.solver = env.solver()
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def get_action(self, obs: Any = None) -> Any:
        move = self.policy.get(obs)
        return move if move is not None else self.solver.action(obs)

    def observe(self, action: Any, reward: float, info: dict[str, Any]) -> None:
        pass


class TabularAgent:
    """Epsilon-greedy over Q(s, move); learns by Q-learning, SARSA or Monte Carlo."""

    def __init__(self, moves: Sequence[str], method: str = "q-learning", gamma: float = 0.9,
                 alpha: float | Schedule = 0.1, epsilon: float | Schedule = 0.1, seed: int = 0,
                 q_init: float = 0.0) -> None:
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.name, self.method, self.moves, self.gamma = method, method, list(moves), float(gamma)
        self.alpha = alpha if isinstance(alpha, Schedule) else Schedule(alpha, alpha)
        self.epsilon = epsilon if isinstance(epsilon, Schedule) else Schedule(epsilon, epsilon)
        self.q_init, self.training, self.t = float(q_init), True, 0
        self.q: dict[Hashable, np.ndarray] = {}
        self._next: tuple[Hashable, str] | None = None  # SARSA: the move already chosen for s'
        self._episode: list[tuple[Hashable, int, float]] = []  # Monte Carlo: (s, a, r) so far
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def values(self, state: Hashable) -> np.ndarray:
        if state not in self.q:
            self.q[state] = np.full(len(self.moves), self.q_init)
        return self.q[state]

    def greedy(self, state: Hashable) -> str:
        q = self.values(state)
        best = np.flatnonzero(q == q.max())
        return self.moves[int(best[self.rng.integers(len(best))]) if len(best) > 1 else int(best[0])]

    def _explore(self, state: Hashable) -> str:
        if self.rng.random() < self.epsilon(self.t):
            return self.moves[int(self.rng.integers(len(self.moves)))]
        return self.greedy(state)

    def get_action(self, obs: Any = None) -> str:
        if not self.training:
            return self.greedy(obs)
        if self._next is not None and self._next[0] == obs:
            return self._next[1]
        return self._explore(obs)

    def observe(self, action: Any, reward: float, info: dict[str, Any]) -> None:
        if not self.training:
            return
        s, s2 = info["obs"], info["next_obs"]
        a, end, terminal = self.moves.index(action), info["terminated"] or info["truncated"], info["terminated"]
        alpha = self.alpha(self.t)
        self.t += 1
        self._next = None
        if self.method == "mc":
            self._episode.append((s, a, float(reward)))
            if end:
                g = 0.0 if terminal else float(self.values(s2).max())  # a truncated tail is bootstrapped
                for state, move, r in reversed(self._episode):
                    g = r + self.gamma * g
                    self.values(state)[move] += alpha * (g - self.values(state)[move])
                self._episode = []
            return
        if terminal:
            target = float(reward)
        elif self.method == "q-learning":
            target = reward + self.gamma * float(self.values(s2).max())
        else:  # SARSA: bootstrap from the move it will actually play next
            nxt = self._explore(s2)
            target = reward + self.gamma * float(self.values(s2)[self.moves.index(nxt)])
            if not end:
                self._next = (s2, nxt)
        self.values(s)[a] += alpha * (target - self.values(s)[a])

    def to_json(self) -> dict[str, Any]:
        """The learned table, keyed by the states' registry dicts (for the leaderboard)."""
        return {"method": self.method, "moves": self.moves, "gamma": self.gamma, "steps": self.t,
                "q": [{"state": s.as_dict(), "q": list(map(float, q))} for s, q in self.q.items()]}
