"""Training forwards that run the batch's shared prompt prefix once.

Why: every row a loss trains on is the chat-rendered prompt and an answer, and the
grid's prompts share their first ~166 of 189-197 tokens (chat header, strategy,
conversion text; the state comes last), while an answer is ~15 tokens. A DPO or CPO-SimPO
batch of 8 pairs is 16 such rows: ~3,000 positions through the model of which ~2,500 are
the same prefix 16 times. Running that prefix once, with gradients (LoRA changes its keys
and values too), and expanding its keys/values over the batch is what made rft's own loop
~4x faster per step (lactchain.train.rft); `share_prompt_prefix` gives the TRL trainers
(DPO, KTO, CPO-SimPO, GRPO) the same.

The patch sits on the decoder backbone (`model.model` of a causal LM), which TRL's fused
LM head and the causal LM's own forward both call: the backbone's hidden states are the
same (to float rounding) with and without it, so everything above it -- the LM head, the
fused log-prob kernel, `logits_to_keep` -- is untouched. It applies only to a plain
training-style call (no cache given, none asked for, token ids with a 2-D mask, no
position ids); anything else, e.g. generation, goes to the backbone's own forward.
Right-padded rows (DPO, KTO, CPO-SimPO) share their leading tokens as they are; GRPO's
rows, whose prompts are padded on the left, are first left-aligned (rotary models only:
a shift of every position changes nothing there; the plain forward numbers those rows'
positions from their padding too).
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch

from lactchain.models.cache_keyword import cache_keyword, output_cache

# Below this many shared tokens, one more forward call costs more than it saves.
MIN_SHARED_TOKENS = 8
# Where sharing the prefix pays, by device type (`TrainActorConfig.shared_prefix=None`
# follows this). A CPU is bound by FLOPs: ~4x faster steps. A GPU running a small model is
# bound by kernel launches, and the prefix is one more pass of them: on one H200 a
# CPO-SimPO step on 8 pairs took 0.416 s shared and 0.245 s whole (`bench device`,
# 2026-11-30, docs/results/gpu-h200-2026-11-30); in the loop CPO-SimPO's train-actor went from
# 110.6 s to 62.3 s with whole rows (docs/results/gpu-h200-2026-11-30b).
SHARED_PREFIX_PAYS = {"cpu": True, "cuda": False}
# What this module's own calls set: a split call has them all None (and use_cache off).
_OWN_KWARGS = ("past_key_values", "cache", "position_ids", "cache_position")


def shares_prefix(model: Any, asked: bool | None) -> bool:
    """Whether a trainer runs its rows' shared prefix once: as `asked`, else where that
    pays on the device `model`'s weights are on (`SHARED_PREFIX_PAYS`)."""
    if asked is not None:
        return bool(asked)
    return SHARED_PREFIX_PAYS.get(next(model.parameters()).device.type, True)


