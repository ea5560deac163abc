"""`strategy search`: the strategy prompt searched as a registry job (detach, kill, resume,
log and chart like the others). The search itself is `lactchain.strategy.search`; the
job adds the actor, the world, the training / held-out split, the registry versions and
the run's files (`search.json` after every whole round: what a resume continues)."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lactchain.bench.carried_cells import STRATEGY_CELLS, cell_settings, keep_cells
from lactchain.config import SEED_MAX, Config, ConfigError, option
from lactchain.envs.catalog import make_env
from lactchain.jobs.cells import check_cells_from, run_cells
from lactchain.jobs.checks import check_models
from lactchain.jobs.engine import EngineConfig, actor_for_job, precheck_engine, prepare_engine
from lactchain.jobs.output import LineLog, err_console
from lactchain.jobs.parts import ActorPart, SceneEnvPart, StrategyPart
from lactchain.jobs.spec import Job
from lactchain.runs.lifecycle import run_context
from lactchain.strategy.search import (
    GENERIC_HINTS, PROPOSERS, Candidate, DemoProposer, EditProposer, Episode, LLMProposer, Search, run_round, score,
    split_states, state_key,
)

SEARCH_FILE = "search.json"
STALL_ROUNDS = 25  # rounds in a row with nothing new from any proposer end a search early
SAMPLE_SEED_BASE = 7_000_000_000  # sampled attempts' rollout seeds (their sampling only: the states are given)
SEARCH_ARTIFACT = "strategy-search"  # the run's search.json, registered after every whole round (what a resume reads)


@dataclass
class StrategySearchConfig(Config):
    """Propose -> evaluate -> keep, on fixed training start states; the best strategy is
    reported on held-out start states the search never saw."""

    model: ActorPart = field(default_factory=ActorPart)
    world: SceneEnvPart = field(default_factory=SceneEnvPart)
    strategy: StrategyPart = field(default_factory=StrategyPart)
    proposers: str = option("edits,demos,llm", "Proposers, comma-separated: edits (sentence edits from the env's "
                                               "hints, no LLM), demos (worked examples from successful episodes), "
                                               "llm (the proposer model rewrites from the scored history).",
                            form="Proposers")
    proposer_actor: str | None = option(None, "The llm proposer's model (a preset); default: the actor itself.")
    rounds: int = option(8, "Rounds of propose -> evaluate -> keep.", min=1, max=10_000, form="Rounds")
    per_round: int = option(2, "Strategies each proposer proposes per round.", min=1, max=64, form="Per round")
    budget_min: float | None = option(None, "Also stop when a round would start after this many minutes.", min=0.1)
    train_states: int = option(24, "Training start states (seeded; a dealt env: seeded deals) every candidate is "
                                   "scored on.", min=1, max=10_000, form="Training states")
    heldout_states: int | None = option(None, "Held-out start states for the final report (default: every other "
                                              "start state; a dealt env: its evaluation deals).", min=1, max=100_000)
    max_actions: int = option(5, "Actions per episode.", min=1, max=1000)
    envs: int = option(64, "Lock-step envs per evaluation batch.", min=1, max=4096)
    seed: int = option(0, "Seed of the split, the proposers and the deals.", min=0, max=SEED_MAX)
    engine: EngineConfig = field(default_factory=EngineConfig)
    resume_from: str | None = option(None, "Continue this stopped search from its last whole round. "
                                           "`lactchain runs resume RUN` passes it.", check="run:strategy")

    def names(self) -> list[str]:
        return [p.strip() for p in str(self.proposers).split(",") if p.strip()]

    def check(self) -> None:
        names = self.names()
        if not names:
            self.refuse("proposers", f"is empty; name at least one of {', '.join(PROPOSERS)}")
        unknown = [n for n in names if n not in PROPOSERS]
        if unknown:
            self.refuse("proposers", f"unknown proposer {', '.join(unknown)}; use some of {', '.join(PROPOSERS)}")
        if len(set(names)) != len(names):
            self.refuse("proposers", "names a proposer more than once")
        self.proposers = ",".join(names)


def _check_split(config: StrategySearchConfig) -> None:
    """Enough start states to hold some out (a dealt env deals as many as asked), and a
    proposer model that exists."""
    if config.proposer_actor:
        try:
            check_models(actor=config.proposer_actor)
        except ConfigError as exc:
            raise ConfigError(f"--proposer-actor {config.proposer_actor}: {exc}") from None

    probe = make_env(config.world.env, **config.world.env_kwargs())
    total = len(probe.start_states())
    if not _dealt(probe) and config.train_states >= total:
        raise ConfigError(f"--train-states {config.train_states}: leaves none of the env's {total} start states to "
                          f"hold out; use at most {total - 1}")


def _prepare(registry: Any, config: StrategySearchConfig) -> dict[str, Any]:
    """The split holds; a resumed search must have saved a round."""
    extra = prepare_engine(registry, config)
    _check_split(config)
    if config.resume_from is None:
        return extra
    config.resume_from = registry.resolve_run_id(config.resume_from)
    _saved_search(registry, config.resume_from)
    return {**extra, "resume_from": config.resume_from}


def _saved_search(registry: Any, run_id: str) -> Any:
    """The newest search a run (or the runs it resumed) saved, read and checked: one
    ConfigError line when there is none or its file is damaged."""
    from lactchain.runs.files import read_json_object
    from lactchain.runs.resume import latest_checkpoint

    try:
        saved = latest_checkpoint(registry, run_id, SEARCH_ARTIFACT)
        if saved is None:
            raise ConfigError(f"--resume-from {run_id}: it saved no search (it stopped before its first round, as "
                              "did the runs it resumed); start a new search")
        path = Path(saved["path"])
        data = read_json_object(path, "strategy search", "start a new search")
        try:
            return Search.from_json(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"strategy search {path.parent}: {path.name} is not a saved search "
                              f"({type(exc).__name__}); start a new search") from None
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(f"--resume-from {run_id}: {exc}") from None


def _dealt(text_env: Any) -> bool:
    """Whether the env's start states are seeded deals (Blackjack) rather than a list."""
    return bool(getattr(text_env, "evaluation_deals", None))


