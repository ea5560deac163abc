"""The actor trainers' configs (TRL-style): `TrainActorConfig` for `train_actor` /
`build_trainer` / `train_rft`, and `TrainActorJobConfig` for the `train-actor` job.

Light on purpose (no torch, no transformers): the CLI and the console build their
options and forms from these classes before any model is loaded.

Which settings each loss reads (`LOSS_SETTINGS`, also in every field's help):

    all losses    epochs, max_steps, lr, batch_size, lora_r, lora_alpha, lora_dropout,
                  target_modules, seed, shared_prefix (lactchain.train.shared_prefix)
    all but grpo  batch_tokens (pairs per step from a token budget: lactchain.train.batch_budget)
    simpo/dpo/kto beta (the `preference` part), grad_accum, bf16, save_steps,
                  save_total_limit, logging_steps, max_length (TRL's Trainer)
    simpo only    simpo_gamma, cpo_alpha (the `simpo` part)
    dpo/kto       rpo_alpha (NLL on chosen; kto's desirable rows: lactchain.train.kto_nll)
    dpo only      dpo_loss (sigmoid or ipo)
    kto only      kto_balance (desirable:undesirable weighted 1:1)
    grpo          bf16, save_steps, save_total_limit, logging_steps, and the `grpo` part
                  (kl_beta, scale_rewards, states_per_step, grpo_loss_type, epsilon_high,
                  group_filter, tokens_per_pass, policy_logprobs, updates_per_generation,
                  entropy_coef, entropy_target, greedy_member, replay_best): TRL's GRPOTrainer on fresh samples
                  (lactchain.train.grpo), not on pairs

`rft` is supervised (best-of-K targets, lactchain.train.rft): a non-default value of
a setting it does not read is refused, as is cpo_alpha / simpo_gamma with dpo or kto,
rather than dropped silently.

SimPO's parameters, as TRL 1.16 implements them (cpo_trainer.cpo_loss):
loss = -log sigmoid(beta * (avg_logp(chosen) - avg_logp(rejected)) - simpo_gamma),
so `simpo_gamma` is the paper's gamma itself (the target reward margin), not
gamma/beta. The SimPO authors use beta 2-10 and gamma/beta 0.25-0.5; the defaults
here are beta 2.5 and gamma 1.25 (gamma/beta = 0.5). The first public LactChain
attempt ran beta 0.1 / gamma 0.5 and learnt nothing; such values are refused.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any
from lactchain.config import SEED_MAX, Config, ConfigError, default_of, flat_names, option
from lactchain.machine import resolve_dtype

ADAPTER_HELP = ("LoRA adapter: an adapter folder, a train-actor run id, or a pipeline run id (the adapter its "
                "actor had after its last finished phase).")
# save_steps at or above it: no trainer checkpoint at all, not even on SIGTERM (the loop's
# phases: a stopped pipeline redoes its unfinished phase from its seeds, never reading one).
NO_CHECKPOINTS = 10**9
ADAPTER_CHECK = "run:actor,pipeline"  # the runs whose ids --adapter takes (a console form checks)

LOSSES = ("simpo", "dpo", "kto", "rft", "grpo")
PREFERENCE_LOSSES = ("simpo", "dpo", "kto")  # rft is supervised: best-of-K targets, no rejected side
PAIR_JOB_LOSSES = ("simpo", "dpo", "kto", "rft")  # `train-actor` trains on stored pairs; grpo samples as it trains
JOB_LABELERS = ("critic", "human", "llm", "episodes", "any")  # `train-actor --labeler`

DEFAULT_BETA = {"simpo": 2.5, "dpo": 0.1, "kto": 0.1, "rft": None, "grpo": None}
SIMPO_GAMMA_RATIO = 0.5  # default gamma / beta
# The SimPO authors' range, and the wider range outside which values are refused.
SIMPO_BETA_RECOMMENDED = (2.0, 10.0)
SIMPO_BETA_ALLOWED = (1.0, 20.0)
SIMPO_RATIO_RECOMMENDED = (0.25, 0.5)
SIMPO_RATIO_ALLOWED = (0.0, 1.0)
KL_BETA_RECOMMENDED = (0.01, 1.0)  # DPO / KTO
DPO_LOSS_TYPES = ("sigmoid", "ipo")
GRPO_LOSS_TYPES = ("dapo", "dr_grpo", "grpo", "bnpo")  # TRL 1.16 GRPOConfig.loss_type values that fit LoRA + our rollouts

_ALL = ("epochs", "max_steps", "lr", "batch_size", "lora_r", "lora_alpha", "lora_dropout", "target_modules", "seed",
        "shared_prefix")
_TRL = ("beta", "grad_accum", "bf16", "save_steps", "save_total_limit", "logging_steps", "max_length")
_PAIRS = ("batch_tokens",)  # every loss that trains on pairs (grpo sizes its steps by --states-per-step)
BATCH_TOKENS_RANGE = (64, 10_000_000)  # a token budget's bounds (train-actor's --batch-tokens, the loop's too)
# loss -> the TrainActorConfig settings it reads (`loss` itself aside)
LOSS_SETTINGS: dict[str, tuple[str, ...]] = {
    "simpo": _ALL + _PAIRS + _TRL + ("simpo_gamma", "cpo_alpha", "torch_compile"),
    "dpo": _ALL + _PAIRS + _TRL + ("rpo_alpha", "dpo_loss", "torch_compile"),
    "kto": _ALL + _PAIRS + _TRL + ("rpo_alpha", "kto_balance", "torch_compile"),
    "rft": _ALL + _PAIRS + ("torch_compile",),
    "grpo": _ALL + ("bf16", "save_steps", "save_total_limit", "logging_steps", "kl_beta",
                    "scale_rewards", "states_per_step", "grpo_loss_type", "epsilon_high", "group_filter",
                    "tokens_per_pass", "policy_logprobs", "updates_per_generation", "entropy_coef", "entropy_target",
                    "greedy_member", "replay_best"),
}


def resolve_hparams(loss: str, beta: float | None, simpo_gamma: float | None) -> tuple[float, float | None, list[str]]:
    """(beta, simpo_gamma, warnings) with per-loss defaults; ValueError for values
    outside sane ranges, a warning for values outside the recommended ones."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}, not {loss!r}")
    notes: list[str] = []
    if loss in ("rft", "grpo"):
        if beta is not None or simpo_gamma is not None:
            raise ValueError(f"beta and simpo_gamma do not apply to loss={loss!r} (grpo's KL weight is --kl-beta)")
        return 0.0, None, notes
    beta = DEFAULT_BETA[loss] if beta is None else float(beta)
    if not beta > 0 or math.isinf(beta):
        raise ValueError(f"beta must be a positive number, got {beta}")
    if loss != "simpo":
        if simpo_gamma is not None:
            raise ValueError(f"simpo_gamma only applies to loss='simpo', not {loss!r}")
        lo, hi = KL_BETA_RECOMMENDED
        if not lo <= beta <= hi:
            notes.append(f"{loss} beta {beta} is outside the usual range {lo}-{hi}")
        return beta, None, notes
    lo, hi = SIMPO_BETA_ALLOWED
    if not lo <= beta <= hi:
        raise ValueError(
            f"SimPO beta {beta} is outside {lo}-{hi}. SimPO's reward is beta x the AVERAGE per-token log-prob, "
            f"so beta must be large (the SimPO authors use {SIMPO_BETA_RECOMMENDED[0]:g}-{SIMPO_BETA_RECOMMENDED[1]:g}; "
            f"default {DEFAULT_BETA['simpo']}). A DPO-style beta such as 0.1 makes the loss flat: the first "
            "LactChain attempt ran SimPO with beta 0.1 / gamma 0.5 and learnt nothing.")
    gamma = SIMPO_GAMMA_RATIO * beta if simpo_gamma is None else float(simpo_gamma)
    if gamma < 0 or math.isnan(gamma):
        raise ValueError(f"simpo_gamma (the target reward margin) must be >= 0, got {gamma}")
    ratio = gamma / beta
    lo, hi = SIMPO_RATIO_ALLOWED
    if not lo <= ratio <= hi:
        raise ValueError(
            f"SimPO gamma/beta = {gamma}/{beta} = {ratio:.3g} is outside {lo}-{hi}. In TRL, simpo_gamma is the margin "
            f"gamma itself (loss = -log sigmoid(beta * delta_avg_logp - gamma)); the SimPO authors keep gamma/beta in "
            f"{SIMPO_RATIO_RECOMMENDED[0]}-{SIMPO_RATIO_RECOMMENDED[1]}, e.g. beta 2.5, gamma 1.25.")
    if not SIMPO_BETA_RECOMMENDED[0] <= beta <= SIMPO_BETA_RECOMMENDED[1]:
        notes.append(f"SimPO beta {beta} is outside the recommended {SIMPO_BETA_RECOMMENDED[0]:g}-"
                     f"{SIMPO_BETA_RECOMMENDED[1]:g}")
    if not SIMPO_RATIO_RECOMMENDED[0] <= ratio <= SIMPO_RATIO_RECOMMENDED[1]:
        notes.append(f"SimPO gamma/beta {ratio:.3g} is outside the recommended {SIMPO_RATIO_RECOMMENDED[0]}-"
                     f"{SIMPO_RATIO_RECOMMENDED[1]}")
    return beta, gamma, notes


