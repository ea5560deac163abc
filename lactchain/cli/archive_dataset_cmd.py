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

from lactchain.cli.archive_cmd import load_archive
from lactchain.cli.common import (
    DbOption,
    JsonOption,
    console,
    fail,
    open_registry,
    print_json,
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
    from lactchain.archive.dataset import export

    if directory.exists() and not directory.is_dir():
        fail(f"{directory} is a file; give a folder to export into")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        fail(f"{directory} is not empty; pick a new or empty folder, or pass --force to replace a previous "
             "export there")
    with open_registry(db) as registry:
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


def _register_import() -> Any:
    """`archive import`: generated from the job's config (lactchain.jobs.archive)."""
    from lactchain.cli.generate import make_command
    from lactchain.jobs.table import JOBS

    return make_command(JOBS["archive import"], render=_render_import)


def _render_import(result: dict[str, Any]) -> None:
    table = Table(title=f"archive {result['run_id']} (imported)", show_header=False)
    table.add_row("trajectories", str(result["trajectories"]))
    table.add_row("verify by replay", f"{result['verified']}/{result['trajectories']}")
    table.add_row("source run", str(result["source_run"]))
    table.add_row("source folder", result["source_dir"])
    console.print(table)

