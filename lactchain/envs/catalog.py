"""The text-environment seam: which envs the lab knows and what each must offer.

Every LactChain env is a gymnasium env (made through `gymnasium.make`) whose action
is a whole list of moves, plus the `TextEnv` members below: rollouts, evaluation and
the CLI use only these, so a new environment plugs in by implementing them and
adding a line to `ENVS`.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import gymnasium as gym

ENVS: dict[str, str] = {
    "grid": "LactChain/GridWorld-v0",
    "blackjack": "LactChain/Blackjack-v0",
}
DEFAULT_ENV = "grid"


class Solver(Protocol):
    """An exact solver: the optimum every actor is measured against."""

    def value(self, state: Any) -> float: ...

    def values(self, gamma: float) -> dict[Any, float]: ...  # V* of every non-terminal state

    def plan(self, state: Any) -> list[str]: ...


@runtime_checkable
class TextEnv(Protocol):
    name: str  # its key in ENVS
    moves: tuple[str, ...]  # the move vocabulary: the prompt's menu and the decoding grammar
    max_actions: int
    max_moves_per_action: int
    observation_label: str  # what the prompt calls the observation ("Your gridworld", "Your hand")
    default_strategy: str  # the built-in strategy prompt
    stochastic: bool  # True: one move list from one state can end differently (cards, dice)

    @property
    def state(self) -> Any: ...  # hashable; `as_dict()` gives its registry form

    @property
    def fixed_start(self) -> Any: ...  # `--start fixed`; None: the seeded reset decides (a dealt hand)

    def describe(self, state: Any = None) -> str: ...  # the state as prompt text

    def start_states(self) -> Sequence[Any]: ...  # every state an episode may start from

    def critic_text(self, state: Any) -> str: ...  # the critic's compact text of a state

    def parse_state(self, value: Any) -> Any: ...  # dict/tuple -> state (ValueError names the field)

    def is_terminal(self, state: Any) -> bool: ...

    def solver(self) -> Solver | None: ...  # None where no exact optimum exists

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None): ...

    def step(self, action: Any): ...  # info: caption, success, moves_executed


def env_id(name: str) -> str:
    """The gymnasium id of a short name ('grid', 'blackjack') or of a full id."""
    import lactchain.envs  # noqa: F401 - registers the ids

    key = str(name).strip()
    if key.lower() in ENVS:
        return ENVS[key.lower()]
    if key in ENVS.values():
        return key
    known = ", ".join(f"{short} ({full})" for short, full in ENVS.items())
    raise ValueError(f"unknown env {name!r}; known envs: {known}")


def env_name(name: str) -> str:
    """The short name of an env id or short name ('LactChain/Blackjack-v0' -> 'blackjack')."""
    full = env_id(name)
    return next(short for short, i in ENVS.items() if i == full)


def make_env(name: str = DEFAULT_ENV, **kwargs: Any) -> TextEnv:
    """A fresh env through `gymnasium.make` (unwrapped: the lab calls the text members)."""
    return gym.make(env_id(name), disable_env_checker=True, **kwargs).unwrapped  # type: ignore[return-value]


def actor_moves(name: str) -> dict[str, Any]:
    """`Actor.load`'s `moves` for an env: the grid's default vocabulary (nothing to pass),
    else the env's own."""
    if env_name(name) == DEFAULT_ENV:
        return {}
    return {"moves": make_env(name).moves}


_PROBES: dict[str, TextEnv] = {}


def env_of_state(value: Any) -> str:
    """The short name of the env whose states look like `value` (a registry state dict):
    for rows that do not say which env they came from (pairs of collect-pairs)."""
    for name in ENVS:
        probe = _PROBES.setdefault(name, make_env(name))
        try:
            probe.parse_state(value)
        except (ValueError, TypeError, KeyError):
            continue
        return name
    raise ValueError(f"no known env has the state {value!r}; known envs: {', '.join(ENVS)}")