def _split(text_env: Any, config: StrategySearchConfig) -> tuple[list[Any], list[Any], list[str], list[str]]:
    """(training starts, held-out starts, their keys). A dealt env (Blackjack): seeded deals
    (a start of None deals by the episode's seed), training and held-out on disjoint seeds."""
    deals = getattr(text_env, "evaluation_deals", None)
    if deals:
        held = config.heldout_states or deals
        train_seed, held_seed = _deal_seeds(config.seed)
        return ([None] * config.train_states, [None] * held,
                [_deal_key(train_seed, i) for i in range(config.train_states)],
                [_deal_key(held_seed, i) for i in range(held)])
    try:
        train, held = split_states(text_env.start_states(), config.train_states, config.heldout_states, config.seed)
    except ValueError as exc:
        raise ConfigError(f"--train-states {config.train_states}: {exc}") from None
    return train, held, [state_key(s) for s in train], [state_key(s) for s in held]


def _deal_seeds(seed: int) -> tuple[int, int]:
    return seed * 2 + 1, seed * 2 + 2  # rollout seeds of the training and the held-out deals (never equal)


def _deal_key(rollout_seed: int, idx: int) -> str:
    from lactchain.loop.rollout import episode_seed

    return f"deal {episode_seed(rollout_seed, idx)}"  # the episode's own seed


def evaluator(model: Any, text_env: Any, world: dict[str, Any], config: StrategySearchConfig,
              temperature: float = 0.0) -> Any:
    """(strategy text, starts, rollout seed) -> the search's Episodes: constrained, greedy
    unless a `temperature` is given (the demos proposer's sampled attempts)."""
    from lactchain.loop.rollout import RolloutConfig, run_rollouts
    from lactchain.strategy.strategies import Strategy

    dealt = _dealt(text_env)

    def evaluate(text: str, starts: Sequence[Any], seed: int) -> list[Any]:
        cfg = RolloutConfig(episodes=len(starts), n_envs=min(config.envs, len(starts)), constrained=True,
                            temperature=temperature, seed=seed, env_kwargs={**world, "max_actions": config.max_actions},
                            env=text_env.name)
        summary = run_rollouts(model, cfg, prompt=Strategy(text).prompt(model.moves, text_env), starts=list(starts))
        out = []
        for e in summary.episodes:
            state = text_env.parse_state(e.start_state)
            out.append(Episode(f"deal {e.seed}" if dealt else state_key(state), text_env.describe(state),
                               bool(e.success), list(e.first_moves or []), bool(e.success) and e.length == 1))
        return out

    return evaluate


