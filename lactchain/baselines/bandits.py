"""Bandit agents (Sutton & Barto ch. 2) and a vectorised testbed simulator.

Every agent keeps its estimates as (runs, arms) arrays, so one class serves both
uses: with runs=1 it is a single-run agent with seed 004's contract (`rng`,
`get_action()`, `observe(action, reward, info)`, `reset(seed)`) for the env's step
loop; with runs=200 `simulate` steps 200 independent problems at once (a Python loop
over steps only). One update rule per agent means the two cannot drift apart.

Agent specs (`parse_agent`), comma-separated on the command line:
  random                  uniform over the arms
  eps:EPS                 epsilon-greedy, sample-average estimates (EPS in [0, 1])
  eps-const:EPS:ALPHA     epsilon-greedy, constant step size ALPHA in (0, 1]
  optimistic:Q0           greedy, initial estimates Q0, step size 0.1
  ucb:C                   upper confidence bound, exploration C >= 0, sample averages
  gradient:ALPHA          gradient bandit (softmax preferences), step ALPHA > 0, with
                          the average reward as baseline
Ties between best estimates are broken at random, as in the book.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from lactchain.envs.bandit import WALK_STD

SPEC_FORMS = "random, eps:EPS, eps-const:EPS:ALPHA, optimistic:Q0, ucb:C or gradient:ALPHA (e.g. eps:0.1,ucb:2)"
DEFAULT_AGENTS = ("eps:0.1", "eps:0.01", "optimistic:5", "ucb:2", "gradient:0.1")


def argmax_random_ties(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row-wise argmax of (runs, arms), a uniformly random one among tied maxima."""
    best = values == values.max(axis=1, keepdims=True)
    return np.argmax(best * (1.0 + rng.random(values.shape)), axis=1)


def random_arms(rng: np.random.Generator, runs: int, num_arms: int) -> np.ndarray:
    """Uniform arms, shape (runs,) (a few times cheaper than rng.integers on tiny arrays)."""
    return (rng.random(runs) * num_arms).astype(np.intp)


class BanditAgent:
    """Base: estimates Q and pull counts N per run and arm; subclasses choose and learn."""

    name = "agent"

    def __init__(self, num_arms: int = 10, runs: int = 1, seed: int | np.random.SeedSequence | None = 0) -> None:
        self.num_arms, self.runs, self.training = int(num_arms), int(runs), True
        self._rows = np.arange(self.runs)
        self.reset(seed)

    def reset(self, seed: int | np.random.SeedSequence | None = None) -> None:
        """A fresh agent: new rng from `seed`, estimates back to their initial values."""
        self.rng = np.random.default_rng(seed)
        self.t = 0
        self.counts = np.zeros((self.runs, self.num_arms))
        self.q = np.full((self.runs, self.num_arms), self.initial_value())

    def initial_value(self) -> float:
        return 0.0

    def act(self) -> np.ndarray:
        """One arm per run, shape (runs,)."""
        raise NotImplementedError

    def update(self, actions: np.ndarray, rewards: np.ndarray) -> None:
        """Learn from each run's pulled arm and its reward (both shape (runs,))."""
        self.t += 1
        self.counts[self._rows, actions] += 1
        step = self.step_size(actions)
        self.q[self._rows, actions] += step * (rewards - self.q[self._rows, actions])

    def step_size(self, actions: np.ndarray) -> np.ndarray | float:
        return 1.0 / self.counts[self._rows, actions]  # sample average

    # seed 004's single-run contract (runs=1); obs is accepted for MDP-style loops
    def get_action(self, obs: Any = None) -> int:  # noqa: ARG002
        return int(self.act()[0])

    def observe(self, action: Any, reward: float, info: dict[str, Any] | None = None) -> None:  # noqa: ARG002
        self.update(np.array([int(action)]), np.array([float(reward)]))


class RandomAgent(BanditAgent):
    name = "random"

    def act(self) -> np.ndarray:
        return random_arms(self.rng, self.runs, self.num_arms)


