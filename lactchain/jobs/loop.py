"""The learning loop as a job: `pipeline` runs lactchain.loop.pipeline over child runs
(train-critic, evaluate, collect, train-actor), resumable at its first unfinished phase."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lactchain.bench.carried_cells import COMPARE_CELLS, cell_settings, keep_cells
from lactchain.config import SEED_MAX, ConfigError, default_of, flat_fields, flat_names, option
from lactchain.envs.catalog import env_class, make_env
from lactchain.envs.scenes import get_scene
from lactchain.envs.world import scene_spec, world_kwargs
from lactchain.jobs.cells import check_cells_from, finished_cells, run_cells
from lactchain.jobs.checks import resolve_adapter, run_of_kind
from lactchain.jobs.engine import check_engine_adapter, check_spelling, choose
from lactchain.jobs.output import err_console
from lactchain.jobs.spec import Job
from lactchain.runs.lifecycle import PROGRESS_METRIC, Cancelled, run_context
from lactchain.loop.config import LOOP_LOSS_SETTINGS, LOSSES, LoopEngineConfig, PipelineConfig, unread_settings
from lactchain.loop.bookkeeping import STATE_FILE, PipelineResult, load_state
from lactchain.loop.pipeline import load_loop_actor, run_pipeline
from lactchain.machine import code_version, machine_info


@dataclass
class PipelineJobConfig(PipelineConfig):
    """The loop's config plus where a resume continues from."""

    resume_from: str | None = option(None, "Continue this killed or failed pipeline run at its first unfinished "
                                           "phase: its finished phases (and their child runs) are kept, with their "
                                           "elites, critic and adapter. `lactchain runs resume RUN` passes it.")

    def record_params(self) -> dict[str, Any]:
        params = self.params()
        params.pop("resume_from", None)
        return {**params, **({"resume_from": self.resume_from} if self.resume_from else {})}


def _precheck(config: PipelineJobConfig) -> None:
    """The rollout engine checked, auto resolved to the one that will run."""
    check_spelling(config)
    config.engine = choose(config.engine, config.actor, config.env)


def _prepare(registry: Any, config: PipelineJobConfig) -> dict[str, Any]:
    """The starting adapter, servable by that engine; the engine recorded. A resume first
    finds the files its saved state goes on from."""
    if config.resume_from:
        _check_resume_state(registry, config.resume_from)
    check_engine_adapter(config.engine.engine, resolve_adapter(registry, config.adapter), config.engine)
    return config.engine.params()


# What a resume may change: how it generates and trains on this machine, not what it computes.
RESUME_MAY_CHANGE = frozenset({*flat_names(LoopEngineConfig), "n_envs", "train_bf16", "train_compile", "resume_from",
                               "strategy"})  # the strategy: compared by the text it renders


def _prepare_pipeline(registry: Any, config: PipelineJobConfig) -> dict[str, Any]:
    """`_prepare`, a resume first checked to be one (a comparison's resume keeps its
    finished cells instead: `check_cells_from`)."""
    if config.resume_from:
        _check_resumable(registry, config)
    return _prepare(registry, config)


def _check_resumable(registry: Any, config: PipelineJobConfig) -> None:
    """`pipeline --resume-from RUN`: a KILLED or FAILED pipeline not already carried to
    its end (as `runs resume` requires), given the settings it ran with: a resume with
    another world, loss or seed would mix two experiments in one lineage (once it failed
    inside a new run, or silently switched the loss)."""
    from lactchain.runs.resume import NotResumable, check_resumable
    from lactchain.strategy.strategies import resolve_strategy

    run = run_of_kind(registry, "--resume-from", config.resume_from, ("pipeline",))
    try:
        check_resumable(registry, run)
    except NotResumable as exc:
        raise ConfigError(f"--resume-from {config.resume_from}: {exc}") from None
    ran, now = registry.params(run["id"]), config.record_params()
    differ = [k for k in now if k not in RESUME_MAY_CHANGE and k in ran and ran[k] != now[k]]
    text = resolve_strategy(registry, config.strategy, config.env).text
    if ran.get("strategy_text") is not None and text != ran["strategy_text"]:
        differ.append("strategy")
    if differ:
        said = "; ".join(f"--{k.replace('_', '-')} " + ("another text" if k == "strategy" else
                                                        f"{now[k]!r} (it ran with {ran[k]!r})") for k in differ)
        raise ConfigError(f"--resume-from {run['id']}: {said}: a resume goes on with the settings its run ran "
                          f"with; give those, or let `lactchain runs resume {run['id']}` take them")


