"""The loop's settings: `PipelineConfig` (and its engine part, `LoopEngineConfig`), the
per-loss defaults the loop chooses (learning rates, the NLL weights, GRPO's recipe) with the
measurements that chose them, and `trainer_config`, the train-actor config a loop
iteration runs. The algorithm that reads them is `lactchain.loop.pipeline`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from lactchain.config import SEED_MAX, Config, ConfigError, flat_fields, flat_names, option
from lactchain.engine import EngineConfig, resolve_auto
from lactchain.envs.catalog import env_class, env_field, normalize_env_field
from lactchain.envs.replay import succeeds_from, success_return_from, success_speed_from
from lactchain.envs.world import check_world, scene_field, state_text_field, world_kwargs
from lactchain.machine import device_type_here, native_bf16_here
from lactchain.loop.labelers import LABELERS
from lactchain.train.compiled import compile_unavailable
from lactchain.train.actor_config import (
    ADAPTER_HELP,
    BATCH_TOKENS_RANGE,
    GRPO_PLAIN,
    LOSS_SETTINGS,
    NO_CHECKPOINTS,
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

    # --help by topic (lactchain.config.help_panel); the rest under the main Options
    HELP_PANELS = {
        "World": ("scene", "state_text", "deals"),
        "Collect and rank": ("states", "samples", "temperature", "gamma", "margin", "rejects_per_state", "horizon",
                             "stitch", "explore", "search_beam", "critic_scorer"),
        "Critic": ("td_rounds", "td_rounds_per_iteration", "td_lists_per_state"),
        "Actor training": ("actor_epochs", "actor_lr", "actor_batch_size", "actor_batch_tokens", "train_bf16",
                           "train_compile"),
        "GRPO": ("grouping", "grpo_reward"),
        "Generation engine": ("constrained",),
        "Evaluation": ("eval_states", "eval_max_actions", "n_envs"),
    }

    actor: str = _help("Actor preset, local folder or cached hub id.", "smollm2-135m", form="Actor")
    env: str = env_field()
    scene: str | None = scene_field()
    state_text: str = state_text_field()
    deals: int = _help("Stochastic envs (blackjack): deals every candidate of a start state is played on (the same "
                       "cards for all of them); the labeler averages over them. Deterministic envs play once.", 16,
                       min=1)
    adapter: str | None = _help(ADAPTER_HELP + " The loop starts from it.", None)
    critic: str = _help("Critic backbone preset (minilm-l6, tiny, ...) or path.", "minilm-l6", form="Critic")
    labeler: str = _help("Who ranks candidates: critic (default), rollout, judge (the actor judges its candidates' "
                         "captions, Motif-style), or oracle (diagnostic only).", "critic", suggest=LABELERS,
                         form="Labeler")
    loss: str = _help("rft (best-of-K fine-tuning on elites), simpo, dpo or kto (on pairs: each state's elite "
                      "against worse lists), or grpo (TRL's GRPOTrainer: --samples fresh lists per state each step, "
                      "scored by the labeler).", "rft", suggest=LOSSES,
                      form="Loss")
    iterations: int = _help("Loop iterations (bench learn: as many as the budget allows).", 1, short="-i",
                           form="Iterations", min=1, max=_MOST["iterations"])
    states: str | int = _help("States per iteration to collect from: 'all' (the start states, and any the env's "
                              "episodes only reach, as Taxi's riding passenger) or a number sampled.", "all")
    samples: int = _help("Move lists sampled per state.", 4, short="-k", min=1, max=_MOST["samples"])
    temperature: float = _help("Sampling temperature (>= 0.7 so candidates differ).", 1.0)
    gamma: float = _help("Discount per action.", 0.9)
    margin: float = _help("Minimum score gap for a pair.", 0.5)
    rejects_per_state: int = _help("Pairs per start state: the state's elite (chosen) against up to this many "
                                   "worse lists of its group, the actor's own answers first (SimPO/DPO/KTO train "
                                   "on them; 1 = against the worst only).", 4, min=1, max=256)
    horizon: int = _help("Rollout labeler: greedy actions after each candidate.", 3, min=1, max=_MOST["horizon"])
    stitch: bool = _help("Also try each greedy answer / elite followed by the elite of the state it reaches.", True,
                         negative="--no-stitch")
    explore: int = _help("Random move lists per state added as candidates (env steps, no LLM): the labeler "
                         "searches beyond the actor's own samples. 0 = only the actor's lists.", 256, min=0,
                         max=_MOST["explore"])
    search_beam: int = _help("Beam search over the labeler's values (critic, or the oracle as a diagnostic): the B "
                             "best move-list prefixes of each length, scored R + gamma V(s'), grow a move at a time "
                             "and the B best lists join each state's candidates (env steps, no LLM; deterministic "
                             "envs). 0 = off. On Taxi, 16 took 3 seeds to 93-95 % in one iteration (2-19 % "
                             "without).", 0, min=0, max=_MOST["search_beam"])
    critic_scorer: str = _help("Critic labeler: 'v' (one-step advantage) or 'q' (Q(s, moves) - V(s)).", "v")
    td_rounds: int = _help("Critic: fitted value-iteration rounds at the start.", 8, min=1, max=_MOST["td_rounds"])
    td_rounds_per_iteration: int = _help("Critic: rounds added each iteration (with the new candidates).", 2, min=0,
                                         max=_MOST["td_rounds_per_iteration"])
    td_lists_per_state: int = _help("Critic: random move lists per state (env steps, no LLM).", 256, min=1,
                                    max=_MOST["td_lists_per_state"])
    actor_epochs: float = _help("Actor epochs per iteration (over the elites for rft, the pairs for simpo/dpo/kto, "
                                "the start states for grpo).", 8.0)
    actor_lr: float | None = _help("Actor learning rate (LoRA). Default per loss (LOOP_LR, from the measured sweep "
                                   "in docs/results/loss-defaults and SmolLM2's runs in docs/results.md): "
                                   + ", ".join(f"{loss} {lr:g}" for loss, lr in LOOP_LR.items())
                                   + f" (grpo {LOOP_LR_GRPO_PLAIN:g} with --grpo-reward labeler or --grouping state).",
                                   None)
    actor_batch_size: int = _help("Actor batch size.", 8, min=1, max=_MOST["actor_batch_size"])
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
    eval_max_actions: int = _help("Evaluation: actions allowed per episode.", 5, min=1, max=_MOST["eval_max_actions"])
    n_envs: int = _help("Envs stepped in lock-step during evaluation (64: every 4x4 start state in one batch, "
                        "faster than 16 even on 2 CPU cores).", 64, min=1, max=_MOST["n_envs"])
    constrained: bool = _help("Grammar-constrained decoding of move lists (--free: free text + lenient parsing).", True,
                              negative="--free")
    strategy: str | None = _help("Strategy prompt: a version saved in the registry (the console's editor, ctrl+s) "
                                 "or a text file; the run records its text. Default: the built-in strategy.", None,
                                 check="strategy", form="Strategy")
    seed: int = _help("Seed: of the critic's fit, the samples, the explored lists and the training (each "
                      "iteration's derived from it).", 0, min=0, max=SEED_MAX)
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
        # the counts' bounds are their fields' min/max (checked before this, and shown in --help)
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


def loss_settings(cfg: PipelineConfig) -> dict[str, Any]:
    """The per-loss settings `cfg.loss` reads, flat (what its train-actor run records)."""
    parts = {**cfg.preference.to_params(), **cfg.simpo.to_params(), **cfg.grpo.to_params()}
    return {name: value for name, value in parts.items() if name in LOSS_SETTINGS[cfg.loss]}


# The loop's train-actor phases save no trainer checkpoints, periodic or on SIGTERM: a stopped
# pipeline redoes its unfinished phase from its seeds, so they were never read (73 MB a phase
# on SmolLM2, written every 25 steps with their SHA-256 manifest).
LOOP_SAVE_STEPS = NO_CHECKPOINTS


def trainer_config(cfg: PipelineConfig, seed: int) -> TrainActorConfig:
    """train-actor's config in the loop: the loop's per-loss parts as they are (its check
    left another loss's settings at their defaults), its epochs, lr and batch size, no
    periodic checkpoints; rft trains fp32 (and never checkpoints)."""
    return TrainActorConfig(loss=cfg.loss, epochs=cfg.actor_epochs, lr=cfg.actor_lr, batch_size=cfg.actor_batch_size,
                            batch_tokens=cfg.actor_batch_tokens,
                            seed=seed, bf16=None if cfg.loss == "rft" else cfg.train_bf16,
                            torch_compile=None if cfg.loss == "grpo" else cfg.train_compile,
                            **({} if cfg.loss == "rft" else {"save_steps": LOOP_SAVE_STEPS}),
                            preference=cfg.preference.replace(), simpo=cfg.simpo.replace(), grpo=cfg.grpo.replace())
