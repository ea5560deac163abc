"""The learning loop, one iteration after another, each phase a child run.

    train-critic (TD on random move lists, once; topped up every iteration)
    evaluate (baseline)
    repeat:  collect -> [train-critic] -> train-actor -> evaluate

collect: every start state (or a sample) gets K sampled move lists plus the
actor's greedy answer plus the best list known so far for that state (the
elite); all are executed from that exact state and scored by the labeler
(critic / rollout / oracle, see lactchain.loop.labelers). Best vs worst become
preference pairs (registry `pairs`, with their ranking accuracy against the
oracle); the best becomes the state's new elite.

The actor's generation (collect, the rollout labeler, evaluate) runs on the
config's engine part (`LoopEngineConfig`, loaded by the lab's one loader,
`lactchain.engine.load_generator_for`): the transformers model that trains, or a
vLLM engine beside it, given the new adapter after every train-actor.

train-actor: `rft` (the default) fine-tunes on the elites (best-of-K rejection
sampling with a memory: expert iteration / self-imitation), so a state's target
only ever improves; `simpo` (optionally with an NLL term on chosen, CPO's alpha),
`dpo` and `kto` train on the pairs. The actor is loaded once and the LoRA adapter
continues across iterations.

evaluate: greedy from every non-goal start state; success, optimal-move ratio,
and the collapse alarm (share of the most common greedy answer).

Reading order: `_loop` is the algorithm, top to bottom; each phase is a module-level
function (`fit_critic`, `collect`, `train_actor_phase`, `evaluate`) over one `LoopState`
(`start_loop` builds it, from a killed run's state file on resume), and `run_phase` makes
every phase a child run and saves the state after it.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lactchain.config import Config, ConfigError, flat_fields, flat_names, option
from lactchain.engine import EngineConfig, load_generator_for, record_generation, record_replicas, resolve_auto
from lactchain.envs.catalog import env_class, env_field, make_env, normalize_env_field
from lactchain.envs.replay import (deal_seeds, decision_states, execute_from, stored_state, succeeds_from,
                                  success_return_from, success_speed_from)
from lactchain.envs.world import check_world, scene_field, state_text_field, world_kwargs
from lactchain.machine import device_type_here, native_bf16_here
from lactchain.runs.lifecycle import PROGRESS_METRIC, RunHandle, run_context
from lactchain.loop.labelers import (
    LABELERS, Candidate, Group, OracleLabeler, execute_candidate, make_labeler, ranking_accuracy, sampled_groups,
)
from lactchain.train.compiled import compile_unavailable
from lactchain.train.actor_config import (
    BATCH_TOKENS_RANGE,
    GRPO_PLAIN,
    LOSS_SETTINGS,
    GRPOSettings,
    PreferenceSettings,
    SimPOSettings,
    TrainActorConfig,
    refuse_unread,
)

# lactchain.train.actor.LOSSES; repeated here so the CLI's help does not import transformers.
LOSSES = ("rft", "simpo", "dpo", "kto", "grpo")

# The NLL weight on chosen the loop's SimPO uses unless told: plain SimPO (0) drifted on the
# tiny actor (success 7 % -> 47 % -> 17 % -> 17 %, oracle labeler) where 1.0 held 92-100 %.
SIMPO_LOOP_CPO_ALPHA = 1.0
# The loop's learning rate per loss when --actor-lr is not given (LoRA r 8, alpha 16), chosen by the sweep
# in docs/results/loss-defaults (`python scripts/loss_sweep.py`); rft and simpo kept their measured 1e-3.
# Tiny actor, explore 0, seed 0: grpo 3e-4 collapsed (top share 0.60), 3e-5 did not move; kto 1e-3 collapsed
# at iteration 2 (0.55); dpo (with its NLL term) 1e-4 gained +0.20 only, 3e-4 collapsed (0.95), 1e-3 +0.52.
# kto: 1e-3 with its NLL term on the desirable rows; at 1e-4, with or without the term, it collapsed on the
# default actor (top share 0.72-0.88, docs/results.md "Learning from the actor's own samples").
# grpo: 1e-3 in its recipe below (at 1e-4 the same recipe moved SmolLM2 from 8 % to 20 % in 45 min);
# 1e-4 rewarded by the labeler or grouped by state (LOOP_LR_GRPO_PLAIN), where 1e-3 collapsed.
LOOP_LR = {"rft": 1e-3, "simpo": 1e-3, "dpo": 1e-3, "kto": 1e-3, "grpo": 1e-3}
LOOP_LR_GRPO_PLAIN = 1e-4
# The NLL weight on chosen (DPO: RPO) or on the desirable rows (KTO) unless told, as CPO-SimPO's cpo_alpha.
LOOP_RPO_ALPHA = 1.0
# KTO runs recorded before LOOP_RPO_ALPHA reached KTO hold rpo_alpha unset: they ran without the term.
KTO_RECORDED_UNSET_RPO_ALPHA = 0.0
GROUPINGS = ("start", "state")
# What one list earns under each env reward of GRPO: read from one action's replay, no critic.
WIN_REWARDS = {"success": succeeds_from, "success-return": success_return_from, "success-speed": success_speed_from}
GRPO_REWARDS = ("labeler", *WIN_REWARDS)
# The loop's GRPO, grouped by start state with an env reward, unless told otherwise: each list paid its
# win's speed, adaptive entropy control on the grammar-masked policy, each state's best list replayed
# into its group (lr LOOP_LR["grpo"]). From SmolLM2's own samples alone (explore 0) it reached 100 %
# of the 60 grid states on 3 seeds within 18-35 min (ending at 100, 100, 90 % in 45), its answers
# depending on the state (docs/results.md, "GRPO on SmolLM2's own samples, every recipe at a glance").
# Grouped by state or rewarded by the labeler, GRPO keeps the plain settings (GRPO_PLAIN, lr
# LOOP_LR_GRPO_PLAIN).
LOOP_GRPO_REWARD = "success-speed"
LOOP_GRPO_RECIPE = {"entropy_coef": 0.01, "entropy_target": 0.3, "policy_logprobs": "constrained", "replay_best": True}
# The loop's per-loss settings: the trainer's parts (beta, simpo_gamma, cpo_alpha, rpo_alpha, dpo_loss,
# kto_balance, kl_beta, ..., tokens_per_pass) and the loop's own `grouping` and `grpo_reward`; which loss
# reads which (a comparison's other cells leave them at their defaults).
LOOP_GRPO = ("grouping", "grpo_reward")
PER_LOSS = (*flat_names(PreferenceSettings), *flat_names(SimPOSettings), *flat_names(GRPOSettings), *LOOP_GRPO)
LOOP_LOSS_SETTINGS = {loss: LOSS_SETTINGS[loss] + (LOOP_GRPO if loss == "grpo" else ()) for loss in LOSSES}

COLLAPSE_SHARE = 0.5  # the alarm: one greedy answer for more than half of the start states
TIE = 1e-6  # labeler scores this close are the same outcome


def unread_settings(loss: str) -> set[str]:
    """The loop's per-loss settings that `loss` does not read (left at their defaults)."""
    return set(PER_LOSS) - set(LOOP_LOSS_SETTINGS[loss])


# Upper bounds: beyond them a typo would run for days or exhaust memory, never finish.
_MOST = {"iterations": 10_000, "samples": 256, "explore": 100_000, "search_beam": 256, "td_lists_per_state": 100_000,
         "td_rounds": 10_000, "td_rounds_per_iteration": 10_000, "horizon": 100, "actor_batch_size": 4096,
         "eval_max_actions": 1000, "n_envs": 4096, "states": 100_000, "eval_states": 100_000}


def _help(text: str, default: Any, **how: Any) -> Any:
    """A config field with its help text (and, in `how`, its command-line spelling)."""
    return option(default, text, **how)