# ---- the per-loss parts ---------------------------------------------------------------

@dataclass
class PreferenceSettings(Config):
    """The preference losses' own settings (simpo, dpo, kto; not rft)."""

    HELP_PANEL = "SimPO, DPO, KTO"

    beta: float | None = option(
        None, "Default per loss: simpo 2.5 (authors' range 2-10), dpo 0.1, kto 0.1.")
    rpo_alpha: float | None = option(
        None, "dpo and kto: weight of an NLL term on chosen (dpo: RPO, TRL's loss types sigmoid + sft; kto: on the "
              "desirable rows, our own term, as TRL's KTO has none): keeps DPO from pushing both sides down when "
              "chosen and rejected differ by a move (likelihood displacement), and ties KTO's answers to each "
              "state. 0 = plain DPO / KTO. Default: 0 for train-actor; 1.0 for dpo and kto in the loop "
              "(pipeline, bench learn).", min=0.0, max=100.0)
    dpo_loss: str = option("sigmoid", "dpo only: sigmoid (DPO) or ipo (IPO: a squared loss that stops at a margin "
                                      "instead of pushing it to infinity).", choices=DPO_LOSS_TYPES)
    kto_balance: bool = option(True, "kto only: each distinct chosen list once, weighted so desirable and "
                                     "undesirable rows count 1:1 (TRL's guidance; a state's elite against K-1 worse "
                                     "lists is 1:(K-1) unweighted).", negative="--no-kto-balance")