def _check_resume_state(registry: Any, run_id: str) -> None:
    """The adapter and critic checkpoint a stopped pipeline goes on from must still be
    there (a phase run deleted with `runs delete --force` takes them): a ConfigError
    before any run exists, not a resume that fails on loading."""
    try:
        state = load_state(registry, run_id) or {}
    except ValueError as exc:
        raise ConfigError(f"--resume-from {run_id}: {exc}") from None
    for key, what in (("adapter", "actor adapter"), ("critic", "critic checkpoint")):
        path = state.get(key)
        if path and not Path(path).exists():
            raise ConfigError(f"--resume-from {run_id}: its {what} {path} is gone (its phase run was deleted?); "
                              "start the pipeline again")
    pending = state.get("pending") or {}
    trained = {p.get("iteration") for p in state.get("phases", []) if p.get("phase") == "train-actor"}
    pairs_run = pending.get("pairs_run")
    if pairs_run and pending.get("iteration") not in trained:  # the collect its next train-actor trains on
        try:
            registry.get_run(pairs_run)
        except (KeyError, ValueError):
            raise ConfigError(f"--resume-from {run_id}: the pairs its iteration {pending.get('iteration')} trains on "
                              f"(collect run {pairs_run}) are gone (the phase run was deleted?); start the pipeline "
                              "again") from None


def run_pipeline_job(handle: Any, config: PipelineJobConfig) -> dict[str, Any]:
    from lactchain.strategy.strategies import resolve_strategy

    resume_from = config.resume_from
    state = load_state(handle.registry, resume_from) if resume_from else None
    if resume_from:
        kept = len(state["phases"]) if state else 0
        err_console.print(f"resuming {resume_from}: {kept} finished phase(s) kept" if kept else
                          f"resuming {resume_from}: no phase had finished; starting from the beginning")
    start_adapter = (state or {}).get("adapter") or resolve_adapter(handle.registry, config.adapter)
    text = resolve_strategy(handle.registry, config.strategy, config.env).text if config.strategy else None
    run_cfg = config.project(PipelineConfig, adapter=start_adapter, strategy=text)
    with err_console.status("pipeline") as status:
        return run_pipeline(handle, run_cfg, resume=state,
                            on_phase=lambda it, name: status.update(f"iteration {it}: {name}"))


PIPELINE = Job(kind="pipeline", command="pipeline", config=PipelineJobConfig, run=run_pipeline_job, title="Pipeline",
               name=lambda c: f"pipeline {c.actor} x{c.iterations}", precheck=_precheck, prepare=_prepare_pipeline,
               resume_field="resume_from",
               doc="""Run the loop: train a critic by TD on random move lists, then repeat
    collect (K samples + greedy + elite per start state, ranked by the labeler)
    -> train-actor -> evaluate. Each phase is a child run of one pipeline run; the
    LoRA adapter continues across iterations. A baseline evaluation comes first,
    so the result says before and after. On a stochastic env (--env blackjack) every
    candidate of a start state is played on the same --deals deals.""")


# ---- bench learn: the loop in a time budget, with its learning curve ------------------------------

CURVE_KEYS = ("success_rate", "mean_optimal_ratio", "critic_spearman_vstar", "ranking_accuracy", "top_answer_share",
              "elites_optimal")


