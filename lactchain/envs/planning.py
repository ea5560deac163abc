"""Exact ground truth for a GridWorld (grid-only): BFS move distances, optimal move lists and V*,
around the scene's walls.

V* is computed over the env's real action space (a list of up to
`max_moves_per_action` moves earns one reward, and the discount applies per
action, not per move) by value iteration, so critic and actor can be scored
against the true optimum.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property
from typing import Any

# The grid's rules live in grid_rules, which imports neither this module nor the env:
# the env builds its Planner, the Planner reads the rules (no import cycle).
from lactchain.envs.grid_rules import GOAL_REWARD, MOVE_COST, State, all_states, apply_move

__all__ = ["Planner", "all_states"]


@dataclass(frozen=True)
class _Config:
    size: int
    goal: tuple[int, int]
    moves: tuple[str, ...]
    max_moves_per_action: int
    terminate_on_exit: bool
    exit_penalty: float
    walls: frozenset[tuple[int, int]] = frozenset()


_VALUES_MEMO: dict[tuple, dict[State, float]] = {}


class Planner:
    """Exact solver for one env configuration (size, goal, moves, limits)."""

    def __init__(self, env: Any):  # a GridWorldEnv (or a wrapper of one)
        env = getattr(env, "unwrapped", env)
        self.cfg = _Config(
            env.size, tuple(env.goal), tuple(env.moves), env.max_moves_per_action, env.terminate_on_exit,
            env.exit_penalty, frozenset(getattr(env, "walls", ()))
        )
        self.states = all_states(self.cfg.size, self.cfg.walls)

    def is_goal(self, state: State) -> bool:
        return (state.x, state.y) == self.cfg.goal

    def _successors(self, state: State):
        for move in self.cfg.moves:
            out = apply_move(state, move, self.cfg.size, self.cfg.terminate_on_exit, self.cfg.walls)
            yield move, out

    @cached_property
    def _policy(self) -> tuple[dict[State, int], dict[State, str]]:
        """Reverse BFS from the goal cell: distance and the first move of a shortest path."""
        preds: dict[State, list[tuple[State, str]]] = {s: [] for s in self.states}
        for s in self.states:
            if self.is_goal(s):
                continue
            for move, out in self._successors(s):
                if not out.exited:
                    preds[out.state].append((s, move))
        dist: dict[State, int] = {}
        first: dict[State, str] = {}
        queue = deque()
        for s in self.states:
            if self.is_goal(s):
                dist[s] = 0
                queue.append(s)
        while queue:
            cur = queue.popleft()
            for prev, move in preds[cur]:
                if prev not in dist:
                    dist[prev] = dist[cur] + 1
                    first[prev] = move
                    queue.append(prev)
        return dist, first

    def distance(self, state: State) -> int | None:
        """Fewest moves from `state` to the goal; None if the goal is unreachable."""
        return self._policy[0].get(state)

    def plan(self, state: State) -> list[str]:
        """One optimal move list from `state` to the goal (empty at the goal)."""
        dist, first = self._policy
        if state not in dist:
            raise ValueError(f"the goal cannot be reached from {state}")
        moves = []
        while not self.is_goal(state):
            move = first[state]
            moves.append(move)
            state = apply_move(state, move, self.cfg.size, self.cfg.terminate_on_exit, self.cfg.walls).state
        return moves

    def _action_outcomes(self, state: State) -> list[tuple[float, State | None]]:
        """Every distinct (reward, next state) one action (0..K moves) can produce.
        next state None means the episode terminated."""
        best: dict[State | None, float] = {state: 0.0}
        frontier = {state}
        for n in range(1, self.cfg.max_moves_per_action + 1):
            nxt = set()
            for s in frontier:
                for _, out in self._successors(s):
                    if out.exited:
                        reward = n * MOVE_COST + self.cfg.exit_penalty
                        best[None] = max(best.get(None, float("-inf")), reward)
                    elif self.is_goal(out.state):
                        best[None] = max(best.get(None, float("-inf")), n * MOVE_COST + GOAL_REWARD)
                    else:
                        nxt.add(out.state)
            for s in nxt:
                best[s] = max(best.get(s, float("-inf")), n * MOVE_COST)
            frontier = nxt
        return [(r, s) for s, r in best.items()]

    def values(self, gamma: float = 0.99, tol: float = 1e-9) -> dict[State, float]:
        """V*(s) for every state under per-action discount `gamma` (0 at the goal).
        Memoised per env configuration: value iteration is pure python (~1 s at 4x4)
        and metrics ask for it every round."""
        if not 0.0 <= gamma < 1.0:
            raise ValueError(f"gamma must be in [0, 1), got {gamma}")
        key = (self.cfg, float(gamma), float(tol))
        if key not in _VALUES_MEMO:
            _VALUES_MEMO[key] = self._value_iteration(gamma, tol)
        return dict(_VALUES_MEMO[key])

    def _value_iteration(self, gamma: float, tol: float) -> dict[State, float]:
        outcomes = {s: self._action_outcomes(s) for s in self.states if not self.is_goal(s)}
        v = {s: 0.0 for s in self.states}
        for _ in range(10_000):
            delta = 0.0
            for s, outs in outcomes.items():
                new = max(r + (gamma * v[n] if n is not None else 0.0) for r, n in outs)
                delta = max(delta, abs(new - v[s]))
                v[s] = new
            if delta < tol:
                break
        return v

    def value(self, state: State, gamma: float = 0.99) -> float:
        return self._values_cached(gamma)[state]

    def _values_cached(self, gamma: float) -> dict[State, float]:
        cache = self.__dict__.setdefault("_value_cache", {})
        if gamma not in cache:
            cache[gamma] = self.values(gamma)
        return cache[gamma]
