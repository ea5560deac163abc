"""`lactchain bench learn` (the loop in a time budget) and how `lactchain pipeline` prints
(the job itself: lactchain.jobs.loop).

Both build one `PipelineConfig` (lactchain.pipeline); its fields are the registry
params, so the CLI, the pipeline and the registry agree on names and defaults.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from lactchain.cli.common import (
    DbOption,
    EnvOption,
    JsonOption,
    StrategyOption,
    check_models,
    check_references,
    console,
    err_console,
    fail,
    finite,
    print_json,
)
from lactchain.cli.play_cmd import ActorOption, choose_engine
from lactchain.pipeline import PipelineConfig

_HELP = PipelineConfig.help()
_D = PipelineConfig.defaults()  # the CLI's defaults are the config's, never a second copy

CriticOption = Annotated[str, typer.Option("--critic", help=_HELP["critic"])]
LabelerOption = Annotated[str, typer.Option("--labeler", help=_HELP["labeler"])]
LossOption = Annotated[str, typer.Option("--loss", help=_HELP["loss"])]
SamplesOption = Annotated[int, typer.Option("--samples", "-k", help=_HELP["samples"])]
StatesOption = Annotated[str, typer.Option("--states", help=_HELP["states"])]
CpoAlphaOption = Annotated[float, typer.Option("--cpo-alpha", callback=finite, help=_HELP["cpo_alpha"])]
ActorEpochsOption = Annotated[float, typer.Option("--actor-epochs", callback=finite, help=_HELP["actor_epochs"])]
ActorLrOption = Annotated[float, typer.Option("--actor-lr", callback=finite, help=_HELP["actor_lr"])]
EvalStatesOption = Annotated[str, typer.Option("--eval-states", help=_HELP["eval_states"])]
SeedOption = Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help=_HELP["seed"])]
ExploreOption = Annotated[int, typer.Option("--explore", help=_HELP["explore"])]
EngineOption = Annotated[str, typer.Option("--engine", help=_HELP["engine"])]
CURVE_KEYS = ("success_rate", "mean_optimal_ratio", "critic_spearman_vstar", "ranking_accuracy", "top_answer_share",
              "elites_optimal")


def make_config(**kwargs: Any) -> PipelineConfig:
    """The config, or a one-line error naming the bad option (before any run exists)."""
    try:
        return PipelineConfig(**kwargs)
    except ValueError as exc:
        fail(f"{exc}")
        raise  # pragma: no cover - fail() exits


def render_pipeline(result: dict[str, Any]) -> None:
    table = Table(title=f"pipeline {result['run_id']}")
    for col in ("iteration", "phase", "run", "seconds", "key metrics"):
        table.add_column(col)
    keys = ("success_rate", "mean_optimal_ratio", "top_answer_share", "spearman_vstar", "pairs", "ranking_accuracy",
            "elites_optimal", "train_loss")
    for p in result["phases"]:
        shown = "  ".join(f"{k}={p[k]:.3g}" for k in keys if isinstance(p.get(k), (int, float)))
        table.add_row(str(p["iteration"]), p["phase"], p["run_id"], f"{p['seconds']:.0f}", shown)
    console.print(table)
    render_summary(result)


def render_summary(result: dict[str, Any]) -> None:
    before, after = result.get("before"), result.get("after")
    if before and after:
        shown = [f"{label} {before[key]:.3f} -> {after[key]:.3f}"
                 for key, label in (("success_rate", "success rate"), ("mean_optimal_ratio", "optimal ratio"),
                                    ("optimal_move_rate", "optimal first move"), ("mean_return", "mean return"),
                                    ("greedy_expected_return", "exact expected return"))
                 if isinstance(before.get(key), (int, float)) and isinstance(after.get(key), (int, float))]
        console.print("; ".join(shown))
    if result.get("transfer"):
        t = result["transfer"]
        console.print(f"transfer to {t['grid']}: success {t['success_rate']:.3f}, optimal ratio "
                      f"{t['mean_optimal_ratio']:.3f} over {t['states']} start states")
    if result.get("curve_png"):
        console.print(f"learning curve: {result['curve_png']}")


def plot_curve(curve: list[dict[str, Any]], path: Path, title: str) -> Path:
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


def bench_learn(
        budget_min: Annotated[float, typer.Option("--budget-min", callback=finite, min=1.0, help="Wall-clock budget in minutes.")] = 30.0,
        actor: ActorOption = "smollm2-135m",
    critic: CriticOption = _D["critic"],
    labeler: LabelerOption = _D["labeler"],
    loss: LossOption = _D["loss"],
    samples: SamplesOption = _D["samples"],
    cpo_alpha: CpoAlphaOption = _D["cpo_alpha"],
    actor_epochs: ActorEpochsOption = _D["actor_epochs"],
    actor_lr: ActorLrOption = _D["actor_lr"],
    explore: ExploreOption = _D["explore"],
    engine: EngineOption = _D["engine"],
        strategy: StrategyOption = None,
        transfer: Annotated[bool, typer.Option("--transfer/--no-transfer", help="Also evaluate the trained adapter zero-shot on the env's transfer target (the grid's: the 5x5 grid, all its start states), where the env has one.")] = True,
    seed: SeedOption = _D["seed"],
        env: EnvOption = "grid",
        db: DbOption = None,
        as_json: JsonOption = False,
) -> None:
    """The loop on the default CPU models within a time budget, evaluated greedily on
    every start state of the env (the 4x4 grid's non-goal poses; at most 5 actions)
    after every iteration: the learning curve (success, optimal-move ratio, critic
    Spearman vs V*, ranking accuracy vs the oracle, pairs, collapse share), a PNG of it
    in the run folder, and zero-shot transfer where the env has a target (the grid:
    5x5). `--labeler oracle` is the diagnostic upper bound, not a result."""
    from lactchain.cli.common import open_registry
    from lactchain.envs.catalog import actor_moves, env_class, make_env
    from lactchain.evaluate import evaluate_actor
    from lactchain.jobs import run_context
    from lactchain.models.actor import Actor
    from lactchain.pipeline import run_pipeline

    t0 = time.time()
    cfg = make_config(actor=actor, critic=critic, labeler=labeler, loss=loss, samples=samples, cpo_alpha=cpo_alpha,
                      actor_epochs=actor_epochs, actor_lr=actor_lr, explore=explore, iterations=1000, seed=seed,
                      deadline=t0 + budget_min * 60, engine=choose_engine(engine, None, actor, None, db).engine,
                      env=env)
    check_models(cfg.actor, cfg.critic if cfg.labeler == "critic" else None)
    registry = open_registry(db)
    strat = check_references(registry, {"strategy": strategy, "env": cfg.env})
    cfg = replace(cfg, strategy=strat.text if strategy else None)
    name = (f"bench learn {labeler}/{loss} {budget_min:g} min" + (f" strategy {strat.label}" if strategy else "")
            + (f" on {cfg.engine}" if cfg.engine != "hf" else ""))
    params = {**cfg.params(), "budget_min": budget_min, **strat.params()}
    with run_context(registry, "pipeline", name=name, params=params) as handle:
        model = Actor.load(cfg.actor, **actor_moves(cfg.env))
        with err_console.status("bench learn") as status:
            out = run_pipeline(handle, cfg, actor=model, on_phase=lambda it, phase: status.update(
                f"iteration {it}: {phase} ({(time.time() - t0) / 60:.1f} of {budget_min:g} min)"))
            result = {"run_id": handle.run_id, "budget_min": budget_min, "wall_min": (time.time() - t0) / 60,
                      "actor": actor, "critic": critic, "labeler": labeler, "loss": loss,
                      **{k: v for k, v in out.items() if k != "phases"}}
            target = env_class(cfg.env).transfer if transfer else None
            if target is not None:
                label, env_kwargs = target
                status.update(f"transfer: {label}")
                t = evaluate_actor(model, states="all", max_actions=cfg.eval_max_actions, n_envs=cfg.n_envs,
                                   env_kwargs=env_kwargs, seed=seed, env=cfg.env,
                                   prompt=strat.prompt(model.moves, make_env(cfg.env)))
                result["transfer"] = {"grid": label, **{k: t[k] for k in ("states", "success_rate",
                                                                          "mean_optimal_ratio", "mean_return",
                                                                          "top_answer_share")}}
                handle.log_metrics({f"transfer_{label}/{k}": float(t[k]) for k in ("success_rate",
                                                                                   "mean_optimal_ratio")})
        png = plot_curve(out["curve"], Path(handle.dir) / "learning_curve.png", name)
        registry.add_artifact(handle.run_id, "plot", png, meta={"what": "learning curve"})
        result["curve_png"] = str(png)
        for row in out["curve"]:
            handle.log_metrics({f"curve/{k}": float(row[k]) for k in CURVE_KEYS if row.get(k) is not None},
                               step=row["iteration"])
    if as_json:
        print_json(result)
    else:
        render_pipeline({**result, "phases": out["phases"]})
