"""GRPO's memory of each start state's best list (`--replay-best`), replayed into its group.

Why: grouped by start state, GRPO compares a state's K samples with each other only.
Once the samples concentrate on one list that wins from most states (a sweep of the
grid's walls), every group holds that list and nothing else: all equal, no advantage,
and nothing says a shorter win was once sampled from that state. Experience-replay
variants of GRPO (ExGRPO, RePO, 2025) put earlier good samples back into the groups;
here each state's best-rewarded list so far takes one of its group's K places, so a
sweep sampled where a direct win is remembered scores below it (and the remembered win
above the sweep), while the group's other K-1 members stay fresh samples. The
replayed list is re-executed (its reward is today's) and trained on as if drawn now:
TRL scores it under the current policy, with no importance weight for the older policy
that drew it (as the replay variants above do for on-policy steps).

A list is remembered only where it beat its own group's mean (it earned a positive
advantage when drawn), and replaces the state's list only with a strictly higher
reward; the remembered list's reward is the one it scored at its last replay (so a
lucky score on a random env is not kept for ever). The memory lives as long as the
object: the loop keeps one for the whole run, across iterations (a resumed run starts
it empty); the `train-actor` job one for its own steps.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass
class _Best:
    reward: float
    sample: Any  # the actor's Sample: its moves and exact token ids


class BestLists:
    """The best-rewarded list sampled so far from each state, keyed by its prompt text."""

    def __init__(self) -> None:
        self._best: dict[str, _Best] = {}

    def __len__(self) -> int:
        return len(self._best)

    def get(self, text: str) -> Any | None:
        best = self._best.get(text)
        return None if best is None else best.sample

    def reward(self, text: str) -> float | None:
        best = self._best.get(text)
        return None if best is None else best.reward

    def members(self, texts: Sequence[str], drawn: Sequence[Any], k: int) -> tuple[list[Any], list[bool]]:
        """Each text's K group members from `drawn` (K per text, grouped per text): its
        remembered list first, in place of the last drawn one (drawn with the others in one
        generate call, then left out), where it has one. Also says which groups hold a
        replayed list."""
        members: list[Any] = []
        replayed: list[bool] = []
        for i, text in enumerate(texts):
            own = list(drawn[i * k:(i + 1) * k])
            best = self.get(text)
            members += own if best is None else [best, *own[:k - 1]]
            replayed.append(best is not None)
        return members, replayed

    def update(self, text: str, group: Sequence[Any], rewards: Sequence[float], replayed: bool) -> None:
        """Learn from one scored group (its first member the remembered list when
        `replayed`): the remembered list takes its new score, and the group's best list
        replaces it if it beat its group's mean and scored strictly more."""
        if replayed:
            self._best[text].reward = float(rewards[0])
        top = max(range(len(rewards)), key=lambda j: rewards[j])
        if rewards[top] <= statistics.fmean(rewards):
            return
        held = self._best.get(text)
        if held is None or rewards[top] > held.reward:
            self._best[text] = _Best(float(rewards[top]), group[top])
