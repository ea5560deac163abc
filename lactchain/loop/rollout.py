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


class _Rollout:
    """One rollout's slots, counters and registry rows; `run_rollouts` drives it."""

    def __init__(self, actor: ActorLike, cfg: RolloutConfig, prompt: PromptSpec | None,
                 starts: Sequence[Any] | None, registry: Any | None, run_id: str | None):
        self.actor, self.cfg = actor, cfg
        self.slots = [_Slot(make_rollout_env(cfg, actor.moves)) for _ in range(min(cfg.n_envs, cfg.episodes))]
        env = self.slots[0].env
        self.prompt = prompt or PromptSpec.for_env(env, moves=actor.moves)
        self.distance = getattr(env.solver(), "distance", None)  # shortest move count, where the env has one
        if starts is not None and len(starts) < cfg.episodes:
            raise ValueError(f"{cfg.episodes} episodes need {cfg.episodes} start states, got {len(starts)}")
        self.starts = list(starts) if starts is not None else start_states(cfg, env)
        self.registry = registry if registry is not None and run_id is not None else None
        self.run_id = run_id
        self.results: list[EpisodeResult] = []
        self.next_episode = 0
        self.lockstep = 0
        self.env_steps = self.parse_failures = self.lenient_parses = 0
        self.gen_seconds = 0.0
        self.t0 = time.perf_counter()
        for slot in self.slots:
            self.begin(slot)

    def live(self) -> list[_Slot]:
        return [s for s in self.slots if s.episode is not None]

    def begin(self, slot: _Slot) -> None:
        """Reset `slot`'s env to the next pending episode's start state."""
        idx = self.next_episode
        self.next_episode += 1
        seed = episode_seed(self.cfg.seed, idx)
        start = self.starts[idx]
        slot.env.reset(seed=seed, options={"state": start.as_dict()} if start is not None else None)
        ep = EpisodeResult(idx, seed, slot.env.state.as_dict(),
                           optimal_moves=self.distance(slot.env.state) if self.distance is not None else None)
        if self.registry is not None:
            ep.episode_id = self.registry.add_episode(
                self.run_id, idx=idx, seed=seed, start_state=ep.start_state, optimal_moves=ep.optimal_moves, length=0
            )
        slot.episode = ep

    def generate(self, live: list[_Slot]) -> tuple[list[str], Sequence[SamplesLike]]:
        """One batched call for every live env's prompt."""
        cfg = self.cfg
        prompts = [self.prompt.render(s.env.describe()) for s in live]
        g0 = time.perf_counter()
        samples = self.actor.generate(
            prompts,
            constrained=cfg.constrained,
            temperature=cfg.temperature,
            max_new_tokens=cfg.max_new_tokens,
            seed=cfg.seed * 7919 + self.lockstep,
            # each episode samples from its own seed and step: the same episodes at any --envs
            seeds=[s.episode.seed * 7919 + s.episode.length for s in live if s.episode is not None],
        )
        self.gen_seconds += time.perf_counter() - g0
        self.lockstep += 1
        return prompts, samples

    def play(self, slot: _Slot, text: str, sample: SamplesLike) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Step `slot`'s env with one answer: its step row, and the episode's final fields
        when the step ended it (then `refill` the slot)."""
        ep = slot.episode
        assert ep is not None
        before = slot.env.state
        _, reward, terminated, truncated, info = slot.env.step(sample.moves)
        self.env_steps += 1
        failed = sample.mode == FAILED
        self.parse_failures += failed
        self.lenient_parses += sample.mode == LENIENT
        ep.parse_failures += failed
        if ep.length == 0:
            ep.first_moves = list(sample.moves)
        ep.total_return += reward
        ep.length += 1
        ep.moves_used += info["moves_executed"]
        done = terminated or truncated
        row = {
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
        if not done:
            return row, None
        ep.success = bool(info.get("success"))
        self.results.append(ep)
        return row, {"return": ep.total_return, "length": ep.length, "success": ep.success,
                     "moves_used": ep.moves_used, "parse_failures": ep.parse_failures}

    def refill(self, slot: _Slot) -> None:
        """A finished slot takes the next pending episode, or drops out."""
        slot.episode = None
        if self.next_episode < self.cfg.episodes:
            self.begin(slot)

    def record(self, rows: list[dict[str, Any]], finished: list[tuple[int, dict[str, Any]]]) -> None:
        """The lock-step's steps and the episodes they finish, in one transaction."""
        if self.registry is None:
            return
        with self.registry.transaction():
            self.registry.add_steps(self.run_id, rows)
            for episode_id, fields in finished:
                self.registry.update_episode(episode_id, **fields)

    def progress(self) -> RolloutProgress:
        """A live episode counts by its share of its action budget (none: 0)."""
        live_share = sum(min(1.0, s.episode.length / s.env.max_actions) if getattr(s.env, "max_actions", 0) else 0.0
                         for s in self.live() if s.episode is not None)
        return RolloutProgress(len(self.results) + live_share, self.cfg.episodes, len(self.results),
                               self.env_steps, time.perf_counter() - self.t0)

    def summary(self) -> RolloutSummary:
        self.results.sort(key=lambda e: e.idx)
        return RolloutSummary(self.results, self.env_steps, self.parse_failures, time.perf_counter() - self.t0,
                              self.gen_seconds, self.lenient_parses, has_distance=self.distance is not None)


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
    rollout = _Rollout(actor, cfg, prompt, starts, registry, run_id)
    while live := rollout.live():
        if should_stop is not None and should_stop():
            break
        if cfg.max_env_steps is not None and rollout.env_steps >= cfg.max_env_steps:
            break
        prompts, samples = rollout.generate(live)
        rows: list[dict[str, Any]] = []
        finished: list[tuple[int, dict[str, Any]]] = []  # (episode id, its final fields)
        for slot, text, sample in zip(live, prompts, samples):
            episode = slot.episode
            row, final = rollout.play(slot, text, sample)
            rows.append(row)
            if final is None:
                continue
            assert episode is not None
            if episode.episode_id is not None:
                finished.append((episode.episode_id, final))
            if on_episode is not None:
                on_episode(episode)
            rollout.refill(slot)
        rollout.record(rows, finished)
        if on_progress is not None:
            on_progress(rollout.progress())
    return rollout.summary()
