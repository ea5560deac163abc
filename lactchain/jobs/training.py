"""The loop's training jobs: train-critic, collect-pairs and train-actor. Their trainer
settings are the library's own configs (lactchain.train.*_config, lactchain.loop.preferences);
the job adds where the data and the models come from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lactchain.config import ConfigError, option
from lactchain.envs.catalog import DEFAULT_ENV, make_env
from lactchain.envs.replay import deal_seeds
from lactchain.envs.scenes import DEFAULT_SCENE
from lactchain.envs.world import (
    STATE_TEXT_DEFAULT, check_world, recorded_world, same_world, scene_field, state_text_field, world_kwargs,
    world_label,
)
from lactchain.jobs.checks import run_of_kind
from lactchain.jobs.engine import EngineConfig, actor_for_job, load_actor, precheck_engine, prepare_engine
from lactchain.jobs.output import JobProgress, LineLog, err_console, progress_bar
from lactchain.jobs.parts import ActorPart, StrategyPart
from lactchain.jobs.spec import Job
from lactchain.loop.labelers import OracleLabeler, sampled_groups
from lactchain.loop.preferences import (
    CollectConfig, PairBatch, collect_pairs, pairs_from_steps, sample_start_states, to_dataset,
)
from lactchain.prompts import PromptSpec
from lactchain.train.actor_config import TrainActorJobConfig
from lactchain.train.critic_config import TrainCriticConfig


# ---- train-critic --------------------------------------------------------------------------------

def _prepare_critic(registry: Any, config: TrainCriticConfig) -> dict[str, Any]:
    """Play runs resolved, of the config's env, with enough finished steps."""
    from lactchain.loop.returns import usable_steps

    # each run once: `-e X -e X` (or a prefix beside its id) would count its steps twice
    config.episodes_from = list(dict.fromkeys(registry.resolve_run_id(r) for r in config.episodes_from))
    if config.resume_from:
        from lactchain.artifact_checks import check_critic_checkpoint
        from lactchain.runs.resume import latest_checkpoint
        from lactchain.train.critic import CHECKPOINT_KIND

        config.resume_from = registry.resolve_run_id(config.resume_from)
        try:
            art = latest_checkpoint(registry, config.resume_from, CHECKPOINT_KIND)
            if art is not None:
                check_critic_checkpoint(art["path"], resume=True)
        except ValueError as exc:
            raise ConfigError(f"--resume-from {config.resume_from}: {exc}") from None
        if art is None:  # never a silent fresh start
            raise ConfigError(f"--resume-from {config.resume_from}: it (and the runs it resumed) kept no critic "
                              "checkpoint on disk (deleted, or it stopped before its first); start a fresh run "
                              "without --resume-from")
    usable, stored = usable_steps(registry, config.episodes_from)
    played = {r: registry.params(r).get("env", DEFAULT_ENV) for r in config.episodes_from}
    other = {r: e for r, e in played.items() if e != config.env}
    if other:
        raise ConfigError(f"--episodes-from {' '.join(other)} played {', '.join(sorted(set(other.values())))}, not "
                          f"{config.env}; pass play runs of --env {config.env} (or --env {next(iter(other.values()))})")
    scene_of = {r: registry.params(r).get("scene") or DEFAULT_SCENE for r in config.episodes_from}
    elsewhere = {r: sc for r, sc in scene_of.items() if sc != (config.scene or DEFAULT_SCENE)}
    if elsewhere:
        theirs = next(iter(elsewhere.values()))
        raise ConfigError(f"--episodes-from {' '.join(elsewhere)} played scene {theirs}, not "
                          f"{config.scene or DEFAULT_SCENE}; pass --scene {theirs} (a critic learns one layout)")
    if usable < 2:
        raise ConfigError(f"--episodes-from {' '.join(config.episodes_from)}: {usable} step(s) of finished episodes "
                          f"({stored} stored; episodes cut off by a kill have no return); play more episodes")
    return {"episodes_from": config.episodes_from, "resume_from": config.resume_from}


