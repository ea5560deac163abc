"""Static KV caches kept across generate calls, one per batch size bucket.

Why: a static cache is what lets the decode step run as CUDA graphs (`Actor.static_cache`),
and a CUDA graph replays on fixed addresses. transformers 5.24's `generate` builds a new
`StaticCache` on every call and marks its tensors as static addresses, so every call
hands the captured graphs new addresses (torch re-records them, and past a limit runs
them uncaptured), and every new batch size is a new shape to trace. The loop calls
generate hundreds of times a run: each evaluation lock-step, each collect batch, each
GRPO step. Kept here instead, one cache per bucket of batch sizes (powers of two from 8)
and dtype, reset before each call (transformers' documented way to reuse a static cache),
its length a multiple of `LENGTH_STEP` that only grows: the decode step then sees a few
shapes and the same tensors throughout a run, training included (weights change, the
cache's buffers do not).

A batch is padded up to its bucket with copies of its first row, whose answers are
dropped. Only where a row's answer does not depend on the others in the batch (greedy,
or sampled with a seed per row): the shared-generator sampling of one `seed` would draw
differently for a larger batch, so those calls keep their own size.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

LENGTH_STEP = 128  # cache lengths are multiples of this: a few shapes over a run's prompt lengths
SMALLEST_BUCKET = 8
CACHES_KEPT = 4  # batch buckets held at once (least recently used dropped): eval, collect, GRPO, one spare


def batch_bucket(rows: int) -> int:
    """The batch size `rows` is padded up to: the next power of two, at least 8."""
    return max(SMALLEST_BUCKET, 1 << max(0, rows - 1).bit_length())


def pad_rows(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    """`tensor` with copies of its first row appended up to `rows` rows."""
    extra = rows - tensor.shape[0]
    if extra <= 0:
        return tensor
    return torch.cat([tensor, tensor[:1].expand(extra, *tensor.shape[1:])], dim=0)


class StaticCachePool:
    """The static caches of one actor, by (batch size, dtype)."""

    def __init__(self, kept: int = CACHES_KEPT) -> None:
        self.kept = kept
        self._caches: OrderedDict[tuple[int, torch.dtype], tuple[int, Any]] = OrderedDict()
        self.created = 0  # caches allocated so far (a test, and a run's log, can see reuse)

    def get(self, model: Any, batch: int, length: int) -> Any:
        """An empty static cache for `batch` rows of up to `length` tokens under `model`:
        the one kept for that batch size if it is long enough, else a new, longer one."""
        from transformers import StaticCache

        dtype = next(model.parameters()).dtype
        key = (batch, dtype)
        need = -(-int(length) // LENGTH_STEP) * LENGTH_STEP
        held = self._caches.get(key)
        if held is None or held[0] < need:
            config = getattr(model, "config", None) or model.get_base_model().config
            held = (need, StaticCache(config=config, max_cache_len=need))
            self._caches[key] = held
            self.created += 1
        self._caches.move_to_end(key)
        while len(self._caches) > self.kept:
            self._caches.popitem(last=False)
        cache = held[1]
        with torch.inference_mode():  # its tensors were made under generate's inference mode
            cache.reset()
        return cache

    def held(self) -> dict[tuple[int, torch.dtype], Any]:
        """The caches kept, by (batch size, dtype)."""
        return {key: cache for key, (_, cache) in self._caches.items()}