@dataclass
class LoopEngineConfig(EngineConfig):
    """The loop's generation engine: the jobs' engine part, generating in the dtype this
    machine is fastest at (`auto`, resolved when the config is checked, so a run records
    the dtype that ran)."""

    engine: str = _help("Rollout engine of collect and evaluate: hf (transformers) or vllm (the vllm extra; after "
                        "every train-actor the adapter is merged and reloaded into it). auto: vllm where it is "
                        "installed and can run the actor. Training always runs on transformers.", "hf",
                        suggest=("hf", "vllm", "auto"), check="engine", form="Engine")
    dtype: str | None = _help("Generation dtype of collect and evaluate: bfloat16 (a merged bf16 copy on hf), "
                              "float32 (the weights as trained), or auto: bfloat16 where the hardware does bf16 "
                              "natively (a CUDA GPU, a CPU with AMX or AVX512-bf16: 1.6x faster than float32), "
                              "else float32 (bf16 emulated: 0.67x on such a CPU).", "auto",
                              choices=("auto", "bfloat16", "float16", "float32"))


@dataclass
class PipelineConfig(Config):
    """Every knob of the loop. The CLI, the registry params and bench learn all come
    from this one dataclass (flat `params`), so names and defaults agree everywhere."""

    actor: str = _help("Actor preset, local folder or cached hub id.", "smollm2-135m", form="Actor")
    env: str = env_field()
    scene: str | None = scene_field()
    state_text: str = state_text_field()
    deals: int = _help("Stochastic envs (blackjack): deals every candidate of a start state is played on (the same "
                       "cards for all of them); the labeler averages over them. Deterministic envs play once.", 16)
    adapter: str | None = _help("LoRA adapter folder to start from.", None)
    critic: str = _help("Critic backbone preset (minilm-l6, tiny, ...) or path.", "minilm-l6", form="Critic")
    labeler: str = _help("Who ranks candidates: critic (default), rollout, judge (the actor judges its candidates' "
                         "captions, Motif-style), or oracle (diagnostic only).", "critic", suggest=LABELERS,
                         form="Labeler")
    loss: str = _help("rft (best-of-K fine-tuning on elites), simpo, dpo or kto (on pairs: each state's elite "
                      "against worse lists), or grpo (TRL's GRPOTrainer: --samples fresh lists per state each step, "
                      "scored by the labeler).", "rft", suggest=LOSSES,
                      form="Loss")
    iterations: int = _help("Loop iterations (bench learn: as many as the budget allows).", 1, short="-i",
                           form="Iterations")
    states: str | int = _help("States per iteration to collect from: 'all' (the start states, and any the env's "
                              "episodes only reach, as Taxi's riding passenger) or a number sampled.", "all")
    samples: int = _help("Move lists sampled per state.", 4, short="-k")
    temperature: float = _help("Sampling temperature (>= 0.7 so candidates differ).", 1.0)
    gamma: float = _help("Discount per action.", 0.9)
    margin: float = _help("Minimum score gap for a pair.", 0.5)
    rejects_per_state: int = _help("Pairs per start state: the state's elite (chosen) against up to this many "
                                   "worse lists of its group, the actor's own answers first (SimPO/DPO/KTO train "
                                   "on them; 1 = against the worst only).", 4, min=1, max=256)
    horizon: int = _help("Rollout labeler: greedy actions after each candidate.", 3)
    stitch: bool = _help("Also try each greedy answer / elite followed by the elite of the state it reaches.", True,
                         negative="--no-stitch")
    explore: int = _help("Random move lists per state added as candidates (env steps, no LLM): the labeler "
                         "searches beyond the actor's own samples. 0 = only the actor's lists.", 256)
    search_beam: int = _help("Beam search over the labeler's values (critic, or the oracle as a diagnostic): the B "
                             "best move-list prefixes of each length, scored R + gamma V(s'), grow a move at a time "
                             "and the B best lists join each state's candidates (env steps, no LLM; deterministic "
                             "envs). 0 = off. On Taxi, 16 took 3 seeds to 93-95 % in one iteration (2-19 % "
                             "without).", 0)
    critic_scorer: str = _help("Critic labeler: 'v' (one-step advantage) or 'q' (Q(s, moves) - V(s)).", "v")
    td_rounds: int = _help("Critic: fitted value-iteration rounds at the start.", 8)
    td_rounds_per_iteration: int = _help("Critic: rounds added each iteration (with the new candidates).", 2)
    td_lists_per_state: int = _help("Critic: random move lists per state (env steps, no LLM).", 256)
    actor_epochs: float = _help("Actor epochs per iteration (over the elites for rft, the pairs for simpo/dpo/kto, "
                                "the start states for grpo).", 8.0)
    actor_lr: float | None = _help("Actor learning rate (LoRA). Default per loss (LOOP_LR, from the measured sweep "
                                   "in docs/results/loss-defaults and SmolLM2's runs in docs/results.md): "
                                   + ", ".join(f"{loss} {lr:g}" for loss, lr in LOOP_LR.items())
                                   + f" (grpo {LOOP_LR_GRPO_PLAIN:g} with --grpo-reward labeler or --grouping state).",
                                   None)
    actor_batch_size: int = _help("Actor batch size.", 8)
    actor_batch_tokens: int | None = _help(
        "Actor pairs per step from a token budget instead of --actor-batch-size (rft, simpo, dpo, kto): as many "
        "pairs as their rows hold this many tokens on average, the learning rate scaled by sqrt(pairs / "
        "batch size) (lactchain.train.batch_budget). For a GPU, whose step costs about the same for 4x the pairs.",
        None)
    grouping: str = _help("GRPO only: what a group is. start: --samples lists sampled from each start state, scored "
                          "as --grpo-reward says. state (GiGPO-style): --samples episodes of up to --eval-max-actions "
                          "actions from each start state; every action joins the group of the state it was taken "
                          "from (across episodes and iterations), rewarded with the env's discounted return from "
                          "there.", "start", choices=GROUPINGS)
    grpo_reward: str | None = _help("GRPO only, grouped by start: what a sampled list earns. labeler: the labeler's "
                             "advantage (--labeler). success: 1 if the list ends the episode in the env's own "
                             "success (goal reached, passenger delivered), else 0 -- a verifiable reward as in "
                             "RLVR: no critic is fitted, and a group without a success is flat (no advantage). "
                             "success-return: the env's own return for a list that succeeds (its goal reward less "
                             "its move costs: a win first, the shorter win preferred), 0 for one that does not. "
                             "success-speed: a win earns the share of the action's moves it left unplayed, "
                             "counting its last (one move 1, all 8 moves 1/8), a failure 0: the steep tie-break "
                             "that pays each state's shortest win far above a long detour. Default: "
                             f"{LOOP_GRPO_REWARD} grouped by start, with the rest of GRPO's loop recipe ("
                             + " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
                                        for k, v in LOOP_GRPO_RECIPE.items())
                             + f", lr {LOOP_LR['grpo']:g}); labeler grouped by state.", None, choices=GRPO_REWARDS)
    # The trainer's own per-loss parts (lactchain.train.actor_config), not copies: the same
    # flat names, help and bounds as train-actor's; the loop's defaults differ only where
    # `check` says (DPO's and SimPO's NLL weight, the learning rate).
    preference: PreferenceSettings = field(default_factory=PreferenceSettings)
    simpo: SimPOSettings = field(default_factory=SimPOSettings)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    train_bf16: bool | None = _help("bf16 autocast while training the actor with a TRL loss (rft trains fp32). "
                                    "Default: where bf16 is native (a CUDA GPU with it, a CPU with AMX or "
                                    "AVX512-bf16), else fp32: emulated bf16 trains ~5x slower.", None,
                                    negative="--no-train-bf16")
    train_compile: bool | None = _help("torch.compile the actor's training forward (rft, simpo, dpo, kto; GRPO "
                                       "stays uncompiled): fused kernels for a step a GPU otherwise spends "
                                       "launching small ones, at the cost of compiling first. Default: where it "
                                       "pays (COMPILE_PAYS in lactchain.train.compiled).", None,
                                       negative="--no-train-compile")
    engine: LoopEngineConfig = field(default_factory=LoopEngineConfig)
    eval_states: str | int = _help("Evaluation: 'all' the env's start states or a number sampled.", "all")
    eval_max_actions: int = _help("Evaluation: actions allowed per episode.", 5)
    n_envs: int = _help("Envs stepped in lock-step during evaluation (64: every 4x4 start state in one batch, "
                        "1.75x faster than 16 on 2 CPU cores).", 64)
    constrained: bool = _help("Grammar-constrained decoding of move lists (--free: free text + lenient parsing).", True,
                              negative="--free")
    strategy: str | None = _help("Strategy prompt: a version saved in the registry or a text file (the job reads "
                                 "its text into this field when it starts); None: the built-in strategy.", None,
                                 check="strategy", form="Strategy")
    seed: int = _help("Seed.", 0)
    baseline: bool = _help("Evaluate once before the first iteration.", True,
                           negative="--no-baseline")
    deadline: float | None = _help("time.time() by which the last iteration should end (bench learn).", None,
                                   cli=False)

    def check(self) -> None:
        def bad(name: str, why: str) -> None:
            raise ConfigError(f"{name.replace('_', '-')} {why}")

        normalize_env_field(self)
        check_world(self)
        if self.labeler not in LABELERS:
            bad("labeler", f"must be one of {', '.join(LABELERS)}, not {self.labeler!r}")
        if self.loss not in LOSSES:
            bad("loss", f"must be one of {', '.join(LOSSES)}, not {self.loss!r}")
        if self.critic_scorer not in ("v", "q"):
            bad("critic_scorer", f"must be 'v' or 'q', not {self.critic_scorer!r}")
        for name in ("iterations", "samples", "horizon", "td_rounds", "td_lists_per_state", "actor_batch_size",
                     "eval_max_actions", "n_envs", "deals"):
            if int(getattr(self, name)) < 1:
                bad(name, f"must be >= 1, got {getattr(self, name)}")
        for name in ("td_rounds_per_iteration", "explore", "search_beam"):
            if int(getattr(self, name)) < 0:
                bad(name, f"must be >= 0, got {getattr(self, name)}")
        for name, most in _MOST.items():
            if isinstance(getattr(self, name), int) and getattr(self, name) > most:
                bad(name, f"must be <= {most}, got {getattr(self, name)}")
        if self.search_beam and self.labeler not in ("critic", "oracle"):
            bad("search_beam", f"searches over a value function: use --labeler critic (or oracle), not {self.labeler}")
        if self.search_beam and env_class(self.env).stochastic:
            bad("search_beam", f"needs a deterministic env: on {self.env} a list's outcome depends on the deal")
        if self.samples < 2:  # one list per state leaves nothing to compare (rft's elites included)
            bad("samples", f"must be >= 2 so each start state's lists can be compared, got {self.samples}")
        if self.temperature < 0.7:
            bad("temperature", f"{self.temperature} is too low to draw different lists; use >= 0.7")
        if not 0.0 <= self.gamma < 1.0:
            bad("gamma", f"must be in [0, 1), got {self.gamma}")
        if self.margin < 0:
            bad("margin", f"must be >= 0, got {self.margin}")
        if not self.actor_epochs > 0:
            bad("actor_epochs", "must be > 0")
        if self.train_bf16 is None:  # recorded as resolved, like the engine's dtype
            self.train_bf16 = native_bf16_here()
        refuse_unread(self, self.loss, PER_LOSS, LOOP_LOSS_SETTINGS)  # another loss's setting: refused, not dropped
        if self.actor_batch_tokens is not None and self.loss == "grpo":
            bad("actor_batch_tokens", "does not apply to --loss grpo (its steps are --states-per-step start "
                "states); leave it out")
        lo, hi = BATCH_TOKENS_RANGE
        if self.actor_batch_tokens is not None and not lo <= self.actor_batch_tokens <= hi:
            bad("actor_batch_tokens", f"must be in {lo}-{hi} tokens, got {self.actor_batch_tokens}")
        if self.loss == "grpo" and self.train_compile:
            bad("train_compile", "does not apply to --loss grpo (it samples from the model it trains between "
                "steps, uncompiled); leave it out")
        if self.train_compile and (why := compile_unavailable(device_type_here())):
            bad("train_compile", f"cannot compile here: {why}; or use --no-train-compile")
        if self.loss == "grpo":
            self._resolve_grpo(bad)
        if self.actor_lr is None:
            self.actor_lr = LOOP_LR[self.loss]
        if not self.actor_lr > 0:
            bad("actor_lr", "must be > 0")
        if self.loss == "simpo" and self.simpo.cpo_alpha is None:
            self.simpo.cpo_alpha = SIMPO_LOOP_CPO_ALPHA
        if "rpo_alpha" in LOOP_LOSS_SETTINGS[self.loss] and self.preference.rpo_alpha is None:
            self.preference.rpo_alpha = LOOP_RPO_ALPHA
        for name in ("states", "eval_states"):
            value = getattr(self, name)
            if value != "all":
                try:
                    setattr(self, name, int(value))
                except (TypeError, ValueError):
                    bad(name, f"must be 'all' or a number, got {value!r}")
                if not 1 <= getattr(self, name) <= _MOST[name]:
                    bad(name, f"must be 'all' or a number from 1 to {_MOST[name]}, got {value!r}")
        self.engine = resolve_auto(self.engine, self.actor)  # the engine that runs, recorded as such

    def _resolve_grpo(self, bad: Callable[[str, str], None]) -> None:
        """GRPO's settings as given, checked together, then the unset ones resolved: the loop's
        recipe grouped by start with an env reward (LOOP_GRPO_RECIPE), else the plain settings."""
        if self.grpo.greedy_member and self.grouping == "state":
            bad("greedy_member", "puts the greedy answer in each start state's group: use --grouping start")
        if self.grpo.replay_best and self.grouping == "state":
            bad("replay_best", "replays each start state's best list into its group: use --grouping start")
        if self.grpo.replay_best and self.grpo_reward == "labeler":
            bad("replay_best", "keeps each state's best-rewarded list, and the labeler's advantages are relative "
                               "to each group: add --grpo-reward success (or success-return, success-speed)")
        if self.grpo_reward not in (None, "labeler") and self.grouping == "state":
            bad("grpo_reward", f"{self.grpo_reward} applies to --grouping start (grouped by state, each action "
                               "earns the env's discounted return)")
        if self.grpo_reward is None:
            self.grpo_reward = LOOP_GRPO_REWARD if self.grouping == "start" else "labeler"
        recipe = self.grpo_reward != "labeler"
        if self.grpo.greedy_member and self.grpo.replay_best is None:
            self.grpo.replay_best = False  # both take a group's first member: the one asked for wins
        self.grpo.resolve(LOOP_GRPO_RECIPE if recipe else GRPO_PLAIN)
        if self.actor_lr is None:
            self.actor_lr = LOOP_LR["grpo"] if recipe else LOOP_LR_GRPO_PLAIN

    def env_kwargs(self) -> dict[str, Any]:
        """The world's env kwargs (scene, state text) beyond the env's defaults."""
        return world_kwargs(self.scene, self.state_text)

    def params(self) -> dict[str, Any]:
        """Every setting, flat (the engine's beside the others), as the run records them."""
        return {k: v for k, v in self.to_params().items() if k != "deadline"}

    def record_params(self) -> dict[str, Any]:
        return self.params()

    @classmethod
    def from_params(cls, params: Any, *, strict: bool = True) -> Any:
        """Also reads configs saved before the engine was a part (`rollout_bf16`), KTO
        configs saved before the loop's NLL default reached KTO (`rpo_alpha` recorded unset:
        they resume as they ran, without the term), and GRPO configs rewarded by the env whose
        entropy target was recorded unset (off: they resume without it, where unset now means
        the recipe's 0.3)."""
        params = dict(params)
        if "rollout_bf16" in params:
            params.setdefault("dtype", "bfloat16" if params.pop("rollout_bf16") else "float32")
        if params.get("loss") == "kto" and "rpo_alpha" in params and params["rpo_alpha"] is None:
            params["rpo_alpha"] = KTO_RECORDED_UNSET_RPO_ALPHA
        if (params.get("loss") == "grpo" and params.get("grpo_reward") not in (None, "labeler")
                and "entropy_target" in params and params["entropy_target"] is None):
            params["entropy_target"] = 0.0  # recorded off where the recipe now sets one: it ran without
        return super().from_params(params, strict=strict)

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for _, f in flat_fields(cls)}


