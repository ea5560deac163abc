"""`lactchain archive fill|verify`: the trajectory archive (issue 12) as registry runs.

An archive run (kind `archive`) holds its elites as episodes (start, seed, return,
length) and, for replay, `archive.jsonl`: one trajectory per line, with its BD key,
annotations, scene, seed, actions and policy (`lactchain.trajectories.Trajectory`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from lactchain.cli.common import (
    DbOption,
    JsonOption,
    RunIdOption,
    console,
    fail,
    open_registry,
    print_json,
    run_job,
    run_of_kind,
)

from lactchain.jobs.archive import record_archive

app = typer.Typer(help="The trajectory archive: diverse, replay-verified behaviours on a scene.", no_args_is_help=True)


def _register_fill() -> None:
    """`archive fill`: generated from the job's config (lactchain.jobs.archive)."""
    from lactchain.cli.generate import make_command
    from lactchain.jobs.table import JOBS

    app.command("fill")(make_command(JOBS["archive fill"], render=_render))


@app.command("add")
def add_cmd(
    ctx: typer.Context,
    runs: Annotated[list[str], typer.Argument(help="Play runs (ids or unique prefixes) on the grid, e.g. an LLM "
                                                   "actor's `lactchain play --scene flat --start random`.")],
    into: Annotated[str | None, typer.Option("--into", help="An archive run to merge into (it stays as it was: "
                                                             "the merge is a new archive run).")] = None,
    max_landmarks: Annotated[int, typer.Option("--max-landmarks", min=0, max=6,
                                               help="Coverage counts BDs with at most this many landmarks.")] = 2,
    db: DbOption = None,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Archive play runs: each finished episode is replayed from its start (every transition
    checked against the run's steps) and offered to the archive, one elite per BD (the
    shortest); the policy (actor, adapter, strategy version, sampling) goes with it."""
    from lactchain.archive import coverage, from_episode, merge, reachable_bds

    registry = open_registry(db)
    sources = [run_of_kind(registry, "RUN", spec, ("play",), "a play run (lactchain play)") for spec in runs]
    scenes = set()
    played = {run["id"]: registry.params(run["id"]) for run in sources}
    for run_id_, params in played.items():
        if params.get("env", "grid") != "grid":
            fail(f"run {run_id_} played {params.get('env')}; the archive holds grid trajectories (play --env grid)")
        scenes.add(params.get("scene") or "empty")
    base: list[dict[str, Any]] = []
    if into is not None:
        target = run_of_kind(registry, "--into", into, ("archive",), "an archive run (lactchain archive fill)")
        scenes.add(registry.params(target["id"]).get("scene") or "empty")
        _, base = load_archive(registry, target["id"])
    if len(scenes) > 1:
        fail(f"the runs are on different scenes ({', '.join(sorted(scenes))}); archive one scene at a time")
    scene = scenes.pop()
    params = dict(scene=scene, sources=[r["id"] for r in sources], into=into, max_landmarks=max_landmarks, env="grid")

    def body(handle) -> dict[str, Any]:
        new, skipped = [], []
        for run in sources:
            run_params = played[run["id"]]
            steps_by_episode: dict[int, list[dict[str, Any]]] = {}
            for step in handle.registry.steps(run_id=run["id"]):
                steps_by_episode.setdefault(step["episode_id"], []).append(step)
            for episode in handle.registry.episodes(run["id"]):
                steps = steps_by_episode.get(episode["id"], [])
                if not steps or not steps[-1].get("done"):
                    skipped.append(f"{run['id']} episode {episode['idx']}: unfinished")
                    continue
                try:
                    new.append(from_episode(episode, steps, run_params, run["id"]))
                except (ValueError, KeyError, TypeError, IndexError) as exc:  # a step the replay cannot follow
                    skipped.append(f"{run['id']} episode {episode['idx']}: {exc}")
        rows, stats = merge(base, new)
        path = record_archive(handle, rows)
        cov = coverage({r["key"] for r in rows}, reachable_bds(scene, max_landmarks), stats["offered"])
        handle.log_metrics({f"final/{k}": float(v) for k, v in cov.items()})
        return {**cov, **stats, "skipped": skipped, "archive": str(path)}

    run_job(ctx, kind="archive", db=db, detach=False, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"archive add {' '.join(r['id'] for r in sources)}", render=_render)


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
    from lactchain.cli.common import _one_line
    from lactchain.jobs import archive

    return _one_line(archive.load_archive, registry, run)


def archive_artifact(registry: Any, run: Any) -> Path:
    """The archive file of an archive run, or a one-line failure."""
    from lactchain.cli.common import _one_line
    from lactchain.jobs import archive

    return _one_line(archive.archive_artifact, registry, run)


@app.command("verify")
def verify_cmd(
    run: Annotated[str, typer.Argument(help="An archive run id (or unique prefix).")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Replay every trajectory of an archive from its start state with its recorded
    actions; list each mismatch by index with its first diverging step."""
    from lactchain.trajectories import Trajectory, verify

    registry = open_registry(db)
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
        return
    console.print(f"{result['verified']}/{len(rows)} trajectories verify by replay")
    for m in mismatches:
        console.print(f"  #{m['index']} {m['key']}: {m['problem']}")
