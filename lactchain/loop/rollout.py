"""Batched lock-step rollouts: N envs, one batched `generate` per step.

Each lock-step renders one prompt per live env, asks the actor for all of them in
a single call, parses and steps every env, and writes the steps to the registry.
A slot whose episode ends takes the next pending episode, so the batch stays full
until the episode budget runs out; then finished slots drop out.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from lactchain.envs.catalog import DEFAULT_ENV, TextEnv, make_env
from lactchain.moves import FAILED, LENIENT
from lactchain.prompts import PromptSpec


class SamplesLike(Protocol):
    text: str
    moves: list[str]
    mode: str
    logprob: float


class ActorLike(Protocol):
    """What a rollout needs from an actor (lactchain.models.actor.Actor fits)."""

    moves: tuple[str, ...]

    def generate(self, prompts: list[str], **kwargs: Any) -> Sequence[SamplesLike]: ...


@dataclass
class RolloutConfig:
    episodes: int = 8
    n_envs: int = 8
    constrained: bool = True
    temperature: float = 0.0
    max_new_tokens: int = 48
    start: str = "fixed"  # "fixed" (the env's own start: the grid's pose, a seeded deal) or "random" (uniform)
    seed: int = 0
    max_env_steps: int | None = None  # stop after this many env steps (benchmarks)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    env: str = DEFAULT_ENV  # a short name or gymnasium id (lactchain.envs.catalog)

    def __post_init__(self) -> None:
        if self.episodes < 1 or self.n_envs < 1:
            raise ValueError("episodes and n_envs must be >= 1")
        if self.start not in ("fixed", "random"):
            raise ValueError(f"start must be 'fixed' or 'random', got {self.start!r}")


@dataclass
class EpisodeResult:
    idx: int
    seed: int
    start_state: dict[str, Any]
    total_return: float = 0.0
    length: int = 0  # actions taken
    moves_used: int = 0  # moves executed
    parse_failures: int = 0
    success: bool = False
    optimal_moves: int | None = None
    episode_id: int | None = None
    first_moves: list[str] | None = None  # the answer at the start state (collapse checks)

    @property
    def optimal_ratio(self) -> float | None:
        """Optimal moves / moves used, for successful episodes (1.0 = optimal)."""
        if not self.success or not self.moves_used:
            return None if not self.success else 1.0
        return (self.optimal_moves or 0) / self.moves_used


@dataclass
class RolloutSummary:
    episodes: list[EpisodeResult]
    env_steps: int
    parse_failures: int
    seconds: float
    generate_seconds: float
    lenient_parses: int = 0  # moves scraped from prose: parsed, but not a clean list
    has_distance: bool = True  # the env's solver gives shortest move counts (optimal ratio is defined)

    def as_dict(self) -> dict[str, Any]:
        n = len(self.episodes)
        ratios = [e.optimal_ratio for e in self.episodes if e.optimal_ratio is not None]
        return {
            "episodes": n,
            "env_steps": self.env_steps,
            "success_rate": sum(e.success for e in self.episodes) / n if n else 0.0,
            "mean_return": sum(e.total_return for e in self.episodes) / n if n else 0.0,
            # only where the env has shortest move counts (the grid); None where it has none (Blackjack)
            "mean_optimal_ratio": (sum(ratios) / len(ratios) if ratios else 0.0) if self.has_distance else None,
            "parse_failure_rate": self.parse_failures / self.env_steps if self.env_steps else 0.0,
            "lenient_parse_rate": self.lenient_parses / self.env_steps if self.env_steps else 0.0,
            "env_steps_per_s": self.env_steps / self.seconds if self.seconds > 0 else 0.0,
            "seconds": self.seconds,
            "generate_seconds": self.generate_seconds,
        }


def start_states(cfg: RolloutConfig, env: TextEnv) -> list[Any]:
    """The start state of every episode, reproducible from the seed (None: the env's
    seeded reset decides, e.g. a dealt hand)."""
    if cfg.start == "fixed":
        return [env.fixed_start] * cfg.episodes
    rng = random.Random(cfg.seed)
    pool = list(env.start_states())
    return [rng.choice(pool) for _ in range(cfg.episodes)]


def make_rollout_env(cfg: RolloutConfig, moves: Sequence[str]) -> TextEnv:
    """The env an actor with `moves` plays: the grid takes the actor's vocabulary; an env
    with a fixed vocabulary refuses another one (its ValueError names its moves)."""
    return make_env(cfg.env, **{"moves": tuple(moves), **cfg.env_kwargs})


@dataclass(frozen=True)
class RolloutProgress:
    """Where a rollout stands after a lock-step: `done` counts finished episodes plus each
    live one's share of its action budget, so it moves every lock-step (with 64 envs in
    lock-step no episode may finish until the end)."""

    done: float
    total: int
    finished: int
    env_steps: int
    seconds: float


@dataclass
class _Slot:
    env: Any
    episode: EpisodeResult | None = None


def episode_seed(rollout_seed: int, idx: int) -> int:
    """The env seed of episode `idx` of a rollout seeded `rollout_seed` (its deal, on a dealt env)."""
    return rollout_seed * 1_000_003 + idx


def run_rollouts(
    actor: ActorLike,
    cfg: RolloutConfig,
    prompt: PromptSpec | None = None,
    registry: Any | None = None,
    run_id: str | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    starts: Sequence[Any] | None = None,
    on_progress: Callable[[RolloutProgress], None] | None = None,
) -> RolloutSummary:
    """Play `cfg.episodes` episodes on `cfg.n_envs` envs in lock-step.

    `starts` overrides the configured start states (one per episode); `on_progress`
    hears after every lock-step where the rollout stands.
    With a registry and run id, every episode and step is written as it happens,
    so a crash loses at most the lock-step in flight.
    """
    slots = [_Slot(make_rollout_env(cfg, actor.moves)) for _ in range(min(cfg.n_envs, cfg.episodes))]
    prompt = prompt or PromptSpec.for_env(slots[0].env, moves=actor.moves)
    distance = getattr(slots[0].env.solver(), "distance", None)  # shortest move count, where the env has one
    if starts is not None and len(starts) < cfg.episodes:
        raise ValueError(f"{cfg.episodes} episodes need {cfg.episodes} start states, got {len(starts)}")
    starts = list(starts) if starts is not None else start_states(cfg, slots[0].env)
    results: list[EpisodeResult] = []
    next_episode = 0
    env_steps = parse_failures = lenient_parses = 0
    gen_seconds = 0.0
    t0 = time.perf_counter()

    def begin(slot: _Slot) -> None:
        nonlocal next_episode
        idx = next_episode
        next_episode += 1
        seed = episode_seed(cfg.seed, idx)
        start = starts[idx]
        slot.env.reset(seed=seed, options={"state": start.as_dict()} if start is not None else None)
        ep = EpisodeResult(idx, seed, slot.env.state.as_dict(),
                           optimal_moves=distance(slot.env.state) if distance is not None else None)
        if registry is not None and run_id is not None:
            ep.episode_id = registry.add_episode(
                run_id, idx=idx, seed=seed, start_state=ep.start_state, optimal_moves=ep.optimal_moves, length=0
            )
        slot.episode = ep

    for slot in slots:
        begin(slot)

    lockstep = 0
    while any(s.episode is not None for s in slots):
        if should_stop is not None and should_stop():
            break
        if cfg.max_env_steps is not None and env_steps >= cfg.max_env_steps:
            break
        live = [s for s in slots if s.episode is not None]
        prompts = [prompt.render(s.env.describe()) for s in live]
        g0 = time.perf_counter()
        samples = actor.generate(
            prompts,
            constrained=cfg.constrained,
            temperature=cfg.temperature,
            max_new_tokens=cfg.max_new_tokens,
            seed=cfg.seed * 7919 + lockstep,
            # each episode samples from its own seed and step: the same episodes at any --envs
            seeds=[s.episode.seed * 7919 + s.episode.length for s in live if s.episode is not None],
        )
        gen_seconds += time.perf_counter() - g0
        lockstep += 1
        rows: list[dict[str, Any]] = []
        finished: list[tuple[int, dict[str, Any]]] = []  # (episode id, its final fields)
        for slot, text, sample in zip(live, prompts, samples):
            ep = slot.episode
            assert ep is not None
            before = slot.env.state
            _, reward, terminated, truncated, info = slot.env.step(sample.moves)
            env_steps += 1
            failed = sample.mode == FAILED
            parse_failures += failed
            lenient_parses += sample.mode == LENIENT
            ep.parse_failures += failed
            if ep.length == 0:
                ep.first_moves = list(sample.moves)
            ep.total_return += reward
            ep.length += 1
            ep.moves_used += info["moves_executed"]
            done = terminated or truncated
            rows.append(
                {
                    "episode_id": ep.episode_id,
                    "t": ep.length - 1,
                    "state": before.as_dict(),
                    "prompt": text,
                    "completion": sample.text,
                    "moves": list(sample.moves),
                    "parse_mode": sample.mode,
                    "reward": reward,
                    "next_state": slot.env.state.as_dict(),
                    "done": bool(done),
                    "terminated": bool(terminated),
                    "caption": info["caption"],
                    "seed": ep.seed,
                    "logprob": float(sample.logprob),
                }
            )
            if done:
                ep.success = bool(info.get("success"))
                results.append(ep)
                if registry is not None and ep.episode_id is not None:
                    finished.append((ep.episode_id, {"return": ep.total_return, "length": ep.length,
                                                     "success": ep.success, "moves_used": ep.moves_used,
                                                     "parse_failures": ep.parse_failures}))
                if on_episode is not None:
                    on_episode(ep)
                slot.episode = None
                if next_episode < cfg.episodes:
                    begin(slot)
        if registry is not None and run_id is not None:
            with registry.transaction():  # the steps and the episodes they finish, together
                registry.add_steps(run_id, rows)
                for episode_id, fields in finished:
                    registry.update_episode(episode_id, **fields)
        if on_progress is not None:  # a live episode counts by its share of its action budget (none: 0)
            live_share = sum(min(1.0, s.episode.length / s.env.max_actions) if getattr(s.env, "max_actions", 0) else 0.0
                             for s in slots if s.episode is not None)
            on_progress(RolloutProgress(len(results) + live_share, cfg.episodes, len(results), env_steps,
                                        time.perf_counter() - t0))

    results.sort(key=lambda e: e.idx)
    return RolloutSummary(results, env_steps, parse_failures, time.perf_counter() - t0, gen_seconds, lenient_parses,
                          has_distance=distance is not None)
