"""`lactchain archive export|import`: an archive run as a Hugging Face dataset folder
(Parquet + dataset card + manifest) and back (issue 12).

Export is what makes an archive shareable (a folder, `huggingface-cli upload`, the
Hub's viewer); import is what makes a shared one usable again: it checks the whole
folder and replays every trajectory *before* it creates a run, so a truncated,
altered or foreign dataset leaves the registry exactly as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from lactchain.cli.archive_cmd import load_archive, record_archive
from lactchain.cli.common import (
    DbOption,
    DetachOption,
    JsonOption,
    RunIdOption,
    console,
    fail,
    open_registry,
    print_json,
    run_job,
)


def export_cmd(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The archive run to export: its id or a unique prefix "
                                            "(from `lactchain archive fill`).")],
    directory: Annotated[Path, typer.Argument(
        metavar="DIR", help="Folder to write the dataset into (created if missing; must be empty unless --force): "
                            "data/train-00000-of-00001.parquet, README.md (the dataset card) and "
                            "lactchain_archive.json (the manifest import checks).")],
    force: Annotated[bool, typer.Option(
        "--force", help="Write into a non-empty DIR: a previous export's Parquet shards, card and manifest there "
                        "are replaced; other files are left alone.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export an archive run as a Hugging Face dataset: one Parquet row per trajectory
    (typed columns for the regular fields, JSON strings for free-form ones, so nothing is
    lost), a dataset card listing every field, the scene and the counts, and a manifest
    with the row count and the file's sha256. Load it with
    `datasets.load_dataset("parquet", data_dir=DIR)`, upload it to the Hub as is, or
    bring it back with `lactchain archive import DIR`."""
    from lactchain.archive_dataset import export

    if directory.exists() and not directory.is_dir():
        fail(f"{directory} is a file; give a folder to export into")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        fail(f"{directory} is not empty; pick a new or empty folder, or pass --force to replace a previous "
             "export there")
    registry = open_registry(db)
    run_id, rows = load_archive(registry, run)
    try:
        manifest = export(rows, directory, {"source_run": run_id})
    except ValueError as exc:
        fail(f"run {run_id}: {exc}; nothing was exported")
    result = {"run_id": run_id, "dir": str(directory), "rows": manifest["rows"], "scenes": manifest["scenes"],
              "distinct_bds": manifest["distinct_bds"], "data_file": str(directory / manifest["data_file"]),
              "sha256": manifest["sha256"], "card": str(directory / "README.md")}
    if as_json:
        print_json(result)
        return
    console.print(f"exported {result['rows']} trajectories of {run_id} to {directory} "
                  f"({', '.join(result['scenes'])}; card {result['card']})")


def import_cmd(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(
        metavar="DIR", help="A folder written by `lactchain archive export` (or a copy of it, e.g. a Hub download).")],
    allow_unverified: Annotated[bool, typer.Option(
        "--allow-unverified", help="Import even when some trajectories do not replay as stored (they are kept, and "
                                   "`lactchain archive verify` lists them). Default: refuse.")] = False,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import an exported archive dataset as a new archive run. Everything is checked
    first: the manifest, the Parquet file's sha256 and row count, the columns, every
    row's scene and landmarks, and every trajectory replayed from its start; only then is
    the run created (its params name the source folder and the source run). A truncated,
    altered or foreign dataset is refused in one line and changes nothing."""
    from lactchain.archive_dataset import load_export
    from lactchain.trajectories import Trajectory, verify

    directory = directory.expanduser().absolute()
    ctx.params["directory"] = directory  # a detached job may start elsewhere
    try:
        manifest, rows = load_export(directory)
    except ValueError as exc:
        fail(f"{exc}; nothing was imported")
    mismatches = []
    for i, row in enumerate(rows):
        try:
            problem = verify(Trajectory.from_dict(row))
        except (ValueError, TypeError, KeyError) as exc:
            problem = exc
        if problem is not None:
            mismatches.append((i, row.get("key"), str(problem)))
    if mismatches and not allow_unverified:
        i, key, problem = mismatches[0]
        fail(f"{len(mismatches)} of {len(rows)} trajectories in {directory} do not replay as stored (first: row {i} "
             f"{key}: {problem}); the dataset is corrupted: export it again, or pass --allow-unverified; "
             "nothing was imported")
    verified = len(rows) - len(mismatches)
    scenes = manifest.get("scenes") or []
    params = dict(source_dir=str(directory), source_run=manifest.get("source_run"), sha256=manifest["sha256"],
                  trajectories=len(rows), verified=verified, scene=",".join(scenes),
                  env=",".join(sorted({str(r.get("env")) for r in rows})))

    def body(handle: Any) -> dict[str, Any]:
        path = record_archive(handle, rows)
        handle.log_metrics({"final/elites": float(len(rows)), "final/verified": float(verified)})
        return {"trajectories": len(rows), "verified": verified, "unverified": [
                    {"index": i, "key": k, "problem": p} for i, k, p in mismatches],
                "source_dir": str(directory), "source_run": manifest.get("source_run"), "archive": str(path)}

    run_job(ctx, kind="archive", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"archive {','.join(scenes) or '?'} import", render=_render_import)


def _render_import(result: dict[str, Any]) -> None:
    table = Table(title=f"archive {result['run_id']} (imported)", show_header=False)
    table.add_row("trajectories", str(result["trajectories"]))
    table.add_row("verify by replay", f"{result['verified']}/{result['trajectories']}")
    table.add_row("source run", str(result["source_run"]))
    table.add_row("source folder", result["source_dir"])
    console.print(table)

