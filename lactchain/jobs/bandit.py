"""The k-armed bandit testbed (Sutton & Barto ch. 2) as a job: curves as metrics, a
two-panel PNG in the run folder."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lactchain.config import SEED_MAX, Config, option
from lactchain.jobs.output import LineLog, err_console
from lactchain.jobs.spec import Job

MAX_CELLS = 10_000_000  # runs x arms: the (runs, arms) arrays of every agent stay well under a GiB


def _agents_help() -> str:
    from lactchain.baselines.bandits import SPEC_FORMS

    return (f"Comma-separated agents: {SPEC_FORMS}. ALPHA is a step size, Q0 an initial estimate, C the UCB "
            "exploration weight.")


def _default_agents() -> str:
    from lactchain.baselines.bandits import DEFAULT_AGENTS

    return ",".join(DEFAULT_AGENTS)


@dataclass
class BanditConfig(Config):
    agents: str = option(_default_agents(), _agents_help(), short="-a", form="Agents")
    runs: int = option(200, "Independent bandit problems, averaged.", short="-r", min=1, max=100_000, form="Runs")
    steps: int = option(1000, "Pulls per problem.", short="-n", min=1, max=1_000_000, form="Steps")
    arms: int = option(10, "Arms per problem.", short="-k", min=2, max=10_000)
    nonstationary: bool = option(False, "Arm means start equal and random-walk (+N(0, 0.01^2) per step) instead of "
                                        "q* ~ N(0, 1).")
    every: int = option(10, "Log one metric point per EVERY steps (their mean).", min=1, max=1_000_000)
    seed: int = option(0, "Seed of the problems, noise and agents.", min=0, max=SEED_MAX)

    def check(self) -> None:
        from lactchain.baselines.bandits import parse_agents

        try:
            self.specs = parse_agents(self.agents)
        except ValueError as exc:
            self.refuse("agents", str(exc))
        if self.runs * self.arms > MAX_CELLS:
            self.refuse("runs", f"--runs x --arms must be at most {MAX_CELLS:,} (got {self.runs * self.arms:,})")

    def record_params(self) -> dict[str, Any]:
        """The parsed agent specs and `stationary`, as bandit runs have always recorded them."""
        return dict(agents=self.specs, runs=self.runs, steps=self.steps, arms=self.arms,
                    stationary=not self.nonstationary, every=self.every, seed=self.seed)


def summary(curves: dict[str, Any]) -> tuple[int, dict[str, dict[str, float]]]:
    """The window the table reports (the last 100 steps, or all of fewer) and each agent's numbers."""
    last = min(100, len(next(iter(curves.values())).avg_reward))
    return last, {name: c.final(last) for name, c in curves.items()}


def plot_curves(curves: dict[str, Any], path: Path, title: str) -> Path:
    """The book's two panels (Figure 2.2): average reward and % optimal action per step."""
    from lactchain.bench.figures import new_figure, save_figure

    fig, (top, bottom) = new_figure(2, 1, figsize=(8, 7), dpi=110, sharex=True)
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
    return save_figure(fig, path)


def log_curves(handle: Any, curves: dict[str, Any], every: int) -> None:
    """One point per `every` steps per agent: the mean of the steps it closes (smoother
    than a single step of 200 runs, and 10x fewer rows), at the step it ends on."""
    steps = len(next(iter(curves.values())).avg_reward)
    for end in sorted({*range(every, steps + 1, every), steps}):
        start = end - (every if end % every == 0 else end % every)
        handle.log_metrics({f"{name}/{key}": float(getattr(c, key)[start:end].mean())
                            for name, c in curves.items() for key in ("avg_reward", "optimal_pct")}, step=end)


def run_bandit(handle: Any, config: BanditConfig) -> dict[str, Any]:
    from lactchain.baselines.bandits import simulate

    specs, runs, steps, arms = config.specs, config.runs, config.steps, config.arms
    stationary = not config.nonstationary
    line = LineLog()
    line(f"bandit: {len(specs)} agents x {runs} runs x {steps} steps, {arms} arms", force=True)

    def progress(t: int) -> None:
        if t % 50 == 0 or t == steps:
            handle.check_cancelled()
            line(f"step {t}/{steps}", force=t == steps)

    t0 = time.perf_counter()
    with err_console.status("simulating"):
        curves = simulate(specs, runs=runs, steps=steps, num_arms=arms, stationary=stationary, seed=config.seed,
                          progress=progress)
    seconds = time.perf_counter() - t0
    log_curves(handle, curves, config.every)
    kind = "stationary" if stationary else "non-stationary"
    png = plot_curves(curves, handle.dir / "bandit.png", f"{arms}-armed testbed ({kind}), mean of {runs} runs")
    handle.registry.add_artifact(handle.run_id, "plot", str(png), meta={"what": "bandit curves"})
    last, rows = summary(curves)
    return {"runs": runs, "steps": steps, "arms": arms, "stationary": stationary, "seed": config.seed,
            "seconds": seconds, "last_steps": last, "agents": rows, "plot": str(png)}


BANDIT = Job(kind="baseline", command="bandit", config=BanditConfig, run=run_bandit, title="Bandit testbed",
             name=lambda c: f"bandit {len(c.specs)} agents, {c.runs}x{c.steps}",
             doc="""The k-armed bandit testbed (Sutton & Barto ch. 2): every agent on the same RUNS
    problems (arm means q* ~ N(0, 1), rewards ~ N(q*, 1)) for STEPS pulls, all runs at once.
    Logs `<agent>/avg_reward` and `<agent>/optimal_pct` (the mean over runs, per --every
    steps) for the console's Runs chart, saves the two-panel plot (bandit.png) in the run
    folder, and prints each agent's average reward and % optimal action over the last
    100 steps.
    """)
