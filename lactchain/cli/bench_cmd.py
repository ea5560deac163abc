"""`lactchain bench ...`: speed targets measured side by side in one run, as JSON."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lactchain.cli.common import JsonOption, check_models, console, fail

app = typer.Typer(help="Benchmarks (print JSON with --json).", no_args_is_help=True)


def render_rollout(result: dict[str, Any]) -> None:
    """The rows per engine and setting as a table, or the hf report one value a line."""
    if "settings" in result:
        _print_rows(result)
    else:
        for key, value in result.items():
            if key not in ("run_id", "report"):
                console.print(f"{key:>28}: {value:.3f}" if isinstance(value, float) else f"{key:>28}: {value}",
                              highlight=False)
    console.print(f"report: {result['report']}", highlight=False)


def _print_rows(result: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"bench rollout {result['actor']}, {result['envs']} envs")
    for col in ("engine", "dtype", "prefix cache", "adapter", "env-steps/s", "parse failures"):
        table.add_column(col)
    for r in result["settings"]:
        table.add_row(r["engine"], r["dtype"], "on" if r["prefix_cache"] else "off",
                      f"{r['adapter']} ({r.get('adapter_mode', 'peft')})" if r["adapter"] else "-",
                      f"{r['env_steps_per_s']:.2f}", f"{r['parse_failure_rate']:.1%}")
    console.print(table)
    for key in ("vllm_over_best_hf", "vllm_with_adapter_over_best_hf", "fp32_agreement"):
        if key in result:
            console.print(f"{key}: {result[key]:.3f}")


def _register_jobs() -> None:
    """The benchmarks of the job table, each command generated from its job's config."""
    from lactchain.cli.bench_device import render_device
    from lactchain.cli.bench_dt import render_dt
    from lactchain.cli.bench_motif import render_motif
    from lactchain.cli.bench_replicas import render_replicas
    from lactchain.cli.generate import make_command
    from lactchain.cli.pipeline_cmd import render_pipeline
    from lactchain.jobs.table import JOBS

    app.command("learn")(make_command(JOBS["bench learn"], render=render_pipeline))
    app.command("rollout")(make_command(JOBS["bench rollout"], render=render_rollout))
    app.command("strategy")(make_command(JOBS["bench strategy"], render=_render_bench_strategy))
    device = make_command(JOBS["bench device"], render=render_device)
    app.command("device")(device)
    app.command("gpu", hidden=True)(device)  # the name issue 46 gave it
    app.command("replicas")(make_command(JOBS["bench replicas"], render=render_replicas))
    app.command("motif")(make_command(JOBS["bench motif"], render=render_motif))
    app.command("dt")(make_command(JOBS["bench dt"], render=render_dt))
    app.command("console")(bench_console)


def bench_console(
    rounds: Annotated[int, typer.Option("--rounds", min=2, max=100, help="Visits of every screen (the first "
                                                                         "mounts it and is reported apart).")] = 5,
    no_job: Annotated[bool, typer.Option("--no-job", help="Idle only: no job running beside the console.")] = False,
    quit_actor: Annotated[str, typer.Option("--quit-actor", help="Actor loaded for the quit measure (ctrl+q with a "
                                                                 "real model in memory); none skips it.")] = "smollm2-135m",
    as_json: JsonOption = False,
) -> None:
    """How fast the console answers (first paint, screen switch, ctrl+q, a kill shown),
    driving the real app headless, idle and with a detached tiny play job stepping. The
    console is its own program (the library never imports it): this runs `python -m
    tui.bench` and passes its output on."""
    import subprocess
    import sys

    if quit_actor.lower() != "none":
        check_models(quit_actor)
    argv = [sys.executable, "-m", "tui.bench", "--rounds", str(rounds), "--quit-actor", quit_actor] + \
        (["--no-job"] if no_job else []) + (["--json"] if as_json else [])
    res = subprocess.run(argv, capture_output=True, text=True)
    if res.returncode != 0:
        fail(f"the console benchmark failed: {(res.stderr.strip().splitlines() or ['no output'])[-1]}")
    print(res.stdout, end="")


def _render_bench_strategy(result: dict) -> None:
    from pathlib import Path

    from rich.markdown import Markdown

    console.print(Markdown(Path(result["bench_md"]).read_text()))
    console.print(f"figure: {result['bench_png']}  ·  data: {result['bench_json']}")


_register_jobs()