def run_strategy_search(handle: Any, config: StrategySearchConfig) -> dict[str, Any]:
    from lactchain.models.actor import Actor
    from lactchain.strategy.strategies import resolve_strategy

    reg, env = handle.registry, config.world.env
    world = config.world.env_kwargs()
    line = LineLog()
    with actor_for_job(config.model.actor, config.model.adapter, handle, config.engine, quiet=handle.quiet,
                       env=env) as model:
        text_env = make_env(env, moves=model.moves, **world)
        train, held, train_keys, held_keys = _split(text_env, config)
        train_seed, held_seed = _deal_seeds(config.seed)
        evaluate_at = evaluator(model, text_env, world, config)

        def on_train(text: str, starts: Sequence[Any]) -> list[Any]:
            return evaluate_at(text, starts, train_seed)

        if config.resume_from:
            search = _saved_search(reg, config.resume_from)
            if search.train_keys != train_keys:
                raise ConfigError(f"--resume-from {config.resume_from}: its training states differ from this "
                                  "search's (another --seed, --train-states or world); resume with its settings")
            line(f"strategy search: resuming {config.resume_from} after round {search.rounds_done}", force=True)
        else:
            search = Search(train_keys, held_keys)
            start = resolve_strategy(reg, config.strategy.strategy, env)
            with err_console.status("scoring the start strategy"):
                first = score(search, Candidate(start.text, "start", 0), train, on_train)
            first.version = start.version
        proposers = []
        for name in config.names():
            if name == "edits":
                proposers.append(EditProposer(getattr(text_env, "strategy_hints", GENERIC_HINTS)))
            elif name == "demos":
                # a dealt env's start is a seeded deal: sampling it again would play another deal
                sample = None if _dealt(text_env) else _sampler(model, text_env, world, config, search)
                proposers.append(DemoProposer(sample, train_states=train))
            else:
                writer = model if config.proposer_actor in (None, config.model.actor) else \
                    Actor.load(config.proposer_actor, moves=model.moves)
                proposers.append(LLMProposer(writer, text_env.judge_description))
        save = _saver(handle, search, env)
        # search.json as of now (the start strategy scored: a resume need not score it again); the
        # start becomes a version too unless it is one (the saver skips saved ones), so `best_version`
        # names a version even when nothing beat it, and `--strategy VERSION` always has one
        save(search.candidates[:1])
        t0, before = time.time(), search.seconds  # a resumed search's budget counts its earlier runs too
        idle = 0  # rounds in a row in which no proposer had anything new
        while search.rounds_done < config.rounds:
            handle.check_cancelled()
            if config.budget_min is not None and before + time.time() - t0 > config.budget_min * 60:
                line(f"budget of {config.budget_min:g} min spent after round {search.rounds_done}", force=True)
                break
            rng = random.Random(config.seed * 1_000_003 + search.rounds_done + 1)
            with err_console.status(f"round {search.rounds_done + 1}/{config.rounds}"):
                new = run_round(search, proposers, config.per_round, train, on_train, rng, handle.check_cancelled)
            search.seconds = before + time.time() - t0
            save(new)
            idle = 0 if new else idle + 1
            point = search.curve[-1]
            handle.log_metrics({k: float(v) for k, v in point.items() if isinstance(v, (int, float)) and k != "round"},
                               step=search.rounds_done)
            line(f"round {search.rounds_done}: {len(new)} new, best {point['best']:.3f} on {len(train_keys)} training "
                 f"states, front {point['front']}, {point['evaluations']} episodes", force=True)
            if idle >= STALL_ROUNDS:
                line(f"no proposer had a new strategy in {STALL_ROUNDS} rounds: stopping after round "
                     f"{search.rounds_done}", force=True)
                break
        best = search.best()
        start_text = search.candidates[0].text
        with err_console.status(f"held-out: {len(held)} start states"):
            held_start = _mean_success(evaluate_at(start_text, held, held_seed))
            held_best = held_start if best.text == start_text else _mean_success(evaluate_at(best.text, held, held_seed))
        handle.log_metrics({"heldout_start": held_start, "heldout_best": held_best, "train_best": best.mean})
        line(f"best (version {best.version}, {best.proposer}, round {best.round}): training {best.mean:.3f}, "
             f"held-out {held_best:.3f} (start strategy {held_start:.3f})", force=True)
        return {"best_version": best.version, "best_text": best.text, "best_proposer": best.proposer,
                "train_best": best.mean, "train_start": search.candidates[0].mean, "heldout_start": held_start,
                "heldout_best": held_best, "rounds": search.rounds_done, "candidates": len(search.candidates),
                "evaluations": search.evaluations, "answers_per_state": search.answers_per_state,
                "train_states": len(train_keys), "heldout_states": len(held_keys),
                "curve": search.curve, "search_file": str(handle.dir / SEARCH_FILE)}


