"""`lactchain collect-pairs` and `lactchain evaluate`: the loop's data and scoring steps."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lactchain.cli.common import (
    DbOption,
    DetachOption,
    DealsOption,
    EnvOption,
    JsonOption,
    LineLog,
    RunIdOption,
    SceneOption,
    StrategyOption,
    console,
    err_console,
    finite,
    run_job,
    scene_kwargs,
    strategy_of,
)
from lactchain.cli.play_cmd import (ActorOption, AdapterOption, ConstrainedOption, DtypeOption, EngineOption,
                                    actor_for_job, choose_engine)



def result_table(title: str, result: dict[str, Any]) -> None:
    """A run's scalar results as a two-column table (the non-JSON output of short commands)."""
    table = Table(title=title, show_header=False)
    for key, value in result.items():
        if isinstance(value, (int, float, str, bool)):
            table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)


def load_critic(registry: Any, critic_run: str):
    """The latest critic checkpoint of a train-critic run, and that run's params."""
    from lactchain.models.critic import load_from_run

    with err_console.status(f"loading critic from {critic_run}"):
        try:
            critic = load_from_run(registry, critic_run)
        except (KeyError, FileNotFoundError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--critic-run") from None
    return critic, registry.params(registry.resolve_run_id(critic_run))


def collect_pairs_cmd(
    ctx: typer.Context,
    actor: ActorOption = "smollm2-135m",
    adapter: AdapterOption = None,
    critic_run: Annotated[Optional[str], typer.Option("--critic-run", help="train-critic run whose checkpoint scores candidates.")] = None,
    states: Annotated[int, typer.Option("--states", min=1, max=100_000, help="Start states to sample (uniform over the env's start states: the grid's poses, Blackjack's deals).")] = 32,
    samples: Annotated[int, typer.Option("--samples", "-k", min=2, max=256, help="Move lists drawn per state (k >= 2).")] = 4,
    temperature: Annotated[float, typer.Option("--temperature", "-t", callback=finite, min=0.7, help="Sampling temperature (>= 0.7 for diversity).")] = 1.0,
    gamma: Annotated[Optional[float], typer.Option("--gamma", callback=finite, min=0.0, max=0.999999, help="Discount in A = R + gamma V(s') - V(s); default: the critic's.")] = None,
    margin: Annotated[float, typer.Option("--margin", callback=finite, min=0.0, help="Minimum advantage gap between chosen and rejected.")] = 0.5,
    episodes_from: Annotated[Optional[list[str]], typer.Option("--episodes-from", help="Also pair steps of these play runs whose states match.")] = None,
    constrained: ConstrainedOption = True,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1)] = 0,
    strategy: StrategyOption = None,
    env: EnvOption = "grid",
    deals: DealsOption = 16,
    engine: EngineOption = "hf",
    dtype: DtypeOption = None,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build chosen/rejected pairs: sample start states, reset the env to each exact
    state, draw k move lists, execute each from that state and rank them by the
    critic's advantage; keep best vs worst when they differ by more than --margin.

    Every dropped candidate is counted by reason. Pairs go to the registry and a
    `datasets` dataset (prompt/chosen/rejected) is saved under the run folder.
    """
    if critic_run is None and not episodes_from:
        raise typer.BadParameter("give --critic-run (critic-scored pairs) and/or --episodes-from (pairs from play runs)")
    choice = choose_engine(engine, dtype, actor, adapter, db)
    params = dict(actor=actor, adapter=adapter, critic_run=critic_run, states=states, samples=samples,
                  temperature=temperature, gamma=gamma, margin=margin, episodes_from=episodes_from or [],
                  constrained=constrained, seed=seed, env=env, deals=deals, **choice.params())

    def body(handle) -> dict[str, Any]:
        from lactchain.envs.catalog import make_env
        from lactchain.preferences import (CollectConfig, PairBatch, collect_pairs, pairs_from_steps,
                                           sample_start_states, to_dataset)

        reg = handle.registry
        with actor_for_job(actor, adapter, handle, choice, quiet=as_json, env=env) as model:
            text_env = make_env(env, moves=model.moves)
            batch = PairBatch()
            g = gamma
            if critic_run is not None:
                critic, critic_params = load_critic(reg, critic_run)
                if critic.env_name != text_env.name:
                    raise typer.BadParameter(f"run {critic_run} trained a critic for {critic.env_name}, not {env}; "
                                             f"train one with `lactchain train-critic --env {env}`",
                                             param_hint="--critic-run")
                g = gamma if gamma is not None else float(critic_params.get("gamma", 0.9))
                start_states = sample_start_states(text_env, states, seed=seed)
                strat = strategy_of(handle, strategy, env)
                line = LineLog()
                line(f"collect-pairs: {len(start_states)} start states x {samples} samples, strategy "
                     f"{strat.label}", force=True)
                with Progress(TextColumn("[bold]pairs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                              console=err_console, transient=as_json) as bar:
                    task = bar.add_task("states", total=len(start_states))

                    def on_progress(n: int) -> None:
                        bar.advance(task, n)
                        done = int(bar.tasks[0].completed)
                        line(f"states {done}/{len(start_states)} sampled and scored", force=done == len(start_states))
                        handle.check_cancelled()

                    sampling = CollectConfig(samples=samples, temperature=temperature, gamma=g, margin=margin,
                                             constrained=constrained, seed=seed, env=env, deals=deals)
                    batch = collect_pairs(model, critic, start_states, sampling,
                                          prompt=strat.prompt(model.moves, text_env), on_progress=on_progress)
            for play_run in episodes_from or []:
                extra = pairs_from_steps(reg.steps(run_id=reg.get_run(play_run)["id"]), gamma=g or 0.9, margin=margin,
                                         env=env)
                batch.pairs += extra.pairs
                batch.dropped.update(extra.dropped)
                batch.candidates += extra.candidates
            reg.add_pairs(handle.run_id, batch.pairs)
            dataset_dir = handle.dir / "dataset"
            to_dataset(batch.pairs, model.chat_prompt, model.tokenizer.eos_token).save_to_disk(str(dataset_dir))
            reg.add_artifact(handle.run_id, "dataset", str(dataset_dir), meta={"rows": len(batch.pairs)})
            stats = batch.stats()
            handle.log_metrics({k: float(v) for k, v in stats.items()})
            return {**stats, "dataset": str(dataset_dir)}

    run_job(ctx, kind="pairs", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"pairs {actor}", render=lambda r: result_table(f"collect-pairs {r['run_id']}", r))


def evaluate_cmd(
    ctx: typer.Context,
    actor: ActorOption = "smollm2-135m",
    adapter: AdapterOption = None,
    states: Annotated[str, typer.Option("--states", help="'all' start states of the env (the grid's non-goal poses, Blackjack's 270 deals), or a number to sample.")] = "all",
    constrained: ConstrainedOption = True,
    envs: Annotated[int, typer.Option("--envs", "-b", min=1, max=4096, help="Batch size of lock-step envs.")] = 16,
    max_actions: Annotated[int, typer.Option("--max-actions", min=1, max=1000, help="Actions per episode before truncation.")] = 10,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1)] = 0,
    strategy: StrategyOption = None,
    env: EnvOption = "grid",
    scene: SceneOption = None,
    engine: EngineOption = "hf",
    dtype: DtypeOption = None,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Score an actor greedily from every start state: success rate, mean return,
    optimal ratio (BFS-optimal moves / moves used) and parse-failure rate. On
    Blackjack: win rate, how often the first move is the exact optimum's, and the
    optimal expected return over the same deals (dynamic programming)."""
    if states != "all" and not (states.isdigit() and 1 <= int(states) <= 100_000):
        raise typer.BadParameter(f"must be 'all' or a number of states from 1 to 100000, not {states!r}",
                                 param_hint="--states")
    extra = scene_kwargs(env, scene)
    choice = choose_engine(engine, dtype, actor, adapter, db)
    params = dict(actor=actor, adapter=adapter, states=states, constrained=constrained, envs=envs,
                  max_actions=max_actions, seed=seed, env=env, **extra, **choice.params())

    def body(handle) -> dict[str, Any]:
        from lactchain.envs.catalog import make_env
        from lactchain.evaluate import evaluate_actor

        with actor_for_job(actor, adapter, handle, choice, quiet=as_json, env=env) as model:
            strat = strategy_of(handle, strategy, env)
            LineLog()(f"evaluate: greedy from {states} start states, strategy {strat.label}", force=True)
            with err_console.status("evaluating"):
                result = evaluate_actor(model, states=states if states == "all" else int(states), constrained=constrained,
                                        n_envs=envs, max_actions=max_actions, seed=seed, registry=handle.registry,
                                        prompt=strat.prompt(model.moves, make_env(env)), env=env, env_kwargs=extra,
                                        run_id=handle.run_id, should_stop=handle.cancelled.is_set)
            handle.log_metrics({k: float(v) for k, v in result.items() if isinstance(v, (int, float))})
            return result

    run_job(ctx, kind="eval", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"eval {actor}" + (f"+{adapter}" if adapter else "") + (f" strategy {strategy}" if strategy else ""), render=lambda r: result_table(f"evaluate {r['run_id']}", r))