# ---- the elites: best known move list per start state ---------------------------------

class EliteBuffer:
    """The best move list found so far for each start state. Elites re-enter every
    later group as a candidate, so they are re-scored with the current labeler and
    only replaced by something it ranks higher."""

    def __init__(self) -> None:
        self.elites: dict[Any, tuple[str, Candidate]] = {}

    def add_to(self, groups: list[Group], env: Any) -> None:
        """Each group's elite as a candidate, executed again on the group's deals."""
        for g in groups:
            if g.state in self.elites:
                _, elite = self.elites[g.state]
                g.candidates.append(execute_candidate(env, g, elite.moves, elite.text, elite.mode, "elite"))

    def stitch(self, groups: list[Group], env: Any) -> int:
        """Add, to each group, each of its candidates followed by the elite of the state
        it leads to (cut to the env's moves per action), executed from the
        group's state. Dynamic programming over the actor's own best pieces: a list
        that reaches the goal in one action is worth more than two that get there in
        two, and sampling alone rarely finds the long ones. Returns how many were added."""
        added = 0
        for g in groups:
            seen = {tuple(c.moves) for c in g.candidates}
            heads = [c for c in g.candidates if c.moves and not c.done]
            for head in heads:
                tail = self.elites.get(head.next_state)
                if tail is None or not tail[1].moves:
                    continue
                moves = (list(head.moves) + list(tail[1].moves))[: env.max_moves_per_action]
                if tuple(moves) in seen:
                    continue
                seen.add(tuple(moves))
                g.candidates.append(execute_candidate(env, g, moves, source="stitched"))
                added += 1
        return added

    @staticmethod
    def best_of(g: Group) -> Candidate | None:
        """The group's best valid candidate. Ties (same reward and next state: e.g. junk
        moves after the goal, which never run) go to the shortest list, then to the
        incumbent: targets only change for a better score or a shorter list, so they
        stop churning."""
        valid = [c for c in g.candidates if c.moves]
        if not valid:
            return None
        top = max(c.advantage for c in valid)
        tied = [c for c in valid if c.advantage >= top - TIE]
        return min(tied, key=lambda c: (len(c.moves), c.source != "elite"))

    def update(self, groups: list[Group]) -> int:
        """Take the best valid candidate of each scored group; returns how many changed."""
        changed = 0
        for g in groups:
            best = self.best_of(g)
            if best is None:
                continue
            old = self.elites.get(g.state)
            if old is None or list(old[1].moves) != list(best.moves):
                changed += 1
            self.elites[g.state] = (g.prompt, best)
        return changed

    def to_json(self) -> list[dict[str, Any]]:
        return [{"state": s.as_dict(), "prompt": prompt, **_candidate_json(c)} for s, (prompt, c) in self.elites.items()]

    @classmethod
    def from_json(cls, rows: list[dict[str, Any]], env: Any) -> "EliteBuffer":
        buffer = cls()
        for row in rows:
            buffer.elites[env.parse_state(row["state"])] = (row["prompt"], _candidate_from_json(row, env))
        return buffer

    def rows(self) -> list[dict[str, Any]]:
        """Training rows for rft: the user prompt and the elite move list."""
        return [{"prompt": prompt, "chosen": list(c.moves), "state": s.as_dict(), "score": c.advantage}
                for s, (prompt, c) in self.elites.items()]