def _saver(handle: Any, search: Any, env: str) -> Any:
    """Saves a round's new candidates as strategy versions of `env` (with their training
    score), then the whole search to the run folder."""

    def save(new: Sequence[Any]) -> None:
        for c in new:
            if c.version is None:
                parent = search.candidates[c.parent].version if c.parent is not None else None
                c.version = handle.registry.save_prompt(
                    c.text, name=f"search {handle.run_id}", note=f"{c.proposer}, round {c.round}: {c.mean:.0%} of "
                    f"{len(c.scores)} training states", parent_version=parent, score=c.mean, run_id=handle.run_id,
                    env=env)
        path = handle.dir / SEARCH_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(search.to_json()))
        tmp.replace(path)
        handle.registry.add_artifact(handle.run_id, SEARCH_ARTIFACT, str(path), step=search.rounds_done,
                                     meta={"rounds": search.rounds_done, "candidates": len(search.candidates)})

    return save


def _sampler(model: Any, text_env: Any, world: dict[str, Any], config: StrategySearchConfig, search: Any) -> Any:
    """The demos proposer's sampled attempts: temperature 1, and a rollout seed of its own
    per call (from the episodes played so far, so a resumed search does not replay them)."""
    sample_at = evaluator(model, text_env, world, config, temperature=1.0)

    def sample(text: str, starts: Sequence[Any]) -> list[Any]:
        return sample_at(text, starts, SAMPLE_SEED_BASE + config.seed * 1_000_003 + search.evaluations)

    return sample


def _mean_success(episodes: Sequence[Any]) -> float:
    return sum(e.success for e in episodes) / len(episodes) if episodes else 0.0


STRATEGY_SEARCH = Job(kind="strategy", command="strategy search", config=StrategySearchConfig,
                      run=run_strategy_search, title="Strategy search",
                      name=lambda c: f"strategy search {c.model.actor} {c.proposers}",
                      precheck=precheck_engine, prepare=_prepare, resume_field="resume_from",
                      doc="""Search the strategy prompt (no weight update): propose -> evaluate -> keep.

    Each round every proposer (edits, demos, llm) proposes --per-round strategies from
    the search so far; each is played greedily from every training start state and
    scored per state; parents come from the Pareto front over those states (GEPA).
    Every candidate is saved as a strategy version with its training score (the
    console's strategy editor lists them ranked; any job takes --strategy VERSION).
    The best is reported on held-out start states the search never saw. search.json in
    the run folder keeps the search after every whole round: `runs resume RUN`
    continues from there.
    """)


# ---- bench strategy: each proposer alone, over seeds, with the same budget ------------------------

