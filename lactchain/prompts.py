"""The learnable strategy prompt and the fixed strategy-conversion template (seed 000).

The actor sees: conversion template filled with the strategy, the move menu and,
last, the env's description of the current state (so the text before it is a prefix
shared by every state). Validation errors are `PromptError`
(a ValueError) with a message a researcher can act on.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from lactchain.moves import DEFAULT_MOVES, format_moves

DEFAULT_STRATEGY = (
    "You are in gridworld. Make a move to help you reach the goal. "
    "Your response must be some kind of move, even if you have to guess."
)

# The state comes LAST: everything before it (strategy, move menu, format) is the same
# for every state, so the actor computes it once and shares it (its prefix KV cache).
# The label's words are all in the `tiny` test model's vocabulary (built from this text).
CONVERSION_TEMPLATE = """There are only {move_count} types of moves you can make:

{move_menu}

Come up with a combination of those {move_count} moves in order
to successfully carry out the action: {strategy}

Your final answer should be in the format of a python list
of moves, where each move is one of the {move_count} types listed above.
E.g. {example}

{observation_label}: {observation}"""

REQUIRED_SLOTS = frozenset({"strategy"})
KNOWN_SLOTS = frozenset({"strategy", "observation", "observation_label", "move_count", "move_menu", "example"})
GRID_OBSERVATION_LABEL = "Your gridworld"
MAX_STRATEGY_CHARS = 4000


class PromptError(ValueError):
    """A strategy, template or rendered prompt that cannot be used."""


def validate_strategy(strategy: str) -> str:
    """Strip and check a strategy text; returns the cleaned text."""
    if not isinstance(strategy, str) or not strategy.strip():
        raise PromptError("the strategy prompt is empty: write at least one instruction for the agent")
    text = strategy.strip()
    if len(text) > MAX_STRATEGY_CHARS:
        raise PromptError(f"the strategy prompt is {len(text)} characters; the limit is {MAX_STRATEGY_CHARS}")
    return text


def template_slots(template: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise PromptError(f"the conversion template is not a valid format string: {exc}") from None


def validate_template(template: str) -> str:
    """Check the conversion template has a {strategy} slot and no unknown slots."""
    if not isinstance(template, str) or not template.strip():
        raise PromptError("the conversion template is empty")
    slots = template_slots(template)
    missing = REQUIRED_SLOTS - slots
    if missing:
        raise PromptError("the conversion template has no {strategy} slot, so the strategy would never reach the model")
    unknown = slots - KNOWN_SLOTS
    if unknown:
        raise PromptError(
            f"the conversion template uses unknown slot(s) {sorted(unknown)}; known slots: {sorted(KNOWN_SLOTS)}"
        )
    return template


@dataclass(frozen=True)
class PromptSpec:
    """Everything that turns a state description into the actor's user message."""

    strategy: str = DEFAULT_STRATEGY
    template: str = CONVERSION_TEMPLATE
    moves: tuple[str, ...] = DEFAULT_MOVES
    observation_label: str = GRID_OBSERVATION_LABEL  # the env's name for its observation ("Your hand")

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", validate_strategy(self.strategy))
        validate_template(self.template)

    def render(self, observation: str) -> str:
        return render_prompt(self.strategy, observation, self.moves, self.template, self.observation_label)

    @classmethod
    def for_env(cls, env: Any, strategy: str | None = None, moves: Sequence[str] | None = None) -> "PromptSpec":
        """The prompt for a text env: its moves, its observation label and (unless given)
        its default strategy."""
        return cls(strategy=strategy or env.default_strategy, moves=tuple(moves or env.moves),
                   observation_label=env.observation_label)


def render_prompt(
    strategy: str,
    observation: str,
    moves: Sequence[str] = DEFAULT_MOVES,
    template: str = CONVERSION_TEMPLATE,
    observation_label: str = GRID_OBSERVATION_LABEL,
) -> str:
    """Fill the conversion template with the strategy, move menu and state text."""
    strategy = validate_strategy(strategy)
    validate_template(template)
    menu = "\n".join(f"{i}. {m}" for i, m in enumerate(moves, 1))
    example = format_moves(list(moves[:2]) if len(moves) > 1 else list(moves))
    return template.format(
        strategy=strategy,
        observation=observation.strip(),
        observation_label=observation_label,
        move_count=len(moves),
        move_menu=menu,
        example=example,
    )


def check_prompt_length(prompt: str, count_tokens: Callable[[str], int], context_length: int, reserve: int = 0) -> int:
    """Raise PromptError when the prompt (plus `reserve` tokens for the answer) does not
    fit the model's context; returns the prompt's token count."""
    n = count_tokens(prompt)
    if n + reserve > context_length:
        raise PromptError(
            f"the rendered prompt is {n} tokens (+{reserve} for the answer) but the model's context is "
            f"{context_length} tokens: shorten the strategy prompt"
        )
    return n
