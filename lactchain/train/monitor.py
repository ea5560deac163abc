"""What a trainer's steps tell the lab: every log's metrics under stable names in the
registry, known failure signatures of preference and GRPO training as warnings, each
checkpoint sealed and recorded, and a cancellation (SIGTERM) or a deadline turned into a
stop. Shared by the preference trainers (`lactchain.train.actor`) and GRPO's."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from transformers import TrainerCallback

from lactchain.runs.checkpoints import seal
from lactchain.train.actor_config import NO_CHECKPOINTS
from lactchain.train.ddp import any_rank

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


def no_signal_loss(loss: str, simpo_gamma: float | None = None) -> float:
    """The loss value when the model does not separate chosen from rejected at all."""
    if loss == "dpo":
        return math.log(2.0)
    if loss == "simpo":
        return math.log1p(math.exp(simpo_gamma or 0.0))  # softplus(gamma); ln 2 when gamma = 0
    if loss in ("rft", "grpo"):
        return float("nan")  # a supervised or policy-gradient loss has no "no signal" value
    return 0.5  # KTO: 1 - sigmoid(0) on every row


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
