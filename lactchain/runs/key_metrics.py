"""The one metric that says how a run of each kind is doing: the console's Jobs chart
starts on it and `lactchain runs list` shows it first."""

from __future__ import annotations

from typing import Any, Mapping

# The metric that says how a job of each kind is doing, first match wins.
KEY_METRICS = {
    "pipeline": ("curve/success_rate", "evaluate/success_rate", "train-actor/train_loss"),
    "actor": ("loss", "train_loss"),
    "critic": ("val_loss", "loss", "v_loss", "spearman_vstar"),
    "eval": ("success_rate",),
    "play": ("success_rate", "episode_success"),  # the run's rate once it ends; the last episode's while it runs
    "pairs": ("ranking_accuracy", "pairs"),
    "collect": ("win_rate",),
    "judge": ("agreement", "answered_rate"),
    "reward": ("held_out_accuracy", "rank_correlation", "loss"),
    "agents": ("intrinsic_win_rate", "mixed_win_rate", "extrinsic_win_rate"),
    "baseline": ("eval/greedy_expected_return", "eval/success_rate"),
    "strategy": ("best", "heldout_best"),  # a search: its curve is the best training score per round
}


def default_metric(kind: str, keys: list[str]) -> str | None:
    """The loss for trainers, the success rate for evaluations and pipelines; else the
    first key with 'loss', then 'success' in it; else the first key."""
    for key in KEY_METRICS.get(kind, ()):
        if key in keys:
            return key
    for word in ("loss", "success"):
        hit = next((k for k in keys if word in k), None)
        if hit:
            return hit
    return keys[0] if keys else None


def key_metrics_first(kind: str, metrics: Mapping[str, Any] | None) -> list[str]:
    """The run's metric keys, the one that matters for its kind first, then the rest sorted."""
    keys = sorted(metrics or {})
    first = default_metric(kind, keys)
    return ([first] if first else []) + [k for k in keys if k != first]
