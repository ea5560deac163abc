"""Grouped-query attention at inference without copying the keys and values.

transformers' SDPA attention repeats a GQA model's key/value heads to the query heads
(`repeat_kv`) whenever the batch carries a padding mask -- every batched rollout does --
because SDPA's `enable_gqa` is taken only without a mask. In decoding that copy is the
whole KV cache, every layer, every token: SmolLM2-135M (9 query heads, 3 KV heads) spent
~57 ms a layer per decode step on a batch of 64 Taxi prompts (~500 cached tokens, one
thread), against 5.8 ms when each KV head's 3 query heads are read as 3 query rows of one
head (same keys, same values, the mask repeated per row). That is what `grouped_sdpa`
does when no gradient is needed; training (and anything it cannot take: a paged cache,
a position bias, no GQA) goes to transformers' own SDPA unchanged.

`use_grouped_attention(model)` switches a loaded model to it (registered with
transformers' AttentionInterface under `GROUPED_SDPA`, with SDPA's mask builder).

`choose_sdpa_kernels(device)` keeps SDPA off cuDNN's kernels on a GPU where they do not
pay: cuDNN builds an execution graph for every new shape, and the loop is nothing but
new shapes (each decode step's longer cache, each training batch's padded length).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

GROUPED_SDPA = "lactchain_grouped_sdpa"
# Where cuDNN's SDPA kernels pay, by device type. torch takes them on Hopper (the H200's
# evaluation profile: `aten::_cudnn_attention_forward`, docs/results/gpu-h200-2026-11-28),
# and each new shape costs them a graph build. On one H200 (2026-11-30) a first greedy
# evaluation of the 60 states took 8.1 s with them and 4.1 s without (warm: 1.50 s and
# 1.52 s, same answers), and the loop's evaluations 2.0-3.3 s without them against 4.5-5.1
# s with. `bench device` times the evaluation with them flipped (`cudnn_sdpa_*`).
CUDNN_SDPA_PAYS = {"cuda": False}


def grouped_sdpa(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                 is_causal: bool | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """SDPA with a GQA model's query heads grouped onto their shared KV head (no KV copy).
    query (B, H, L, D), key/value (B, KV, T, D) -> (B, L, H, D), as transformers expects."""
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, length, dim = query.shape
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    if (groups == 1 or torch.is_grad_enabled() or kwargs.get("position_bias") is not None
            or kwargs.get("cache") is not None or key.shape[1] * groups != heads
            or (attention_mask is None and causal and length > 1)):  # unpadded causal prefill: SDPA's own GQA path
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    rows = query.reshape(batch, key.shape[1], groups * length, dim)  # head kv*groups + g -> rows (g, l) of head kv
    mask = None if attention_mask is None else attention_mask.repeat(1, 1, groups, 1)
    out = torch.nn.functional.scaled_dot_product_attention(rows, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(batch, heads, length, dim).transpose(1, 2).contiguous(), None


AttentionInterface.register(GROUPED_SDPA, grouped_sdpa)
AttentionMaskInterface.register(GROUPED_SDPA, sdpa_mask)


def choose_sdpa_kernels(device: torch.device | str, cudnn: bool | None = None) -> bool:
    """On a CUDA device, let SDPA take cuDNN's kernels or not (`cudnn`; None: as
    `CUDNN_SDPA_PAYS` says). torch's switch is process-wide, as a device's kernels are.
    Returns whether cuDNN's SDPA is on; other devices are left alone."""
    if torch.device(device).type != "cuda":
        return torch.backends.cuda.cudnn_sdp_enabled()
    want = CUDNN_SDPA_PAYS["cuda"] if cudnn is None else bool(cudnn)
    torch.backends.cuda.enable_cudnn_sdp(want)
    return want


def use_grouped_attention(model: Any) -> bool:
    """Switch `model` (a transformers model, or a PEFT model around one) from SDPA to
    `grouped_sdpa`; False where it does not run SDPA (eager, flash...) and is left alone."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(base.config, "_attn_implementation", None) != "sdpa" or not hasattr(base, "set_attn_implementation"):
        return False
    base.set_attn_implementation(GROUPED_SDPA)
    return base.config._attn_implementation == GROUPED_SDPA
