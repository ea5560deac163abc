"""The learning loop as a job: `pipeline` runs lactchain.pipeline over child runs
(train-critic, evaluate, collect, train-actor), resumable at its first unfinished phase."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lactchain.config import option
from lactchain.jobs.checks import resolve_adapter
from lactchain.jobs.engine import check_engine_adapter, choose
from lactchain.jobs.output import err_console
from lactchain.jobs.spec import Job
from lactchain.pipeline import PipelineConfig


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
    config.engine = choose(config.engine, config.actor)


def _prepare(registry: Any, config: PipelineJobConfig) -> dict[str, Any]:
    """The starting adapter, servable by that engine; the engine recorded."""
    check_engine_adapter(config.engine.engine, resolve_adapter(registry, config.adapter), config.engine)
    return config.engine.params()


def run_pipeline_job(handle: Any, config: PipelineJobConfig) -> dict[str, Any]:
    from lactchain.pipeline import load_state, run_pipeline
    from lactchain.strategies import resolve_strategy

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
               name=lambda c: f"pipeline {c.actor} x{c.iterations}", precheck=_precheck, prepare=_prepare,
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

    budget_min: float = option(30.0, "Wall-clock budget in minutes.", min=1.0)
    transfer: bool = option(True, "Also evaluate the trained adapter zero-shot on the env's transfer target (the "
                                  "grid's: the 5x5 grid, all its start states), where the env has one.",
                            negative="--no-transfer")
    iterations: int = option(1000, "Loop iterations: as many as the budget allows.", cli=False)

    def record_params(self) -> dict[str, Any]:
        params = self.params()
        params.pop("transfer", None)
        return params


def plot_curve(curve: list[dict[str, Any]], path: Any, title: str) -> Any:
    """The learning curve (success, optimal ratio, critic and ranking quality, collapse
    share per iteration, against wall time) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _bench_name(config: BenchLearnConfig) -> str:
    return (f"bench learn {config.labeler}/{config.loss} {config.budget_min:g} min"
            + (f" strategy {config.strategy}" if config.strategy else "")
            + (f" on {config.engine.engine}" if config.engine.engine != "hf" else "")
            + (f" {config.env}" if config.env != "grid" else ""))


def run_bench_learn(handle: Any, config: BenchLearnConfig) -> dict[str, Any]:
    import time

    from lactchain.envs.catalog import env_class, make_env
    from lactchain.evaluate import evaluate_actor
    from lactchain.pipeline import load_loop_actor, run_pipeline
    from lactchain.strategies import resolve_strategy

    t0 = time.time()
    strat = resolve_strategy(handle.registry, config.strategy, config.env)
    cfg = config.project(PipelineConfig, strategy=strat.text if config.strategy else None,
                         deadline=t0 + config.budget_min * 60)
    model = load_loop_actor(cfg)
    with err_console.status("bench learn") as status:
        out = run_pipeline(handle, cfg, actor=model, on_phase=lambda it, phase: status.update(
            f"iteration {it}: {phase} ({(time.time() - t0) / 60:.1f} of {config.budget_min:g} min)"))
        result = {"budget_min": config.budget_min, "wall_min": (time.time() - t0) / 60, "actor": cfg.actor,
                  "critic": cfg.critic, "labeler": cfg.labeler, "loss": cfg.loss, "env": cfg.env, **out}
        target = env_class(cfg.env).transfer if config.transfer else None
        if target is not None:
            label, env_kwargs = target
            status.update(f"transfer: {label}")
            t = evaluate_actor(model, states="all", max_actions=cfg.eval_max_actions, n_envs=cfg.n_envs,
                               env_kwargs=env_kwargs, seed=cfg.seed, env=cfg.env,
                               prompt=strat.prompt(model.moves, make_env(cfg.env)))
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


BENCH_LEARN = Job(kind="pipeline", command="bench learn", config=BenchLearnConfig, run=run_bench_learn,
                  title="Learning benchmark", name=_bench_name, precheck=_precheck, prepare=_prepare,
                  doc="""The loop on the default CPU models within a time budget, evaluated greedily on
    every start state of the env (the 4x4 grid's non-goal poses; at most 5 actions)
    after every iteration: the learning curve (success, optimal-move ratio, critic
    Spearman vs V*, ranking accuracy vs the oracle, pairs, collapse share), a PNG of it
    in the run folder, and zero-shot transfer where the env has a target (the grid:
    5x5). `--labeler oracle` is the diagnostic upper bound, not a result. With
    --detach it runs as a background job: its curve is in the run's metrics and PNG.""")