@dataclass
class SimPOSettings(Config):
    """SimPO's own settings (CPO trainer, loss_type=simpo)."""

    HELP_PANEL = PreferenceSettings.HELP_PANEL

    simpo_gamma: float | None = option(
        None, "SimPO target margin gamma itself (default 0.5 x beta; gamma/beta must stay in 0-1).")
    cpo_alpha: float | None = option(
        None, "simpo only: weight of an NLL term on chosen (CPO alpha; 0 = plain SimPO). Default: 0 for "
              "train-actor; 1.0 in the loop (CPO-SimPO: plain SimPO drifted there, docs/results.md).", min=0.0)


@dataclass
class GRPOSettings(Config):
    """GRPO's own settings (TRL's GRPOTrainer, lactchain.train.grpo): the loop's `--loss
    grpo`, and train-actor's on a play run's states (`--rollouts-from`)."""

    HELP_PANEL = "GRPO"

    kl_beta: float = option(0.0, "grpo only: KL penalty to the starting policy (TRL's beta). 0, TRL's default, "
                                 "loads no reference model; 0.04 is the DeepSeekMath value.", min=0.0, max=10.0)
    scale_rewards: str = option("group", "grpo only: advantages divided by the reward std of the group (GRPO), "
                                         "of the batch, or not at all (none: Dr. GRPO).",
                                choices=("group", "batch", "none"))
    states_per_step: int = option(8, "grpo only: start states per optimizer step (each with its group of samples).",
                                  min=1, max=4096)
    grpo_loss_type: str = option("dapo", "grpo only: TRL's loss aggregation: dapo (token-level over the batch, TRL's "
                                         "default), dr_grpo (a constant: no length bias), grpo (per sequence), bnpo.",
                                 choices=GRPO_LOSS_TYPES)
    epsilon_high: float | None = option(0.28, "grpo only: upper clip of the probability ratio (clip-higher, DAPO "
                                              "0.28; the lower clip is 0.2).", min=0.2, max=10.0)
    group_filter: int = option(2, "grpo only: sample groups for this many times the step's states and train on the "
                                  "ones whose rewards vary most (zero-variance groups last: they carry no gradient; "
                                  "DAPO's dynamic sampling, RAGEN's variance filter). 1 = no filter.",
                               min=1, max=16)
    policy_logprobs: str | None = option(
        None, "grpo only: score the samples under the raw model over its whole vocabulary (raw, TRL's way) or "
              "under the policy that drew them, the grammar-masked one (constrained: renormalised over the "
              "tokens the move grammar allows). Unconstrained samples are always scored raw. Default: "
              "constrained in the loop's GRPO recipe (grouped by start, an env --grpo-reward), else raw.",
        choices=("raw", "constrained"))
    updates_per_generation: int = option(
        1, "grpo only: optimizer steps on each generated batch (TRL's num_iterations, the GRPO paper's mu; PPO's "
           "epochs). Above 1 the samples are reused with the clipped ratio against the policy that drew them, "
           "so a costly generation trains more; an epoch then has this many times the steps.", min=1, max=16)
    tokens_per_pass: int | None = option(
        None, "grpo only: most tokens (prompt + completion, padded) in one forward/backward pass. A step's "
              "sequences are split into passes of at most this many and their gradients accumulated: the same "
              "update in less memory (a full SmolLM2 step of 32 Taxi sequences peaked at 19 GB in one pass). "
              "Default: 2048 on a CPU, 16384 on a CUDA GPU for a model of SmolLM2-135M's width x depth, "
              "scaled to the model's (a 7B model gets ~1/8).", min=64, max=1_000_000)
    entropy_coef: float | None = option(
        None, "grpo only: weight of an entropy bonus in the loss (TRL's entropy_coef: the mean per-token entropy "
              "of the scored policy, raw or constrained as --policy-logprobs says), against the sampling "
              "collapse that leaves every group flat. With --entropy-target, the starting weight. Default: "
              "0.01 in the loop's GRPO recipe, else 0.", min=0.0, max=1.0)
    entropy_target: float | None = option(
        None, "grpo only: adaptive entropy control (Skywork-OR1, TRL's use_adaptive_entropy): the bonus "
              "applies only while the entropy is at or below this many nats, its weight rising 0.005 a step "
              "while it is and falling while it is not; in the loop it restarts from --entropy-coef at each "
              "iteration's train-actor (one trainer each). Set it near the entropy of the first steps (the "
              "`entropy` metric). 0: off (a fixed --entropy-coef). Default: 0.3 in the loop's GRPO recipe "
              "(the masked policy's entropy at the start), else off.", min=0.0, max=20.0)
    greedy_member: bool = option(
        False, "grpo only: one member of each start state's group is the policy's greedy answer (the others "
               "sampled), so a greedy answer the samples beat gets a negative advantage: the greedy decode is "
               "what the evaluation plays, and it can narrow to one list for every state while the samples "
               "spread. Groups by start state only.")
    replay_best: bool | None = option(
        None, "grpo only: one member of each start state's group is the best list sampled from that state so "
              "far (one that beat its group; replaced only by a higher reward), the others sampled: experience "
              "replay as in ExGRPO / RePO, so a list that wins from every state (a sweep) scores below a "
              "shorter win once one was drawn there, where groups of fresh samples alone tie. In the loop the "
              "memory spans the run (a resume starts it empty) and needs an env --grpo-reward. Groups by start "
              "state only; not with --greedy-member. Default: on in the loop's GRPO recipe, else off.",
        negative="--no-replay-best")

    def check(self) -> None:
        if self.replay_best and self.greedy_member:  # here, so the loop and train-actor refuse it alike
            raise ConfigError("replay-best and --greedy-member each take a group's first member: choose one")

    def resolve(self, defaults: dict[str, Any]) -> None:
        """Each setting left unset (None) takes its value in `defaults` (the command's own):
        recorded resolved, so a run's params say what ran."""
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)


