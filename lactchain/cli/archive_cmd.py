"""`lactchain archive fill|verify`: the trajectory archive (issue 12) as registry runs.

An archive run (kind `archive`) holds its elites as episodes (start, seed, return,
length) and, for replay, `archive.jsonl`: one trajectory per line, with its BD key,
annotations, scene, seed, actions and policy (`lactchain.archive.trajectories.Trajectory`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from lactchain.cli.common import DbOption, JsonOption, checked_or_fail, console, open_registry, print_json, shown

app = typer.Typer(help="The trajectory archive: diverse, replay-verified behaviours on a scene.", no_args_is_help=True)


def _register_fill() -> None:
    """`archive fill`: generated from the job's config (lactchain.jobs.archive)."""
    from lactchain.cli.generate import make_command
    from lactchain.jobs.table import JOBS

    app.command("fill")(make_command(JOBS["archive fill"], render=_render))
    app.command("add")(make_command(JOBS["archive add"], render=_render))


def _render(result: dict[str, Any]) -> None:
    table = Table(title=f"archive {result['run_id']}", show_header=False)
    for key in ("elites", "covered_bds", "reachable_bds", "coverage", "beyond_bound", "tried", "new_bds", "shorter"):
        if key in result:
            value = result[key]
            table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)
    skipped = result.get("skipped") or []
    for line in skipped[:10]:
        console.print(f"  skipped {line}")
    if len(skipped) > 10:
        console.print(f"  ... and {len(skipped) - 10} more skipped (--json lists them all)")


def load_archive(registry: Any, run: str) -> tuple[str, list[dict[str, Any]]]:
    """(run id, trajectory rows) of an archive run, or a one-line failure."""
    from lactchain.jobs import archive

    return checked_or_fail(archive.load_archive, registry, run)


def archive_artifact(registry: Any, run: Any) -> Path:
    """The archive file of an archive run, or a one-line failure."""
    from lactchain.jobs import archive

    return checked_or_fail(archive.archive_artifact, registry, run)


@app.command("verify")
def verify_cmd(
    run: Annotated[str, typer.Argument(metavar="RUN", help="An archive run id (or unique prefix).")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replay every trajectory of an archive from its start state with its recorded
    actions; list each mismatch by index with its first diverging step."""
    from lactchain.archive.trajectories import Trajectory, verify

    with open_registry(db) as registry:
        run_id, rows = load_archive(registry, run)
    mismatches = []
    for i, row in enumerate(rows):
        try:
            problem = verify(Trajectory.from_dict(row))
        except ValueError as exc:
            problem = exc
        if problem is not None:
            mismatches.append({"index": i, "key": row.get("key"), "problem": str(problem)})
    result = {"run_id": run_id, "trajectories": len(rows), "verified": len(rows) - len(mismatches),
              "verified_rate": (len(rows) - len(mismatches)) / len(rows) if rows else 0.0, "mismatches": mismatches}
    if as_json:
        print_json(result)
    else:
        console.print(f"{result['verified']}/{len(rows)} trajectories verify by replay")
        for m in mismatches:
            console.print(f"  #{m['index']} {shown(m['key'])}: {shown(m['problem'])}")
    if mismatches:  # scripts and CI read the exit code: a trajectory that does not replay is a failure
        raise typer.Exit(1)
