"""`lactchain bandit`: the k-armed testbed of Sutton & Barto ch. 2 as a registry run
(curves as metrics, a two-panel PNG), and `lactchain bench bandit`: its speed.

Classic baselines give the LLM-actor work a floor with known answers: eps-greedy 0.1
reaches about 1.4 average reward and 80 % optimal actions after 1000 steps.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from lactchain.baselines.bandits import DEFAULT_AGENTS, SPEC_FORMS, Curves, parse_agents, simulate
from lactchain.cli.common import (DbOption, DetachOption, JsonOption, LineLog, RunIdOption, console, err_console,
                                  print_json, run_job)

MAX_CELLS = 10_000_000  # runs x arms: the (runs, arms) arrays of every agent stay well under a GiB

AgentsOption = Annotated[str, typer.Option(
    "--agents", "-a", help=f"Comma-separated agents: {SPEC_FORMS}. ALPHA is a step size, Q0 an initial "
                           "estimate, C the UCB exploration weight.")]
RunsOption = Annotated[int, typer.Option("--runs", "-r", min=1, max=100_000, help="Independent bandit problems, averaged.")]
StepsOption = Annotated[int, typer.Option("--steps", "-n", min=1, max=1_000_000, help="Pulls per problem.")]
ArmsOption = Annotated[int, typer.Option("--arms", "-k", min=2, max=10_000, help="Arms per problem.")]
NonstationaryOption = Annotated[bool, typer.Option(
    "--nonstationary", help="Arm means start equal and random-walk (+N(0, 0.01^2) per step) instead of q* ~ N(0, 1).")]
SeedOption = Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed of the problems, noise and agents.")]


def check_input(agents: str, runs: int, arms: int) -> list[str]:
    """The agent specs, or a one-line error (exit 2) before any run exists."""
    try:
        specs = parse_agents(agents)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--agents") from None
    if runs * arms > MAX_CELLS:
        raise typer.BadParameter(f"--runs x --arms must be at most {MAX_CELLS:,} (got {runs * arms:,})", param_hint="--runs")
    return specs


def summary(curves: dict[str, Curves]) -> tuple[int, dict[str, dict[str, float]]]:
    """The window the table reports (the last 100 steps, or all of fewer) and each agent's numbers."""
    last = min(100, len(next(iter(curves.values())).avg_reward))
    return last, {name: c.final(last) for name, c in curves.items()}


def render_table(result: dict[str, Any]) -> None:
    from rich.table import Table

    kind = "stationary" if result["stationary"] else "non-stationary"
    title = f"{result.get('run_id') or 'bench bandit'}: {result['arms']}-armed testbed, {kind}"
    caption = (f"{result['runs']} runs x {result['steps']} steps; means over the last {result['last_steps']} steps; "
               f"simulated in {result['seconds']:.2f} s" + (f"\nplot: {result['plot']}" if result.get("plot") else ""))
    table = Table(title=title, caption=caption)
    for column in ("agent", "avg reward", "% optimal", "seconds"):
        table.add_column(column, justify="left" if column == "agent" else "right")
    for name, row in result["agents"].items():
        table.add_row(name, f"{row['avg_reward']:.3f}", f"{row['optimal_pct']:.1f}", f"{row['seconds']:.2f}")
    console.print(table)