class EpsilonGreedy(BanditAgent):
    """Greedy on Q with probability 1 - epsilon, else a uniform arm. alpha None: sample
    averages; a number: constant step (tracks non-stationary arms); q0: optimism."""

    def __init__(self, num_arms: int = 10, epsilon: float = 0.1, alpha: float | None = None, q0: float = 0.0,
                 runs: int = 1, seed: int | np.random.SeedSequence | None = 0) -> None:
        self.epsilon, self.alpha, self.q0 = float(epsilon), alpha, float(q0)
        self.name = f"eps:{epsilon:g}" if alpha is None else f"eps-const:{epsilon:g}:{alpha:g}"
        super().__init__(num_arms, runs, seed)

    def initial_value(self) -> float:
        return self.q0

    def act(self) -> np.ndarray:
        greedy = argmax_random_ties(self.q, self.rng)
        if self.epsilon <= 0:
            return greedy
        explore = self.rng.random(self.runs) < self.epsilon
        return np.where(explore, random_arms(self.rng, self.runs, self.num_arms), greedy)

    def step_size(self, actions: np.ndarray) -> np.ndarray | float:
        return super().step_size(actions) if self.alpha is None else self.alpha


class UCB(BanditAgent):
    """argmax Q + c sqrt(ln t / N): every arm once first (N = 0 counts as maximal)."""

    def __init__(self, num_arms: int = 10, c: float = 2.0, runs: int = 1, seed: int | np.random.SeedSequence | None = 0) -> None:
        self.c, self.name = float(c), f"ucb:{c:g}"
        super().__init__(num_arms, runs, seed)

    def act(self) -> np.ndarray:
        bonus = self.c * np.sqrt(math.log(self.t + 1) / np.maximum(self.counts, 1))
        return argmax_random_ties(np.where(self.counts == 0, np.inf, self.q + bonus), self.rng)


class GradientBandit(BanditAgent):
    """Softmax over preferences H (kept in `q`), H += alpha (R - baseline)(1[a] - pi);
    the baseline is the running average of all rewards so far, this one included."""

    def __init__(self, num_arms: int = 10, alpha: float = 0.1, baseline: bool = True, runs: int = 1,
                 seed: int | np.random.SeedSequence | None = 0) -> None:
        self.alpha, self.baseline = float(alpha), baseline
        self.name = f"gradient:{alpha:g}" + ("" if baseline else " (no baseline)")
        super().__init__(num_arms, runs, seed)

    def reset(self, seed: int | np.random.SeedSequence | None = None) -> None:
        super().reset(seed)
        self.mean_reward = np.zeros(self.runs)

    def policy(self) -> np.ndarray:
        z = np.exp(self.q - self.q.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    def act(self) -> np.ndarray:
        cdf = np.cumsum(self.policy(), axis=1)
        u = self.rng.random((self.runs, 1)) * cdf[:, -1:]
        return np.minimum((cdf <= u).sum(axis=1), self.num_arms - 1)

    def update(self, actions: np.ndarray, rewards: np.ndarray) -> None:
        pi = self.policy()
        self.t += 1
        self.counts[self._rows, actions] += 1
        if self.baseline:
            self.mean_reward += (rewards - self.mean_reward) / self.t
        onehot = np.zeros_like(pi)
        onehot[self._rows, actions] = 1.0
        self.q += self.alpha * (rewards - self.mean_reward)[:, None] * (onehot - pi)


# ---- specs -------------------------------------------------------------------------

_ARITY = {"random": 0, "eps": 1, "eps-const": 2, "optimistic": 1, "ucb": 1, "gradient": 1}
_RANGES: dict[str, tuple[str, Callable[[float], bool]]] = {
    "EPS": ("in [0, 1]", lambda v: 0 <= v <= 1),
    "ALPHA": ("in (0, 1]", lambda v: 0 < v <= 1),
    # Bounded far beyond the book's parameter study (1/128 .. 4) but short of overflow.
    "RATE": ("in (0, 1000]", lambda v: 0 < v <= 1000),
    "C": ("in [0, 1000]", lambda v: 0 <= v <= 1000),
    "Q0": ("in [-1e6, 1e6]", lambda v: -1e6 <= v <= 1e6),
}


def _number(spec: str, what: str, text: str, kind: str | None = None) -> float:
    """A finite float within the range of `kind` (default: `what`), else a one-line ValueError."""
    words, ok = _RANGES[kind or what]
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and ok(value)):
        raise ValueError(f"agent {spec!r}: {what} must be a finite number {words}, not {text!r}; use {SPEC_FORMS}")
    return value


def parse_agent(spec: str) -> tuple[str, tuple[float, ...]]:
    """'eps:0.1' -> ('eps', (0.1,)). ValueError (one line naming the valid forms) otherwise."""
    s = spec.strip()
    name, *args = s.split(":")
    if name not in _ARITY:
        raise ValueError(f"unknown agent {s!r}; use {SPEC_FORMS}")
    if len(args) != _ARITY[name]:
        raise ValueError(f"agent {s!r}: {name} takes {_ARITY[name]} number(s) after ':'; use {SPEC_FORMS}")
    if name == "eps":
        return name, (_number(s, "EPS", args[0]),)
    if name == "eps-const":
        return name, (_number(s, "EPS", args[0]), _number(s, "ALPHA", args[1]))
    if name == "optimistic":
        return name, (_number(s, "Q0", args[0]),)
    if name == "ucb":
        return name, (_number(s, "C", args[0]),)
    if name == "gradient":
        return name, (_number(s, "ALPHA", args[0], "RATE"),)
    return name, ()


