"""Exact reference values the Lab prints beside the critic's (the oracle column Q*).

For Blackjack one seeded deal says little about a move list (one card can turn a
good hit into a bust), so the Lab ranks candidates by the solver's exact expected
return of the list: draw every card with its probability, execute the rest of the
list, then play optimally (the solver's V*) once the list runs out with the hand
still open. Other envs: r + V*(s'), where their solver has a value.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from lactchain.envs.blackjack import CARD_P, BlackjackSolver, Hand, add_card
from lactchain.moves import STICK


def exact_q(solver: Any, state: Any, moves: Sequence[str], reward: float, next_state: Any, done: bool,
            natural: bool = False) -> float | None:
    """The oracle's value of playing `moves` from `state` (None where the env has no solver)."""
    if isinstance(solver, BlackjackSolver):
        return list_value(solver, state, tuple(moves), natural)
    value = getattr(solver, "value", None)
    if value is None:
        return None
    return float(reward) + (0.0 if done else float(value(next_state)))


def list_value(solver: BlackjackSolver, hand: Hand, moves: tuple[str, ...], natural: bool = False) -> float:
    """E[return] of executing `moves` from `hand` (ignored after the hand ends), then the
    optimum. `natural`: the hand as dealt is an ace and a 10 (sticking wins unless the
    dealer has one too)."""

    @lru_cache(maxsize=None)
    def go(h: Hand, i: int, first: bool) -> float:
        if i == len(moves):
            return solver.value(h, natural=first and natural)
        if moves[i] == STICK:
            return solver.value(h, natural=True) if first and natural else solver.q_values(h)[STICK]
        total = 0.0
        for card, p in CARD_P.items():
            s, usable = add_card(h.player_sum, h.usable_ace, card)
            total += p * (-1.0 if s > 21 else go(Hand(s, h.dealer_card, usable), i + 1, False))
        return total

    return go(hand, 0, True)