def _candidate_json(c: Candidate) -> dict[str, Any]:
    return {"moves": list(c.moves), "text": c.text, "mode": c.mode, "reward": c.reward,
            "next_state": c.next_state.as_dict(), "done": c.done, "advantage": c.advantage, "source": c.source}


def _candidate_from_json(row: dict[str, Any], env: Any) -> Candidate:
    return Candidate(list(row["moves"]), row["text"], row["mode"], row["reward"],
                     stored_state(env, row["next_state"]), row["done"], row["advantage"], row["source"])


# ---- resume: the state after every finished phase ----------------------------------------

STATE_KIND = "pipeline-state"  # artifact kind (lactchain.runs.resume.CHECKPOINTS)
STATE_FILE = "pipeline_state.json"


def _transitions_json(transitions: list[Any]) -> list[dict[str, Any]]:
    return [{"state": t.state.as_dict(), "moves": list(t.moves), "reward": t.reward,
             "next_state": t.next_state.as_dict(), "done": t.done} for t in transitions]


def _transitions_from_json(rows: list[dict[str, Any]], env: Any) -> list[Any]:
    from lactchain.train.critic_td import Transition

    return [Transition(env.parse_state(r["state"]), tuple(r["moves"]), r["reward"],
                       stored_state(env, r["next_state"]), r["done"]) for r in rows]


def load_state(registry: Any, run_id: str) -> dict[str, Any] | None:
    """The saved state of a pipeline run (or of the runs it resumed), or None when it
    stopped before its first phase finished."""
    import json

    from lactchain.runs.resume import latest_checkpoint

    art = latest_checkpoint(registry, run_id, STATE_KIND)
    if art is None:
        return None
    try:
        return json.loads(Path(art["path"]).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{art['path']} cannot be read ({exc}); start the pipeline again") from None


def _save_state(handle: RunHandle, state: dict[str, Any]) -> None:
    """Atomically replace the run's state file (registered once as its checkpoint)."""
    import json
    import os

    path = Path(handle.dir) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, default=str))
    os.replace(tmp, path)
    if handle.registry.latest_artifact(handle.run_id, STATE_KIND) is None:
        handle.registry.add_artifact(handle.run_id, STATE_KIND, path, meta={"what": "resume state"})


# ---- results ------------------------------------------------------------------------------

@dataclass
class PipelineResult:
    phases: list[dict[str, Any]] = field(default_factory=list)
    seconds_per_phase: dict[str, float] = field(default_factory=dict)
    t0: float = field(default_factory=time.time)

    def add(self, iteration: int, phase: str, run_id: str, seconds: float, metrics: dict[str, Any]) -> None:
        self.phases.append({"iteration": iteration, "phase": phase, "run_id": run_id, "seconds": seconds,
                            "wall_s": time.time() - self.t0, **metrics})
        self.seconds_per_phase[phase] = self.seconds_per_phase.get(phase, 0.0) + seconds

    def last(self, phase: str, iteration: int | None = None) -> dict[str, Any] | None:
        return next((p for p in reversed(self.phases)
                     if p["phase"] == phase and (iteration is None or p["iteration"] == iteration)), None)

    def curve(self) -> list[dict[str, Any]]:
        """One row per evaluated iteration: the learning curve."""
        rows = []
        moves_before: dict[int, int] = {}  # phase index of an evaluate -> env moves of the training data so far
        total = 0
        for i, p in enumerate(self.phases):
            total += int(p.get("env_moves") or 0)
            moves_before[i] = total
        for i, ev in enumerate(self.phases):
            if ev["phase"] != "evaluate":
                continue
            it = ev["iteration"]
            collect = self.last("collect", it) or {}
            critic = self.last("train-critic", it) or self.last("train-critic", 0) or {}
            rows.append({
                "iteration": it, "wall_s": ev["wall_s"], "success_rate": ev.get("success_rate"),
                "mean_optimal_ratio": ev.get("mean_optimal_ratio"), "mean_return": ev.get("mean_return"),
                "optimal_move_rate": ev.get("optimal_move_rate"), "greedy_expected_return": ev.get("greedy_expected_return"),
                "top_answer_share": ev.get("top_answer_share"), "distinct_answers": ev.get("distinct_answers"),
                "critic_spearman_vstar": critic.get("spearman_vstar"),
                "ranking_accuracy": collect.get("ranking_accuracy"), "pairs": collect.get("pairs"),
                "elites_optimal": collect.get("elites_optimal"), "env_moves": moves_before[i],
            })
        return rows

    def summary(self) -> dict[str, Any]:
        evals = [p for p in self.phases if p["phase"] == "evaluate"]
        before, after = (evals[0], evals[-1]) if evals else (None, None)
        critic = self.last("train-critic") or {}
        pick = ("success_rate", "mean_return", "mean_optimal_ratio", "parse_failure_rate", "lenient_parse_rate",
                "top_answer_share", "distinct_answers", "optimal_move_rate", "optimal_mean_return", "greedy_expected_return")
        collects = [p for p in self.phases if p["phase"] == "collect" and p.get("ranking_accuracy") is not None]
        return {
            "before": {k: before.get(k) for k in pick} if before else None,
            "after": {k: after.get(k) for k in pick} if after else None,
            "critic_spearman_vstar": critic.get("spearman_vstar"),
            "ranking_accuracy": (sum(p["ranking_accuracy"] for p in collects) / len(collects)) if collects else None,
            "max_top_answer_share": max((p.get("top_answer_share") or 0.0 for p in evals), default=None),
            "iterations_done": max((p["iteration"] for p in self.phases), default=0),
            "seconds_per_phase": self.seconds_per_phase,
            "curve": self.curve(),
            "phases": self.phases,
        }


