"""`lactchain dt train|eval`: the language-conditioned decision transformer (issue 13).

`dt train` is a registry job of kind `dt` like every trainer: foreground or
`--detach`, metrics per step (`loss` is what the console's job view plots),
checkpoints (artifact kind `dt`), SIGTERM -> KILLED with a last checkpoint, and
`lactchain runs resume RUN` continues from the newest checkpoint of the lineage.
`dt eval` (kind `dt-eval`) rolls the model out closed-loop on the held-out
trajectories of its training split; with `--baseline`, a no-text model trained on
the same split; the planner (an oracle that knows the target BD) is always there.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from lactchain.cli.common import console

app = typer.Typer(help="A language-conditioned decision transformer trained on the trajectory archive.",
                  no_args_is_help=True)


def _render_train(result: dict[str, Any]) -> None:
    table = Table(title=f"dt train {result['run_id']}", show_header=False)
    for key in ("archive", "text_encoder", "trajectories", "train_trajectories", "val_trajectories", "select_trajectories",
                "parameters",
                "start_step", "steps", "train_seconds"):
        value = result[key]
        table.add_row(key, f"{value:.1f}" if isinstance(value, float) else str(value))
    for key, value in (result.get("tokenizer") or {}).items():
        table.add_row(f"tokenizer/{key}", str(value))
    for key, value in result["metrics"].items():
        table.add_row(key, f"{value:.4f}")
    best = result.get("best")
    if best:
        table.add_row("best (selection)", f"step {best['step']}: score {best['select_score']:.3f}")
    table.add_row("checkpoint", str(result["checkpoint"]))
    console.print(table)


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _render_eval(result: dict[str, Any]) -> None:
    table = Table(title=f"dt eval {result['dt_run']} on {result['heldout']} held-out trajectories "
                        f"({result['unseen_instructions']} with unseen instructions)")
    for col in ("model", "mode", "bd_reached", "order_match", "order_match_unseen", "stopped", "mean_moves"):
        table.add_column(col)
    for name, block in (("dt", result["dt"]), ("baseline (no text)", result.get("baseline") or {})):
        for mode, r in block.items():
            if isinstance(r, dict) and "n" in r:
                table.add_row(name, mode, *(_fmt(r.get(k)) for k in ("bd_reached", "order_match",
                                                                     "order_match_unseen", "stopped", "mean_moves")))
    p = result["planner"]
    table.add_row("planner (oracle)", "bd", *(_fmt(p.get(k)) for k in ("bd_reached", "order_match",
                                                                    "order_match_unseen")), "-", _fmt(p["mean_moves"]))
    console.print(table)
    summary = Table(title="summary", show_header=False)
    for key, value in result["summary"].items():
        summary.add_row(key, _fmt(value))
    console.print(summary)


def _register() -> None:
    """`dt train` and `dt eval`: generated from the jobs' configs (lactchain.jobs.dt)."""
    from lactchain.cli.generate import make_command
    from lactchain.jobs.table import JOBS

    app.command("train")(make_command(JOBS["dt train"], render=_render_train))
    app.command("eval")(make_command(JOBS["dt eval"], render=_render_eval))
