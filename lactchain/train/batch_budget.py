"""Pairs per optimizer step from a token budget (`TrainActorConfig.batch_tokens`).

Why: a step of a 135M model on a GPU is bound by kernel launches, not by its FLOPs. On
one H200 a CPO-SimPO step took 0.36-0.39 s for 32 pairs against 0.42-0.47 s for 8
(docs/performance.md), so a fixed 8 pairs a step leaves the card idle, and a longer
prompt (a bigger scene) fills it more than a short one. A budget in tokens sizes the
step to what the device takes in one pass; on a CPU, where a step's time grows with its
tokens, the fixed batch stays the default.

Fewer, larger steps need a larger learning rate to learn as much per epoch: the given
lr is the rate at `batch_size` pairs a step, and a budget of N pairs scales it by
sqrt(N / batch_size), the square-root rule for Adam (Malladi et al., "On the SDEs and
Scaling Rules for Adaptive Gradient Algorithms", NeurIPS 2022). Both resolved values are
recorded in the trainer's result. Measured on the CPU (docs/results.md, "Pairs per step"):
one loop iteration at 32 pairs and twice the rate reached 88-90 % where 8 pairs reach 100 %,
so the rule does not keep all that an iteration learns, and no device defaults to a budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from lactchain.moves import format_moves


@dataclass(frozen=True)
class BatchPlan:
    """What a budget resolved to for one training run."""

    batch_size: int  # pairs per optimizer step
    lr: float  # the learning rate at that batch size (where the trainer's schedule starts)
    tokens_per_pair: float  # mean tokens a pair's rows hold (0 without a budget)

    def record(self, batch_tokens: int | None) -> dict[str, Any]:
        """The keys a trainer's result carries, so a run says what it trained with."""
        return {"batch_size": self.batch_size, "start_lr": self.lr, "batch_tokens": batch_tokens,
                "tokens_per_pair": round(self.tokens_per_pair, 1)}


def row_tokens(actor: Any, prompt_tokens: int, moves: Sequence[str]) -> int:
    """Tokens of one training row, whole: its prompt (as generation sees it, `prompt_tokens`
    long), the move list's text and EOS."""
    return prompt_tokens + actor.count_tokens(format_moves(list(moves))) + 1


def pair_tokens(actor: Any, pairs: Sequence[Mapping[str, Any]], loss: str) -> float:
    """Mean tokens the training rows of one pair hold, whole (prompt as generation sees
    it, completion with EOS): chosen and rejected each with its prompt for simpo, dpo and
    kto, the chosen side alone for rft."""
    if not pairs:
        raise ValueError("no pairs to size a batch from")
    prompt_len: dict[str, int] = {}
    total = 0
    for p in pairs:
        text = p["prompt"]
        if text not in prompt_len:
            prompt_len[text] = len(actor.prompt_ids(text))
        sides = ("chosen",) if loss == "rft" else ("chosen", "rejected")
        for side in sides:
            total += row_tokens(actor, prompt_len[text], p[side])
    return total / len(pairs)


def pairs_in_budget(batch_tokens: int, tokens_per_pair: float, n_pairs: int, multiple: int = 1) -> int:
    """Pairs a step of at most `batch_tokens` tokens holds (at least one, at most the data),
    rounded down to a multiple of `multiple` (the processes a step is split over)."""
    n = max(1, min(n_pairs, int(batch_tokens // max(tokens_per_pair, 1.0))))
    return max(multiple, n - n % multiple)


def scaled_lr(lr: float, batch_size: int, reference_batch: int) -> float:
    """`lr`, given for `reference_batch` pairs a step, at `batch_size` (square-root rule)."""
    return float(lr) * math.sqrt(batch_size / reference_batch)


def plan_batch(actor: Any, pairs: Sequence[Mapping[str, Any]], config: Any, multiple: int = 1) -> BatchPlan:
    """The batch size and learning rate `config` trains `pairs` with: as given without a
    budget, else sized by `config.batch_tokens` with the lr scaled from `config.batch_size`."""
    if not config.batch_tokens:
        return BatchPlan(int(config.batch_size), float(config.lr), 0.0)
    per_pair = pair_tokens(actor, pairs, config.loss)
    n = pairs_in_budget(int(config.batch_tokens), per_pair, len(pairs), multiple)
    return BatchPlan(n, scaled_lr(config.lr, n, int(config.batch_size)), per_pair)