def shared_prefix_len(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """Leading positions where every row has the same token and no padding, leaving at
    least one position per row after it."""
    same = (input_ids == input_ids[:1]).all(dim=0) & (attention_mask != 0).all(dim=0)
    run = int(torch.cumprod(same.to(torch.int32), dim=0).sum())
    return min(run, int(input_ids.shape[1]) - 1)


def expanded_cache(cache: Any, batch: int, config: Any) -> Any:
    """A DynamicCache of `cache`'s per-layer keys/values (batch 1) expanded to `batch`
    rows: views, so the gradient of every row flows back into the one prefix pass."""
    from transformers import DynamicCache

    layers = [(layer.keys.expand(batch, -1, -1, -1), layer.values.expand(batch, -1, -1, -1)) for layer in cache.layers]
    return DynamicCache(layers, config=config)


def _backbone(model: Any) -> Any:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder() if hasattr(base, "get_decoder") else None


def _plain_call(args: tuple, input_ids: Any, attention_mask: Any, kwargs: dict[str, Any]) -> bool:
    """A training-style call this patch may split: token ids, a 2-D mask, batch > 1, and
    nothing that asks for a cache, positions or per-layer outputs."""
    if args or input_ids is None or attention_mask is None or attention_mask.dim() != 2 or input_ids.shape[0] < 2:
        return False
    if kwargs.get("use_cache") or any(kwargs.get(k) is not None for k in _OWN_KWARGS + ("inputs_embeds",)):
        return False
    return not (kwargs.get("output_hidden_states") or kwargs.get("output_attentions"))


def left_aligned(run: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, lead: torch.Tensor) -> Any:
    """`run(ids, mask)`'s hidden states for rows shifted left by their padding `lead` (so
    they are right padded and their shared prefix lines up), shifted back; None when a
    row's tokens are not one contiguous run or `run` returns None."""
    width = input_ids.shape[1]
    cols = torch.arange(width, device=input_ids.device)
    there = (cols + lead[:, None]) % width
    mask = attention_mask.gather(1, there)
    if (mask[:, 1:] > mask[:, :-1]).any():  # a gap inside a row: not one run of tokens
        return None
    hidden = run(input_ids.gather(1, there), mask)
    if hidden is None:
        return None
    back = (cols - lead[:, None]) % width
    return hidden.gather(1, back[..., None].expand(-1, -1, hidden.shape[-1]))


def share_prompt_prefix(model: Any) -> bool:
    """Patch the decoder backbone of `model` (a causal LM, PEFT-wrapped or not) so that a
    training forward runs the rows' shared prefix once. Idempotent; False when the model
    has no backbone this knows (then nothing changes)."""
    backbone = _backbone(model)
    if backbone is None or getattr(backbone.forward, "lactchain_shared_prefix", False):
        return backbone is not None
    original = backbone.forward
    config = backbone.config
    cache_kw = cache_keyword(backbone)  # `cache` from transformers 5.24, `past_key_values` before

    # Left-aligning a left-padded batch (GRPO's: prompts padded left, answers right) shifts a
    # row's positions, which only relative position encodings (rotary) do not see.
    relative = hasattr(backbone, "rotary_emb")

    def shared(input_ids: Any, attention_mask: Any, rest: dict[str, Any]) -> Any:
        """The hidden states with the rows' shared prefix run once; None where none pays."""
        n = shared_prefix_len(input_ids, attention_mask)
        if n < MIN_SHARED_TOKENS:
            return None
        from transformers import DynamicCache

        batch, width = input_ids.shape
        head = original(input_ids=input_ids[:1, :n], use_cache=True, **{cache_kw: DynamicCache(config=config)}, **rest)
        past = expanded_cache(output_cache(head), batch, config)
        positions = (n + torch.arange(width - n, device=input_ids.device)).expand(batch, -1)
        tail = original(input_ids=input_ids[:, n:], attention_mask=attention_mask, position_ids=positions,
                        use_cache=True, **{cache_kw: past}, **rest)
        return torch.cat([head.last_hidden_state.expand(batch, -1, -1), tail.last_hidden_state], dim=1)

    @functools.wraps(type(backbone).forward)
    def forward(self: Any, *args: Any, input_ids: Any = None, attention_mask: Any = None, **kwargs: Any) -> Any:
        if not _plain_call(args, input_ids, attention_mask, kwargs):
            return original(*args, input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        from transformers.modeling_outputs import BaseModelOutputWithPast

        rest = {k: v for k, v in kwargs.items() if k not in _OWN_KWARGS + ("use_cache",)}
        lead = (attention_mask.cumsum(dim=1) == 0).sum(dim=1)  # each row's left padding
        if not lead.any():
            hidden = shared(input_ids, attention_mask, rest)
        elif relative:
            hidden = left_aligned(lambda ids, mask: shared(ids, mask, rest), input_ids, attention_mask, lead)
        else:
            hidden = None
        if hidden is None:
            return original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        return BaseModelOutputWithPast(last_hidden_state=hidden)

    forward.lactchain_shared_prefix = True  # type: ignore[attr-defined]
    backbone.forward = types.MethodType(forward, backbone)
    return True


def unshare_prompt_prefix(model: Any) -> None:
    """Take the patch off again: every row then runs whole (a trainer told
    `shared_prefix=False`, e.g. `bench device` timing both on a GPU)."""
    backbone = _backbone(model)
    if backbone is not None and getattr(vars(backbone).get("forward"), "lactchain_shared_prefix", False):
        del backbone.forward
