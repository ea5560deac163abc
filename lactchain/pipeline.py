"""The whole learning loop, one iteration after another, each phase a child run.

play -> train-critic -> collect-pairs -> train-actor -> evaluate. The actor is
loaded once; each iteration starts from the adapter the previous one trained.
An evaluation before the first iteration gives the baseline, so every pipeline
says how much it moved the agent.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from lactchain.jobs import RunHandle, run_context


@dataclass
class PipelineConfig:
    actor: str = "smollm2-135m"
    adapter: str | None = None  # adapter folder to start from
    critic: str = "minilm-l6"
    iterations: int = 1
    loss: str = "simpo"
    play_episodes: int = 16
    play_max_actions: int = 5
    play_temperature: float = 1.0
    critic_epochs: int = 3
    gamma: float = 0.9
    pair_states: int = 24
    pair_samples: int = 4
    pair_temperature: float = 1.0
    margin: float = 0.5
    actor_epochs: float = 2.0
    actor_lr: float = 5e-4
    actor_batch_size: int = 8
    eval_states: str | int = 24
    eval_max_actions: int = 5
    n_envs: int = 16
    constrained: bool = True
    seed: int = 0
    baseline: bool = True
    deadline: float | None = None  # time.time() by which the last iteration should end

    def params(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "deadline"}


@dataclass
class PipelineResult:
    phases: list[dict[str, Any]] = field(default_factory=list)
    seconds_per_phase: dict[str, float] = field(default_factory=dict)

    def add(self, iteration: int, phase: str, run_id: str, seconds: float, metrics: dict[str, Any]) -> None:
        self.phases.append({"iteration": iteration, "phase": phase, "run_id": run_id, "seconds": seconds, **metrics})
        self.seconds_per_phase[phase] = self.seconds_per_phase.get(phase, 0.0) + seconds

    def last(self, phase: str) -> dict[str, Any] | None:
        return next((p for p in reversed(self.phases) if p["phase"] == phase), None)

    def summary(self) -> dict[str, Any]:
        evals = [p for p in self.phases if p["phase"] == "evaluate"]
        before, after = (evals[0], evals[-1]) if evals else (None, None)
        critic = self.last("train-critic") or {}
        pick = ("success_rate", "mean_return", "mean_optimal_ratio", "parse_failure_rate", "lenient_parse_rate")
        return {
            "before": {k: before[k] for k in pick} if before else None,
            "after": {k: after[k] for k in pick} if after else None,
            "critic_spearman_vstar": critic.get("spearman_vstar"),
            "iterations_done": max((p["iteration"] for p in self.phases), default=0),
            "seconds_per_phase": self.seconds_per_phase,
            "phases": self.phases,
        }


def run_pipeline(
    handle: RunHandle,
    cfg: PipelineConfig,
    on_phase: Callable[[int, str], None] | None = None,
    progress: Callable[[str, float | None], None] | None = None,
) -> dict[str, Any]:
    """Run `cfg.iterations` iterations under the parent run `handle`."""
    from lactchain.evaluate import evaluate_actor
    from lactchain.models.actor import Actor
    from lactchain.preferences import collect_pairs, sample_start_states
    from lactchain.rollout import RolloutConfig, run_rollouts
    from lactchain.train.actor import train_actor
    from lactchain.train.critic import train_critic
    from lactchain.envs import GridWorldEnv

    reg = handle.registry
    result = PipelineResult()
    actor = Actor.load(cfg.actor, adapter=cfg.adapter, progress=progress or (lambda step, fraction=None: None))
    env_play = {"max_actions": cfg.play_max_actions}

    def phase(iteration: int, name: str, kind: str, params: dict[str, Any], fn: Callable[[RunHandle], dict[str, Any]]):
        handle.check_cancelled()
        if on_phase is not None:
            on_phase(iteration, name)
        t0 = time.perf_counter()
        with run_context(reg, kind, name=f"{name} (iteration {iteration})", params=params,
                         parent_id=handle.run_id) as child:
            metrics = fn(child)
            numeric = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            child.log_metrics(numeric)
        seconds = time.perf_counter() - t0
        result.add(iteration, name, child.run_id, seconds, metrics)
        handle.log_metrics({f"{name}/{k}": v for k, v in numeric.items()}, step=iteration)
        handle.log_metrics({f"{name}/seconds": seconds}, step=iteration)
        return child.run_id, metrics

    def evaluate(iteration: int) -> None:
        phase(iteration, "evaluate", "eval", {"states": cfg.eval_states, "adapter": str(actor.adapter or "")},
              lambda h: evaluate_actor(actor, states=cfg.eval_states, constrained=cfg.constrained, n_envs=cfg.n_envs,
                                       max_actions=cfg.eval_max_actions, seed=cfg.seed, registry=reg, run_id=h.run_id,
                                       should_stop=h.cancelled.is_set))

    if cfg.baseline:
        evaluate(0)
    play_runs: list[str] = []
    longest_iteration = 0.0
    for it in range(1, cfg.iterations + 1):
        # Start another iteration only if one as long as the longest so far still fits.
        if cfg.deadline is not None and time.time() + longest_iteration > cfg.deadline:
            break
        it_start = time.time()
        play_id, _ = phase(
            it, "play", "play", {"episodes": cfg.play_episodes, "temperature": cfg.play_temperature},
            lambda h: run_rollouts(
                actor,
                RolloutConfig(episodes=cfg.play_episodes, n_envs=cfg.n_envs, constrained=cfg.constrained,
                              temperature=cfg.play_temperature, start="random", seed=cfg.seed + it, env_kwargs=env_play),
                registry=reg, run_id=h.run_id, should_stop=h.cancelled.is_set,
            ).as_dict(),
        )
        play_runs.append(play_id)
        critic_params = {"episodes_from": list(play_runs), "critic": cfg.critic, "epochs": cfg.critic_epochs,
                         "gamma": cfg.gamma, "seed": cfg.seed}
        critic_holder: dict[str, Any] = {}

        def fit_critic(h: RunHandle) -> dict[str, Any]:
            out = train_critic(h, **critic_params)
            critic_holder["path"] = out["checkpoint"]
            flat = {**out, **out["metrics"]}
            return {k: v for k, v in flat.items() if not isinstance(v, (dict, list))}

        phase(it, "train-critic", "critic", critic_params, fit_critic)
        from lactchain.models.critic import Critic

        critic = Critic.load(checkpoint=critic_holder["path"])
        pairs_holder: dict[str, Any] = {}

        def pairs(h: RunHandle) -> dict[str, Any]:
            states = sample_start_states(GridWorldEnv(moves=actor.moves), cfg.pair_states, seed=cfg.seed + it)
            batch = collect_pairs(actor, critic, states, samples=cfg.pair_samples, temperature=cfg.pair_temperature,
                                  gamma=cfg.gamma, margin=cfg.margin, constrained=cfg.constrained, seed=cfg.seed + it)
            reg.add_pairs(h.run_id, batch.pairs)
            pairs_holder["pairs"] = batch.pairs
            return batch.stats()

        phase(it, "collect-pairs", "pairs", {"states": cfg.pair_states, "samples": cfg.pair_samples}, pairs)
        del critic
        if not pairs_holder["pairs"]:
            longest_iteration = max(longest_iteration, time.time() - it_start)
            continue  # nothing to learn from this round; the next play adds data
        phase(it, "train-actor", "actor", {"loss": cfg.loss, "epochs": cfg.actor_epochs, "lr": cfg.actor_lr},
              lambda h: {k: v for k, v in train_actor(actor, pairs_holder["pairs"], loss=cfg.loss, handle=h,
                                                      epochs=cfg.actor_epochs, lr=cfg.actor_lr,
                                                      batch_size=cfg.actor_batch_size, seed=cfg.seed).items()
                         if not isinstance(v, (dict, list))})
        evaluate(it)
        longest_iteration = max(longest_iteration, time.time() - it_start)
    return result.summary()
