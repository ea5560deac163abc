"""What several benchmarks share (no torch here, so the CLI can import it at start-up):
the 4x4 grid's start states as prompts, a recorder of an actor's answers, and how
alike two runs' answers are."""

from __future__ import annotations
from lactchain.envs import GridWorldEnv, all_states

from typing import Any, Sequence


def grid_starts(moves: Sequence[str]) -> tuple[list[str], list[Any]]:
    """Every non-goal start state of the default grid and its rendered prompt."""
    from lactchain.prompts import PromptSpec

    env = GridWorldEnv(moves=moves)
    spec = PromptSpec(moves=moves)
    states = [s for s in all_states(env.size) if (s.x, s.y) != env.goal]
    return [spec.render(env.describe(s)) for s in states], states


def agreement(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> float:
    """Share of completions that are the same token for token (1.0 when none)."""
    pairs = list(zip(a, b))
    return sum(x == y for x, y in pairs) / len(pairs) if pairs else 1.0


class Recording:
    """Passes generate calls to the actor (every other attribute too) and keeps every
    completion's token ids, so two runs can be compared token for token."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.token_ids: list[list[int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.actor, name)

    def generate(self, prompts: list[str], **kwargs: Any) -> Any:
        out = self.actor.generate(prompts, **kwargs)
        self.token_ids.extend(s.token_ids for s in out)
        return out
