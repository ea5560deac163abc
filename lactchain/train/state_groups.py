"""GiGPO-style step groups for GRPO: every action taken from the same state, across
episodes and iterations, joins one group, scored by the env's discounted return from
that state.

Why: GRPO's groups are K samples from one start state; with a near-greedy actor most
of them score alike and the step carries no signal. The grid revisits the same states
constantly, so the actions that different episodes took from one state are a free,
larger group (verl-agent's GiGPO "anchor states"). Plain data here (no torch): the
GRPO rollout (lactchain.train.grpo) plays the episodes and picks groups from it.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Hashable, Sequence


@dataclass(frozen=True)
class Step:
    """One action of an episode, as the actor answered it."""

    state: Hashable
    sample: Any  # lactchain.models.actor.Sample (moves, text, token_ids)
    reward: float


@dataclass(frozen=True)
class GroupEntry:
    """An action in a state's group: the sample and the discounted return it led to."""

    sample: Any
    ret: float
    tick: int  # when it was added (newer entries are kept first)


def returns_to_go(rewards: Sequence[float], gamma: float, tail: float = 0.0) -> list[float]:
    """G_t = r_t + gamma * G_{t+1}, with G_T = `tail` (0 at an episode's end, a value
    estimate where it was cut short)."""
    out, g = [0.0] * len(rewards), float(tail)
    for t in range(len(rewards) - 1, -1, -1):
        g = float(rewards[t]) + gamma * g
        out[t] = g
    return out


class StateGroups:
    """The actions seen from each state (the newest `keep` per state) and their returns.

    `add_episode` files each step of an episode under its state; two episodes that pass
    the same state put both their actions in that state's group."""

    def __init__(self, gamma: float, keep: int = 16) -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        if keep < 2:
            raise ValueError(f"a group needs room for at least 2 actions, got keep={keep}")
        self.gamma, self.keep = float(gamma), int(keep)
        self.groups: OrderedDict[Hashable, list[GroupEntry]] = OrderedDict()
        self.ticks = 0
        self.episodes = 0

    def __len__(self) -> int:
        return len(self.groups)

    def add_episode(self, steps: Sequence[Step], tail: float = 0.0) -> list[Hashable]:
        """File the episode's actions by state; returns the states it touched, in order."""
        self.episodes += 1
        touched = []
        for step, ret in zip(steps, returns_to_go([s.reward for s in steps], self.gamma, tail)):
            self.ticks += 1
            entries = self.groups.setdefault(step.state, [])
            entries.append(GroupEntry(step.sample, ret, self.ticks))
            del entries[:-self.keep]  # the newest `keep`
            self.groups.move_to_end(step.state)
            touched.append(step.state)
        return touched

    def group(self, state: Hashable) -> list[GroupEntry]:
        return list(self.groups.get(state, ()))

    def spread(self, state: Hashable) -> float:
        """The return std of the state's group (0 for fewer than 2 actions)."""
        rets = [e.ret for e in self.groups.get(state, ())]
        return statistics.pstdev(rets) if len(rets) >= 2 else 0.0

    def pick(self, states: Sequence[Hashable], n: int) -> list[Hashable]:
        """Up to `n` of `states` (deduplicated) with at least 2 actions, the ones whose
        returns vary most first (a zero-variance group carries no gradient)."""
        seen = list(OrderedDict.fromkeys(s for s in states if len(self.groups.get(s, ())) >= 2))
        order = sorted(range(len(seen)), key=lambda i: (-self.spread(seen[i]), i))
        return [seen[i] for i in order[:n]]

    def draw(self, state: Hashable, k: int) -> list[GroupEntry]:
        """K entries of the state's group for one GRPO group: the newest first, repeated
        in turn when the group holds fewer than K."""
        entries = sorted(self.groups[state], key=lambda e: -e.tick)
        return [entries[i % len(entries)] for i in range(k)]

    def stats(self) -> dict[str, float]:
        sizes = [len(v) for v in self.groups.values()]
        return {"state_groups": float(len(sizes)), "state_group_mean_size": (sum(sizes) / len(sizes)) if sizes else 0.0,
                "episodes_played": float(self.episodes)}
