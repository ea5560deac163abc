"""`--cells-from` for the benches that run cells (bench learn --compare, bench strategy):
the folder checked before any run exists, and its kept cells written into the new run's
cells/. A config using these has `cells_from`, `resume_from`, `kept_cells()` and `refuse`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lactchain.bench.carried_cells import older_note
from lactchain.jobs.output import err_console


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