def seed_phase(seed: int, iteration: int, name: str) -> None:
    """Every phase starts from random states fixed by (seed, iteration, phase), not by all
    that ran before it: a resumed loop redoes its unfinished phase exactly as an
    uninterrupted one would (the critic's optimizer is restored beside its checkpoint)."""
    import random
    import zlib

    import numpy as np
    import torch

    value = (seed * 1_000_003 + iteration * 101 + zlib.crc32(name.encode())) % 2**32
    random.seed(value)
    np.random.seed(value)
    torch.manual_seed(value)


class PhaseProgress:
    """What happens inside a phase, live: a progress line on stderr (the pipeline's log)
    every few seconds, and the trainer's and the critic's figures on the pipeline run
    itself under `live/<phase>/<key>` at the phase's running step, so its log and chart
    move while a phase runs (the phase's own run has the full record). Also the run's `progress` (0..1, the
    console's Jobs column) as `fraction()` reads it, passed on to `on_progress` (a
    comparison's own progress over its cells)."""

    EVERY_S = 5.0

    def __init__(self, handle: RunHandle, on_progress: Callable[[float], None] | None = None) -> None:
        self.handle, self.on_progress = handle, on_progress
        self.fraction: Callable[[], float] | None = None  # set by the loop's state
        self.steps: dict[str, int] = {}  # each phase's running step of its live metrics
        self._last = 0.0
        self._ticked = 0.0

    def tick(self, final: bool = False) -> None:
        """The run's progress, at most every EVERY_S seconds (or now, `final`: a phase ended)."""
        now = time.time()
        if self.fraction is None or not (final or now - self._ticked >= self.EVERY_S):
            return
        self._ticked, fraction = now, self.fraction()
        try:  # each value at the key's next step
            self.handle.log_metrics({PROGRESS_METRIC: fraction})
            if self.on_progress is not None:
                self.on_progress(fraction)
        except Exception:  # a busy registry must not stop the loop
            pass

    def _due(self, final: bool) -> bool:
        now = time.time()
        if final or now - self._last >= self.EVERY_S:
            self._last = now
            return True
        return False

    def _live(self, phase: str, numeric: dict[str, float]) -> None:
        """A phase's figures on the pipeline run, each phase's series numbered 1, 2, ... over the run."""
        self.steps[phase] = step = self.steps.get(phase, 0) + 1
        self.handle.log_metrics({f"live/{phase}/{k}": v for k, v in numeric.items()}, step=step)

    def trainer(self, iteration: int) -> Callable[[int, int, dict[str, float]], None]:
        def on_log(step: int, total: int, metrics: dict[str, float]) -> None:
            numeric = _numeric(metrics)
            self.tick()
            try:
                self._live("train-actor", numeric)
            except Exception:  # a busy registry must not stop training
                pass
            shown = ", ".join(f"{k}={numeric[k]:.3g}" for k in ("loss", "reward", "margin") if k in numeric)
            if shown and self._due(step >= total):  # the trainer's end-of-run summary has none of these
                print(f"iteration {iteration} train-actor: step {step}/{total} {shown}", file=sys.stderr, flush=True)
        return on_log

    def rounds(self, iteration: int, total: int) -> Callable[[int, dict[str, float]], None]:
        """The critic's fit, round by round (the first fit of a run takes half a minute or
        more on a CPU, and said nothing until it ended)."""
        def on_round(rnd: int, metrics: dict[str, float]) -> None:
            numeric = _numeric(metrics)
            self.tick()
            try:
                self._live("train-critic", numeric)
            except Exception:  # a busy registry must not stop the fit
                pass
            if rnd < total and self._due(False):  # the last round's figures are the phase's own summary
                shown = ", ".join(f"{k}={numeric[k]:.3g}" for k in ("v_loss", "spearman_vstar") if k in numeric)
                print(f"iteration {iteration} train-critic: round {rnd}/{total} {shown}", file=sys.stderr, flush=True)
        return on_round

    def episodes(self, iteration: int, phase: str) -> Callable[[Any], None]:
        """A rollout's lock-steps (`RolloutProgress`): an evaluation of 1,000 Blackjack deals
        takes a minute on a CPU, and said nothing until it ended."""
        def on_progress(progress: Any) -> None:
            self.tick()
            if progress.finished < progress.total and self._due(False):  # the phase's summary says the end
                print(f"iteration {iteration} {phase}: {progress.finished}/{progress.total} episodes, "
                      f"{progress.env_steps} env steps", file=sys.stderr, flush=True)
        return on_progress

    def states(self, iteration: int, phase: str, total: int) -> Callable[[int], None]:
        done = [0]

        def on_progress(n: int) -> None:
            done[0] += n
            self.tick()
            if self._due(done[0] >= total):
                print(f"iteration {iteration} {phase}: {done[0]}/{total} states", file=sys.stderr, flush=True)
        return on_progress


def _numeric(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v}


