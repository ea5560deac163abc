"""GRPO on the actor through TRL's `GRPOTrainer`, with the lab's own generation.

TRL's generation loop cannot take the constrained move-list grammar, so the trainer
gets a `rollout_func` (TRL's hook for custom generation): each step the policy being
trained (the actor's LoRA model) samples with the grammar (`actor.generate`, seeded),
the rollout scores the samples and hands back their exact token ids with their
rewards. Two ways to form a group (TRL's unit: K consecutive samples of one prompt):

- by start state (default): K move lists sampled from each of the step's start
  states, each scored by the task (in the loop: the labeler's advantage -- critic,
  rollout return, judge or oracle);
- by state (GiGPO-style, `GRPOTask.episodes`): K multi-action episodes from each start
  state; every action is filed under the state it was taken from, across episodes and
  iterations (lactchain.train.state_groups), and rewarded with the env's discounted
  return from there. The groups trained are visited states.

With `GRPOTask.greedy_member` (start grouping) one member of each group is the
policy's greedy answer and K-1 are sampled: the evaluation plays the greedy decode,
and a greedy answer the samples beat is then pushed down directly (in the spirit of
ReMax's greedy baseline; here it is also trained on). With `GRPOTask.replay` (start
grouping) one member of each group is the best list sampled from that state so far,
where one beat its group (lactchain.train.best_lists: experience replay in the manner
of ExGRPO / RePO), so a list that wins from everywhere no longer ties with itself in
a state where a better one was once drawn.

Either way the rollout can over-sample (`group_filter`) and keep the groups whose
rewards vary most: a group whose samples all score alike has zero advantage and only
costs time (DAPO's dynamic sampling, RAGEN's variance filter). TRL turns the rewards
into advantages (minus the group mean, divided by the std unless `scale_rewards` says
otherwise) and applies its clipped policy-gradient loss (`loss_type`, clip-higher
`epsilon_high`). The samples' log-probs are the raw model's over its whole
vocabulary, or with `policy_logprobs="constrained"` those of the grammar-masked policy
that drew them (lactchain.train.constrained_policy). No sampling log-probs are passed:
with one gradient step per generation (the default) the samples are on-policy; with
`updates_per_generation` above 1 (TRL's num_iterations) TRL scores each batch once
before its first step and clips the later steps' ratios against that. Besides TRL's
metrics (reward, reward_std, frac_reward_zero_std, entropy, clip ratios, kl when
beta > 0) each step logs the filter's counts, the share of the most common sample and
the KL to the base model.

The trainer, LoRA, bf16, checkpoints, the metrics callback and the adapter saved at
the end are the ones of the preference losses (lactchain.train.actor).
"""

from __future__ import annotations

import math
import random
import statistics
import sys
import time
from collections import Counter
import warnings as pywarnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from lactchain.runs.checkpoints import TRAINER_CHECKPOINTS
from lactchain.train.actor import (
    ActorTrainingCallback,
    autocast_bf16,
    checkpointing_off,
    TrainActorConfig,
    prepare_model,
    quiet_datasets,
    run_trainer,
    silence_trainer_printing,
)
from lactchain.train.best_lists import BestLists
from lactchain.train.compiled import step_timing
from lactchain.train.constrained_policy import ConstrainedScoring
from lactchain.train.ddp import world_size
from lactchain.train.lora import add_lora, publish_adapter, quiet_checkpointing_deprecation
from lactchain.train.state_groups import StateGroups, Step

MAX_COMPLETION_TOKENS = 48  # the actor's generate default: a move list and its EOS
# Tokens per forward/backward pass unless told (GRPOSettings.tokens_per_pass), for a model of SmolLM2-135M's
# size: activations grow with the tokens of a pass (SmolLM2: ~1.3 MB a token in fp32 + bf16 autocast), and
# smaller passes were no slower on the CPU (1.27 s a 460-token sequence in passes of 4, 1.5 s in one pass of 32).
TOKENS_PER_PASS = {"cpu": 2048, "cuda": 16384}
# The activations kept per token scale with width x depth: SmolLM2-135M's 576 x 30 is what TOKENS_PER_PASS
# was measured on; a 7B model (4096 x 32) gets ~1/8 of the tokens, the 64 x 2 test model all of a step.
REFERENCE_WIDTH_DEPTH = 576 * 30


