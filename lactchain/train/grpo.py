"""GRPO on the actor through TRL's `GRPOTrainer`, with the lab's own generation.

TRL's generation loop cannot take the constrained move-list grammar, so the trainer
gets a `rollout_func` (TRL's hook for custom generation): each step, for the step's
start states, the policy being trained (the actor's LoRA model) samples K move lists
with the grammar (`actor.generate`, seeded) and hands back their exact token ids. The
reward function executes each list from its state and asks the task for its score
(in the loop: the labeler's advantage -- critic, rollout return, judge or oracle). A
group is the K samples of one start state; TRL turns their rewards into advantages
(minus the group mean, divided by the group's std unless `scale_rewards` says
otherwise) and applies its clipped policy-gradient loss (`loss_type` dapo: token-level,
no length bias). Samples are on-policy (one gradient step per generation), so no
sampling log-probs are passed.

The trainer, LoRA, bf16, checkpoints, the metrics callback and the adapter saved at
the end are the ones of the preference losses (lactchain.train.actor).
"""

from __future__ import annotations

import itertools
import sys
import warnings as pywarnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from lactchain.train.actor import (
    ActorTrainingCallback,
    TrainActorConfig,
    _prepare_model,
    _quiet_datasets,
    finish_actor,
    run_trainer,
    save_adapter,
)
from lactchain.train.ddp import is_main_process, world_size
from lactchain.train.lora import ADAPTER_KIND, add_lora

MAX_COMPLETION_TOKENS = 48  # the actor's generate default: a move list and its EOS


@dataclass
class GRPOTask:
    """What GRPO trains on: the start states (each row {"prompt": user text, "state":
    the env's state}), how to score sampled lists, and how to sample them."""

    rows: list[dict[str, Any]]
    reward: Callable[[Sequence[Any], Sequence[Any]], list[float]]  # (states, samples) -> one reward each
    generations: int = 4
    temperature: float = 1.0
    constrained: bool = True
    seed: int = 0