@dataclass
class BenchLearnConfig(PipelineConfig):
    """The loop's config with a wall-clock budget instead of a number of iterations."""

    HELP_PANELS = {**PipelineConfig.HELP_PANELS,
                   "Transfer": ("transfer", "transfer_scene", "transfer_max_actions"),
                   "Comparison": ("compare", "seeds", "budget_iterations", "resume_from", "cells_from")}

    budget_min: float = option(30.0, "Wall-clock budget in minutes.", min=1.0)
    transfer: bool = option(True, "Also evaluate the trained adapter zero-shot on the env's transfer target (the "
                                  "grid's: the 5x5 grid, all its start states), where the env has one.",
                            negative="--no-transfer")
    transfer_scene: str | None = option(None, "The transfer target: a scene (flat, rooms, maze or a scene JSON file), "
                                              "all its start states. Default: the env's own target (the grid's: the "
                                              "5x5 grid).", form="Transfer scene")
    transfer_max_actions: int | None = option(None, "Actions per episode on the transfer target (default: "
                                                    "--eval-max-actions; a larger scene needs more).", min=1, max=1000)
    iterations: int = option(1000, "Loop iterations: as many as the budget allows.", cli=False)
    explore: int | str = option(256, "Random move lists per start state added as candidates (env steps, no LLM). "
                                     "With --compare: a comma-separated list, e.g. 0,256 (each a cell).")
    compare: str | None = option(None, "Compare these losses with the same budget, e.g. rft,simpo,dpo,kto,grpo: "
                                       "one pipeline child run per loss x --explore x --seeds cell, run one after "
                                       "the other; writes compare.json, compare.png and compare.md in the run folder.")
    seeds: str | None = option(None, "With --compare: the seeds of every cell, e.g. 0,1,2 (default: --seed).")
    budget_iterations: int | None = option(None, "Stop each run (or cell) after this many iterations even if "
                                                 "minutes are left (a budget in steps).", min=1, max=10_000)
    resume_from: str | None = option(None, "With --compare: continue this stopped comparison: its finished cells "
                                           "are kept, the rest run. `lactchain runs resume RUN` passes it.")
    cells_from: str | None = option(None, "With --compare: keep the finished cells in this folder (a comparison's run "
                                          "folder, or a copy of its cells such as docs/results/NAME, from any "
                                          "machine): the cells of this comparison run with its settings are not "
                                          "run again.")

    def lists(self) -> tuple[list[str], list[int], list[int]]:
        """(losses, explores, seeds) of --compare / --explore / --seeds; ValueError for a bad list."""
        from lactchain.bench.compare import parse_list

        losses = parse_list(self.compare, "compare", str, len(LOSSES)) if self.compare is not None else []
        explores = parse_list(str(self.explore), "explore", int, 8)
        seeds = parse_list(self.seeds, "seeds", int, 20) if self.seeds is not None else [self.seed]
        return losses, explores, seeds

    def check(self) -> None:
        try:
            losses, explores, seeds = self.lists()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        unknown = [x for x in losses if x not in LOSSES]
        if unknown:
            self.refuse("compare", f"unknown loss {', '.join(unknown)}; use some of {', '.join(LOSSES)}")
        if any(e < 0 for e in explores):
            self.refuse("explore", "must be >= 0 (0 = only the actor's own lists)")
        if any(not 0 <= v <= SEED_MAX for v in seeds):
            self.refuse("seeds", f"every seed must be from 0 to {SEED_MAX}")
        self.explore = explores[0] if len(explores) == 1 else ",".join(map(str, explores))
        if self.transfer_scene is not None:
            try:
                self.transfer_scene = scene_spec(self.transfer_scene)
            except ValueError as exc:
                self.refuse("transfer_scene", str(exc))
            if not getattr(env_class(self.env), "has_scenes", False):
                self.refuse("transfer_scene", f"scenes are the grid's (not {self.env}); drop it")
        if not losses:
            if len(explores) > 1 or self.seeds is not None:
                self.refuse("explore" if len(explores) > 1 else "seeds", "a list of settings needs --compare LOSSES")
            if self.cells_from is not None:
                self.refuse("cells_from", "keeps the cells of a comparison; add --compare LOSSES")
            super().check()
            return
        for loss in losses:  # every cell's own loop config must hold, before any run exists
            for explore in explores:
                self.cell_config(loss, explore, seeds[0])
        check_cells_from(self)

    def cell_settings(self, loss: str, explore: int, seed: int,
                      pinned: dict[str, Any] | None = None) -> dict[str, Any]:
        """What the cell (loss, explore, seed) runs with beyond its key: a kept cell must match.
        Another loss's settings are left out (older cells recorded 0 for an unread NLL weight)."""
        unread = unread_settings(loss)
        params = {k: v for k, v in self.cell_config(loss, explore, seed, pinned).params().items() if k not in unread}
        return cell_settings(COMPARE_CELLS, params, budget_min=self.budget_min,
                             budget_iterations=self.budget_iterations)

    def kept_cells(self) -> list[dict[str, Any]]:
        """The finished cells of --cells-from that this comparison keeps (ValueError: a cell
        of the plan was run with other settings)."""
        from lactchain.bench.compare import cell_key

        if self.cells_from is None:
            return []
        return keep_cells(COMPARE_CELLS, self.cells_from, [cell_key(*c) for c in self.cells()],
                          lambda c: self.cell_settings(c["loss"], c["explore"], c["seed"]))

    def cell_config(self, loss: str, explore: int, seed: int,
                    pinned: dict[str, Any] | None = None) -> PipelineConfig:
        """One comparison cell's loop config: this config with the cell's loss, explore
        and seed (--cpo-alpha, a SimPO setting, reaches the simpo cells only). `pinned`
        (`defaults_ran`) holds what an earlier cell of the loss resolved its unset settings to."""
        names = set(flat_names(PipelineConfig)) - unread_settings(loss)  # another loss's settings: defaults
        # unset ones left out too: the cell's loss resolves its own default (as a command line's would)
        params = {k: v for k, v in self.to_params().items() if k in names and v is not None}
        params.update({k: v for k, v in (pinned or {}).items() if k in names})
        params.update(loss=loss, explore=explore, seed=seed)
        if self.budget_iterations:
            params["iterations"] = self.budget_iterations
        return PipelineConfig.from_params(params)

    def defaults_ran(self, loss: str, finished: list[dict[str, Any]]) -> dict[str, Any]:
        """What the first finished cell of `loss` resolved the settings left unset here to (its
        learning rate, its loss's own settings), as that cell recorded them. The comparison's
        other cells of the loss run with these, so a default changed while a comparison was
        stopped does not split its table: a resumed one runs as it started."""
        legacy = dict(COMPARE_CELLS.ran_before_recorded)
        defaults = {f.name: default_of(f) for _, f in flat_fields(type(self)) if f.name in legacy}
        # Left to a default: unset, or (a setting older cells did not record) at its default.
        unset = {k for k, v in self.to_params().items() if v is None or (k in legacy and v == defaults[k])}
        unset &= {"actor_lr", *LOOP_LOSS_SETTINGS[loss]}
        for cell in finished:
            if cell.get("loss") == loss and isinstance(cell.get("settings"), dict):
                recorded = {**legacy, **cell["settings"]}
                return {k: recorded[k] for k in sorted(unset) if k in recorded}
        return {}

    def cells(self) -> list[tuple[str, int, int]]:
        """(loss, explore, seed) of every cell, in the order they run: seed by seed, so a
        comparison stopped part-way already compares every method on its first seeds."""
        losses, explores, seeds = self.lists()
        return [(loss, e, seed) for seed in seeds for e in explores for loss in losses]

    def record_params(self) -> dict[str, Any]:
        params = self.params()
        params.pop("transfer", None)
        for name in ("compare", "seeds", "budget_iterations", "resume_from", "cells_from", "transfer_scene",
                     "transfer_max_actions"):
            if params.get(name) is None:
                params.pop(name, None)  # a plain bench learn records what it always did
        return params


