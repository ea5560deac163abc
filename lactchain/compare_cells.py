"""Finished comparison cells kept from a folder (`bench learn --compare ... --cells-from DIR`).

A comparison runs for hours, over several sittings and often several machines; its
registry may not travel, but its cells do (a run folder's cells/, or the copy under
docs/results). A cell is kept only when it belongs to this comparison's plan and was
run with this comparison's settings, so a table never mixes budgets or critics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable

CELL_FIELDS = ("key", "loss", "explore", "seed", "curve")
SUMMARIES = ("compare.json", "compare.partial.json")  # a comparison's summary: its cells and settings
SUMMARY_SETTINGS = ("budget_min", "budget_iterations", "env", "actor", "critic", "labeler")
NOT_SETTINGS = ("loss", "explore", "seed", "deadline")  # the cell's key, or its own clock


def cell_settings(params: dict[str, Any], budget_min: float, budget_iterations: int | None) -> dict[str, Any]:
    """What a cell was run with, beyond its key: its loop params and the budget."""
    kept = {k: v for k, v in params.items() if k not in NOT_SETTINGS}
    return {**kept, "budget_min": budget_min, "budget_iterations": budget_iterations}


def cells_folder(path: str | Path) -> Path:
    """The folder holding the cell files: `path`, or its cells/ (a comparison's run folder)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder; give a comparison's run folder or a copy of its cells")
    return folder / "cells" if (folder / "cells").is_dir() else folder


def _cell(data: Any) -> bool:
    return isinstance(data, dict) and all(f in data for f in CELL_FIELDS)


def read_cells(folder: Path) -> dict[str, dict[str, Any]]:
    """Every cell in `folder` by key: the cell files, and the cells listed in a
    compare(.partial).json (a docs/results copy often holds only that)."""
    cells = {}
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path} is not readable JSON ({exc.__class__.__name__}); move it out of the folder")
        listed = data.get("cells") if path.name in SUMMARIES and isinstance(data, dict) else [data]
        for cell in listed if isinstance(listed, list) else []:
            if _cell(cell):
                cells.setdefault(cell["key"], cell)
    return cells


def summary_settings(folder: Path) -> dict[str, Any] | None:
    """The comparison-level settings in the folder's compare(.partial).json, for cells
    written before cells recorded their own (None: no summary beside them)."""
    for base in (folder, folder.parent):
        for name in SUMMARIES:
            if (base / name).is_file():
                data = json.loads((base / name).read_text())
                return {k: data[k] for k in SUMMARY_SETTINGS if k in data}
    return None


def first_difference(theirs: dict[str, Any], ours: dict[str, Any]) -> str | None:
    """'name A (this comparison: B)' for the first setting both record that differs
    (ours as JSON reads it back, so tuples and lists agree)."""
    ours = json.loads(json.dumps(ours, default=str))
    for name in sorted(set(theirs) & set(ours)):
        if theirs[name] != ours[name]:
            return f"{name.replace('_', '-')} {theirs[name]!r} (this comparison: {ours[name]!r})"
    return None


def keep_cells(path: str | Path, plan: Iterable[str],
               settings_of: Callable[[dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells in `path` that belong to `plan` (cell keys), each checked against
    `settings_of(cell)`, this comparison's settings for that cell; ValueError names the
    first cell that differs. Cells of other keys are left alone (not kept)."""
    folder = cells_folder(path)
    found = read_cells(folder)
    if not found:
        raise ValueError(f"{folder} holds no comparison cells (<loss>-explore<N>-seed<S>.json)")
    kept = [found[key] for key in plan if key in found]
    summary = None
    for cell in kept:
        recorded = cell.get("settings")
        if recorded is None:
            summary = summary if summary is not None else summary_settings(folder)
            if summary is None:
                raise ValueError(f"cell {cell['key']} records no settings and no compare.json is beside it; "
                                 "keep the comparison's folder whole")
            recorded = summary
        differs = first_difference(recorded, settings_of(cell))
        if differs:
            raise ValueError(f"cell {cell['key']} was run with {differs}; "
                             "keep only cells run with this comparison's settings")
    return kept