def plot_curves(curves: dict[str, Curves], path: Path, title: str) -> Path:
    """The book's two panels (Figure 2.2): average reward and % optimal action per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), dpi=110, sharex=True)
    for name, c in curves.items():
        steps = range(1, len(c.avg_reward) + 1)
        top.plot(steps, c.avg_reward, lw=0.9, label=name)
        bottom.plot(steps, c.optimal_pct, lw=0.9, label=name)
    top.set_ylabel("average reward")
    top.set_title(title)
    top.legend(loc="lower right", fontsize=8)
    bottom.set_ylabel("% optimal action")
    bottom.set_ylim(0, 100)
    bottom.set_xlabel("step")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def log_curves(handle: Any, curves: dict[str, Curves], every: int) -> None:
    """One point per `every` steps per agent: the mean of the steps it closes (smoother
    than a single step of 200 runs, and 10x fewer rows), at the step it ends on."""
    steps = len(next(iter(curves.values())).avg_reward)
    for end in sorted({*range(every, steps + 1, every), steps}):
        start = end - (every if end % every == 0 else end % every)
        handle.log_metrics({f"{name}/{key}": float(getattr(c, key)[start:end].mean())
                            for name, c in curves.items() for key in ("avg_reward", "optimal_pct")}, step=end)


def bandit_cmd(
    ctx: typer.Context,
    agents: AgentsOption = ",".join(DEFAULT_AGENTS),
    runs: RunsOption = 200,
    steps: StepsOption = 1000,
    arms: ArmsOption = 10,
    nonstationary: NonstationaryOption = False,
    every: Annotated[int, typer.Option("--every", min=1, max=1_000_000, help="Log one metric point per EVERY steps (their mean).")] = 10,
    seed: SeedOption = 0,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """The k-armed bandit testbed (Sutton & Barto ch. 2): every agent on the same RUNS
    problems (arm means q* ~ N(0, 1), rewards ~ N(q*, 1)) for STEPS pulls, all runs at once.

    Logs `<agent>/avg_reward` and `<agent>/optimal_pct` (the mean over runs, per --every
    steps) for the console's Runs chart, saves the two-panel plot (bandit.png) in the run
    folder, and prints each agent's average reward and % optimal action over the last
    100 steps.
    """
    specs = check_input(agents, runs, arms)
    params = dict(agents=specs, runs=runs, steps=steps, arms=arms, stationary=not nonstationary, every=every, seed=seed)

    def body(handle: Any) -> dict[str, Any]:
        line = LineLog()
        line(f"bandit: {len(specs)} agents x {runs} runs x {steps} steps, {arms} arms", force=True)

        def progress(t: int) -> None:
            if t % 50 == 0 or t == steps:
                handle.check_cancelled()
                line(f"step {t}/{steps}", force=t == steps)

        t0 = time.perf_counter()
        with err_console.status("simulating"):
            curves = simulate(specs, runs=runs, steps=steps, num_arms=arms, stationary=not nonstationary, seed=seed,
                              progress=progress)
        seconds = time.perf_counter() - t0
        log_curves(handle, curves, every)
        kind = "stationary" if not nonstationary else "non-stationary"
        png = plot_curves(curves, handle.dir / "bandit.png",
                          f"{arms}-armed testbed ({kind}), mean of {runs} runs")
        handle.registry.add_artifact(handle.run_id, "plot", str(png), meta={"what": "bandit curves"})
        last, rows = summary(curves)
        return {"runs": runs, "steps": steps, "arms": arms, "stationary": not nonstationary, "seed": seed,
                "seconds": seconds, "last_steps": last, "agents": rows, "plot": str(png)}

    run_job(ctx, kind="baseline", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"bandit {len(specs)} agents, {runs}x{steps}", render=render_table)


def bench_bandit(
    agents: AgentsOption = ",".join(DEFAULT_AGENTS),
    runs: RunsOption = 200,
    steps: StepsOption = 1000,
    arms: ArmsOption = 10,
    seed: SeedOption = 0,
    as_json: JsonOption = False,
) -> None:
    """Wall time of the vectorised bandit testbed (no registry run), with the final
    numbers, so a slowdown or a changed result shows. Target: 5 agents x 200 runs x
    1000 steps in under 10 s."""
    specs = check_input(agents, runs, arms)
    t0 = time.perf_counter()
    curves = simulate(specs, runs=runs, steps=steps, num_arms=arms, seed=seed)
    seconds = time.perf_counter() - t0
    last, rows = summary(curves)
    result = {"runs": runs, "steps": steps, "arms": arms, "stationary": True, "seed": seed, "seconds": seconds,
              "agent_steps_per_s": len(specs) * runs * steps / seconds, "last_steps": last, "agents": rows}
    if as_json:
        print_json(result)
    else:
        render_table(result)