def run_train_critic(handle: Any, config: TrainCriticConfig) -> dict[str, Any]:
    from lactchain.train.critic import train_critic

    with progress_bar("train-critic", handle.quiet) as bar:
        task = bar.add_task("epochs", total=config.epochs, stats="loading data and model")
        progress = JobProgress(handle, "train-critic", "epochs")  # the log's lines, the Jobs list's column

        def on_batch(epoch: int, done: int, total: int) -> None:
            stats = bar.tasks[0].fields.get("last", "")
            bar.update(task, stats=f"batch {done}/{total}" + (f"  {stats}" if stats else ""))
            progress(epoch - 1 + done / max(1, total), config.epochs, f"epoch {epoch}, batch {done}/{total}")

        def on_epoch(epoch: int, m: dict[str, float]) -> None:
            last = f"loss {m['train_loss']:.3f}"
            if "val_loss" in m:
                last += f"  val {m['val_loss']:.3f}  EV {m['val_explained_variance']:.2f}"
            last += f"  spearman(V, V*) {m['spearman_vstar']:.2f}"
            bar.update(task, completed=epoch, last=last, stats=last)
            progress(epoch, config.epochs, f"epoch {epoch}: {last}", force=True)

        return train_critic(handle, config, on_epoch=on_epoch, on_batch=on_batch)


TRAIN_CRITIC = Job(kind="critic", command="train-critic", config=TrainCriticConfig, run=run_train_critic,
                   title="Train critic", name=lambda c: f"train-critic {c.critic}", prepare=_prepare_critic,
                   resume_field="resume_from",
                   doc="""Train the critic (V(s) and Q(s, moves)) on the steps of play runs.

    Monte-Carlo discounted returns per episode; train/validation split by episode;
    per epoch: train/val loss, explained variance on val and the Spearman rank
    correlation of V with the exact V* over the env's start states. A checkpoint
    (artifact kind "critic") is saved every epoch and on SIGTERM. The play runs must
    have played --env.
    """)


# ---- collect-pairs -------------------------------------------------------------------------------

@dataclass
class CollectPairsConfig(CollectConfig):
    """`collect-pairs`: the sampling and ranking of `CollectConfig`, plus the actor, the
    critic that scores, the start states and play runs to pair."""

    model: ActorPart = field(default_factory=ActorPart)
    scene: str | None = scene_field()
    state_text: str = state_text_field()
    critic_run: str | None = option(None, "train-critic run whose checkpoint scores candidates.", check="run:critic",
                                    form="Critic run")
    states: int = option(32, "Start states to sample (uniform over the env's start states: the grid's poses, "
                             "Blackjack's deals).", min=1, max=100_000, form="Start states")
    episodes_from: list[str] = option([], "Also pair steps of these play runs whose states match.")
    strategy: StrategyPart = field(default_factory=StrategyPart)
    engine: EngineConfig = field(default_factory=EngineConfig)

    def check(self) -> None:
        super().check()
        check_world(self)
        if self.critic_run is None and not self.episodes_from:
            self.refuse("critic_run", "give --critic-run (critic-scored pairs) and/or --episodes-from (pairs from "
                                      "play runs)")

    def sampling(self, gamma: float | None) -> CollectConfig:
        return self.project(CollectConfig, gamma=gamma)


