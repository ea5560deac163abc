"""`lactchain play`: the actor plays episodes (the grid, Blackjack) in batched lock-step."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lactchain.cli.common import (
    DbOption,
    DetachOption,
    EnvOption,
    JsonOption,
    LineLog,
    RunIdOption,
    SceneOption,
    StrategyOption,
    console,
    err_console,
    finite,
    resolve_adapter,
    run_job,
    scene_kwargs,
    strategy_of,
)

ActorOption = Annotated[str, typer.Option("--actor", help="Actor preset (tiny, smollm2-135m, mistral-7b-instruct), local path or hub id.")]
AdapterOption = Annotated[
    Optional[str], typer.Option("--adapter", help="LoRA adapter: a train-actor run id or an adapter folder.")
]
ConstrainedOption = Annotated[
    bool,
    typer.Option("--constrained/--free", help="Grammar-constrained move lists (default), or free text + lenient parsing."),
]


def load_actor(actor: str, adapter: Optional[str], registry: Any, quiet: bool = False, env: str = "grid"):
    """Load an actor with a status spinner on stderr (model loads take seconds)."""
    from lactchain.envs.catalog import actor_moves
    from lactchain.models.actor import Actor

    adapter_path = resolve_adapter(registry, adapter)
    with err_console.status(f"loading actor {actor}" + (f" + adapter {adapter}" if adapter else ""), spinner="dots") as status:
        def progress(step: str, fraction: float | None = None) -> None:
            if not quiet:
                status.update(f"{step}" + (f" {fraction:.0%}" if fraction is not None else ""))

        return Actor.load(actor, adapter=adapter_path, progress=progress, **actor_moves(env))


def render_summary(result: dict[str, Any]) -> None:
    table = Table(title=f"play {result['run_id']}", show_header=False)
    for key in ("episodes", "success_rate", "mean_return", "mean_optimal_ratio", "parse_failure_rate",
                "lenient_parse_rate", "env_steps_per_s"):
        value = result[key]
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)


def play(
    ctx: typer.Context,
    actor: ActorOption = "smollm2-135m",
    adapter: AdapterOption = None,
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, max=10_000_000, help="Episodes to play.")] = 8,
    envs: Annotated[int, typer.Option("--envs", "-b", min=1, max=4096, help="Envs stepped in lock-step (the generate batch size).")] = 8,
    constrained: ConstrainedOption = True,
    start: Annotated[str, typer.Option("--start", help="Start state: 'fixed' (the grid's (0,0) east; Blackjack: the hand the seed deals) or 'random' (uniform over the env's start states).")] = "fixed",
    temperature: Annotated[float, typer.Option("--temperature", "-t", callback=finite, min=0.0, help="Sampling temperature; 0 = greedy.")] = 0.0,
    max_actions: Annotated[int, typer.Option("--max-actions", min=1, max=1000, help="Actions per episode before truncation.")] = 10,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed for start states and sampling.")] = 0,
    strategy: StrategyOption = None,
    env: EnvOption = "grid",
    scene: SceneOption = None,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Play episodes with an LLM actor and record every step in the registry.

    Each lock-step renders one prompt per live env and makes ONE batched generate
    call. Prints success rate, mean return, optimal ratio (BFS-optimal moves /
    moves used, over successful episodes), parse-failure rate and env-steps/s.
    """
    if start not in ("fixed", "random"):
        raise typer.BadParameter("must be 'fixed' or 'random'", param_hint="--start")
    extra = scene_kwargs(env, scene)
    params = dict(actor=actor, adapter=adapter, episodes=episodes, envs=envs, constrained=constrained, start=start,
                  temperature=temperature, max_actions=max_actions, seed=seed, env=env, **extra)

    def body(handle) -> dict[str, Any]:
        from lactchain.rollout import RolloutConfig, run_rollouts

        from lactchain.envs.catalog import make_env

        model = load_actor(actor, adapter, handle.registry, quiet=as_json, env=env)
        cfg = RolloutConfig(episodes=episodes, n_envs=envs, constrained=constrained, temperature=temperature,
                            start=start, seed=seed, env_kwargs={"max_actions": max_actions, **extra}, env=env)
        won, lost = ("won the hand", "did not win") if env == "blackjack" else ("reached the goal",
                                                                                "did not reach the goal")
        with Progress(TextColumn("[bold]play"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                      TimeElapsedColumn(), console=err_console, transient=as_json) as bar:
            task = bar.add_task("episodes", total=episodes, stats="")
            wins = 0
            line = LineLog()

            def on_episode(ep) -> None:
                nonlocal wins
                wins += ep.success
                done = bar.tasks[0].completed + 1
                bar.update(task, advance=1, stats=f"success {wins}/{done}")
                handle.log_metrics({"episode_return": ep.total_return, "episode_success": float(ep.success)}, step=ep.idx)
                line(f"episode {done}/{episodes}: return {ep.total_return:.2f}, "
                     f"{won if ep.success else lost}; success {wins}/{done}",
                     force=done in (1, episodes))

            strat = strategy_of(handle, strategy, env)
            line(f"play: {episodes} episodes of {env} on {envs} envs, strategy {strat.label}", force=True)
            summary = run_rollouts(model, cfg, prompt=strat.prompt(model.moves, make_env(env)),
                                   registry=handle.registry, run_id=handle.run_id,
                                   on_episode=on_episode, should_stop=handle.cancelled.is_set)
        result = summary.as_dict()
        handle.log_metrics({k: v for k, v in result.items() if isinstance(v, (int, float))})
        return result

    run_job(ctx, kind="play", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"play {actor}" + (f" {env}" if env != "grid" else ""), render=render_summary)