def parse_agents(specs: str | Sequence[str]) -> list[str]:
    """A comma-separated list (or a sequence) of specs, checked; duplicates refused."""
    items = [s.strip() for s in (specs.split(",") if isinstance(specs, str) else specs) if s.strip()]
    if not items:
        raise ValueError(f"name at least one agent: {SPEC_FORMS}")
    for s in items:
        parse_agent(s)
    if len(set(items)) != len(items):
        raise ValueError(f"agent {next(s for s in items if items.count(s) > 1)!r} is listed twice")
    return items


def make_agent(spec: str, num_arms: int = 10, runs: int = 1, seed: int | np.random.SeedSequence | None = 0) -> BanditAgent:
    """The agent a spec names, with `runs` independent copies (1: a single-run agent)."""
    name, args = parse_agent(spec)
    kw = {"num_arms": num_arms, "runs": runs, "seed": seed}
    if name == "random":
        agent: BanditAgent = RandomAgent(**kw)
    elif name == "eps":
        agent = EpsilonGreedy(epsilon=args[0], **kw)
    elif name == "eps-const":
        agent = EpsilonGreedy(epsilon=args[0], alpha=args[1], **kw)
    elif name == "optimistic":
        agent = EpsilonGreedy(epsilon=0.0, alpha=0.1, q0=args[0], **kw)
    elif name == "ucb":
        agent = UCB(c=args[0], **kw)
    else:
        agent = GradientBandit(alpha=args[0], **kw)
    agent.name = spec.strip()
    return agent


# ---- the vectorised testbed --------------------------------------------------------

@dataclass
class Curves:
    """One agent's testbed curves: per step, the mean over runs."""

    avg_reward: np.ndarray
    optimal_pct: np.ndarray
    seconds: float

    def final(self, last: int = 100) -> dict[str, float]:
        """Means over the last `last` steps (the numbers a table reports)."""
        return {"avg_reward": float(self.avg_reward[-last:].mean()),
                "optimal_pct": float(self.optimal_pct[-last:].mean()), "seconds": self.seconds}


def simulate(agent_specs: str | Sequence[str], runs: int = 200, steps: int = 1000, num_arms: int = 10,
             stationary: bool = True, seed: int = 0,
             progress: Callable[[int], None] | None = None) -> dict[str, Curves]:
    """Every agent on the same `runs` bandit problems (and, non-stationary, the same
    walks), each problem an independent row. Per step all agents see one shared
    (runs, arms) reward-noise draw, so differences between agents are not luck of the
    draw. `progress(t)` is called after each step t (1-based), e.g. to stop on a signal."""
    specs = parse_agents(agent_specs)
    if min(runs, steps, num_arms) < 1:
        raise ValueError(f"runs, steps and num_arms must be at least 1 (got {runs}, {steps}, {num_arms})")
    env_seed, *agent_seeds = np.random.SeedSequence(seed).spawn(1 + len(specs))
    env_rng = np.random.default_rng(env_seed)
    q = env_rng.normal(0.0, 1.0, (runs, num_arms)) if stationary else np.zeros((runs, num_arms))
    agents = [make_agent(s, num_arms, runs, seed=ss) for s, ss in zip(specs, agent_seeds)]
    reward = np.zeros((len(agents), steps))
    optimal = np.zeros((len(agents), steps))
    seconds = np.zeros(len(agents))
    rows = np.arange(runs)
    for t in range(steps):
        noise = env_rng.normal(0.0, 1.0, (runs, num_arms))
        best = q.max(axis=1)
        for i, agent in enumerate(agents):
            t0 = time.perf_counter()
            actions = agent.act()
            r = q[rows, actions] + noise[rows, actions]
            agent.update(actions, r)
            seconds[i] += time.perf_counter() - t0
            reward[i, t] = r.mean()
            optimal[i, t] = (q[rows, actions] >= best).mean() * 100.0
        if not stationary:
            q += env_rng.normal(0.0, WALK_STD, (runs, num_arms))
        if progress is not None:
            progress(t + 1)
    return {s: Curves(reward[i], optimal[i], float(seconds[i])) for i, s in enumerate(specs)}
