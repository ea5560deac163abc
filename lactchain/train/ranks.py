"""Spearman's rank correlation, for the critic's fit to V* and Motif's reward model.

Pearson's correlation of average ranks (ties share their mean rank), which is what
scipy's `spearmanr` computes. pandas ranks; scipy is not a dependency because
transformers imports `scipy.optimize` in every process whenever scipy is installed
(0.4 s each, docs/setup.md)."""

from __future__ import annotations

from typing import Sequence

import pandas as pd


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho of two equal-length sequences; 0.0 where it is undefined (fewer than
    two values, or one side constant): no rank information."""
    if len(a) != len(b):
        raise ValueError(f"spearman needs two sequences of one length, got {len(a)} and {len(b)}")
    rho = pd.Series(a, dtype=float).rank().corr(pd.Series(b, dtype=float).rank())
    return 0.0 if rho != rho else float(rho)
