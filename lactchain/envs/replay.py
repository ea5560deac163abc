"""Moving and replaying any text env (lactchain.envs.catalog.TextEnv): one action from an
exact state, the seeded deals a group of candidates shares, random move lists, and
states read back from the registry.

Labelers, the pair builder, the TD critic, the classic agents and the pipeline all move
envs through these, so every one of them resets the env to exactly the recorded state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class EndState:
    """A stored state the env cannot act in (a bust hand): kept as its registry dict."""

    items: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.items)


def stored_state(env: Any, value: Any) -> Any:
    """A state from its registry dict; one the env rejects (only ever an end state) as `EndState`."""
    try:
        return env.parse_state(value)
    except ValueError:
        return EndState(tuple(sorted(dict(value).items())))


def execute_from(env: Any, state: Any, moves: Sequence[str], seed: int | None = None) -> tuple[float, Any, bool]:
    """Reset the env to exactly `state` (on deal `seed` where the env is stochastic), run
    one action, return (reward, s', done)."""
    reward, nxt, done, _ = _step_from(env, state, moves, seed)
    return reward, nxt, done


def succeeds_from(env: Any, state: Any, moves: Sequence[str], seed: int | None = None) -> bool:
    """Whether one action from exactly `state` ends the episode in the env's own success
    (its info's `success`: the goal reached, the passenger delivered, the hand won)."""
    return bool(_step_from(env, state, moves, seed)[3].get("success"))


def success_return_from(env: Any, state: Any, moves: Sequence[str], seed: int | None = None) -> float:
    """The env's own return for one action from exactly `state` if it ends in the env's
    success, else 0: a win first, and among wins the one its move costs charge least."""
    reward, _, _, info = _step_from(env, state, moves, seed)
    return reward if info.get("success") else 0.0


def success_speed_from(env: Any, state: Any, moves: Sequence[str], seed: int | None = None) -> float:
    """For a win from exactly `state`, the share of the action's moves it left unplayed,
    counting its last ((most - played + 1) / most: a one-move win 1, a win on the last
    move 1/most); 0 for a failure. A steep tie-break: where the env's return tells two wins
    apart by a point per move (97 vs 92), this one pays a 3-move win 6x an 8-move one."""
    _, _, _, info = _step_from(env, state, moves, seed)
    if not info.get("success"):
        return 0.0
    most = env.max_moves_per_action  # the env plays at most this many; a start already at the goal plays 0
    return (most - max(info["moves_executed"], 1) + 1) / most


def _step_from(env: Any, state: Any, moves: Sequence[str], seed: int | None) -> tuple[float, Any, bool, dict]:
    env.reset(seed=seed, options={"state": state.as_dict()})
    if env.state != state:
        raise RuntimeError(f"the env did not reset to {state}")
    _, reward, terminated, _, info = env.step(list(moves))
    return float(reward), env.state, bool(terminated), info


def deal_seeds(env: Any, seed: int, deals: int) -> tuple[int | None, ...]:
    """The deals a group's candidates are all executed on: `deals` seeds on a stochastic
    env (common random numbers), one unseeded run on a deterministic one."""
    if not getattr(env, "stochastic", False):
        return (None,)
    if deals < 1:
        raise ValueError(f"deals must be >= 1, got {deals}")
    return tuple(seed * 1009 + d for d in range(deals))


def random_moves(env: Any, rng: Any) -> tuple[str, ...]:
    """A random move list: uniform length 1..moves per action, uniform moves."""
    return tuple(rng.choice(env.moves) for _ in range(rng.randint(1, env.max_moves_per_action)))


def reachable_states(env: Any, starts: Sequence[Any] | None = None) -> list[Any]:
    """Every non-terminal state one-move actions reach from the start states (the starts
    first, in order; then the rest, breadth first): the states a tabular method must
    cover where the start states are not all of them (a passenger in the taxi).
    Deterministic envs only: each (state, move) is executed once."""
    order = list(dict.fromkeys(env.start_states() if starts is None else starts))
    seen = set(order)
    i = 0
    while i < len(order):
        for move in env.moves:
            _, nxt, done = execute_from(env, order[i], [move])
            if not done and nxt not in seen and not env.is_terminal(nxt):
                seen.add(nxt)
                order.append(nxt)
        i += 1
    return order


def decision_states(env: Any) -> list[Any]:
    """Every state the actor acts from: the start states, then those an episode only
    reaches (Taxi's 100 with the passenger riding: `reachable_states`). On the grid every
    such state is a start state; a stochastic env (Blackjack) gives its start states."""
    return list(env.start_states()) if getattr(env, "stochastic", False) else reachable_states(env)
