"""`strategy search`: the strategy prompt searched as a registry job (detach, kill, resume,
log and chart like the others). The search itself is `lactchain.strategy_search`; the
job adds the actor, the world, the training / held-out split, the registry versions and
the run's files (`search.json` after every whole round: what a resume continues)."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lactchain.config import Config, ConfigError, option
from lactchain.jobs.engine import EngineConfig, actor_for_job, precheck_engine, prepare_engine
from lactchain.jobs.output import LineLog, err_console
from lactchain.jobs.parts import SEED_MAX, ActorPart, SceneEnvPart, StrategyPart
from lactchain.jobs.spec import Job
from lactchain.strategy_search import PROPOSERS

SEARCH_FILE = "search.json"
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


def _prepare(registry: Any, config: StrategySearchConfig) -> dict[str, Any]:
    """Enough start states to hold some out; a resumed search must have saved a round."""
    from lactchain.envs.catalog import make_env

    extra = prepare_engine(registry, config)
    probe = make_env(config.world.env, **config.world.env_kwargs())
    total = len(probe.start_states())
    if not getattr(probe, "evaluation_deals", None) and config.train_states >= total:
        raise ConfigError(f"--train-states {config.train_states}: leaves none of the env's {total} start states to "
                          f"hold out; use at most {total - 1}")
    if config.resume_from is None:
        return extra
    from lactchain.resume import latest_checkpoint

    config.resume_from = registry.resolve_run_id(config.resume_from)
    if latest_checkpoint(registry, config.resume_from, SEARCH_ARTIFACT) is None:
        raise ConfigError(f"--resume-from {config.resume_from}: it saved no search (it stopped before its first "
                          "round, as did the runs it resumed); start a new search")
    return {**extra, "resume_from": config.resume_from}


def _split(text_env: Any, config: StrategySearchConfig) -> tuple[list[Any], list[Any], list[str], list[str]]:
    """(training starts, held-out starts, their keys). A dealt env (Blackjack): seeded deals
    (a start of None deals by the episode's seed), training and held-out on disjoint seeds."""
    from lactchain.strategy_search import split_states, state_key

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
    return f"deal {rollout_seed * 1_000_003 + idx}"  # the episode's own seed (lactchain.rollout)


def evaluator(model: Any, text_env: Any, world: dict[str, Any], config: StrategySearchConfig) -> Any:
    """(strategy text, starts, rollout seed) -> the search's Episodes: greedy, constrained."""
    from lactchain.rollout import RolloutConfig, run_rollouts
    from lactchain.strategies import Strategy
    from lactchain.strategy_search import Episode, state_key

    dealt = bool(getattr(text_env, "evaluation_deals", None))

    def evaluate(text: str, starts: Sequence[Any], seed: int) -> list[Any]:
        cfg = RolloutConfig(episodes=len(starts), n_envs=min(config.envs, len(starts)), constrained=True,
                            temperature=0.0, seed=seed, env_kwargs={**world, "max_actions": config.max_actions},
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
    from lactchain.envs.catalog import make_env
    from lactchain.models.actor import Actor
    from lactchain.strategies import resolve_strategy
    from lactchain.strategy_search import (Candidate, DemoProposer, EditProposer, GENERIC_HINTS, LLMProposer,
                                           Search, run_round, score)

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
            from lactchain.resume import latest_checkpoint

            saved = latest_checkpoint(reg, config.resume_from, SEARCH_ARTIFACT)
            search = Search.from_json(json.loads(Path(saved["path"]).read_text()))
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
                proposers.append(DemoProposer())
            else:
                writer = model if config.proposer_actor in (None, config.model.actor) else \
                    Actor.load(config.proposer_actor, moves=model.moves)
                proposers.append(LLMProposer(writer, text_env.judge_description))
        save = _saver(handle, search)
        save([])  # search.json as of now (the start strategy scored: a resume need not score it again)
        t0 = time.time()
        while search.rounds_done < config.rounds:
            handle.check_cancelled()
            if config.budget_min is not None and time.time() - t0 > config.budget_min * 60:
                line(f"budget of {config.budget_min:g} min spent after round {search.rounds_done}", force=True)
                break
            rng = random.Random(config.seed * 1_000_003 + search.rounds_done + 1)
            with err_console.status(f"round {search.rounds_done + 1}/{config.rounds}"):
                new = run_round(search, proposers, config.per_round, train, on_train, rng, handle.check_cancelled)
            save(new)
            point = search.curve[-1]
            handle.log_metrics({k: float(v) for k, v in point.items() if isinstance(v, (int, float)) and k != "round"},
                               step=search.rounds_done)
            line(f"round {search.rounds_done}: {len(new)} new, best {point['best']:.3f} on {len(train_keys)} training "
                 f"states, front {point['front']}, {point['evaluations']} episodes", force=True)
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
                "evaluations": search.evaluations, "train_states": len(train_keys), "heldout_states": len(held_keys),
                "curve": search.curve, "search_file": str(handle.dir / SEARCH_FILE)}


def _saver(handle: Any, search: Any) -> Any:
    """Saves a round's new candidates as strategy versions (with their training score),
    then the whole search to the run folder."""

    def save(new: Sequence[Any]) -> None:
        for c in new:
            if c.version is None:
                parent = search.candidates[c.parent].version if c.parent is not None else None
                c.version = handle.registry.save_prompt(
                    c.text, name=f"search {handle.run_id}", note=f"{c.proposer}, round {c.round}: {c.mean:.0%} of "
                    f"{len(c.scores)} training states", parent_version=parent, score=c.mean, run_id=handle.run_id)
        path = handle.dir / SEARCH_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(search.to_json()))
        tmp.replace(path)
        handle.registry.add_artifact(handle.run_id, SEARCH_ARTIFACT, str(path), step=search.rounds_done,
                                     meta={"rounds": search.rounds_done, "candidates": len(search.candidates)})

    return save


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
