"""Exact reference values the Lab prints beside the critic's (the oracle column Q*).

For Blackjack one seeded deal says little about a move list (one card can turn a
good hit into a bust), so the Lab ranks candidates by the solver's exact expected
return of the list: draw every card with its probability, execute the rest of the
list, then play optimally (the solver's V*) once the list runs out with the hand
still open. Other envs: r + V*(s'), where their solver has a value.
"""

from __future__ import annotations

from typing import Any, Sequence


def exact_q(solver: Any, state: Any, moves: Sequence[str], reward: float, next_state: Any, done: bool,
            natural: bool = False) -> float | None:
    """The oracle's value of playing `moves` from `state` (None where the env has no solver).
    `natural`: the hand is as dealt (a soft 21 is then a natural)."""
    plan_return = getattr(solver, "plan_return", None)
    if plan_return is not None:
        return plan_return(state, list(moves), start=natural)
    value = getattr(solver, "value", None)
    if value is None:
        return None
    return float(reward) + (0.0 if done else float(value(next_state)))