def run_collect_pairs(handle: Any, config: CollectPairsConfig) -> dict[str, Any]:
    from lactchain.models.critic import load_from_run
    from lactchain.strategy.strategies import resolve_strategy
    from lactchain.train.actor import quiet_datasets

    reg, env = handle.registry, config.env
    with actor_for_job(config.model.actor, config.model.adapter, handle, config.engine, quiet=handle.quiet,
                       env=env) as model:
        world = world_kwargs(config.scene, config.state_text)
        text_env = make_env(env, moves=model.moves, **world)
        batch = PairBatch()
        gamma = config.gamma
        if config.critic_run is not None:
            with err_console.status(f"loading critic from {config.critic_run}"):
                critic = load_from_run(reg, config.critic_run)
            critic_params = reg.params(reg.resolve_run_id(config.critic_run))
            gamma = gamma if gamma is not None else float(critic_params.get("gamma", 0.9))
            start_states = sample_start_states(text_env, config.states, seed=config.seed)
            strat = resolve_strategy(reg, config.strategy.strategy, env)
            line = LineLog()
            line(f"collect-pairs: {len(start_states)} start states x {config.samples} samples, strategy "
                 f"{strat.label}", force=True)
            with progress_bar("pairs", handle.quiet) as bar:
                task = bar.add_task("states", total=len(start_states), stats="")

                def on_progress(n: int) -> None:
                    bar.advance(task, n)
                    done = int(bar.tasks[0].completed)
                    line(f"states {done}/{len(start_states)} sampled and scored", force=done == len(start_states))
                    handle.check_cancelled()

                batch = collect_pairs(model, critic, start_states, config.sampling(gamma),
                                      prompt=strat.prompt(model.moves, text_env), env_kwargs=world,
                                      on_progress=on_progress)
        for play_run in config.episodes_from:
            extra = pairs_from_steps(reg.steps(run_id=reg.get_run(play_run)["id"]), gamma=gamma or 0.9,
                                     margin=config.margin, env=env)
            batch.pairs += extra.pairs
            batch.dropped.update(extra.dropped)
            batch.candidates += extra.candidates
        reg.add_pairs(handle.run_id, batch.pairs)
        dataset_dir = handle.dir / "dataset"
        with quiet_datasets():  # no "Saving the dataset (0/1 shards)" bar under the job's own progress
            to_dataset(batch.pairs, model.chat_prompt, model.tokenizer.eos_token).save_to_disk(str(dataset_dir))
        reg.add_artifact(handle.run_id, "dataset", str(dataset_dir), meta={"rows": len(batch.pairs)})
        stats = batch.stats()
        handle.log_metrics({k: float(v) for k, v in stats.items()})
        return {**stats, "dataset": str(dataset_dir)}


COLLECT_PAIRS = Job(kind="pairs", command="collect-pairs", config=CollectPairsConfig, run=run_collect_pairs,
                    title="Collect pairs", name=lambda c: f"pairs {c.model.actor}",
                    precheck=precheck_engine, prepare=prepare_engine,
                    doc="""Build chosen/rejected pairs: sample start states, reset the env to each exact
    state, draw k move lists, execute each from that state and rank them by the
    critic's advantage; keep best vs worst when they differ by more than --margin.

    Every dropped candidate is counted by reason. Pairs go to the registry and a
    `datasets` dataset (prompt/chosen/rejected) is saved under the run folder.
    """)


# ---- train-actor ---------------------------------------------------------------------------------

def resolve_checkpoint(registry: Any, spec: str | None, check: bool = True) -> str | None:
    """A checkpoint folder from a path, or from a run id's latest `checkpoint` artifact
    (back through earlier resumes if needed); `check`ed to load before a run exists (the
    job itself, after its prepare checked it, does not read the files again)."""
    if not spec:
        return None
    from lactchain.artifact_checks import check_trainer_checkpoint
    from lactchain.runs.resume import latest_checkpoint

    def checked(folder: str) -> str:
        if check:
            try:
                check_trainer_checkpoint(folder)
            except ValueError as exc:
                raise ConfigError(f"--resume-from {spec}: {exc}") from None
        return folder

    if Path(spec).is_dir():
        return checked(str(Path(spec)))

    try:
        run = registry.get_run(spec)
    except KeyError as exc:
        raise ConfigError(f"--resume-from {spec}: neither a checkpoint folder nor a run id ({exc})") from None
    if run["kind"] != "actor":
        raise ConfigError(f"--resume-from {spec}: run {run['id']} is a {run['kind']} run; expected actor")
    try:
        art = latest_checkpoint(registry, run["id"], "checkpoint")
    except ValueError as exc:
        raise ConfigError(f"--resume-from {spec}: {exc}") from None
    if art is None:
        raise ConfigError(f"--resume-from {spec}: run {run['id']} (and the runs it resumed) kept no checkpoint on "
                          "disk; start a fresh run without --resume-from")
    return checked(art["path"])


