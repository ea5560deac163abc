"""LoRA adapters of the actor: which layers to adapt, saving an adapter, and handing
the trained model back to the in-memory actor.

Shared by every actor trainer (`lactchain.train.actor`: SimPO / DPO / KTO through
TRL, and `lactchain.train.rft`: best-of-K fine-tuning), so the adapters they save
look alike and every loader reads them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lactchain.models.quiet import quiet_checkpointing_deprecation
from lactchain.train.ddp import is_main_process

ADAPTER_KIND = "adapter"

# The attention and MLP projections of Llama-style models (tiny, SmolLM2, Mistral).
LLAMA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Other common names, tried when none of the above exist (GPT-2, GPT-NeoX, Falcon, ...).
FALLBACK_TARGET_MODULES = ("c_attn", "c_proj", "c_fc", "query_key_value", "dense", "dense_h_to_4h",
                           "dense_4h_to_h", "fc1", "fc2", "Wqkv", "out_proj")


def lora_targets(model: Any) -> list[str]:
    """Projection layers to adapt: Llama-style names if present, else common others."""
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    found = [t for t in LLAMA_TARGET_MODULES if t in names]
    if not found:
        found = [t for t in FALLBACK_TARGET_MODULES if t in names]
    if not found:
        raise ValueError("found no attention/MLP projection layers to put LoRA on; pass target_modules=")
    return found


def lora_config(model: Any, config: Any) -> Any:
    """peft's LoraConfig from a trainer config's LoRA settings (rank, alpha, dropout,
    target modules: the model's projections unless given)."""
    from peft import LoraConfig

    targets = list(config.target_modules) if config.target_modules else lora_targets(model)
    return LoraConfig(r=int(config.lora_r), lora_alpha=int(config.lora_alpha), lora_dropout=float(config.lora_dropout),
                      bias="none", target_modules=targets, task_type="CAUSAL_LM")


def add_lora(model: Any, config: Any) -> Any:
    """`model` wrapped in a fresh LoRA adapter (`lora_config`)."""
    from peft import get_peft_model

    with quiet_checkpointing_deprecation():
        return get_peft_model(model, lora_config(model, config))


def save_adapter(model: Any, folder: Path, meta: dict[str, Any]) -> Path:
    """The LoRA weights only (never the base weights) plus `lactchain_adapter.json`."""
    from lactchain.paths import writing

    with writing(folder, "the adapter"):
        folder.mkdir(parents=True, exist_ok=True)
        names = ["default"] if "default" in getattr(model, "peft_config", {}) else None
        model.save_pretrained(str(folder), selected_adapters=names)
        (folder / "lactchain_adapter.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return folder


def publish_adapter(actor: Any, model: Any, out: Path, meta: dict[str, Any], handle: Any = None) -> Path:
    """Save the trained adapter to `<out>/adapter` (one process of a DDP run writes: the
    others hold the same weights), record it as the run's artifact at `meta["step"]`, and
    leave `actor` on it."""
    adapter_dir = out / "adapter"
    if is_main_process():
        save_adapter(model, adapter_dir, meta)
        if handle is not None:
            handle.registry.add_artifact(handle.run_id, ADAPTER_KIND, adapter_dir, step=meta["step"], meta=meta)
    finish_actor(actor, model, adapter_dir)
    return adapter_dir


def finish_actor(actor: Any, model: Any, adapter_dir: Path) -> None:
    """Leave the in-memory actor on the trained adapter, in eval mode."""
    from accelerate.utils import extract_model_from_parallel

    # A Trainer with bf16/fp16 (the default on CUDA) leaves accelerate's autocast +
    # fp32-output wrapper on `model.forward`: the in-memory actor would then score and
    # generate differently from the same adapter reloaded. accelerate takes it off.
    model = extract_model_from_parallel(model, keep_fp32_wrapper=False)
    # accelerate also marks the model prepared and never wraps a marked model again: the
    # next training call on this actor (the loop's next iteration) would then run without
    # the bf16 autocast it asks for: 24 s a SimPO step on SmolLM2 instead of 9.
    model.__dict__.pop("_is_accelerate_prepared", None)
    peft_config = getattr(model, "peft_config", {})
    if "ref" in peft_config:  # DPO/KTO added a frozen copy of a continued adapter as reference
        try:
            model.set_adapter("default")
            model.delete_adapter("ref")
        except Exception:
            pass
    model.eval()
    actor.model = model
    actor.adapter = adapter_dir
