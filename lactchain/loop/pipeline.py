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
every phase a child run and saves the state after it. The settings are
`lactchain.loop.config`'s `PipelineConfig`; what the loop keeps between phases (the elites,
the state file, the result, live progress) is `lactchain.loop.bookkeeping`.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lactchain.config import SEED_MAX
from lactchain.engine import EngineConfig, load_generator_for, record_generation, record_replicas
from lactchain.envs.catalog import make_env
from lactchain.envs.replay import deal_seeds, decision_states, execute_from
from lactchain.envs.world import world_params
from lactchain.runs.lifecycle import RunHandle, run_context
from lactchain.loop.labelers import (Group, OracleLabeler, execute_candidate, make_labeler, ranking_accuracy,
                                     sampled_groups)
from lactchain.loop.config import COLLAPSE_SHARE, WIN_REWARDS, PipelineConfig, loss_settings, trainer_config
from lactchain.loop.bookkeeping import (EliteBuffer, PhaseProgress, PipelineResult, numeric_metrics, record_adapter,
                                        save_state, seed_phase, transitions_from_json, transitions_json)


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

    @property
    def adapter(self) -> str | None:
        """The training actor's adapter folder now (None: the bare model)."""
        return str(self.actor.adapter) if getattr(self.actor, "adapter", None) else None

    def save(self) -> None:
        save_state(self.handle, {"phases": self.result.phases, "elites": self.elites.to_json(), **self.saved,
                                  "adapter": self.adapter})
        record_adapter(self.handle, self.adapter, max((p["iteration"] for p in self.result.phases), default=0))

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
        state.live.child = child
        try:
            metrics = fn(child)
        finally:
            state.live.child = None
        numeric = numeric_metrics(metrics)
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
    run_phase(state, iteration, "evaluate", "eval",  # its world too: read alone (leaderboard) it names it
              {"states": cfg.eval_states, "adapter": state.adapter or "", "max_actions": cfg.eval_max_actions,
               **world_params(cfg.env, cfg.scene, cfg.state_text)}, body)
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
    critic["transitions"] = fresh + transitions_from_json(state.saved["transitions"], state.env)
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
        state.saved["transitions"] = state.saved["transitions"] + transitions_json(new)
        td = TDConfig(rounds=rounds, lists_per_state=cfg.td_lists_per_state, gamma=cfg.gamma, seed=cfg.seed,
                      q_weight=0.5 if cfg.critic_scorer == "q" else 0.0)  # the Q head ranks only if trained
        critic["optimizer"], metrics = fit_critic_td(critic["critic"], critic["transitions"], td,
                                                     critic["optimizer"], on_round=state.live.rounds(iteration, rounds),
                                                     should_stop=h.cancelled.is_set)
        folder = critic["critic"].save(h.dir / "critic")
        with writing(folder, "the critic's optimizer"):
            torch.save(critic["optimizer"].state_dict(), folder / TD_OPTIMIZER_FILE)
        reg.add_artifact(h.run_id, "critic", folder, step=int(metrics.get("round", 0)), meta=numeric_metrics(metrics))
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
                                  "transitions": transitions_json(holder["transitions"])}
        metrics = _collect_metrics(state, groups)
        metrics["env_moves"] += search_moves  # the prefixes it tried, beyond the lists it kept
        return {**batch.stats(), **metrics, "elites_changed": changed, "stitched": stitched,
                "explored": explored, "searched": searched}

    run_phase(state, it, "collect", "pairs", {"labeler": cfg.labeler, "samples": cfg.samples, "states": cfg.states,
                                              "temperature": cfg.temperature,
                                              **world_params(cfg.env, cfg.scene, cfg.state_text)}, body)
    if "transitions" not in holder:  # collect was kept from the run this one resumes
        pending = state.saved["pending"] or {}
        holder["transitions"] = transitions_from_json(pending.get("transitions", []), env)
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
    trainer = trainer_config(cfg, seed=(cfg.seed + it) % (SEED_MAX + 1))  # a seed near the top wraps

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
    return {**state.result.summary(), "adapter": state.adapter}


def _is_optimal(oracle: Any, row: dict[str, Any]) -> bool:
    """Diagnostic only: does this elite achieve V*(s) (its oracle advantage is 0)?"""
    group = Group(oracle.env.parse_state(row["state"]), "")
    group.candidates.append(execute_candidate(oracle.env, group, row["chosen"]))
    oracle.score([group])
    return group.candidates[0].advantage > -1e-6