@dataclass
class BenchStrategyConfig(StrategySearchConfig):
    """A strategy search per (proposer, seed) cell, each with the same minutes: which
    proposer pays, measured on held-out start states."""

    budget_min: float | None = option(30.0, "Minutes per cell (a round starts only while minutes are left).",
                                      min=0.1)
    rounds: int = option(10_000, "Rounds per cell at most (the minutes usually end a cell first).", min=1,
                         max=10_000)
    seeds: str = option("0", "Seeds of the cells, e.g. 0,1,2 (each its own split, proposals and deals).")
    resume_from: str | None = option(None, "Continue this stopped bench: its finished cells are kept, the rest run. "
                                           "`lactchain runs resume RUN` passes it.")
    cells_from: str | None = option(None, "Keep the finished cells in this folder (a bench's run folder, or a copy "
                                          "such as docs/results/NAME, from any machine): the cells of this bench "
                                          "run with its settings are not run again.")

    def seed_list(self) -> list[int]:
        from lactchain.bench.compare import parse_list

        return parse_list(self.seeds, "seeds", int, 20)

    def check(self) -> None:
        super().check()
        try:
            seeds = self.seed_list()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if any(not 0 <= s <= SEED_MAX for s in seeds):
            self.refuse("seeds", f"every seed must be from 0 to {SEED_MAX}")
        check_cells_from(self)

    def cells(self) -> list[tuple[str, int]]:
        """(proposer, seed) of every cell, seed by seed (a stopped bench already compares every proposer)."""
        return [(name, seed) for seed in self.seed_list() for name in self.names()]

    def cell_config(self, name: str, seed: int) -> StrategySearchConfig:
        return self.project(StrategySearchConfig, proposers=name, seed=seed, resume_from=None)

    def cell_settings(self, name: str, seed: int) -> dict[str, Any]:
        """What the cell (proposer, seed) runs with beyond its key: a kept cell must match."""
        return cell_settings(STRATEGY_CELLS, self.cell_config(name, seed).record_params())

    def kept_cells(self) -> list[dict[str, Any]]:
        """The finished cells of --cells-from this bench keeps (ValueError: one of its plan
        was run with other settings)."""
        if self.cells_from is None:
            return []
        return keep_cells(STRATEGY_CELLS, self.cells_from, [f"{name}-seed{seed}" for name, seed in self.cells()],
                          lambda c: self.cell_settings(c["proposer"], c["seed"]))


def _prepare_bench(registry: Any, config: BenchStrategyConfig) -> dict[str, Any]:
    """The split holds; a resumed bench must be a run of this registry (its cells are kept)."""
    extra = prepare_engine(registry, config)
    _check_split(config)
    if config.resume_from is not None:
        config.resume_from = registry.resolve_run_id(config.resume_from)
        extra["resume_from"] = config.resume_from
    return extra


def run_bench_strategy(handle: Any, config: BenchStrategyConfig) -> dict[str, Any]:
    """Every (proposer, seed) cell as a strategy-search child run; a resume keeps the
    finished cells. Writes bench_strategy.json, .png (best training score against
    episodes played, mean and min-max band over seeds) and .md (held-out success)."""
    reg = handle.registry
    plan = [(f"{name}-seed{seed}", (name, seed)) for name, seed in config.cells()]

    def run_cell(n: int, key: str, cell: tuple[str, int]) -> dict[str, Any]:
        name, seed = cell
        cell_config = config.cell_config(name, seed)
        with run_context(reg, "strategy", name=f"bench strategy cell {key}", params=cell_config.record_params(),
                         parent_id=handle.run_id, quiet=True) as child:
            out = run_strategy_search(child, cell_config)
        return {"proposer": name, "seed": seed, "run_id": child.run_id,
                **{k: out[k] for k in ("curve", "train_start", "train_best", "heldout_start", "heldout_best",
                                       "evaluations", "answers_per_state", "rounds", "best_version", "best_text")},
                "settings": config.cell_settings(name, seed)}

    def report(n: int, cell: dict[str, Any]) -> None:
        handle.log_metrics({f"{cell['key']}/heldout_best": float(cell["heldout_best"])}, step=n)
        err_console.print(f"cell {n}/{len(plan)} {cell['key']}: held-out {cell['heldout_start']:.3f} -> "
                          f"{cell['heldout_best']:.3f} in {cell['wall_min']:.1f} min")

    results = run_cells(handle, config, plan, run_cell, report)
    rows = summarize_cells(results)
    title = f"bench strategy {config.proposers} ({config.budget_min:g} min per cell, {config.world.env})"
    paths = {"json": handle.dir / "bench_strategy.json", "png": handle.dir / "bench_strategy.png",
             "md": handle.dir / "bench_strategy.md"}
    summary = {"budget_min": config.budget_min, "actor": config.model.actor, "env": config.world.env,
               "scene": config.world.scene, "cells": results, "table": rows}
    paths["json"].write_text(json.dumps(summary, indent=2, default=str) + "\n")
    plot_cells(results, paths["png"], title)
    paths["md"].write_text(markdown_cells(rows, title))
    for kind, path in paths.items():
        reg.add_artifact(handle.run_id, "plot" if kind == "png" else "report", path, meta={"what": f"bench {kind}"})
    return {**summary, **{f"bench_{k}": str(p) for k, p in paths.items()}}


