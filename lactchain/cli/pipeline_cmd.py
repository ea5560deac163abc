"""`lactchain pipeline` and `lactchain bench learn`: the whole loop, end to end."""

from __future__ import annotations

import time
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from lactchain.cli.common import DbOption, DetachOption, JsonOption, RunIdOption, console, err_console, print_json, run_job
from lactchain.cli.play_cmd import ActorOption, AdapterOption, ConstrainedOption, resolve_adapter


def render_pipeline(result: dict[str, Any]) -> None:
    table = Table(title=f"pipeline {result['run_id']}")
    for col in ("iteration", "phase", "run", "seconds", "key metrics"):
        table.add_column(col)
    keys = ("success_rate", "mean_optimal_ratio", "spearman_vstar", "pairs", "train_loss", "parse_failure_rate")
    for p in result["phases"]:
        shown = "  ".join(f"{k}={p[k]:.3g}" for k in keys if isinstance(p.get(k), (int, float)))
        table.add_row(str(p["iteration"]), p["phase"], p["run_id"], f"{p['seconds']:.0f}", shown)
    console.print(table)
    if result.get("before") and result.get("after"):
        console.print(f"success rate {result['before']['success_rate']:.3f} -> {result['after']['success_rate']:.3f}; "
                      f"optimal ratio {result['before']['mean_optimal_ratio']:.3f} -> {result['after']['mean_optimal_ratio']:.3f}")


def pipeline_cmd(
    ctx: typer.Context,
    actor: ActorOption = "smollm2-135m",
    adapter: AdapterOption = None,
    critic: Annotated[str, typer.Option("--critic", help="Critic backbone preset (minilm-l6, tiny, sfr-embedding-mistral) or path.")] = "minilm-l6",
    iterations: Annotated[int, typer.Option("--iterations", "-i", min=1, help="Loop iterations.")] = 1,
    loss: Annotated[str, typer.Option("--loss", help="simpo, dpo or kto.")] = "simpo",
    episodes: Annotated[int, typer.Option("--episodes", min=1, help="Play episodes per iteration (critic data).")] = 16,
    pair_states: Annotated[int, typer.Option("--pair-states", min=1, help="Start states sampled for pairs per iteration.")] = 24,
    samples: Annotated[int, typer.Option("--samples", "-k", min=2, help="Move lists drawn per pair state.")] = 4,
    critic_epochs: Annotated[int, typer.Option("--critic-epochs", min=1)] = 3,
    actor_epochs: Annotated[float, typer.Option("--actor-epochs", min=0.1)] = 2.0,
    eval_states: Annotated[str, typer.Option("--eval-states", help="'all' non-goal states or a number.")] = "24",
    constrained: ConstrainedOption = True,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the loop: play -> train-critic -> collect-pairs -> train-actor -> evaluate,
    repeated; each phase is a child run of one pipeline run and each iteration
    starts from the adapter the previous one trained. A baseline evaluation comes
    first, so the result says before and after."""
    if loss not in ("simpo", "dpo", "kto"):
        raise typer.BadParameter("must be simpo, dpo or kto", param_hint="--loss")
    if eval_states != "all" and not eval_states.isdigit():
        raise typer.BadParameter("must be 'all' or a number", param_hint="--eval-states")
    params = dict(actor=actor, adapter=adapter, critic=critic, iterations=iterations, loss=loss, episodes=episodes,
                  pair_states=pair_states, samples=samples, critic_epochs=critic_epochs, actor_epochs=actor_epochs,
                  eval_states=eval_states, constrained=constrained, seed=seed)

    def body(handle) -> dict[str, Any]:
        from lactchain.pipeline import PipelineConfig, run_pipeline

        cfg = PipelineConfig(actor=actor, adapter=resolve_adapter(handle.registry, adapter), critic=critic,
                             iterations=iterations, loss=loss, play_episodes=episodes, pair_states=pair_states,
                             pair_samples=samples, critic_epochs=critic_epochs, actor_epochs=actor_epochs,
                             eval_states=eval_states if eval_states == "all" else int(eval_states),
                             constrained=constrained, seed=seed)
        with err_console.status("pipeline") as status:
            return run_pipeline(handle, cfg, on_phase=lambda it, name: status.update(f"iteration {it}: {name}"))

    run_job(ctx, kind="pipeline", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"pipeline {actor} x{iterations}", render=render_pipeline)


def bench_learn(
    ctx: typer.Context,
    budget_min: Annotated[float, typer.Option("--budget-min", min=1.0, help="Wall-clock budget in minutes.")] = 20.0,
    actor: ActorOption = "smollm2-135m",
    critic: Annotated[str, typer.Option("--critic", help="Critic backbone preset.")] = "minilm-l6",
    loss: Annotated[str, typer.Option("--loss")] = "simpo",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """The pipeline on the default CPU models within a time budget: success rate and
    optimal ratio before and after, critic Spearman vs V*, parse-failure rate and
    wall time per phase. Iterations continue while the budget lasts."""
    from lactchain.cli.common import open_registry
    from lactchain.jobs import run_context
    from lactchain.pipeline import PipelineConfig, run_pipeline

    t0 = time.time()
    # Default sizes: one iteration of smollm2-135m + minilm-l6 takes ~3-5 CPU minutes.
    cfg = PipelineConfig(actor=actor, critic=critic, loss=loss, iterations=1000, seed=seed,
                         deadline=t0 + budget_min * 60)
    registry = open_registry(db)
    with run_context(registry, "pipeline", name=f"bench learn {budget_min:g} min", params=cfg.params()) as handle:
        with err_console.status("bench learn") as status:
            out = run_pipeline(handle, cfg, on_phase=lambda it, name: status.update(
                f"iteration {it}: {name} ({(time.time() - t0) / 60:.1f} of {budget_min:g} min)"))
    result = {"run_id": handle.run_id, "budget_min": budget_min, "wall_min": (time.time() - t0) / 60,
              "actor": actor, "critic": critic, **{k: v for k, v in out.items() if k != "phases"}}
    if as_json:
        print_json(result)
    else:
        render_pipeline({**result, "phases": out["phases"]})