def _prepare_actor(registry: Any, config: TrainActorJobConfig) -> dict[str, Any]:
    """A resumable checkpoint and pairs (grpo: rollouts of one world) to train on, before a run exists."""
    from lactchain.train.pair_selection import NoUsablePairs, select_pairs  # not TRL: a refusal comes fast

    resumes = {}
    if config.resume:  # recorded as a full id or an absolute folder: prune keeps what a run not yet done
        if Path(config.resume).is_dir():  # resumes from, whatever folder it is run in or ids come later
            config.resume = str(Path(config.resume).resolve())
        else:
            try:
                config.resume = registry.resolve_run_id(config.resume)
            except (KeyError, ValueError):
                pass  # resolve_checkpoint says why, in one line
        resumes = {"resume": config.resume}
    resolve_checkpoint(registry, config.resume)
    if config.loss == "grpo":
        config.rollouts_from = [rollouts_run(registry, spec) for spec in config.rollouts_from]
        rollouts_world(registry, config.rollouts_from)
        return {"rollouts_from": config.rollouts_from, **resumes}
    try:
        select_pairs(registry, config.pairs_from, config.labeler)
    except NoUsablePairs as exc:
        raise ConfigError(str(exc)) from None
    return resumes


def rollouts_run(registry: Any, spec: str) -> str:
    """A play or evaluate run with stored steps (GRPO's start states)."""
    run = run_of_kind(registry, "--rollouts-from", spec, ("play", "eval", "rollout"))
    if not registry.counts(run["id"])["steps"]:
        raise ConfigError(f"--rollouts-from {spec}: run {run['id']} has no stored steps; play some episodes first")
    return run["id"]


def rollouts_world(registry: Any, run_ids: list[str]) -> dict[str, Any]:
    """The env and world (scene, state text) the rollouts runs played: one for all of them."""
    worlds = []
    for run_id in run_ids:
        params = registry.params(run_id)
        worlds.append(recorded_world({**params, "env": params.get("env") or DEFAULT_ENV}) or {"env": DEFAULT_ENV})
    if any(not same_world(world, worlds[0]) for world in worlds):
        played = sorted({world_label(world) for world in worlds})
        raise ConfigError(f"--rollouts-from {' '.join(run_ids)}: the runs played different worlds "
                          f"({'; '.join(played)}); give runs of one env and scene")
    world = worlds[0]
    return {"env": world["env"], "scene": world.get("scene"),
            "state_text": world.get("state_text") or STATE_TEXT_DEFAULT}


def grpo_task_from_rollouts(registry: Any, config: TrainActorJobConfig, model: Any) -> Any:
    """GRPO's task from stored runs: every distinct state their steps visited, its prompt
    (the built-in strategy), and each sampled list's reward (`--grpo-reward`)."""
    from lactchain.train.best_lists import BestLists
    from lactchain.train.grpo import GRPOTask

    world = rollouts_world(registry, config.rollouts_from)
    env = make_env(world["env"], moves=model.moves, **world_kwargs(world["scene"], world["state_text"]))
    prompt = PromptSpec.for_env(env, moves=model.moves)
    seen: dict[str, Any] = {}
    for run_id in config.rollouts_from:
        for step in registry.steps(run_id=run_id):
            state = env.parse_state(step["state"])
            if not env.is_terminal(state):
                seen.setdefault(json.dumps(state.as_dict(), sort_keys=True), state)
    states = list(seen.values())
    oracle = OracleLabeler(env, 0.9) if config.grpo_reward == "oracle" else None
    generations = 4

    def reward(batch_states: list[Any], samples: list[Any]) -> list[float]:
        groups = sampled_groups(env, batch_states, samples, generations,
                                lambda i: deal_seeds(env, config.seed * 7919 + i, 4))
        if oracle is not None:
            oracle.score(groups)
            return [c.advantage for g in groups for c in g.candidates]
        return [sum(o[0] for o in c.outcomes) / len(c.outcomes) if c.outcomes else c.reward
                for g in groups for c in g.candidates]

    rows = [{"prompt": prompt.render(env.describe(s)), "state": s} for s in states]
    return GRPOTask(rows, reward, generations=generations, temperature=1.0, seed=config.seed,
                    greedy_member=config.grpo.greedy_member, replay=BestLists() if config.grpo.replay_best else None)


