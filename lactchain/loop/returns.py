"""Monte-Carlo returns from stored episodes: what the critic learns from.

Only FINISHED episodes count (the last stored step is done: terminated or out of
actions). An episode cut off mid-way (its run was killed, or hit a step budget)
has no return yet: counting its partial rewards would teach the critic that
states near the cut are worth nothing. Plain Python: the CLI checks data with it
before a run (and torch) are started.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Sample:
    """One step as the critic sees it."""

    episode: tuple[str, Any]  # (run id, episode id): the unit of the train/val split
    t: int
    state: dict[str, Any]
    moves: list[str]
    ret: float  # discounted return from this step on
    truncated: bool = False  # the episode ended out of actions (or was cut short), not terminated


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """G_t = r_t + gamma * G_{t+1}, computed backwards from the end of the episode."""
    out = [0.0] * len(rewards)
    g = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        g = float(rewards[i]) + gamma * g
        out[i] = g
    return out


def samples_from_steps(run_id: str, steps: Sequence[Mapping[str, Any]], gamma: float) -> list[Sample]:
    """Per-episode Monte-Carlo returns for steps rows (as `Registry.steps` returns them)."""
    by_episode: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for row in steps:
        by_episode[row["episode_id"]].append(row)
    samples: list[Sample] = []
    for episode_id, rows in by_episode.items():
        rows = sorted(rows, key=lambda r: r["t"])
        if rows[-1].get("done") is False:
            continue  # cut off (a killed run): its return is unknown, not a short episode's
        returns = discounted_returns([r["reward"] or 0.0 for r in rows], gamma)
        last = rows[-1]
        terminated = last.get("terminated")
        truncated = not (terminated if terminated is not None else last.get("done"))  # older rows: done only
        for row, g in zip(rows, returns):
            samples.append(Sample((run_id, episode_id), int(row["t"]), dict(row["state"]),
                                  list(row.get("moves") or []), g, truncated))
    return samples


def load_samples(registry: Any, run_ids: Sequence[str], gamma: float) -> list[Sample]:
    samples: list[Sample] = []
    for rid in run_ids:
        samples.extend(samples_from_steps(rid, registry.steps(run_id=rid), gamma))
    return samples


def split_by_episode(samples: Sequence[Sample], val_fraction: float, seed: int) -> tuple[list[Sample], list[Sample]]:
    """Whole episodes go to validation (at least one when there are two or more episodes)."""
    episodes = sorted({s.episode for s in samples}, key=repr)
    random.Random(seed).shuffle(episodes)
    n_val = 0 if len(episodes) < 2 or val_fraction <= 0 else min(len(episodes) - 1, max(1, round(val_fraction * len(episodes))))
    val_eps = set(episodes[:n_val])
    return [s for s in samples if s.episode not in val_eps], [s for s in samples if s.episode in val_eps]


def usable_steps(registry: Any, run_ids: Sequence[str]) -> tuple[int, int]:
    """(steps of finished episodes, steps stored) over `run_ids`."""
    stored = sum(registry.counts(r)["steps"] for r in run_ids)
    return len(load_samples(registry, run_ids, 0.0)), stored