SUMMARY_KEYS = ("heldout_start", "heldout_best", "train_best", "answers_per_state", "evaluations", "wall_min")


def summarize_cells(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per proposer: held-out and training success as mean, min and max over seeds."""
    from lactchain.bench.compare import spread

    rows = []
    for name in dict.fromkeys(c["proposer"] for c in cells):
        group = [c for c in cells if c["proposer"] == name]
        rows.append({"proposer": name, "seeds": [c["seed"] for c in group],
                     **{k: spread([c.get(k) for c in group]) for k in SUMMARY_KEYS}})
    return rows


def markdown_cells(rows: Sequence[dict[str, Any]], title: str) -> str:
    def cell(s: dict[str, Any], fmt: str = "{:.3f}") -> str:
        if s["mean"] is None:
            return "-"
        return fmt.format(s["mean"]) + (f" [{fmt.format(s['min'])}-{fmt.format(s['max'])}]" if s["n"] > 1 else "")

    lines = [f"# {title}", "", "| proposer | seeds | held-out: start strategy | held-out: best found | "
             "training: best | greedy answers per state | episodes played | minutes |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['proposer']} | {','.join(map(str, r['seeds']))} | {cell(r['heldout_start'])} | "
                     f"{cell(r['heldout_best'])} | {cell(r['train_best'])} | "
                     f"{cell(r['answers_per_state'], '{:.2f}')} | {cell(r['evaluations'], '{:.0f}')} | "
                     f"{cell(r['wall_min'], '{:.1f}')} |")
    return "\n".join(lines) + "\n"


def plot_cells(cells: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Best training score so far against episodes played, one line per proposer: the
    mean over seeds at each round every seed reached, the band from min to max."""
    from lactchain.bench.figures import new_figure, save_figure

    fig, ax = new_figure(figsize=(8, 4.5), dpi=110)
    for name in dict.fromkeys(c["proposer"] for c in cells):
        group = [c for c in cells if c["proposer"] == name and c["curve"]]
        if not group:
            continue
        n = min(len(c["curve"]) for c in group)
        xs = [sum(c["curve"][i]["evaluations"] for c in group) / len(group) for i in range(n)]
        ys = [[c["curve"][i]["best"] for c in group] for i in range(n)]
        line, = ax.plot(xs, [sum(y) / len(y) for y in ys], marker="o", label=name)
        ax.fill_between(xs, [min(y) for y in ys], [max(y) for y in ys], color=line.get_color(), alpha=0.15)
    ax.set_xlabel("episodes played (training states)")
    ax.set_ylabel("best training success so far")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    return save_figure(fig, path)


BENCH_STRATEGY = Job(kind="strategy", command="bench strategy", config=BenchStrategyConfig, run=run_bench_strategy,
                     title="Benchmark the strategy search",
                     name=lambda c: f"bench strategy {c.proposers} x seeds {c.seeds} {c.budget_min:g} min",
                     precheck=precheck_engine, prepare=_prepare_bench, resume_field="resume_from",
                     doc="""Each proposer alone, per seed, with the same minutes: a strategy search per cell.

    The default strategy's and the best found strategy's greedy success on held-out
    start states (never used to choose), the best training score against episodes
    played (mean and min-max over seeds), in bench_strategy.json, .png and .md in the
    run folder. A stopped bench resumes at its first unfinished cell.
    """)