def pass_budget(tokens_per_pass: int | None, model_config: Any, use_cuda: bool) -> int:
    """Tokens in one forward/backward pass: as told, else TOKENS_PER_PASS for the device
    scaled to the model's width x depth (activation memory per token)."""
    if tokens_per_pass:
        return int(tokens_per_pass)
    width = getattr(model_config, "hidden_size", None) or REFERENCE_WIDTH_DEPTH
    depth = getattr(model_config, "num_hidden_layers", None) or 1
    return max(64, int(TOKENS_PER_PASS["cuda" if use_cuda else "cpu"] * REFERENCE_WIDTH_DEPTH / (width * depth)))


def sequences_per_pass(sequences: int, tokens_each: int, budget: int) -> int:
    """The most sequences of `tokens_each` tokens that fit `budget` in one pass and divide
    the step's `sequences` evenly (TRL splits a step into equal passes); at least 1."""
    fit = max(1, budget // max(1, tokens_each))
    return max(d for d in range(1, sequences + 1) if sequences % d == 0 and d <= fit)


@dataclass
class EpisodeSpec:
    """Grouping by state (GiGPO-style): how to play multi-action episodes from a start
    state. Each step's groups are then states the episodes visited, each holding the
    actions taken from it (this step's and earlier ones, `groups`), rewarded with the
    env's discounted return from that state."""

    render: Callable[[Any], str]  # state -> the user prompt
    execute: Callable[[Any, Sequence[str]], tuple[float, Any, bool]]  # (state, moves) -> (reward, next state, done)
    groups: StateGroups
    max_actions: int = 5


@dataclass
class GRPOTask:
    """What GRPO trains on: the start states (each row {"prompt": user text, "state":
    the env's state}), how to score sampled lists, and how to sample them.
    `episodes` set: groups by state over multi-action episodes (rewards are the env's
    returns; `reward` is not called)."""

    rows: list[dict[str, Any]]
    reward: Callable[[Sequence[Any], Sequence[Any]], list[float]]  # (states, samples) -> one reward each
    generations: int = 4
    temperature: float = 1.0
    constrained: bool = True
    seed: int = 0
    episodes: EpisodeSpec | None = None
    greedy_member: bool = False  # start grouping: each group's first member is the greedy answer
    replay: BestLists | None = None  # start grouping: each group's first member its state's best list so far

    def check(self) -> None:
        if not self.rows:
            raise ValueError("GRPO needs start states to sample from; got none")
        if self.generations < 2:
            raise ValueError(f"GRPO needs groups of at least 2 samples per state, got {self.generations}")
        if not self.temperature > 0:
            raise ValueError(f"GRPO samples at temperature > 0 (its groups must differ), got {self.temperature}")
        if (self.greedy_member or self.replay is not None) and self.episodes is not None:
            raise ValueError("greedy_member and replay apply to groups by start state, not by state")
        if self.greedy_member and self.replay is not None:
            raise ValueError("greedy_member and replay each take a group's first member: choose one")


def most_varied(rewards: Sequence[Sequence[float]], n: int) -> list[int]:
    """The indices of the `n` groups whose rewards vary most (ties: the earlier group),
    in their original order: DAPO's dynamic sampling / RAGEN's variance filter."""
    spread = [statistics.pstdev(r) if len(r) > 1 else 0.0 for r in rewards]
    best = sorted(range(len(rewards)), key=lambda i: (-spread[i], i))[:n]
    return sorted(best)


def top_share(samples: Sequence[Any]) -> float:
    """The share of `samples` that are the most common move list (1.0: all alike)."""
    if not samples:
        return 0.0
    return Counter(tuple(s.moves) for s in samples).most_common(1)[0][1] / len(samples)


def drift_k3(policy_logprob: float, base_logprob: float, n_tokens: int) -> float:
    """Schulman's k3 estimate of KL(policy || base) per token, r - 1 - log r with log r the
    sequence's log(p_base / p_policy) over its tokens: >= 0, 0 where the two agree, and the
    same for a long answer as for a short one that drifted as far per token. (Taken over the
    whole sequence, e^(log r) blew up to 1e8 on single steps while its neighbours read 1-7.)"""
    log_r = max(-20.0, min(20.0, (base_logprob - policy_logprob) / max(1, n_tokens)))
    return math.exp(log_r) - 1.0 - log_r


class _Rollouts:
    """TRL's rollout_func around the actor and the task: it samples (and, with a filter,
    over-samples) the step's groups, scores them, and hands each sample's reward to the
    reward function through the batch (`lc_reward`). Diagnostics of the last step wait
    in `metrics` for the training callback."""

    def __init__(self, actor: Any, task: GRPOTask, group_filter: int = 1) -> None:
        if group_filter < 1:
            raise ValueError(f"group_filter must be >= 1, got {group_filter}")
        self.actor, self.task, self.group_filter = actor, task, int(group_filter)
        self.state_of = {r["prompt"]: r["state"] for r in task.rows}  # rollout_func sees prompts only
        self.rng = random.Random(task.seed)
        self.calls = 0
        self.batches = 0  # generated batches (TRL calls the rollout once per `updates_per_generation` steps)
        self.scored = 0
        self.env_moves = 0
        self.replayed: list[bool] = []  # replay: which of the last sampled groups hold a remembered list
        self.metrics: dict[str, float] = {}
        self.sample_s = 0.0  # this step's seconds in generate (the rest of its rollout: scoring, the KL gauge)

    def _generate(self, user_texts: list[str], **kwargs: Any) -> list[Any]:
        t0 = time.perf_counter()
        try:
            return self.actor.generate(user_texts, constrained=self.task.constrained,
                                       max_new_tokens=MAX_COMPLETION_TOKENS, **kwargs)
        finally:
            self.sample_s += time.perf_counter() - t0

    def _sample(self, user_texts: list[str], k: int) -> list[Any]:
        self.calls += 1
        return self._generate(user_texts, temperature=self.task.temperature, num_samples=k,
                              seed=self.task.seed * 100_003 + self.calls)

    def _group_members(self, user_texts: list[str], k: int) -> list[Any]:
        """K members for each text, grouped per text: K samples, or (greedy_member) the
        greedy answer first and K-1 samples, or (replay) the state's best list so far
        first, where it has one, and K-1 samples."""
        if self.task.replay is not None:
            members, self.replayed = self.task.replay.members(user_texts, self._sample(user_texts, k), k)
            return members
        if not self.task.greedy_member:
            return self._sample(user_texts, k)
        drawn = self._sample(user_texts, k - 1)
        greedy = self._generate(user_texts, temperature=0.0)
        return [s for i, g in enumerate(greedy) for s in (g, *drawn[i * (k - 1):(i + 1) * (k - 1)])]

    def rollout(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        k = self.task.generations
        self.batches += 1
        start, self.sample_s = time.perf_counter(), 0.0
        if len(prompts) % k:
            raise ValueError(f"GRPO batch of {len(prompts)} prompts is not whole groups of {k}")
        unique = prompts[::k]
        if any(prompts[i] != unique[i // k] for i in range(len(prompts))):
            raise ValueError("GRPO batch: a group's prompts differ (expected each prompt repeated consecutively)")
        if self.task.episodes is not None:
            texts, groups, rewards = self._by_state(unique, k)
        else:
            texts, groups, rewards = self._by_start(unique, k)
        kept = [s for g in groups for s in g]
        scored = time.perf_counter()
        self.metrics.update(top_sample_share=top_share(kept), **self._kl_to_base(texts, groups))
        # Where the step's host time goes (its update is step_time_s less rollout_s): issue 46's GRPO step.
        done = time.perf_counter()
        self.metrics.update(rollout_s=done - start, sample_s=self.sample_s, kl_gauge_s=done - scored)
        prompt_ids = [self.actor.prompt_ids(t) for t in texts]
        return {"prompt_ids": [prompt_ids[i] for i in range(len(texts)) for _ in range(k)],
                "completion_ids": [list(s.token_ids) for s in kept], "logprobs": None,
                "lc_reward": [float(r) for rs in rewards for r in rs]}

    def _step_prompts(self, unique: list[str]) -> list[str]:
        """The step's start prompts and, with a filter, (group_filter - 1) times as many
        more drawn at random from the task's rows."""
        extra = len(unique) * (self.group_filter - 1)
        return list(unique) + ([r["prompt"] for r in self.rng.choices(self.task.rows, k=extra)] if extra else [])

    def _by_start(self, unique: list[str], k: int) -> tuple[list[str], list[list[Any]], list[list[float]]]:
        """K samples from each of the step's start states (and, with a filter, from as
        many more drawn at random), scored by the task; the most varied groups kept."""
        texts = self._step_prompts(unique)
        samples = self._group_members(texts, k)
        states = [self.state_of[t] for t in texts for _ in range(k)]
        flat = [float(r) for r in self.task.reward(states, samples)]
        self.scored += len(samples)
        self.env_moves += sum(len(s.moves) for s in samples)
        groups = [samples[i * k:(i + 1) * k] for i in range(len(texts))]
        rewards = [flat[i * k:(i + 1) * k] for i in range(len(texts))]
        keep = most_varied(rewards, len(unique))
        zero = sum(1 for r in rewards if statistics.pstdev(r) == 0.0)
        self.metrics = {"groups_sampled": float(len(texts)), "zero_std_share_sampled": zero / len(texts),
                        "groups_filtered": float(len(texts) - len(keep))}
        if self.task.greedy_member:  # > 0: the greedy answer beat its group's samples on average
            self.metrics["greedy_reward_gap"] = statistics.fmean(r[0] - statistics.fmean(r[1:]) for r in rewards)
        if self.task.replay is not None:
            self.metrics.update(self._replay_step(texts, groups, rewards))
        return [texts[i] for i in keep], [groups[i] for i in keep], [rewards[i] for i in keep]

    def _replay_step(self, texts: list[str], groups: list[list[Any]], rewards: list[list[float]]) -> dict[str, float]:
        """The memory learns from every sampled group; the step's replay metrics: the share of
        groups holding a remembered list, how far its reward sits above its group's samples
        (mean over those groups) and the states remembered."""
        memory, replayed = self.task.replay, self.replayed
        gaps = [r[0] - statistics.fmean(r[1:]) for r, was in zip(rewards, replayed) if was]
        for text, group, r, was in zip(texts, groups, rewards, replayed):
            memory.update(text, group, r, was)
        return {"replay_share": sum(replayed) / len(replayed),
                "replay_reward_gap": statistics.fmean(gaps) if gaps else 0.0, "replay_states": float(len(memory))}

    def _by_state(self, unique: list[str], k: int) -> tuple[list[str], list[list[Any]], list[list[float]]]:
        """K episodes from each of the step's start states (and more with a filter), every
        action filed under its state; the step trains on the visited states whose
        returns vary most, each group its state's newest K actions."""
        spec = self.task.episodes
        starts = [self.state_of[t] for t in self._step_prompts(unique)]
        touched: list[Any] = []
        for episode in self._play(starts, k, spec):
            touched += spec.groups.add_episode(episode)
        chosen = spec.groups.pick(touched, len(unique))
        # Too few varied states visited: fill up with the start states (their K first actions form a group).
        for s in starts:
            if len(chosen) >= len(unique):
                break
            if s not in chosen:
                chosen.append(s)
        zero = sum(1 for s in set(touched) if spec.groups.spread(s) == 0.0)
        self.metrics = {"groups_sampled": float(len(set(touched))), "zero_std_share_sampled": zero / max(len(set(touched)), 1),
                        "groups_filtered": float(len(set(touched)) - len(chosen)), **spec.groups.stats()}
        entries = [spec.groups.draw(s, k) for s in chosen]
        return ([spec.render(s) for s in chosen], [[e.sample for e in g] for g in entries],
                [[e.ret for e in g] for g in entries])

    def _play(self, starts: list[Any], k: int, spec: EpisodeSpec) -> list[list[Step]]:
        """K episodes from each start state, in lock-step: each action is one batched
        generate over the episodes still running."""
        episodes: list[list[Step]] = [[] for _ in range(len(starts) * k)]
        current = [starts[i // k] for i in range(len(episodes))]
        running = list(range(len(episodes)))
        for _ in range(spec.max_actions):
            if not running:
                break
            samples = self._sample([spec.render(current[i]) for i in running], 1)
            still = []
            for i, sample in zip(running, samples):
                reward, nxt, done = spec.execute(current[i], sample.moves)
                episodes[i].append(Step(current[i], sample, reward))
                self.scored += 1
                self.env_moves += len(sample.moves)
                current[i] = nxt
                if not done:
                    still.append(i)
            running = still
        return episodes

    def _kl_to_base(self, texts: list[str], groups: list[list[Any]]) -> dict[str, float]:
        """How far training has moved the actor from the base model (adapter off), on the
        step's samples: `drift_k3` per sequence, averaged. 0 while the adapter changes
        nothing. (The samples come from the grammar-masked, tempered policy, so this is a
        drift gauge, not an unbiased KL.)"""
        model = self.actor.model
        if not hasattr(model, "disable_adapter"):
            return {}
        # One sample per group: a gauge, not worth a second forward pass over the whole batch.
        prompts = [t for t, g in zip(texts, groups) if g]
        samples = [g[0] for g in groups if g]
        with model.disable_adapter():
            base = self.actor.completion_logprobs(prompts, [s.token_ids for s in samples], add_eos=False)
        k3 = [drift_k3(s.logprob, b, len(s.token_ids)) for s, b in zip(samples, base)]
        return {"kl_to_base": sum(k3) / len(k3)} if k3 else {}


def _grpo_args(config: TrainActorConfig, task: GRPOTask, out: Path, per_pass: int, passes: int, bf16: bool,
               use_cuda: bool) -> Any:
    """TRL's GRPOConfig for one run: `per_pass` sequences a pass, `passes` passes an optimizer step."""
    from trl import GRPOConfig

    k = task.generations
    return GRPOConfig(
        output_dir=str(out / TRAINER_CHECKPOINTS), learning_rate=float(config.lr), num_generations=k,
        per_device_train_batch_size=per_pass, gradient_accumulation_steps=passes,
        num_train_epochs=float(config.epochs), max_steps=int(config.max_steps) if config.max_steps else -1,
        num_iterations=int(config.grpo.updates_per_generation),
        max_completion_length=MAX_COMPLETION_TOKENS, temperature=float(task.temperature), beta=config.grpo.kl_beta,
        scale_rewards=config.grpo.scale_rewards, loss_type=config.grpo.grpo_loss_type,
        epsilon_high=config.grpo.epsilon_high, logging_steps=int(config.logging_steps), save_strategy="steps",
        entropy_coef=float(config.grpo.entropy_coef),
        save_steps=int(config.save_steps), save_total_limit=int(config.save_total_limit) or None, report_to="none",
        bf16=bool(bf16), fp16=False, use_cpu=not use_cuda, dataloader_num_workers=0, disable_tqdm=True,
        seed=int(config.seed), data_seed=int(config.seed), lr_scheduler_type="constant", warmup_steps=0,
        remove_unused_columns=False, log_completions=False,
        **({} if not config.grpo.entropy_target else  # adaptive entropy control (Skywork-OR1); 0 or None: off
           {"use_adaptive_entropy": True, "entropy_target": float(config.grpo.entropy_target)}),
        **checkpointing_off(),
    )


def _summary(config: TrainActorConfig, task: GRPOTask, rollouts: Any, callback: Any, output: Any, seconds: float,
             step: int, per_pass: int, passes: int, adapter_dir: Path,
             resume_from_checkpoint: str | Path | bool | None) -> dict[str, Any]:
    """What `train_grpo` returns: the run's settings, its rollouts' counts and the trainer's outcome."""
    k = task.generations
    return {"loss_type": "grpo", "processes": world_size(), "steps": step, "states": len(task.rows), "generations": k,
            "samples_scored": rollouts.scored, "env_moves": rollouts.env_moves, "kl_beta": config.grpo.kl_beta,
            "grpo_loss_type": config.grpo.grpo_loss_type, "group_filter": config.grpo.group_filter,
            "updates_per_generation": config.grpo.updates_per_generation, "generations_sampled": rollouts.batches,
            "sequences_per_pass": per_pass, "passes_per_step": passes,
            "grouping": "state" if task.episodes is not None else "start",
            "policy_logprobs": config.grpo.policy_logprobs if task.constrained else "raw",
            "greedy_member": task.greedy_member, "replay_best": task.replay is not None,
            "final_metrics": {k_: v for k_, v in callback.last.items() if k_ not in ("train_loss", "train_runtime_s")},
            "train_loss": float(output.training_loss) if output.training_loss is not None else None,
            "seconds": seconds, **step_timing(callback.step_times),  # first step apart, as every trainer
            "adapter": str(adapter_dir), "checkpoints": [p for _, p in callback.checkpoints],
            "warnings": [{"code": w.code, "message": w.message, "step": w.step} for w in callback.warnings],
            "cancelled": callback.cancelled, "out_of_time": callback.out_of_time,
            "resumed_from": None if resume_from_checkpoint in (None, False) else str(resume_from_checkpoint)}


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
    from trl import GRPOTrainer

    if config.loss != "grpo":
        raise ValueError(f"train_grpo trains loss 'grpo', not {config.loss!r}")
    task.check()
    if output_dir is None:
        if handle is None:
            raise ValueError("train_grpo needs output_dir= or a run handle")
        output_dir = handle.dir
    out = Path(output_dir)
    started_from = str(getattr(actor, "adapter", None) or "") or None
    set_seed(int(config.seed))
    model, continuing = prepare_model(actor, config.shared_prefix)
    if not continuing:  # LoRA put on here (not by TRL), so the actor generates with the policy that trains
        model = add_lora(model, config)
    actor.model = model
    use_cuda = torch.cuda.is_available() and next(model.parameters()).device.type == "cuda"
    bf16 = autocast_bf16(config.bf16, use_cuda)
    k, per_step = task.generations, config.grpo.states_per_step
    # Each step's states over all processes (DDP, --processes): each rank samples and scores whole groups of its share.
    per_rank = max(1, min(per_step, len(task.rows)) // world_size())
    # One optimizer step = k * per_rank sequences, run in passes of `per_pass` (gradients accumulated; TRL
    # generates once for the whole step: steps_per_generation follows gradient_accumulation_steps).
    budget = pass_budget(config.grpo.tokens_per_pass, model.config, use_cuda)
    longest = max(len(actor.prompt_ids(r["prompt"])) for r in task.rows) + MAX_COMPLETION_TOKENS
    per_pass = sequences_per_pass(k * per_rank, longest, budget)
    passes = k * per_rank // per_pass
    args = _grpo_args(config, task, out, per_pass, passes, bf16, use_cuda)
    rollouts = _Rollouts(actor, task, config.grpo.group_filter)

    def labeler_reward(prompts: list[str], completions: list[Any], lc_reward: list[float], **_: Any) -> list[float]:
        return list(lc_reward)  # scored in the rollout (it filters groups by their rewards)

    dataset = Dataset.from_dict({"prompt": [r["prompt"] for r in task.rows]})
    callback = ActorTrainingCallback("grpo", handle=handle, on_log=on_log, extra_metrics=lambda: rollouts.metrics)
    with quiet_datasets(), quiet_checkpointing_deprecation(), pywarnings.catch_warnings():
        pywarnings.filterwarnings("ignore", message=".*rollout_func.*")
        trainer_class = GRPOTrainer
        if task.constrained and config.grpo.policy_logprobs == "constrained":
            trainer_class = type("ConstrainedGRPOTrainer", (ConstrainedScoring, GRPOTrainer),
                                 {"automaton": actor.token_automaton()})
        trainer = trainer_class(model=model, reward_funcs=[labeler_reward], args=args, train_dataset=dataset,
                                processing_class=actor.tokenizer, callbacks=[callback], rollout_func=rollouts.rollout)
    silence_trainer_printing(trainer)
    output, seconds = run_trainer(trainer, resume_from_checkpoint)
    step = int(trainer.state.global_step)
    meta = {"base": getattr(actor, "name", None), "loss": "grpo", "lora_r": config.lora_r,
            "lora_alpha": config.lora_alpha, "step": step, "states": len(task.rows), "generations": k,
            "complete": not callback.cancelled, "started_from": started_from}
    adapter_dir = publish_adapter(actor, trainer.model, out, meta, handle)
    for w in callback.warnings:
        print(f"warning [{w.code}]: {w.message}", file=sys.stderr)
    return _summary(config, task, rollouts, callback, output, seconds, step, per_pass, passes, adapter_dir,
                    resume_from_checkpoint)