# GRPO's settings where no recipe applies: train-actor, and the loop grouped by state or rewarded
# by the labeler (what every GRPO run recorded before the loop's recipe became its default).
GRPO_PLAIN = {"entropy_coef": 0.0, "entropy_target": None, "policy_logprobs": "raw", "replay_best": False}

# What older records wrote for a setting their loss did not read (its "off", the default then); read
# as not given, so such a run still loads where the setting now defaults to unset.
_OFF_WHEN_UNREAD = {"cpo_alpha": 0.0, "rpo_alpha": 0.0, "grpo_reward": "labeler", **GRPO_PLAIN}


def holder_of(config: Config, name: str) -> Config:
    """The config (`config` or one of its parts) that holds the flat setting `name`."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, Config) and name in flat_names(type(value)):
            return holder_of(value, name)
    return config


def refuse_unread(config: Config, loss: str, names: list[str],
                  settings: dict[str, tuple[str, ...]] = LOSS_SETTINGS) -> None:
    """Refuse (one line, naming the flag) a non-default value of any of `names` that
    `loss` does not read (`settings[loss]`): a setting of another loss is never dropped
    silently. An older record's "off" for it (`_OFF_WHEN_UNREAD`: cpo_alpha 0, GRPO's
    entropy_coef 0, ...) reads as not given."""
    for name in names:
        if name == "loss" or name in settings[loss]:
            continue
        holder = holder_of(config, name)
        f = next(f for f in dataclasses.fields(holder) if f.name == name)
        value = getattr(holder, name)
        if name in _OFF_WHEN_UNREAD and value is not None and value == _OFF_WHEN_UNREAD[name]:
            setattr(holder, name, None)
            continue
        if value != default_of(f):
            who = [other for other, names_read in settings.items() if name in names_read]
            why = ("rft is supervised best-of-K fine-tuning" if loss == "rft"
                   else f"--loss {loss} does not use it")
            holder.refuse(name, f"only applies to --loss {'/'.join(who)} ({why}); leave it out")


# ---- the trainer's config -----------------------------------------------------------------

@dataclass
class TrainActorConfig(Config):
    """Everything `train_actor` / `build_trainer` / `train_rft` read. Which loss reads
    which setting: `LOSS_SETTINGS` (and each field's help); a non-default value of a
    setting the chosen loss does not read is refused."""

    loss: str = option("simpo", "simpo (CPO trainer, loss_type=simpo), dpo, kto, rft (fine-tune on the chosen "
                       "side only: best-of-K), or grpo (TRL's GRPOTrainer on fresh samples scored by a labeler: the "
                       "loop's `pipeline --loss grpo`).", choices=LOSSES, form="Loss")
    epochs: float = option(1.0, "Passes over the pairs (ignored with --max-steps).", form="Epochs")
    max_steps: int | None = option(None, "Stop after this many optimizer steps.", min=1)
    lr: float = option(5e-5, "Learning rate of the LoRA weights.", form="Learning rate")
    batch_size: int = option(8, "Pairs per optimizer step.", short="-b", min=1)
    batch_tokens: int | None = option(
        None, "Pairs per optimizer step from a token budget instead (simpo, dpo, kto, rft): as many pairs as their "
              "rows hold this many tokens on average (prompt and completion, whole), and --lr, the rate at "
              "--batch-size pairs, scaled by sqrt(pairs / batch-size) (Adam's square-root rule). Fills a GPU, whose "
              "step costs about the same for 4x the pairs; both resolved values are recorded. Default: off (a fixed "
              "--batch-size).", min=BATCH_TOKENS_RANGE[0], max=BATCH_TOKENS_RANGE[1])
    preference: PreferenceSettings = field(default_factory=PreferenceSettings)
    simpo: SimPOSettings = field(default_factory=SimPOSettings)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    lora_r: int = option(8, "LoRA rank.", min=1, max=1024)
    lora_alpha: int = option(16, "LoRA alpha.", min=1, max=4096)
    save_steps: int = option(25, "Checkpoint every N steps (and on SIGTERM). simpo, dpo, kto; rft runs are short "
                             f"and do not checkpoint. {NO_CHECKPOINTS} or more: none at all.", min=1)
    seed: int = option(0, "Seed for LoRA init, data order and dropout.", min=0, max=SEED_MAX)
    # Not command-line options today (library callers and the pipeline set them).
    grad_accum: int = option(1, "Gradient accumulation steps (simpo, dpo, kto).", min=1, cli=False)
    bf16: bool | None = option(None, "bf16 autocast (simpo, dpo, kto, grpo; rft trains fp32). Default: where the "
                               "device does bf16 natively (a CUDA GPU that has it, a CPU with AMX or "
                               "AVX512-bf16), else off.", cli=False)
    lora_dropout: float = option(0.0, "LoRA dropout.", min=0.0, max=0.9, cli=False)
    target_modules: list[str] | None = option(None, "Layers to put LoRA on. Default: the attention and MLP "
                                              "projections found in the model.", cli=False)
    save_total_limit: int = option(2, "Checkpoints kept (older ones are deleted; 0 keeps all). simpo, dpo, kto.",
                                   min=0, cli=False)
    logging_steps: int = option(1, "Log metrics every N steps (simpo, dpo, kto; rft logs every step).", min=1,
                                cli=False)
    max_length: int = option(1024, "Longest prompt + completion in tokens (simpo, dpo, kto).", min=1, cli=False)
    shared_prefix: bool | None = option(None, "Run the prompt prefix a batch's rows share once, forward and "
                                              "backward, or every row whole (every loss). Default: where "
                                              "it pays on the training device (SHARED_PREFIX_PAYS: ~4x faster steps "
                                              "on a CPU; on an H200 whole rows were 1.7x faster).", cli=False)
    torch_compile: bool | None = option(None, "torch.compile the model's training forward (simpo, dpo, kto, rft; "
                                              "GRPO samples from the model it trains and stays uncompiled). "
                                              "Default: where it pays on the training device (COMPILE_PAYS, "
                                              "lactchain.train.compiled).", cli=False)

    # -- what the trainers read
    @property
    def beta(self) -> float | None:
        return self.preference.beta

    @property
    def simpo_gamma(self) -> float | None:
        return self.simpo.simpo_gamma

    @property
    def cpo_alpha(self) -> float:
        return self.simpo.cpo_alpha or 0.0

    def hparams(self) -> tuple[float, float | None, list[str]]:
        """(beta, simpo_gamma, notes) resolved for the loss (lactchain.train.actor_config.resolve_hparams)."""
        return resolve_hparams(self.loss, self.beta, self.simpo_gamma)

    def check(self) -> None:
        for name in ("epochs", "lr"):
            if not getattr(self, name) > 0:
                self.refuse(name, "must be above 0")
        # a subclass's own fields (the job's) are its to check
        refuse_unread(self, self.loss, flat_names(TrainActorConfig))
        if self.loss == "simpo" and self.simpo.cpo_alpha is None:
            self.simpo.cpo_alpha = 0.0  # train-actor's own default: plain SimPO (the loop's is 1.0)
        if "rpo_alpha" in LOSS_SETTINGS[self.loss] and self.preference.rpo_alpha is None:
            self.preference.rpo_alpha = 0.0  # plain DPO / KTO (the loop's DPO is 1.0)
        if self.loss == "grpo":
            self.grpo.resolve(GRPO_PLAIN)  # train-actor's own (the loop resolves its recipe before)
        try:
            self.hparams()
        except ValueError as exc:
            raise ConfigError(f"--beta/--simpo-gamma: {exc}") from None


# ---- the job: `lactchain train-actor` ---------------------------------------------------------

DDP_LOSSES = ("rft", "simpo", "dpo", "kto", "grpo")  # TRL's trainers through accelerate; rft's loop by hand

@dataclass
class TrainActorJobConfig(TrainActorConfig):
    """`lactchain train-actor`: the trainer's settings plus where the pairs and the actor
    come from. Its params are the command's recorded params (plus the trainer settings
    the command does not expose, at their defaults)."""

    HELP_PANELS = {"GRPO": ("rollouts_from", "grpo_reward", "dtype")}

    loss: str = option("simpo", "simpo (CPO trainer, loss_type=simpo), dpo, kto, rft (fine-tune on the chosen "
                       "side only: best-of-K), or grpo (samples as it trains, from the start states of "
                       "--rollouts-from runs; in the loop: `lactchain pipeline --loss grpo`).",
                       choices=(*PAIR_JOB_LOSSES, "grpo"), form="Loss")
    rollouts_from: list[str] = option([], "grpo: play or evaluate runs whose visited states GRPO samples from "
                                          "(repeatable).", check="run:", form="Rollouts runs")
    grpo_reward: str = option("return", "grpo: a sampled list's reward: return (what the env pays for it from the "
                                        "state, averaged over deals on a dealt env) or oracle (the exact planner's "
                                        "advantage: a diagnostic upper bound).", choices=("return", "oracle"))
    pairs_from: list[str] = option([], "Take pairs from this run (repeatable). Default: every run in the registry.",
                                   check="run:", form="Pairs runs")
    labeler: str = option("any", "Only pairs from this labeler: critic, human, llm, episodes or any.",
                          choices=JOB_LABELERS, form="Labeler")
    actor: str = option("smollm2-135m", "Actor preset (tiny, smollm2-135m, mistral-7b-instruct), local path or hub id.",
                        form="Actor")
    adapter: str | None = option(None, ADAPTER_HELP, check=ADAPTER_CHECK,
                                 form="Adapter run")
    resume: str | None = option(None, "Continue from a checkpoint folder, or a train-actor run id's latest checkpoint "
                                "(`lactchain runs resume` passes --resume-from RUN_ID).", flag="--resume-from", short="--resume",
                                check="run:actor")

    dtype: str | None = option(None, "grpo: the dtype its samples are drawn at: auto (the default: bfloat16 where "
                                     "this machine does bf16 natively, a CUDA GPU or a CPU with AMX or "
                                     "AVX512-bf16, else float32: as the loop's GRPO samples), bfloat16, float16 or "
                                     "float32 (the weights as trained). Other losses do not generate.")
    processes: int = option(1, "Train on N processes: DDP under `accelerate launch` (gloo on a CPU; NCCL on "
                               "GPUs, one GPU each), the global batch kept at --batch-size (each process takes "
                               "batch-size / N). Every loss; grpo: each process samples and scores its share of "
                               "the states of a step.",
                            min=1, max=64)

    def check(self) -> None:
        super().check()
        if self.processes > 1:
            if self.loss not in DDP_LOSSES:
                self.refuse("processes", f"--loss {self.loss} trains on one process (DDP runs "
                                         f"{', '.join(DDP_LOSSES)}); leave --processes out")
            if self.loss == "grpo" and self.grpo.states_per_step % self.processes:
                n = self.grpo.states_per_step
                self.refuse("processes", f"grpo's {n} start states per step do not split over {self.processes} "
                                         f"processes; use a divisor of {n}")
            if self.loss != "grpo" and self.batch_size % self.processes:
                self.refuse("processes", f"--batch-size {self.batch_size} does not split over {self.processes} "
                                         "processes; give a multiple")
        if self.loss == "grpo":
            try:  # recorded resolved: the run's params say which dtype sampled
                self.dtype = resolve_dtype(self.dtype or "auto")
            except ValueError as exc:
                self.refuse("dtype", str(exc))
        elif self.dtype is not None:
            self.refuse("dtype", f"only applies to --loss grpo (its samples; --loss {self.loss} trains on stored "
                                 "pairs and generates nothing); leave it out")
        if self.loss == "rft" and self.resume:
            self.refuse("resume", "rft runs are short and do not checkpoint; start a new run")
        if self.loss == "grpo" and not self.rollouts_from:
            self.refuse("rollouts_from", "grpo samples from stored states: give --rollouts-from PLAY_RUN (or run "
                                         "`lactchain pipeline --loss grpo`)")
        if self.loss != "grpo" and self.rollouts_from:
            self.refuse("rollouts_from", f"only feeds --loss grpo ({self.loss} trains on pairs: --pairs-from)")
        if self.loss == "grpo" and self.pairs_from:
            self.refuse("pairs_from", "grpo samples its own lists; it takes --rollouts-from runs, not pairs")

    def trainer(self) -> TrainActorConfig:
        """The trainer's part alone."""
        return self.project(TrainActorConfig)

