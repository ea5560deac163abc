"""The text-environment seam: which envs the lab knows and what each must offer.

Every LactChain env is a gymnasium env (made through `gymnasium.make`) whose action
is a whole list of moves, plus the `TextEnv` members below: rollouts, evaluation,
labelers, judges, classic agents, the tiny model's vocabulary, the CLI and the console
use only these, so a new environment plugs in by implementing them in one module and
adding ONE line to `REGISTRY` (its short name, gymnasium id and entry point).
"""

from __future__ import annotations

import importlib
from typing import Any, Hashable, Protocol, Sequence, runtime_checkable

import gymnasium as gym

# One line per env: short name -> (gymnasium id, entry point "module:Class"). Registered
# with gymnasium when this module is imported; `ENVS` (short name -> id) follows from it.
REGISTRY: dict[str, tuple[str, str]] = {
    "grid": ("LactChain/GridWorld-v0", "lactchain.envs.gridworld:GridWorldEnv"),
    "blackjack": ("LactChain/Blackjack-v0", "lactchain.envs.blackjack:BlackjackTextEnv"),
    "taxi": ("LactChain/Taxi-v0", "lactchain.envs.taxi:TaxiTextEnv"),
}
ENVS: dict[str, str] = {name: gid for name, (gid, _) in REGISTRY.items()}
DEFAULT_ENV = "grid"

# Any env's state (a grid pose, a Blackjack hand, ...): hashable and frozen, with
# `as_dict()` (its registry form) and, optionally, `short()` (a table cell). Generic code
# types states with this, never with one env's state class.
EnvState = Hashable


def register_envs() -> None:
    """Register every env of `REGISTRY` with gymnasium (idempotent). No TimeLimit wrapper:
    the envs truncate themselves after `max_actions` actions."""
    for gid, entry_point in REGISTRY.values():
        if gid not in gym.registry:
            gym.register(id=gid, entry_point=entry_point)


register_envs()


class Solver(Protocol):
    """An exact solver: the optimum every actor is measured against. Optional extras the
    lab uses where a solver has them: `distance(state)` (fewest moves to success: the
    optimal-move ratio), `action(state)` (the one optimal move: the optimal-move rate),
    `start_value`, `plan_return` and `policy_return` (exact expected returns, Blackjack)."""

    def value(self, state: Any) -> float: ...

    def values(self, gamma: float) -> dict[Any, float]: ...  # V* of every non-terminal state

    def plan(self, state: Any) -> list[str]: ...


@runtime_checkable
class TextEnv(Protocol):
    """What the lab reads from an env. Class-level facts (the attributes) can be read
    without making one (`env_class(name).judge_goal`)."""

    name: str  # its key in ENVS
    moves: tuple[str, ...]  # the move vocabulary: the prompt's menu and the decoding grammar
    all_moves: tuple[str, ...]  # every move the env can be given (`moves` is the played subset)
    max_actions: int
    max_moves_per_action: int
    observation_label: str  # what the prompt calls the observation ("Your gridworld", "Blackjack")
    default_strategy: str  # the built-in strategy prompt
    stochastic: bool  # True: one move list from one state can end differently (cards, dice)
    judge_description: str  # the env for an LLM judge ("Blackjack against a dealer. ...")
    judge_goal: str  # the player's goal for an LLM judge ("win the hand")
    outcome_words: tuple[str, str]  # an episode's end in words: (success, failure), e.g. ("won the hand", "did not win")
    has_scenes: bool  # takes a `scene=` kwarg (lactchain.envs.scenes: the grid's)
    classic_kwargs: dict[str, Any]  # env kwargs a classic one-move-per-action agent plays under (leaderboard)
    transfer: tuple[str, dict[str, Any]] | None  # (label, env kwargs) of a zero-shot transfer evaluation, or None
    console_view: str  # the console pane that draws it: "grid" (GridView), "cards" (Blackjack's), "text" (render_text)
    lab_blurb: str  # the console palette's line for "Lab: play <env>"
    # Optional: `strategy_hints` (sentences the strategy search's edits proposer may insert),
    # `evaluation_deals` (a dealt env: evaluation plays that many seeded deals).

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

    def state_features(self, state: Any) -> Any: ...  # float32 numpy vector for the classic agents (pg)

    def vocabulary_texts(self) -> list[str]: ...  # texts whose words the tiny model's tokenizer must know

    def render_text(self) -> str: ...  # the live episode as text lines (the console's "text" view)

    def headline(self, state: Any) -> str: ...  # the state in one line, pinned above the console's prompt

    @classmethod
    def plan_from_prompt(cls, prompt: str) -> list[str] | None: ...  # optimal moves for a prompt's state; None: not this env's

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None): ...

    def step(self, action: Any): ...  # info: caption, success, moves_executed


def env_id(name: str) -> str:
    """The gymnasium id of a short name ('grid', 'blackjack') or of a full id."""
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


def env_names() -> tuple[str, ...]:
    """The registered envs' short names (what forms offer)."""
    return tuple(ENVS)


def env_field(default: str = DEFAULT_ENV, *, form: bool = True) -> Any:
    """The `env` field every config that takes --env declares: its help, the envs a form
    offers, a gymnasium id accepted too (check it with `normalize_env_field`)."""
    from lactchain.config import option

    return option(default, "Environment: a short name (lactchain env list) or its gymnasium id.",
                  form="Environment" if form else False, suggest=env_names)


def normalize_env_field(config: Any, field: str = "env") -> None:
    """A config's env field as its short name, or the config's one-line refusal naming
    the known envs (every job config that takes --env checks it this way)."""
    try:
        setattr(config, field, env_name(getattr(config, field)))
    except ValueError as exc:
        config.refuse(field, str(exc))


def env_class(name: str) -> type:
    """The class of an env (short name or id): its class-level facts without making one."""
    module, _, attr = REGISTRY[env_name(name)][1].partition(":")
    return getattr(importlib.import_module(module), attr)


def make_env(name: str = DEFAULT_ENV, **kwargs: Any) -> TextEnv:
    """A fresh env through `gymnasium.make` (unwrapped: the lab calls the text members)."""
    return gym.make(env_id(name), disable_env_checker=True, **kwargs).unwrapped  # type: ignore[return-value]


def actor_moves(name: str) -> dict[str, Any]:
    """`Actor.load`'s `moves` for an env: the grid's default vocabulary (nothing to pass),
    else the env's own."""
    if env_name(name) == DEFAULT_ENV:
        return {}
    return {"moves": make_env(name).moves}


def oracle_plan(prompt: str) -> tuple[list[str], tuple[str, ...]] | None:
    """(the optimal move list, the env's move vocabulary) for the state a prompt
    describes, from the first env of the catalog that reads the prompt
    (`plan_from_prompt`); None when none does. The console's model-free oracle actor."""
    for name in ENVS:
        cls = env_class(name)
        read = getattr(cls, "plan_from_prompt", None)
        plan = read(prompt) if read is not None else None
        if plan is not None:
            return list(plan), tuple(cls.all_moves)
    return None


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
