"""Move lists found by beam search over the labeler's own values: candidates beside the
actor's samples and the random explore lists.

Why: random lists find a good action only where one is short. On Taxi a delivery needs a
drive to the passenger (up to 8 moves), a pickup, a drive to the destination and a
drop-off; among 256 random lists of up to 8 moves from a state, the critic's pick was the
optimal action for 14 % of the 400 states (docs/worlds.md). The critic already knows
which states are closer to a delivery, so a list can be grown a move at a time toward
them: every prefix is itself a move list, scored exactly as the labeler scores a whole
list, R(list) + gamma * V(s') (R alone where the list ends the episode); the `beam` best of
each length are extended by every move, and the best `beam` lists of all lengths join the
group as candidates (source "search"). The labeler then ranks them with the rest, so a
searched list becomes an elite only if it beats the actor's own answers and the random
ones. A learned value function, never the exact planner: with the oracle labeler it is a
diagnostic, like the labeler itself.

Deterministic envs only: a list's outcome must not depend on a deal.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from lactchain.envs.replay import execute_from
from lactchain.loop.labelers import Group, execute_candidate


def beam_lists(env: Any, state: Any, values: Callable[[list[Any]], list[float]], gamma: float, beam: int,
               cache: dict[Any, float]) -> tuple[list[tuple[str, ...]], int]:
    """The `beam` best move lists from `state` by R + gamma V(s') (best first), and the env
    moves their search executed. `cache` keeps V of every state seen, across calls."""
    def value_of(states: list[Any]) -> None:
        new = [s for s in dict.fromkeys(states) if s not in cache]
        if new:
            cache.update(zip(new, values(new)))

    frontier: list[tuple[str, ...]] = [()]
    scored: dict[tuple[str, ...], float] = {}
    moves_run = 0
    for _ in range(env.max_moves_per_action):
        grown = [(*prefix, m) for prefix in frontier for m in env.moves]
        outcomes = [execute_from(env, state, moves) for moves in grown]
        moves_run += sum(len(moves) for moves in grown)
        value_of([nxt for _, nxt, done in outcomes if not done])
        step = {moves: reward + (0.0 if done else gamma * cache[nxt])
                for moves, (reward, nxt, done) in zip(grown, outcomes)}
        scored.update(step)
        open_ends = [moves for moves, (_, _, done) in zip(grown, outcomes) if not done]
        frontier = sorted(open_ends, key=lambda moves: -step[moves])[:beam]
        if not frontier:
            break
    best = sorted(scored, key=lambda moves: (-scored[moves], len(moves)))[:beam]
    return best, moves_run


def add_search(groups: Sequence[Group], env: Any, values: Callable[[list[Any]], list[float]], gamma: float,
               beam: int) -> tuple[int, int]:
    """Add to every group the `beam` best lists of `beam_lists` it does not hold yet,
    executed from its state. Returns (lists added, env moves the search ran)."""
    if getattr(env, "stochastic", False):
        raise ValueError("search needs a deterministic env: a list's outcome here depends on the deal")
    cache: dict[Any, float] = {}
    added = moves_run = 0
    for g in groups:
        lists, ran = beam_lists(env, g.state, values, gamma, beam, cache)
        moves_run += ran
        seen = {tuple(c.moves) for c in g.candidates}
        for moves in lists:
            if moves not in seen:
                g.candidates.append(execute_candidate(env, g, moves, source="search"))
                added += 1
    return added, moves_run
