"""Finished benchmark cells kept from a folder (`bench learn --compare ... --cells-from DIR`,
`bench strategy ... --cells-from DIR`).

A comparison runs for hours, over several sittings and often several machines; its
registry may not travel, but its cells do (a run folder's cells/, or the copy under
docs/results). A cell is kept only when it belongs to this bench's plan and was run
with this bench's settings, so a table never mixes budgets or critics."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from lactchain.machine import code_version
from lactchain.train.actor_config import GRPO_PLAIN


@dataclass(frozen=True)
class CellKind:
    """What one bench's cells look like: the fields that make a JSON object a cell, the
    summary files that also list cells (and the settings an older cell is checked by),
    the params that are the cell's key rather than its settings."""

    fields: tuple[str, ...]
    summaries: tuple[str, ...]
    summary_settings: tuple[str, ...]
    key_params: tuple[str, ...]
    file_pattern: str
    # Settings older cells do not record, and what those cells ran with: a cell that lacks
    # one is read as having run with that value (so it is not kept beside cells run otherwise).
    ran_before_recorded: tuple[tuple[str, Any], ...] = ()


COMPARE_CELLS = CellKind(fields=("key", "loss", "explore", "seed", "curve"),
                         summaries=("compare.json", "compare.partial.json"),
                         summary_settings=("budget_min", "budget_iterations", "env", "actor", "critic", "labeler"),
                         key_params=("loss", "explore", "seed", "deadline"),
                         file_pattern="<loss>-explore<N>-seed<S>.json",
                         ran_before_recorded=(("updates_per_generation", 1), ("grpo_reward", "labeler"),
                                              ("grammar_spelling", "any"), ("greedy_member", False),
                                              ("actor_batch_tokens", None),
                                              *GRPO_PLAIN.items()))
STRATEGY_CELLS = CellKind(fields=("key", "proposer", "seed", "curve"), summaries=("bench_strategy.json",),
                          summary_settings=("budget_min", "actor", "env", "scene"),
                          key_params=("proposers", "seed", "resume_from"), file_pattern="<proposer>-seed<S>.json",
                          # before --dtype defaulted to auto, a search generated at the weights' dtype and
                          # recorded no engine settings: float32 on the CPUs those cells ran on
                          ran_before_recorded=(("engine", "hf"), ("dtype", "float32")))


def cell_settings(kind: CellKind, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """What a cell was run with beyond its key: its params (and `extra`, e.g. the budget)."""
    return {**{k: v for k, v in params.items() if k not in kind.key_params}, **extra}


def cells_folder(path: str | Path) -> Path:
    """The folder holding the cell files: `path`, or its cells/ (a bench's run folder)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder; give a benchmark's run folder or a copy of its cells")
    return folder / "cells" if (folder / "cells").is_dir() else folder


def read_cells(kind: CellKind, folder: Path) -> dict[str, dict[str, Any]]:
    """Every cell in `folder` (and beside it, for a run folder's cells/) by key: the cell
    files, and the cells a summary lists (a docs/results copy often holds only that). A
    cell file wins over a summary's entry of the same key: it is that cell's own record
    (e.g. a rerun, or a later variant of a method, put into a docs copy's cells/)."""
    cells: dict[str, dict[str, Any]] = {}
    files = sorted(p for p in folder.glob("*.json") if p.name not in kind.summaries)
    summaries = [base / name for base in (folder.parent, folder) for name in kind.summaries]
    for path in [*files, *summaries]:
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path} is not readable JSON ({exc.__class__.__name__}); move it out of the folder")
        listed = data.get("cells") if path.name in kind.summaries and isinstance(data, dict) else [data]
        for cell in listed if isinstance(listed, list) else []:
            if isinstance(cell, dict) and all(f in cell for f in kind.fields):
                cells.setdefault(cell["key"], cell)
    return cells


def summary_settings(kind: CellKind, folder: Path) -> dict[str, Any] | None:
    """The settings a summary beside the cells records, for cells written before cells
    recorded their own (None: no summary)."""
    for base in (folder, folder.parent):
        for name in kind.summaries:
            if (base / name).is_file():
                data = json.loads((base / name).read_text())
                return {k: data[k] for k in kind.summary_settings if k in data}
    return None


def first_difference(theirs: dict[str, Any], ours: dict[str, Any]) -> str | None:
    """'name A (this bench: B)' for the first setting both record that differs (ours as
    JSON reads it back, so tuples and lists agree)."""
    ours = json.loads(json.dumps(ours, default=str))
    for name in sorted(set(theirs) & set(ours)):
        if theirs[name] != ours[name]:
            return f"{name.replace('_', '-')} {theirs[name]!r} (this benchmark: {ours[name]!r})"
    return None


def keep_cells(kind: CellKind, path: str | Path, plan: Iterable[str],
               settings_of: Callable[[dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells in `path` that belong to `plan` (cell keys), each checked against
    `settings_of(cell)`, this bench's settings for that cell; ValueError names the first
    cell that differs. Cells of other keys are left alone (not kept)."""
    folder = cells_folder(path)
    found = read_cells(kind, folder)
    if not found:
        raise ValueError(f"{folder} holds no benchmark cells ({kind.file_pattern})")
    kept = [found[key] for key in plan if key in found]
    older = [c for c in kept if c.get("settings") is None]
    summary = summary_settings(kind, folder) if older else None
    if older and summary is None:
        raise ValueError(f"cell {older[0]['key']} records no settings and no summary is beside it; "
                         "keep the benchmark's folder whole")
    for cell in kept:
        recorded = cell["settings"] if cell.get("settings") is not None else summary
        differs = first_difference({**dict(kind.ran_before_recorded), **recorded}, settings_of(cell))
        if differs:
            raise ValueError(f"cell {cell['key']} was run with {differs}; "
                             "keep only cells run with this benchmark's settings")
    return kept


def older_note(cell: dict[str, Any]) -> str:
    """The caveats printed beside a kept cell: settings it predates, and code other than
    this run's (not refused: a fix elsewhere need not void a measured cell, but the
    reader of the table should know the numbers came from another commit)."""
    note = "" if "settings" in cell else " (an older cell: only the settings its summary records were checked)"
    theirs = (cell.get("code") or {}).get("commit")
    ours = code_version()["commit"]
    if theirs is None:
        return note + " (its code is not recorded)"
    if ours is not None and theirs != ours:
        note += f" (code {theirs}; this run: {ours})"
    return note
