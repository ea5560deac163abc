"""Rejection-sampling fine-tuning (best-of-K targets) with a shared-prompt-prefix forward.

Why a loop of our own and not TRL's SFTTrainer: every training row starts with the
same ~190 tokens (chat header + strategy + conversion text) and differs only in
the last ~30 (the state and the move list). Running that prefix ONCE per batch
(with gradients: LoRA changes its keys/values too) and expanding its KV cache
over the batch cuts a SmolLM2 step on CPU about 4x (batch 8: 12.4 s -> 3.1 s,
measured side by side). The loss is plain next-token NLL on the completion (the
move list + EOS), i.e. SFT on the labeler's best candidate per state.

Read top to bottom: `encode_rows` (token ids, shared prefix), `nll_loss` (one
batch), `train_rft` (epochs, LoRA, metrics to the registry, SIGTERM -> save and
stop, adapter saved like the TRL trainers' so every loader reads it).

Its settings are the `TrainActorConfig` of every actor trainer with loss "rft": it
reads epochs, max_steps, lr, batch_size, lora_r, lora_alpha, lora_dropout,
target_modules, seed and shared_prefix (`actor_config.LOSS_SETTINGS["rft"]`); the config refuses
the preference losses' settings with rft rather than dropping them.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from lactchain.models.actor import common_prefix_len, ensure_distinct_pad
from lactchain.models.cache_keyword import cache_kwargs, output_cache
from lactchain.moves import format_moves
from lactchain.train.actor_config import TrainActorConfig
from lactchain.train.batch_budget import plan_batch
from lactchain.train.ddp import any_rank, average_gradients, rank, same_start, sum_over_ranks, world_size
from lactchain.train.lora import add_lora, publish_adapter
from lactchain.train.compiled import compiled_model, compiles, step_timing
from lactchain.train.shared_prefix import expanded_cache, shares_prefix


@dataclass
class EncodedRow:
    prompt: list[int]  # chat-rendered user prompt, generation header included
    completion: list[int]  # move list tokens + EOS


def encode_rows(actor: Any, rows: Sequence[Mapping[str, Any]]) -> list[EncodedRow]:
    """Token ids of each (prompt, chosen) row exactly as generation sees them."""
    eos = actor.eos_token_id
    out = []
    for r in rows:
        if not r.get("chosen"):
            raise ValueError("an rft row needs a non-empty 'chosen' move list")
        out.append(EncodedRow(actor._ids(actor.chat_prompt(r["prompt"])), actor._ids(format_moves(list(r["chosen"]))) + [eos]))
    return out


def _common_prefix(rows: Sequence[EncodedRow]) -> int:
    """Prompt tokens all rows share, keeping >= 1 prompt token per row in the suffix."""
    return max(common_prefix_len([r.prompt for r in rows]) - 1, 0)


def nll_loss(model: Any, rows: Sequence[EncodedRow], pad_id: int, shared_prefix: bool = True) -> torch.Tensor:
    """Mean NLL of the completion tokens; the shared prompt prefix runs once (unless told not to)."""
    sums, counts = completion_logps(model, rows, pad_id, shared_prefix)
    return -sums.sum() / counts.sum()


def completion_logps(model: Any, rows: Sequence[EncodedRow], pad_id: int,
                     shared_prefix: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: the summed log-prob of its completion tokens and their count. With
    `shared_prefix` off every row runs whole (one pass: faster on a GPU, where launches bound the step)."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    n = _common_prefix(rows) if shared_prefix else 0
    batch = len(rows)
    past, prefix_mask = None, torch.ones((batch, n), dtype=torch.long, device=device)
    if n:
        out = model(input_ids=torch.tensor([rows[0].prompt[:n]], device=device), use_cache=True,
                    **cache_kwargs(model, DynamicCache(config=model.config)))
        past = expanded_cache(output_cache(out), batch, model.config)
    suffixes = [r.prompt[n:] + r.completion for r in rows]
    width = max(len(s) for s in suffixes)
    ids = torch.full((batch, width), pad_id, dtype=torch.long)
    labels = torch.full((batch, width), -100, dtype=torch.long)
    mask = torch.zeros((batch, width), dtype=torch.long)
    for i, (r, s) in enumerate(zip(rows, suffixes)):  # right padding: positions stay contiguous
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        start = len(r.prompt) - n
        labels[i, start : len(s)] = torch.tensor(r.completion)
    ids, labels, mask = ids.to(device), labels.to(device), mask.to(device)
    positions = (n + torch.arange(width, device=device)).expand(batch, width)
    logits = model(input_ids=ids, attention_mask=torch.cat([prefix_mask, mask], dim=1), position_ids=positions,
                   **cache_kwargs(model, past)).logits
    targets = labels[:, 1:]
    keep = targets != -100
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (logp * keep).sum(-1), keep.sum(-1)


def train_rft(
    actor: Any,
    rows: Sequence[Mapping[str, Any]],
    config: TrainActorConfig,
    *,
    handle: Any = None,
    output_dir: str | Path | None = None,
    on_log: Callable[[int, int, dict[str, float]], None] | None = None,
) -> dict[str, Any]:
    """Fine-tune `actor` (LoRA, continued if it already has one) on `rows` of
    {"prompt": user text, "chosen": move list}; save the adapter to
    `<output_dir>/adapter`. After the call `actor.model` carries it.
    `config.max_steps`, when set, is the number of steps (else `config.epochs` passes).
    The learning rate is constant: the pipeline calls this once per iteration on a
    continued adapter, and a schedule that decays to 0 every call wastes half of
    every call. (bf16 autocast was measured: 5.6 vs 5.9 s per SmolLM2 step on CPU,
    with a worse loss, so training stays fp32.)"""
    from peft import PeftModel

    if config.loss != "rft":
        raise ValueError(f"train_rft trains loss 'rft', not {config.loss!r} (use lactchain.train.actor.train_actor)")
    if not rows:
        raise ValueError("no rft rows to train on")
    plan = plan_batch(actor, rows, config, multiple=world_size())  # a fixed batch, or one from a token budget
    epochs, lr, batch_size, seed = config.epochs, plan.lr, plan.batch_size, config.seed
    if batch_size < 1 or not lr > 0 or not epochs > 0:
        raise ValueError("batch_size must be >= 1, lr and epochs > 0")
    if output_dir is None:
        if handle is None:
            raise ValueError("train_rft needs output_dir= or a run handle")
        output_dir = handle.dir
    out = Path(output_dir)
    ensure_distinct_pad(actor.tokenizer, actor.model)
    encoded = encode_rows(actor, rows)
    model = actor.model
    started_from = str(getattr(actor, "adapter", None) or "") or None
    if isinstance(model, PeftModel):
        for name, param in model.named_parameters():
            param.requires_grad_("lora_" in name and ".default." in name)
    else:
        torch.manual_seed(seed)
        model = add_lora(model, config)
    params = [p for p in model.parameters() if p.requires_grad]
    shared = shares_prefix(model, config.shared_prefix)  # the prefix once (a CPU) or whole rows (a GPU)
    compiled = compiles(model, config.torch_compile)
    forward = compiled_model(model, compiled)  # the same parameters; a fused forward where it pays
    world, me = world_size(), rank()
    same_start(params)  # DDP (--processes): every rank from rank 0's weights
    # One fused kernel for the whole update on a GPU (a CPU has none).
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, fused=params[0].is_cuda or None)
    rng = random.Random(seed)
    order = list(range(len(encoded)))
    total_steps = int(config.max_steps) if config.max_steps else max(1, round(epochs * len(encoded) / batch_size))
    model.train()
    t0 = time.perf_counter()
    losses: list[float] = []
    step_times: list[float] = []
    cancelled = out_of_time = False
    step = 0
    while step < total_steps:
        rng.shuffle(order)
        for i in range(0, len(order), batch_size):
            if step >= total_steps:
                break
            if handle is not None:  # every rank of a DDP run decides alike
                cancelled, out_of_time = any_rank(handle.cancelled.is_set(), bool(step) and handle.out_of_time())
                if cancelled or out_of_time:  # out of time: the budget's deadline, keep what is learnt so far
                    break
            s0 = time.perf_counter()
            whole = order[i : i + batch_size]
            whole += order[: max(0, world - len(whole))]  # a short last batch: every rank gets a row (as DistributedSampler pads)
            mine = whole[me::world]  # this rank's slice of the global batch (all of it alone)
            loss = nll_loss(forward, [encoded[j] for j in mine], actor.pad_token_id, shared)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            average_gradients(params, len(mine) / len(whole))
            optimizer.step()
            step += 1
            losses.append(sum_over_ranks(loss.item() * len(mine) / len(whole))[0])
            step_times.append(time.perf_counter() - s0)
            metrics = {"loss": losses[-1], "step_time_s": step_times[-1], "lr": lr}
            if handle is not None:
                handle.log_metrics(metrics, step=step)
            if on_log is not None:
                on_log(step, total_steps, metrics)
        if cancelled or out_of_time:
            break
    seconds = time.perf_counter() - t0
    meta = {"base": getattr(actor, "name", None), "loss": "rft", "lora_r": config.lora_r, "lora_alpha": config.lora_alpha,
            "step": step, "rows": len(rows), "complete": not cancelled, "started_from": started_from}
    adapter_dir = publish_adapter(actor, model, out, meta, handle)
    return {"loss_type": "rft", "processes": world, "shared_prefix": shared, "torch_compile": compiled,
            **plan.record(config.batch_tokens),
            **step_timing(step_times), "steps": step, "rows": len(rows), "pairs": len(rows), "train_loss": sum(losses) / len(losses) if losses else None,
            "final_loss": losses[-1] if losses else None, "final_metrics": {"loss": losses[-1]} if losses else {},
            "seconds": seconds, "adapter": str(adapter_dir),
            "cancelled": cancelled, "out_of_time": out_of_time, "warnings": []}