class _Rollouts:
    """TRL's rollout_func and reward function around the actor and the task: the
    samples of a step wait here (by key) until the reward function scores them."""

    def __init__(self, actor: Any, task: GRPOTask) -> None:
        self.actor, self.task = actor, task
        self.pending: dict[int, Any] = {}
        self.keys = itertools.count()
        self.calls = 0
        self.scored = 0
        self.env_moves = 0

    def rollout(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        k = self.task.generations
        if len(prompts) % k:
            raise ValueError(f"GRPO batch of {len(prompts)} prompts is not whole groups of {k}")
        unique = prompts[::k]
        if any(prompts[i] != unique[i // k] for i in range(len(prompts))):
            raise ValueError("GRPO batch: a group's prompts differ (expected each prompt repeated consecutively)")
        self.calls += 1
        samples = self.actor.generate(unique, constrained=self.task.constrained, temperature=self.task.temperature,
                                      num_samples=k, seed=self.task.seed * 100_003 + self.calls,
                                      max_new_tokens=MAX_COMPLETION_TOKENS)
        keys = [next(self.keys) for _ in samples]
        self.pending.update(zip(keys, samples))
        prompt_ids = [self.actor.prompt_ids(p) for p in unique]
        return {"prompt_ids": [prompt_ids[i // k] for i in range(len(prompts))],
                "completion_ids": [list(s.token_ids) for s in samples], "logprobs": None, "sample_key": keys}

    def reward(self, prompts: list[str], completions: list[Any], sample_key: list[int], state_index: list[int],
               **_: Any) -> list[float]:
        samples = [self.pending.pop(k) for k in sample_key]
        states = [self.task.rows[i]["state"] for i in state_index]
        self.scored += len(samples)
        self.env_moves += sum(len(s.moves) for s in samples)
        return [float(r) for r in self.task.reward(states, samples)]


def train_grpo(
    actor: Any,
    task: GRPOTask,
    config: TrainActorConfig,
    *,
    handle: Any = None,
    output_dir: str | Path | None = None,
    resume_from_checkpoint: str | Path | bool | None = None,
    on_log: Callable[[int, int, dict[str, float]], None] | None = None,
) -> dict[str, Any]:
    """GRPO on `task` (`config.loss` must be grpo); the LoRA adapter (continued if the
    actor has one) saved to `<output_dir>/adapter`; after the call `actor.model` carries
    it. Checkpoints every `save_steps` and on SIGTERM, as the other TRL losses."""
    import torch
    from datasets import Dataset
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    if config.loss != "grpo":
        raise ValueError(f"train_grpo trains loss 'grpo', not {config.loss!r}")
    if not task.rows:
        raise ValueError("GRPO needs start states to sample from; got none")
    if task.generations < 2:
        raise ValueError(f"GRPO needs groups of at least 2 samples per state, got {task.generations}")
    if output_dir is None:
        if handle is None:
            raise ValueError("train_grpo needs output_dir= or a run handle")
        output_dir = handle.dir
    out = Path(output_dir)
    started_from = str(getattr(actor, "adapter", None) or "") or None
    set_seed(int(config.seed))
    model, continuing = _prepare_model(actor)
    if not continuing:  # LoRA put on here (not by TRL), so the actor generates with the policy that trains
        model = add_lora(model, config)
    actor.model = model
    use_cuda = torch.cuda.is_available() and next(model.parameters()).device.type == "cuda"
    bf16 = config.bf16 if config.bf16 is not None else bool(
        use_cuda and torch.cuda.is_bf16_supported(including_emulation=False))
    k, per_step = task.generations, config.grpo.states_per_step
    # Each step's states over all processes (DDP, --processes): each rank samples and scores whole groups of its share.
    per_rank = max(1, min(per_step, len(task.rows)) // world_size())
    args = GRPOConfig(
        output_dir=str(out / "checkpoints"), learning_rate=float(config.lr), num_generations=k,
        per_device_train_batch_size=k * per_rank, gradient_accumulation_steps=1,
        num_train_epochs=float(config.epochs), max_steps=int(config.max_steps) if config.max_steps else -1,
        max_completion_length=MAX_COMPLETION_TOKENS, temperature=float(task.temperature), beta=config.grpo.kl_beta,
        scale_rewards=config.grpo.scale_rewards, logging_steps=int(config.logging_steps), save_strategy="steps",
        save_steps=int(config.save_steps), save_total_limit=int(config.save_total_limit) or None, report_to="none",
        bf16=bool(bf16), fp16=False, use_cpu=not use_cuda, dataloader_num_workers=0, disable_tqdm=True,
        seed=int(config.seed), data_seed=int(config.seed), lr_scheduler_type="constant", warmup_steps=0,
        remove_unused_columns=False, log_completions=False,
    )
    from transformers import TrainingArguments

    if "activation_checkpointing" in TrainingArguments.__dataclass_fields__:
        args.activation_checkpointing, args.gradient_checkpointing = False, None
    else:  # pragma: no cover - older transformers
        args.gradient_checkpointing = False
    rollouts = _Rollouts(actor, task)

    def labeler_reward(prompts: list[str], completions: list[Any], **kw: Any) -> list[float]:
        return rollouts.reward(prompts, completions, **kw)

    dataset = Dataset.from_dict({"prompt": [r["prompt"] for r in task.rows],
                                 "state_index": list(range(len(task.rows)))})
    callback = ActorTrainingCallback("grpo", handle=handle, on_log=on_log)
    with _quiet_datasets(), pywarnings.catch_warnings():
        pywarnings.filterwarnings("ignore", message=".*rollout_func.*")
        pywarnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        trainer = GRPOTrainer(model=model, reward_funcs=[labeler_reward], args=args, train_dataset=dataset,
                              processing_class=actor.tokenizer, callbacks=[callback], rollout_func=rollouts.rollout)
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    output, seconds = run_trainer(trainer, resume_from_checkpoint)
    step = int(trainer.state.global_step)
    meta = {"base": getattr(actor, "name", None), "loss": "grpo", "lora_r": config.lora_r,
            "lora_alpha": config.lora_alpha, "step": step, "states": len(task.rows), "generations": k,
            "complete": not callback.cancelled, "started_from": started_from}
    adapter_dir = out / "adapter"
    if is_main_process():  # one process writes (the others hold the same weights)
        save_adapter(trainer.model, adapter_dir, meta)
        if handle is not None:
            handle.registry.add_artifact(handle.run_id, ADAPTER_KIND, adapter_dir, step=step, meta=meta)
    finish_actor(actor, trainer.model, adapter_dir)
    for w in callback.warnings:
        print(f"warning [{w.code}]: {w.message}", file=sys.stderr)
    timed = callback.step_times[1:] or callback.step_times
    return {"loss_type": "grpo", "processes": world_size(), "steps": step, "states": len(task.rows), "generations": k,
            "samples_scored": rollouts.scored, "env_moves": rollouts.env_moves, "kl_beta": config.grpo.kl_beta,
            "final_metrics": {k_: v for k_, v in callback.last.items() if k_ not in ("train_loss", "train_runtime_s")},
            "train_loss": float(output.training_loss) if output.training_loss is not None else None,
            "seconds": seconds, "s_per_step": (sum(timed) / len(timed)) if timed else None,
            "adapter": str(adapter_dir), "checkpoints": [p for _, p in callback.checkpoints],
            "warnings": [{"code": w.code, "message": w.message, "step": w.step} for w in callback.warnings],
            "cancelled": callback.cancelled, "out_of_time": callback.out_of_time,
            "resumed_from": None if resume_from_checkpoint in (None, False) else str(resume_from_checkpoint)}