def plot_curve(curve: list[dict[str, Any]], path: Any, title: str) -> Any:
    """The learning curve (success, optimal ratio, critic and ranking quality, collapse
    share per iteration, against wall time) as a PNG."""
    from lactchain.bench.figures import new_figure, save_figure

    fig, ax = new_figure(figsize=(8, 4.5), dpi=110)
    minutes = [row["wall_s"] / 60 for row in curve]
    for key in CURVE_KEYS:
        ys = [row.get(key) for row in curve]
        if any(y is not None for y in ys):
            ax.plot(minutes, [float("nan") if y is None else y for y in ys], marker="o", label=key)
    ax.axhline(0.9, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("wall time (min)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    return save_figure(fig, path)


def _bench_name(config: BenchLearnConfig) -> str:
    what = f"compare {config.compare} x explore {config.explore}" if config.compare else config.loss
    return (f"bench learn {config.labeler}/{what} {config.budget_min:g} min"
            + (f" strategy {config.strategy}" if config.strategy else "")
            + (f" on {config.engine.engine}" if config.engine.engine != "hf" else "")
            + (f" {config.env}" if config.env != "grid" else ""))


def write_partial(handle: Any, config: BenchLearnConfig) -> Path | None:
    """A stopped benchmark keeps what it measured: the finished phases' learning curve as
    bench_learn.partial.json and learning_curve.partial.png (None: nothing finished)."""
    import json

    try:
        phases = json.loads((handle.dir / STATE_FILE).read_text())["phases"]
    except (OSError, ValueError, KeyError):
        return None
    summary = {"partial": True, "budget_min": config.budget_min, **PipelineResult(phases=phases).summary()}
    path = handle.dir / "bench_learn.partial.json"
    path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    png = plot_curve(summary["curve"], handle.dir / "learning_curve.partial.png",
                     _bench_name(config) + " (partial: stopped)")
    for kind, what in ((path, "partial result"), (png, "partial learning curve")):
        handle.registry.add_artifact(handle.run_id, "plot" if kind == png else "report", kind, meta={"what": what})
    err_console.print(f"stopped: what was measured is in {path} and {png}")
    return path


def transfer_target(config: BenchLearnConfig) -> tuple[str, dict[str, Any]] | None:
    """(label, env kwargs) of the zero-shot transfer evaluation: --transfer-scene, else the
    env's own target (None: the env has none), read the way the loop's states read."""
    if config.transfer_scene is not None:
        return get_scene(config.transfer_scene).name, world_kwargs(config.transfer_scene, config.state_text)
    target = env_class(config.env).transfer
    if target is None:
        return None
    label, kwargs = target
    return label, {**kwargs, **world_kwargs(None, config.state_text)}


def run_bench_learn(handle: Any, config: BenchLearnConfig) -> dict[str, Any]:
    import time

    from lactchain.loop.evaluate import evaluate_actor
    from lactchain.strategy.strategies import resolve_strategy

    if config.compare:
        return run_compare(handle, config)
    t0 = time.time()
    strat = resolve_strategy(handle.registry, config.strategy, config.env)
    cfg = config.project(PipelineConfig, strategy=strat.text if config.strategy else None,
                         deadline=t0 + config.budget_min * 60,
                         iterations=config.budget_iterations or config.iterations)
    model = load_loop_actor(cfg)
    with err_console.status("bench learn") as status:
        try:
            out = run_pipeline(handle, cfg, actor=model, on_phase=lambda it, phase: status.update(
                f"iteration {it}: {phase} ({(time.time() - t0) / 60:.1f} of {config.budget_min:g} min)"))
        except Cancelled:
            write_partial(handle, config)
            raise
        result = {"budget_min": config.budget_min, "wall_min": (time.time() - t0) / 60, "actor": cfg.actor,
                  "critic": cfg.critic, "labeler": cfg.labeler, "loss": cfg.loss, "env": cfg.env,
                  "machine": machine_info(), "code": code_version(), **out}
        target = transfer_target(config) if config.transfer else None
        if target is not None:
            label, env_kwargs = target
            status.update(f"transfer: {label}")
            t = evaluate_actor(model, states="all", max_actions=config.transfer_max_actions or cfg.eval_max_actions,
                               n_envs=cfg.n_envs, env_kwargs=env_kwargs, seed=cfg.seed, env=cfg.env,
                               prompt=strat.prompt(model.moves, make_env(cfg.env, **cfg.env_kwargs())))
            result["transfer"] = {"grid": label, **{k: t[k] for k in ("states", "success_rate", "mean_optimal_ratio",
                                                                      "mean_return", "top_answer_share")}}
            handle.log_metrics({f"transfer_{label}/{k}": float(t[k]) for k in ("success_rate", "mean_optimal_ratio")})
    png = plot_curve(out["curve"], handle.dir / "learning_curve.png", _bench_name(config))
    handle.registry.add_artifact(handle.run_id, "plot", png, meta={"what": "learning curve"})
    result["curve_png"] = str(png)
    for row in out["curve"]:
        handle.log_metrics({f"curve/{k}": float(row[k]) for k in CURVE_KEYS if row.get(k) is not None},
                           step=row["iteration"])
    return result


def run_compare(handle: Any, config: BenchLearnConfig) -> dict[str, Any]:
    """Every (loss, explore, seed) cell of `config`, one after the other (`jobs.cells.run_cells`),
    each a pipeline child run with the same budget; a cell kept from the comparison this one
    resumes is not run again. Writes compare.json, compare.png and compare.md."""
    import time

    from lactchain.bench.compare import cell_key
    from lactchain.strategy.strategies import resolve_strategy

    reg = handle.registry
    strat = resolve_strategy(reg, config.strategy, config.env)
    plan = [(cell_key(*cell), cell) for cell in config.cells()]

    def run_cell(n: int, key: str, cell: tuple[str, int, int]) -> dict[str, Any]:
        loss, explore, seed = cell
        t0 = time.time()
        pinned = config.defaults_ran(loss, finished_cells(handle))
        settings = config.cell_settings(loss, explore, seed, pinned)
        today = config.cell_settings(loss, explore, seed) if pinned else settings
        changed = [f"{k.replace('_', '-')} {settings.get(k)!r} (default now: {today.get(k)!r})"
                   for k in pinned if settings.get(k) != today.get(k)]
        if changed:
            err_console.print(f"cell {key} runs as this comparison's finished {loss} cells ran: {', '.join(changed)}")
        cfg = config.cell_config(loss, explore, seed, pinned).replace(
            strategy=strat.text if config.strategy else None, deadline=t0 + config.budget_min * 60)
        with err_console.status(f"cell {n}/{len(plan)}: {key}") as status, \
                run_context(reg, "pipeline", name=f"compare cell {key}", params=cfg.params(),
                            parent_id=handle.run_id, quiet=True) as child:
            out = run_pipeline(child, cfg, actor=load_loop_actor(cfg), on_phase=lambda it, phase: status.update(
                f"cell {n}/{len(plan)} {key}: iteration {it} {phase} ({(time.time() - t0) / 60:.1f} of "
                f"{config.budget_min:g} min)"), on_progress=lambda fraction: handle.log_metrics(
                {PROGRESS_METRIC: (n - 1 + fraction) / len(plan)}))  # the cells before it (run or kept) done
        return {"loss": loss, "explore": explore, "seed": seed, "run_id": child.run_id, "curve": out["curve"],
                "before": out.get("before"), "after": out.get("after"),
                "settings": settings}

    def report(n: int, cell: dict[str, Any]) -> None:
        final = cell["curve"][-1]
        handle.log_metrics({f"{cell['key']}/success_rate": float(final["success_rate"] or 0.0)}, step=n)
        err_console.print(f"cell {n}/{len(plan)} {cell['key']}: success {cell['curve'][0]['success_rate']:.2f} -> "
                          f"{final['success_rate']:.2f} in {cell['wall_min']:.1f} min")

    results = run_cells(handle, config, plan, run_cell, report,  # finished cells marked partial on a cancel
                        on_cancel=lambda done: write_compare(handle, config, done, partial=True))
    return write_compare(handle, config, results)


def write_compare(handle: Any, config: BenchLearnConfig, results: list[dict[str, Any]],
                  partial: bool = False) -> dict[str, Any]:
    """compare.json, .png and .md of the finished cells (compare.partial.* for a stopped one)."""
    import json

    from lactchain.bench.compare import machines_line, markdown, plot, summarize

    title = (f"bench learn --compare {config.compare} ({config.budget_min:g} min"
             + (f", <= {config.budget_iterations} iterations" if config.budget_iterations else "") + " per cell)"
             + (f" (partial: {len(results)} of {len(config.cells())} cells)" if partial else ""))
    rows = summarize(results)
    summary = {"budget_min": config.budget_min, "budget_iterations": config.budget_iterations, "env": config.env,
               "actor": config.actor, "critic": config.critic, "labeler": config.labeler, "cells": results,
               "table": rows, **({"partial": True} if partial else {})}
    stem = "compare.partial" if partial else "compare"
    paths = {kind: handle.dir / f"{stem}.{kind}" for kind in ("json", "png", "md")}
    paths["json"].write_text(json.dumps(summary, indent=2, default=str) + "\n")
    plot(results, paths["png"], title)
    paths["md"].write_text(markdown(rows, title) + "\n" + machines_line(results))
    for kind, path in paths.items():
        handle.registry.add_artifact(handle.run_id, "plot" if kind == "png" else "report", path,
                                     meta={"what": f"compare {kind}" + (" (partial)" if partial else "")})
    if partial:
        err_console.print(f"stopped: the {len(results)} finished cell(s) are in {paths['json']} and {paths['png']}")
    return {**summary, "compare_json": str(paths["json"]), "compare_png": str(paths["png"]),
            "compare_md": str(paths["md"])}


BENCH_LEARN = Job(kind="pipeline", command="bench learn", config=BenchLearnConfig, run=run_bench_learn,
                  title="Learning benchmark", name=_bench_name, precheck=_precheck, prepare=_prepare,
                  resume_field="resume_from",
                  doc="""The loop on the default CPU models within a time budget, evaluated greedily on
    every start state of the env (the 4x4 grid's non-goal poses; at most 5 actions)
    after every iteration: the learning curve (success, optimal-move ratio, critic
    Spearman vs V*, ranking accuracy vs the oracle, pairs, collapse share), a PNG of it
    in the run folder, and zero-shot transfer where the env has a target (the grid:
    5x5). `--labeler oracle` is the diagnostic upper bound, not a result. With
    --detach it runs as a background job: its curve is in the run's metrics and PNG.
    --compare LOSSES runs one cell per loss x --explore x --seeds with the same budget
    (resumable cell by cell) and writes compare.json, compare.png and compare.md.""")