def run_train_actor(handle: Any, config: TrainActorJobConfig) -> dict[str, Any]:
    from lactchain.train.actor import train_actor
    from lactchain.train.pair_selection import select_pairs

    if config.loss == "grpo":
        return run_train_actor_grpo(handle, config)

    selection = select_pairs(handle.registry, config.pairs_from, config.labeler)
    stats = selection.stats()
    handle.log_metrics({"pairs_used": stats["pairs"], "pairs_dropped_identical": stats["dropped_identical"],
                        "pairs_dropped_unlabeled": stats["dropped_unlabeled"]}, step=0)
    err_console.print(f"{stats['pairs']} pairs ({stats['found']} found, {stats['dropped_identical']} with "
                      f"chosen == rejected, {stats['dropped_unlabeled']} unlabeled dropped)")
    checkpoint = resolve_checkpoint(handle.registry, config.resume, check=False)  # checked by prepare
    model = load_actor(config.actor, config.adapter, handle.registry, quiet=handle.quiet)
    with progress_bar(config.loss, handle.quiet) as bar:
        task = bar.add_task("steps", total=config.max_steps, stats="")
        progress = JobProgress(handle, config.loss, "steps")

        def on_log(step: int, total: int, metrics: dict[str, float]) -> None:
            shown = [f"{k} {metrics[k]:.3g}" for k in ("loss", "margin", "accuracy") if k in metrics]
            bar.update(task, completed=step, total=total or None, stats="  ".join(shown))
            progress(step, total or step, ", ".join(shown), force=step == total)

        result = train_actor(model, selection, config, handle=handle, resume_from_checkpoint=checkpoint, on_log=on_log)
    result["pair_stats"] = stats
    if result["cancelled"]:
        err_console.print(f"stopped at step {result['steps']}; checkpoint saved, resume with "
                          f"`lactchain runs resume {handle.run_id}`")
    return result


def run_train_actor_grpo(handle: Any, config: TrainActorJobConfig) -> dict[str, Any]:
    """GRPO on the states of stored rollouts: the policy samples as it trains."""
    from lactchain.train.grpo import train_grpo

    checkpoint = resolve_checkpoint(handle.registry, config.resume, check=False)  # checked by prepare
    model = load_actor(config.actor, config.adapter, handle.registry, quiet=handle.quiet, handle=handle,
                       settings=EngineConfig(dtype=config.dtype))  # samples as the loop's GRPO does
    task = grpo_task_from_rollouts(handle.registry, config, model)
    err_console.print(f"grpo: {len(task.rows)} states from {', '.join(config.rollouts_from)}, {task.generations} "
                      f"samples each, reward: {config.grpo_reward}")
    progress = JobProgress(handle, "grpo", "steps")

    def on_log(step: int, total: int, metrics: dict[str, float]) -> None:
        shown = [f"{k} {metrics[k]:.3g}" for k in ("loss", "reward") if k in metrics]
        progress(step, total or step, ", ".join(shown), force=step == total)

    result = train_grpo(model, task, config.trainer(), handle=handle, resume_from_checkpoint=checkpoint,
                        on_log=on_log)
    if result["cancelled"]:
        err_console.print(f"stopped at step {result['steps']}; checkpoint saved, resume with "
                          f"`lactchain runs resume {handle.run_id}`")
    return result


TRAIN_ACTOR = Job(kind="actor", command="train-actor", config=TrainActorJobConfig, run=run_train_actor,
                  title="Train actor", name=lambda c: f"train-actor {c.loss} {c.actor}", prepare=_prepare_actor,
                  resume_field="resume",
                  doc="""Tune an actor on preference pairs (SimPO by default) and save a LoRA adapter.

    Pairs come from the registry (`--pairs-from RUN_ID`, `--labeler`); pairs with
    chosen == rejected or not yet labeled are dropped and counted. Metrics stream
    to the registry every step, checkpoints every --save-steps and on SIGTERM,
    and known failure signatures (loss stuck at ln 2, accuracy 1.0 from the
    start, chosen log-prob falling) are recorded as warnings. The adapter (LoRA
    weights only) is saved to runs/<id>/adapter; use it with `--adapter <id>`.
    """)