def run_pipeline(
    handle: RunHandle,
    cfg: PipelineConfig,
    on_phase: Callable[[int, str], None] | None = None,
    progress: Callable[[str, float | None], None] | None = None,
    actor: Any = None,
    resume: dict[str, Any] | None = None,
    on_progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Run `cfg.iterations` iterations under the parent run `handle` (or fewer, when
    `cfg.deadline` comes first). `actor` reuses an already loaded actor (for a resume:
    loaded with the state's adapter). `resume` is a killed run's state (`load_state`):
    its finished phases are kept (their child runs stay where they are) and the loop
    goes on at the first unfinished one, with its elites, critic and adapter.
    `on_progress(fraction)` hears the run's progress as it is logged (`LoopState.fraction`)."""
    progress = progress or (lambda step, fraction=None: None)
    if actor is None:
        actor = load_loop_actor(cfg, progress)
    generator = rollout_engine(cfg, actor, handle, progress)
    try:
        return _loop(handle, cfg, actor, generator, PhaseProgress(handle, on_progress), on_phase, resume)
    finally:
        if generator is not actor:
            generator.close()


def load_loop_actor(cfg: PipelineConfig, progress: Callable[[str, float | None], None] | None = None) -> Any:
    """The transformers actor that trains (from `cfg.adapter`); on the hf engine it also
    generates, at the engine's dtype."""
    hf = EngineConfig(dtype=cfg.engine.dtype, static_cache=cfg.engine.static_cache,
                      grammar_spelling=cfg.engine.grammar_spelling) if cfg.engine.engine == "hf" else EngineConfig()
    return load_generator_for(cfg.actor, cfg.adapter, cfg.env, hf, progress=progress)


def rollout_engine(cfg: PipelineConfig, actor: Any, handle: RunHandle | None = None,
                   progress: Callable[[str, float | None], None] | None = None) -> Any:
    """What generates in the loop: the actor itself (engine hf), or a vLLM engine on the
    same base model serving the actor's current adapter (engine vllm). The engine stops
    when the job is cancelled (and at exit), so it never outlives the run."""
    if cfg.engine.engine != "vllm":  # auto was resolved by the config's check
        if handle is not None:
            record_generation(handle.registry, handle.run_id, actor)
        return actor
    generator = load_generator_for(cfg.actor, getattr(actor, "adapter", None), cfg.env,
                                   cfg.engine.replace(engine="vllm"), progress=progress)
    if handle is not None:
        handle.on_cancel(generator.close)
        record_replicas(handle.registry, handle.run_id, generator)
    return generator


# ---- the loop's state, and its phases as functions over it ----------------------------------

@dataclass
class LoopState:
    """Everything the loop carries from phase to phase: built once by `start_loop` (from a
    resumed run's state file when there is one), read and updated by the phase functions,
    written back by `save` after every finished phase."""

    handle: RunHandle
    cfg: PipelineConfig
    actor: Any  # the model that trains
    generator: Any  # what generates: the actor itself, or a vLLM engine serving its adapter
    env: Any
    prompt: Any
    oracle: Any
    world: dict[str, Any]
    result: PipelineResult
    done: dict[tuple[int, str], dict[str, Any]]  # finished before a resume: (iteration, phase) -> its row
    saved: dict[str, Any]  # what a resume needs beyond phases, elites and adapter: critic, transitions, pending
    elites: EliteBuffer
    live: PhaseProgress
    on_phase: Callable[[int, str], None] | None = None
    pool: list[Any] | None = None  # every decision state, listed once when each iteration takes them all
    critic: dict[str, Any] = field(default_factory=dict)  # critic, optimizer, transitions, env_moves
    state_groups: Any = None  # grouping by state: the actions seen from each state, across iterations
    best_lists: Any = None  # --replay-best: each start state's best list so far, across iterations
    evaluate_s: float = 0.0  # the longest evaluation: what a budgeted trainer leaves time for

    @property
    def env_rewarded(self) -> bool:
        """GRPO grouped by state rewards each action with the env's own return from its state,
        and with an env `grpo_reward` (WIN_REWARDS) each list by its win: it reads no critic and
        no collected pairs, so the loop skips those phases."""
        return self.cfg.loss == "grpo" and (self.cfg.grouping == "state" or self.cfg.grpo_reward != "labeler")

    @property
    def fits_critic(self) -> bool:
        return self.cfg.labeler == "critic" and not self.env_rewarded

    def fraction(self) -> float:
        """How far the run is, 0..1: the share of its iterations done, an iteration's phases
        counted as they end (its evaluation ends it), or of its time budget spent where it
        has a deadline (bench learn), whichever is further."""
        cfg, t0 = self.cfg, self.result.t0
        by_time = 0.0
        if cfg.deadline is not None:
            by_time = min(1.0, max(0.0, (time.time() - t0) / (cfg.deadline - t0))) if cfg.deadline > t0 else 1.0
        phases = [p for p in self.result.phases if p["iteration"] > 0]  # iteration 0: the start
        latest = max((p["iteration"] for p in phases), default=0)
        if any(p["iteration"] == latest and p["phase"] == "evaluate" for p in phases):
            ended, within = len({p["iteration"] for p in phases}), 0.0
        else:  # of the latest iteration's phases (collect, critic, train, evaluate), those that ended
            ended = len({p["iteration"] for p in phases}) - (1 if phases else 0)
            within = min(0.75, sum(p["iteration"] == latest for p in phases) / 4)
        return max(by_time, min(1.0, (ended + within) / cfg.iterations))

    def save(self) -> None:
        _save_state(self.handle, {"phases": self.result.phases, "elites": self.elites.to_json(), **self.saved,
                                  "adapter": str(self.actor.adapter) if getattr(self.actor, "adapter", None) else None})

    def starts(self, it: int) -> list[Any]:
        """Iteration `it`'s states to collect from and train on: every state the actor acts
        from (the start states, and those an episode only reaches, as Taxi's riding
        passenger: `decision_states`), or a sample drawn per iteration."""
        from lactchain.loop.evaluate import sample_states

        return self.pool if self.pool is not None else sample_states(decision_states(self.env), self.cfg.states,
                                                                     self.cfg.seed + it)

    def labeler(self, model: Any) -> Any:
        """The configured labeler with the current critic; `model` plays the rollout labeler's greedy actions."""
        cfg = self.cfg
        return make_labeler(cfg.labeler, env=self.env, gamma=cfg.gamma, critic=self.critic.get("critic"), actor=model,
                            horizon=cfg.horizon, scorer=cfg.critic_scorer, prompt=self.prompt)


def start_loop(handle: RunHandle, cfg: PipelineConfig, actor: Any, generator: Any, live: PhaseProgress,
               on_phase: Callable[[int, str], None] | None, resume: dict[str, Any] | None) -> LoopState:
    """The loop's state at its start, or where a resumed run stopped (its finished phases
    kept, its elites and critic restored)."""
    from lactchain.prompts import PromptSpec

    resume = resume or {}
    result = PipelineResult()
    done = {(p["iteration"], p["phase"]): p for p in resume.get("phases", [])}
    if done:
        result.phases = list(resume["phases"])
        result.t0 = time.time() - max(p["wall_s"] for p in result.phases)
        for p in result.phases:
            result.seconds_per_phase[p["phase"]] = result.seconds_per_phase.get(p["phase"], 0.0) + p["seconds"]
    world = cfg.env_kwargs()
    env = make_env(cfg.env, moves=actor.moves, **world)
    state = LoopState(handle=handle, cfg=cfg, actor=actor, generator=generator, env=env,
                      prompt=PromptSpec.for_env(env, strategy=cfg.strategy, moves=actor.moves),
                      oracle=OracleLabeler(env, cfg.gamma), world=world, result=result, done=done,
                      saved={"critic": resume.get("critic"), "transitions": resume.get("transitions", []),
                             "pending": resume.get("pending")},
                      elites=EliteBuffer.from_json(resume.get("elites", []), env), live=live,
                      on_phase=on_phase, pool=decision_states(env) if cfg.states == "all" else None)
    live.fraction = state.fraction
    if state.fits_critic and state.saved["critic"]:
        load_critic(state)
    return state


def run_phase(state: LoopState, iteration: int, name: str, kind: str, params: dict[str, Any],
              fn: Callable[[RunHandle], dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """One phase as a child run of the pipeline run: seeded, timed, its metrics logged on
    both runs and the state saved after it. A phase finished before a resume is kept."""
    handle, reg = state.handle, state.handle.registry
    if (iteration, name) in state.done:
        kept = state.done[(iteration, name)]
        print(f"iteration {iteration} {name}: kept from run {kept['run_id']}", file=sys.stderr, flush=True)
        return kept["run_id"], kept
    handle.check_cancelled()
    if state.on_phase is not None:
        state.on_phase(iteration, name)
    seed_phase(state.cfg.seed, iteration, name)
    t0 = time.perf_counter()
    with run_context(reg, kind, name=f"{name} (iteration {iteration})", params=params,
                     parent_id=handle.run_id) as child:
        metrics = fn(child)
        numeric = _numeric(metrics)
        child.log_metrics(numeric)
    seconds = time.perf_counter() - t0
    state.result.add(iteration, name, child.run_id, seconds, metrics)
    handle.log_metrics({f"{name}/{k}": v for k, v in numeric.items()}, step=iteration)
    handle.log_metrics({f"{name}/seconds": seconds}, step=iteration)
    # Progress lines for the job's log (stderr: stdout is the --json result).
    print(f"iteration {iteration} {name}: " + ", ".join(f"{k}={v:.3g}" for k, v in numeric.items()),
          file=sys.stderr, flush=True)
    state.save()
    state.live.tick(final=True)
    return child.run_id, metrics


def evaluate(state: LoopState, iteration: int) -> None:
    """Greedy from every start state; tags the run when one answer takes over (collapse)."""
    from lactchain.loop.evaluate import evaluate_actor

    cfg, handle, reg = state.cfg, state.handle, state.handle.registry

    def body(h: RunHandle) -> dict[str, Any]:
        out = evaluate_actor(state.generator, states=cfg.eval_states, constrained=cfg.constrained,
                             n_envs=cfg.n_envs, prompt=state.prompt, max_actions=cfg.eval_max_actions, seed=cfg.seed,
                             registry=reg, run_id=h.run_id, should_stop=h.cancelled.is_set, env=cfg.env,
                             env_kwargs=state.world, on_progress=state.live.episodes(iteration, "evaluate"))
        if out["top_answer_share"] > COLLAPSE_SHARE:
            msg = (f"collapse: {out['top_answer_share']:.0%} of start states get the same greedy answer "
                   f"{out['top_answer']} (iteration {iteration})")
            for rid in (h.run_id, handle.run_id):
                reg.set_tag(rid, "warning", msg)
            print(f"warning [collapse] at iteration {iteration}: {msg}", file=sys.stderr, flush=True)
        elif reg.tags(handle.run_id).get("warning", "").startswith("collapse:"):
            # The run's warning speaks of its latest policy: the untrained model's collapse
            # stays on iteration 0's eval run, not on a run whose actor has since learned.
            reg.set_tag(handle.run_id, "warning", None)
        return out

    t0 = time.time()
    run_phase(state, iteration, "evaluate", "eval",
              {"states": cfg.eval_states, "adapter": str(state.actor.adapter or "")}, body)
    state.evaluate_s = max(state.evaluate_s, time.time() - t0)


def load_critic(state: LoopState) -> None:
    """The critic and its optimizer as of the last finished phase (resumed), or fresh; with
    the random move lists it fits on (regenerated: env steps are free) and the actor's
    candidates saved so far."""
    import torch

    from lactchain.models.critic import Critic
    from lactchain.train.critic_td import TD_OPTIMIZER_FILE, TDConfig, random_transitions, td_optimizer

    cfg, critic = state.cfg, state.critic
    if state.saved["critic"]:
        critic["critic"] = Critic.load(checkpoint=state.saved["critic"])
        kept = Path(state.saved["critic"]) / TD_OPTIMIZER_FILE
        if kept.is_file():
            optimizer_state = torch.load(kept, map_location="cpu", weights_only=True)
            critic["optimizer"] = td_optimizer(critic["critic"], TDConfig(), optimizer_state)
    else:
        critic["critic"] = Critic.load(cfg.critic, env_kwargs={"moves": tuple(state.actor.moves), **state.world},
                                       env=cfg.env)
    fresh = random_transitions(state.env, cfg.td_lists_per_state, cfg.seed)
    critic["env_moves"] = sum(len(t.moves) for t in fresh)  # counted by the fit that loaded it
    critic["transitions"] = fresh + _transitions_from_json(state.saved["transitions"], state.env)
    critic.setdefault("optimizer", None)


def fit_critic(state: LoopState, iteration: int, rounds: int, new: list[Any]) -> None:
    """The train-critic phase: fitted value iteration on the random lists and every candidate
    collected so far (`new`: this iteration's), checkpointed with its optimizer."""
    import torch

    from lactchain.paths import writing
    from lactchain.train.critic_td import TD_OPTIMIZER_FILE, TDConfig, fit_critic_td

    cfg, critic, reg = state.cfg, state.critic, state.handle.registry

    def body(h: RunHandle) -> dict[str, Any]:
        if "critic" not in critic:
            load_critic(state)
        critic["transitions"] = critic["transitions"] + new
        state.saved["transitions"] = state.saved["transitions"] + _transitions_json(new)
        td = TDConfig(rounds=rounds, lists_per_state=cfg.td_lists_per_state, gamma=cfg.gamma, seed=cfg.seed,
                      q_weight=0.5 if cfg.critic_scorer == "q" else 0.0)  # the Q head ranks only if trained
        critic["optimizer"], metrics = fit_critic_td(critic["critic"], critic["transitions"], td,
                                                     critic["optimizer"], on_round=state.live.rounds(iteration, rounds),
                                                     should_stop=h.cancelled.is_set)
        folder = critic["critic"].save(h.dir / "critic")
        with writing(folder, "the critic's optimizer"):
            torch.save(critic["optimizer"].state_dict(), folder / TD_OPTIMIZER_FILE)
        reg.add_artifact(h.run_id, "critic", folder, step=int(metrics.get("round", 0)), meta=_numeric(metrics))
        state.saved["critic"] = str(folder)
        return {**metrics, "env_moves": critic.pop("env_moves", 0)}

    params = ({"critic": cfg.critic, "rounds": rounds, "lists_per_state": cfg.td_lists_per_state, "gamma": cfg.gamma}
              if iteration == 0 else {"rounds": rounds, "continued": True})
    run_phase(state, iteration, "train-critic", "critic", params, body)


def collect(state: LoopState, it: int) -> tuple[list[Any], list[dict[str, Any]]]:
    """The collect phase: every start state's K samples, greedy answer, elite, explore and
    stitched lists, executed and ranked by the labeler; the elites updated and the pairs
    stored. Returns (the actor's own transitions, the pairs) -- from the state file when
    this phase finished before a resume."""
    from lactchain.loop.preferences import DrawConfig, PairBatch, add_exploration, draw_groups, pairs_against
    from lactchain.loop.search import add_search
    from lactchain.train.critic_td import Transition

    cfg, env, elites, reg = state.cfg, state.env, state.elites, state.handle.registry
    holder: dict[str, Any] = {}

    def body(h: RunHandle) -> dict[str, Any]:
        starts = state.starts(it)
        sampling = DrawConfig(samples=cfg.samples, temperature=cfg.temperature, constrained=cfg.constrained,
                              seed=cfg.seed * 7919 + it, batch_states=8, include_greedy=True, env=cfg.env,
                              deals=cfg.deals)
        groups = draw_groups(state.generator, starts, sampling, prompt=state.prompt, env_kwargs=state.world,
                             on_progress=state.live.states(it, "collect", len(starts)))
        holder["transitions"] = Transition.from_candidates(groups)  # the actor's own, before elites
        explored = add_exploration(groups, env, cfg.explore, seed=cfg.seed * 7919 + it) if cfg.explore else 0
        labeler = state.labeler(state.generator)
        searched, search_moves = (add_search(groups, env, labeler.values, cfg.gamma, cfg.search_beam)
                                  if cfg.search_beam else (0, 0))
        elites.add_to(groups, env)
        stitched = elites.stitch(groups, env) if cfg.stitch else 0
        labeler.score(groups)
        changed = elites.update(groups)
        batch = pairs_against(groups, EliteBuffer.best_of, labeler, cfg.margin, cfg.rejects_per_state, PairBatch())
        batch.ranking = ranking_accuracy(batch.pairs, state.oracle)
        reg.add_pairs(h.run_id, batch.pairs)
        holder["pairs"] = batch.pairs
        state.saved["pending"] = {"iteration": it, "pairs_run": h.run_id,
                                  "transitions": _transitions_json(holder["transitions"])}
        metrics = _collect_metrics(state, groups)
        metrics["env_moves"] += search_moves  # the prefixes it tried, beyond the lists it kept
        return {**batch.stats(), **metrics, "elites_changed": changed, "stitched": stitched,
                "explored": explored, "searched": searched}

    run_phase(state, it, "collect", "pairs", {"labeler": cfg.labeler, "samples": cfg.samples, "states": cfg.states,
                                              "temperature": cfg.temperature, "env": cfg.env,
                                              **({"scene": cfg.scene} if cfg.scene else {})}, body)
    if "transitions" not in holder:  # collect was kept from the run this one resumes
        pending = state.saved["pending"] or {}
        holder["transitions"] = _transitions_from_json(pending.get("transitions", []), env)
        holder["pairs"] = reg.pairs(run_ids=pending["pairs_run"]) if pending.get("pairs_run") else []
    return holder["transitions"], holder["pairs"]


def _collect_metrics(state: LoopState, groups: list[Group]) -> dict[str, Any]:
    """What a collect says about its targets: how many elites, how many optimal, who won."""
    elite_rows = state.elites.rows()
    optimal = sum(1 for r in elite_rows if _is_optimal(state.oracle, r))
    greedy = [c for g in groups for c in g.candidates if c.source == "greedy"]
    won = Counter(max(g.candidates, key=lambda c: c.advantage).source for g in groups)
    moves = sum(len(c.moves) * len(g.seeds) for g in groups for c in g.candidates)
    return {"elites": len(elite_rows), "env_moves": moves,
            **{f"best_from_{k}": won.get(k, 0) for k in ("sample", "greedy", "elite", "stitched", "explore", "search")},
            "elites_optimal": optimal / len(elite_rows) if elite_rows else 0.0,
            "greedy_success": sum(c.done and c.reward > 0 for c in greedy) / max(len(greedy), 1),
            "mean_best_score": sum(r["score"] for r in elite_rows) / max(len(elite_rows), 1)}


def grpo_task(state: LoopState, it: int) -> Any:
    """GRPO's start states (this iteration's), sampled on-policy by the training actor and
    scored by the labeler, which sees each state's K samples as one group (or, with
    an env `grpo_reward`, by each list's win); grouped by state, K multi-action
    episodes rewarded with the env's discounted return instead."""
    from lactchain.train.best_lists import BestLists
    from lactchain.train.grpo import EpisodeSpec, GRPOTask
    from lactchain.train.state_groups import StateGroups

    cfg, env, prompt, k = state.cfg, state.env, state.prompt, state.cfg.samples
    labelers: list[Any] = []  # built on first use: a state-grouped run never scores with one

    def deals(i: int) -> tuple[int | None, ...]:  # the deals of the group whose first row is i
        return deal_seeds(env, cfg.seed * 7919 + it * 131 + i, cfg.deals)

    def reward(states: list[Any], samples: list[Any]) -> list[float]:
        if cfg.grpo_reward != "labeler":  # each list's mean over its group's deals, nothing else run
            won = WIN_REWARDS[cfg.grpo_reward]
            wins = []
            for i in range(0, len(states), k):
                seeds = deals(i)
                wins += [sum(float(won(env, states[i], x.moves, seed)) for seed in seeds) / len(seeds)
                         for x in samples[i:i + k]]
            return wins
        groups = sampled_groups(env, states, samples, k, deals)
        if not labelers:
            labelers.append(state.labeler(state.actor))  # the rollout labeler plays the policy being trained
        labelers[0].score(groups)
        return [c.advantage for g in groups for c in g.candidates]

    rows = [{"prompt": prompt.render(env.describe(s)), "state": s} for s in state.starts(it)]
    episodes = None
    if cfg.grouping == "state":
        seeds = deal_seeds(env, cfg.seed * 7919 + it, 1)
        if state.state_groups is None:  # one store for the whole run: groups grow across iterations
            state.state_groups = StateGroups(cfg.gamma, keep=max(k, 2))
        episodes = EpisodeSpec(render=lambda s: prompt.render(env.describe(s)),
                               execute=lambda s, moves: execute_from(env, s, moves, seeds[0]),
                               groups=state.state_groups, max_actions=cfg.eval_max_actions)
    if cfg.grpo.replay_best and state.best_lists is None:  # one memory for the whole run
        state.best_lists = BestLists()
    return GRPOTask(rows, reward, generations=k, temperature=cfg.temperature, constrained=cfg.constrained,
                    seed=cfg.seed * 7919 + it, episodes=episodes, greedy_member=cfg.grpo.greedy_member,
                    replay=state.best_lists)


def training_rows(state: LoopState, it: int, pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What train-actor learns from: the elites (rft), the start states (grpo samples as it
    goes) or the pairs (simpo, dpo, kto)."""
    if state.cfg.loss == "rft":
        return state.elites.rows()
    if state.cfg.loss == "grpo":
        return [{"state": s} for s in state.starts(it)]
    return pairs


def train_actor_phase(state: LoopState, it: int, rows: list[dict[str, Any]]) -> None:
    """train-actor at the loss's own settings; under a budget it stops early enough for the
    evaluation that follows. The new adapter is handed to a separate rollout engine (timed)."""
    from lactchain.train.actor import train_actor
    from lactchain.train.grpo import train_grpo

    cfg, actor, generator = state.cfg, state.actor, state.generator
    trainer = trainer_config(cfg, seed=cfg.seed + it)

    def body(h: RunHandle) -> dict[str, Any]:
        if cfg.deadline is not None:
            h.stop_at = cfg.deadline - state.evaluate_s
        on_log = state.live.trainer(it)
        if cfg.loss == "grpo":
            metrics = train_grpo(actor, grpo_task(state, it), trainer, handle=h, on_log=on_log)
        else:
            metrics = train_actor(actor, rows, trainer, handle=h, on_log=on_log)
        out = {k: v for k, v in metrics.items() if not isinstance(v, (dict, list))}
        out["stopped_at_deadline"] = float(bool(metrics.get("out_of_time")))
        if generator is not actor and getattr(actor, "adapter", None) is not None:
            t0 = time.perf_counter()
            generator.load_adapter(actor.adapter)
            out["adapter_load_s"] = time.perf_counter() - t0
        return out

    run_phase(state, it, "train-actor", "actor",
              {"loss": cfg.loss, "epochs": cfg.actor_epochs, "lr": cfg.actor_lr, "rows": len(rows),
               "cpo_alpha": trainer.cpo_alpha, **loss_settings(cfg)}, body)


def _loop(handle: RunHandle, cfg: PipelineConfig, actor: Any, generator: Any, live: PhaseProgress,
          on_phase: Callable[[int, str], None] | None, resume: dict[str, Any] | None) -> dict[str, Any]:
    """The learning loop, top to bottom: `actor` trains, `generator` (the actor, or a vLLM
    engine) generates; every phase is a child run and the state is saved after each, so a
    resume (`resume`: the killed run's state) goes on at the first unfinished phase."""
    state = start_loop(handle, cfg, actor, generator, live, on_phase, resume)
    if state.fits_critic:  # the critic: fitted on random move lists, topped up each iteration
        fit_critic(state, 0, cfg.td_rounds, [])
    if cfg.baseline:
        evaluate(state, 0)
    longest_iteration = 0.0
    for it in range(1, cfg.iterations + 1):
        # Start another iteration only if one as long as the longest so far still fits.
        if cfg.deadline is not None and time.time() + longest_iteration > cfg.deadline:
            break
        it_start = time.time()
        transitions, pairs = ([], []) if state.env_rewarded else collect(state, it)
        if state.fits_critic and cfg.td_rounds_per_iteration:
            fit_critic(state, it, cfg.td_rounds_per_iteration, transitions)
        rows = training_rows(state, it, pairs)
        if rows:
            train_actor_phase(state, it, rows)
            evaluate(state, it)
        longest_iteration = max(longest_iteration, time.time() - it_start)
    return state.result.summary()


def loss_settings(cfg: PipelineConfig) -> dict[str, Any]:
    """The per-loss settings `cfg.loss` reads, flat (what its train-actor run records)."""
    parts = {**cfg.preference.to_params(), **cfg.simpo.to_params(), **cfg.grpo.to_params()}
    return {name: value for name, value in parts.items() if name in LOSS_SETTINGS[cfg.loss]}


def trainer_config(cfg: PipelineConfig, seed: int) -> TrainActorConfig:
    """train-actor's config in the loop: the loop's per-loss parts as they are (its check
    left another loss's settings at their defaults), its epochs, lr and batch size; rft
    trains fp32."""
    return TrainActorConfig(loss=cfg.loss, epochs=cfg.actor_epochs, lr=cfg.actor_lr, batch_size=cfg.actor_batch_size,
                            batch_tokens=cfg.actor_batch_tokens,
                            seed=seed, bf16=None if cfg.loss == "rft" else cfg.train_bf16,
                            torch_compile=None if cfg.loss == "grpo" else cfg.train_compile,
                            preference=cfg.preference.replace(), simpo=cfg.simpo.replace(), grpo=cfg.grpo.replace())


def _is_optimal(oracle: Any, row: dict[str, Any]) -> bool:
    """Diagnostic only: does this elite achieve V*(s) (its oracle advantage is 0)?"""
    group = Group(oracle.env.parse_state(row["state"]), "")
    group.candidates.append(execute_candidate(oracle.env, group, row["chosen"]))
    oracle.score([group])
    return group.candidates[0].advantage > -1e-6
