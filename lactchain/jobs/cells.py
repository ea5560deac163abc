"""The benches that run cells (bench learn --compare, bench strategy): the one sweep runner
(`run_cells`: a cell's result kept as cells/<key>.json the moment it ends, so a resume or
`--cells-from` runs only the rest), and `--cells-from` checked before any run exists. A
config using these has `cells_from`, `resume_from`, `kept_cells()` and `refuse`."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from lactchain.bench.carried_cells import older_note
from lactchain.jobs.output import err_console
from lactchain.machine import code_version, machine_info
from lactchain.runs.lifecycle import Cancelled

CELLS_DIR = "cells"  # <bench run>/cells/<cell key>.json: a finished cell's result


def check_cells_from(config: Any) -> None:
    """The folder made absolute (a detached job runs elsewhere) and its cells checked; a
    resume skips it (its own cells/ already hold them)."""
    if config.cells_from is None or config.resume_from:
        return
    config.cells_from = str(Path(config.cells_from).expanduser().absolute())
    try:
        config.kept_cells()
    except ValueError as exc:
        config.refuse("cells_from", str(exc))


def write_kept_cells(config: Any, cells_dir: Path) -> None:
    """The --cells-from cells this bench keeps, written into its cells/ as if it had run them."""
    for cell in [] if config.resume_from else config.kept_cells():
        (cells_dir / f"{cell['key']}.json").write_text(json.dumps(cell, default=str))
        err_console.print(f"cell {cell['key']} kept from {config.cells_from} (run {cell.get('run_id')})"
                          + older_note(cell))


def finished_cells(handle: Any) -> list[dict[str, Any]]:
    """The cells this bench holds finished so far (run, kept by a resume or --cells-from)."""
    folder = Path(handle.dir) / CELLS_DIR
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def run_cells(handle: Any, config: Any, plan: Sequence[tuple[str, Any]],
              run_cell: Callable[[int, str, Any], dict[str, Any]],
              report: Callable[[int, dict[str, Any]], None] | None = None,
              on_cancel: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
    """Every cell of `plan` ((key, what run_cell needs) each), in order: the cells a resumed
    bench or `--cells-from` already holds are read back, the others run by
    `run_cell(n, key, spec)` (it makes the cell's child run and returns its result), stamped
    with key, wall minutes, machine and code, written at once, then `report(n, cell)`ed. A
    cancel between or inside cells hands the finished ones to `on_cancel` and goes on up."""
    reg = handle.registry
    cells_dir = Path(handle.dir) / CELLS_DIR
    cells_dir.mkdir(parents=True, exist_ok=True)
    if config.resume_from:  # a stopped bench: its finished cells are kept
        old = reg.run_dir(reg.resolve_run_id(config.resume_from)) / CELLS_DIR
        kept = sorted(old.glob("*.json")) if old.is_dir() else []
        for path in kept:
            shutil.copy(path, cells_dir / path.name)
        err_console.print(f"resuming {config.resume_from}: {len(kept)} finished cell(s) kept")
    write_kept_cells(config, cells_dir)
    results: list[dict[str, Any]] = []
    try:
        for n, (key, spec) in enumerate(plan, 1):
            done = cells_dir / f"{key}.json"
            if done.is_file():
                results.append(json.loads(done.read_text()))
                continue
            handle.check_cancelled()
            t0 = time.time()
            cell = {"key": key, **run_cell(n, key, spec)}
            cell.update(wall_min=(time.time() - t0) / 60, machine=machine_info(), code=code_version())
            done.write_text(json.dumps(cell, default=str))
            results.append(cell)
            if report is not None:
                report(n, cell)
    except Cancelled:
        if on_cancel is not None and results:
            on_cancel(results)
        raise
    return results
