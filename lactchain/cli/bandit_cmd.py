"""`lactchain bandit` (the job: lactchain.jobs.bandit) prints with `render_table`, and
`lactchain bench bandit`: the k-armed testbed's speed.

Classic baselines give the LLM-actor work a floor with known answers: eps-greedy 0.1
reaches about 1.4 average reward and 80 % optimal actions after 1000 steps.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from lactchain.baselines.bandits import DEFAULT_AGENTS, SPEC_FORMS, simulate
from lactchain.cli.common import JsonOption, console, print_json
from lactchain.jobs.bandit import BanditConfig, summary


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
    """The agent specs, or a one-line error (exit 2) before anything runs: the bandit
    job's own config checks them."""
    return BanditConfig(agents=agents, runs=runs, arms=arms).specs


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
