"""Refresh the generation copy's merged LoRA weights in place after a training step.

Why: the actor generates with a copy of its model that has the adapter merged
(`Actor._generation_model`). GRPO samples between optimizer steps, so the adapter changes
every step, and rebuilding the copy (deep copy, merge, cast) costs several times what
writing the new merged weights into the copy's own tensors does (for SmolLM2 on a 2-core
CPU, `scripts/merged_copy_refresh_check.py`, docs/performance.md); on a GPU it also leaves
every tensor at its address, which the decode step's CUDA graphs replay on
(lactchain.models.static_cache). Only the adapted layers change:
LoRA training freezes everything else. Anything this cannot map (another model, DoRA, an
adapter merged into its base, trainable weights outside the adapter) asks for a rebuild.
"""

from __future__ import annotations

from typing import Any

import torch

PEFT_PREFIX = "base_model.model."  # a peft model's module names start with this


def refresh_merged(copy: Any, adapted: Any) -> bool:
    """Write `adapted`'s base weights plus its active LoRA deltas into the matching linear
    layers of `copy` (merged in the weights' dtype, then cast to the copy's: as peft's
    merge-then-cast does, bit for bit). False, with `copy` untouched, when it cannot."""
    from peft.tuners.lora import LoraLayer

    if any(p.requires_grad and "lora_" not in name for name, p in adapted.named_parameters()):
        return False
    targets = dict(copy.named_modules())
    writes: list[tuple[torch.Tensor, Any, list[str]]] = []  # (the copy's weight, the adapted layer, its adapters)
    for name, module in adapted.named_modules():
        if not isinstance(module, LoraLayer):
            continue
        target = targets.get(name.removeprefix(PEFT_PREFIX))
        weight = getattr(target, "weight", None)
        active = [a for a in module.active_adapters if a in module.lora_A]
        if (weight is None or module.merged or module.disable_adapters
                or any(module.use_dora.get(a, False) for a in active)
                or weight.shape != module.base_layer.weight.shape):
            return False
        writes.append((weight, module, active))
    if not writes:
        return False
    with torch.no_grad():
        for weight, module, active in writes:
            merged = module.base_layer.weight.detach().clone()
            for name in active:
                merged += module.get_delta_weight(name)
            weight.copy_(merged.to(weight.dtype))
    return True
