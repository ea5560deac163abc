"""Strategy prompt and conversion template: seed text, rendering and validation."""

from __future__ import annotations

import re

import pytest

from lactchain.envs import GridWorldEnv
from lactchain.moves import ALL_MOVES, DEFAULT_MOVES, parse_moves
from lactchain.prompts import (
    CONVERSION_TEMPLATE,
    DEFAULT_STRATEGY,
    PromptError,
    PromptSpec,
    check_prompt_length,
    render_prompt,
    validate_strategy,
    validate_template,
)

# The strategy prompt as written in the user's seed notes (000), whitespace aside.
SEED_STRATEGY = (
    "You are in gridworld. Make a move to help you reach the goal. "
    "Your response must be some kind of move, even if you have to guess."
)


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_default_strategy_is_the_seeds():
    assert squash(DEFAULT_STRATEGY) == SEED_STRATEGY


def test_conversion_template_follows_the_seed():
    text = squash(CONVERSION_TEMPLATE)
    assert "{strategy}" in text
    assert "to successfully carry out the action: {strategy}" in text
    assert "python list of moves" in text


def test_render_contains_strategy_menu_and_observation():
    env = GridWorldEnv()
    _, info = env.reset()
    prompt = render_prompt(DEFAULT_STRATEGY, info["description"])
    assert DEFAULT_STRATEGY in prompt
    assert info["description"] in prompt
    assert "1. move forward\n2. turn left" in prompt
    assert "only 2 types of moves" in prompt
    assert "{" not in prompt and "}" not in prompt  # every slot filled
    # The example in the prompt is itself a strictly parseable move list.
    example = prompt[prompt.index("E.g.") + len("E.g.") :].splitlines()[0].strip()
    assert parse_moves(example).mode == "strict"


def test_render_with_turn_right():
    prompt = render_prompt("Go to the goal.", "You are somewhere.", ALL_MOVES)
    assert "3. turn right" in prompt
    assert "only 3 types of moves" in prompt


def test_render_keeps_braces_in_user_text_verbatim():
    prompt = render_prompt("Aim for {the goal}.", "State: {x=1}")
    assert "Aim for {the goal}." in prompt
    assert "State: {x=1}" in prompt


def test_prompt_spec():
    spec = PromptSpec()
    assert spec.strategy == DEFAULT_STRATEGY
    assert spec.moves == DEFAULT_MOVES
    prompt = spec.render("You are at (x=0, y=0) facing east.")
    assert prompt == render_prompt(DEFAULT_STRATEGY, "You are at (x=0, y=0) facing east.")
    # Strategies are stripped on the way in.
    assert PromptSpec(strategy="  go north  ").strategy == "go north"


def test_custom_template():
    template = "Strategy: {strategy}\nMoves: {move_menu}\nNow: {observation}"
    prompt = render_prompt("hug the east wall", "at (0, 0)", template=template)
    assert prompt == "Strategy: hug the east wall\nMoves: 1. move forward\n2. turn left\nNow: at (0, 0)"


# ---- validation -------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["", "   ", "\n\t"])
def test_empty_strategy_is_an_error(strategy):
    with pytest.raises(PromptError, match="empty"):
        validate_strategy(strategy)
    with pytest.raises(PromptError):
        render_prompt(strategy, "obs")
    with pytest.raises(PromptError):
        PromptSpec(strategy=strategy)


def test_too_long_strategy_is_an_error():
    with pytest.raises(PromptError, match="limit"):
        validate_strategy("go " * 5000)


def test_template_without_strategy_slot():
    template = "{observation}\nPick moves from {move_menu}."
    with pytest.raises(PromptError, match=r"\{strategy\}"):
        validate_template(template)
    with pytest.raises(PromptError, match=r"\{strategy\}"):
        render_prompt(DEFAULT_STRATEGY, "obs", template=template)
    with pytest.raises(PromptError, match=r"\{strategy\}"):
        PromptSpec(template=template)


def test_template_with_unknown_slot():
    with pytest.raises(PromptError, match="reward"):
        validate_template("{strategy} and {reward}")


@pytest.mark.parametrize("template", ["", "  ", "{strategy", "{strategy} }{"])
def test_broken_templates(template):
    with pytest.raises(PromptError):
        validate_template(template)


def test_prompt_error_is_a_value_error():
    assert issubclass(PromptError, ValueError)


def test_default_template_is_valid():
    assert validate_template(CONVERSION_TEMPLATE) == CONVERSION_TEMPLATE


# ---- context length ---------------------------------------------------------------
def words(text: str) -> int:
    return len(text.split())


def test_check_prompt_length():
    prompt = render_prompt(DEFAULT_STRATEGY, "You are at (x=0, y=0) facing east.")
    n = words(prompt)
    assert check_prompt_length(prompt, words, context_length=n) == n
    assert check_prompt_length(prompt, words, context_length=n + 10, reserve=10) == n
    with pytest.raises(PromptError, match=str(n)):
        check_prompt_length(prompt, words, context_length=n - 1)
    with pytest.raises(PromptError, match="context"):
        check_prompt_length(prompt, words, context_length=n + 5, reserve=10)


def test_long_strategy_overflows_a_small_context():
    strategy = "Always think carefully about walls. " * 50
    prompt = render_prompt(strategy, "obs")
    with pytest.raises(PromptError, match="shorten the strategy"):
        check_prompt_length(prompt, words, context_length=128)
