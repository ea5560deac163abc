"""Deleting runs and their folders (checkpoints and adapters are most of a registry's disk).

What would go and what would break is worked out first, in one `DeletePlan`, so the CLI
(`lactchain runs delete`) and the console (Runs: D) ask the same question and refuse for
the same reasons: a run still running (stop it first), child runs not asked for (a
pipeline's phases, a run resumed from it), and kept runs that read a run being deleted
(its critic, adapter, pairs or archive; a stopped pipeline its phases, which its resume
goes on from). Rows go first, in one transaction; then the folders -- a crash between
leaves a folder without a run, never a run without its files.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from lactchain.runs.lifecycle import ACTIVE, reap_dead_runs
from lactchain.runs.resume import RESUMES_TAG, NotResumable, check_resumable


@dataclass(frozen=True)
class DeletePlan:
    """The runs to delete (asked ones first, then their descendants) and why not, if not."""

    runs: tuple[dict[str, Any], ...]
    children: tuple[str, ...] = ()  # descendants nobody named: deleted only when allowed
    active: tuple[str, ...] = ()  # still RUNNING or SCHEDULED: never deleted
    used_by: dict[str, tuple[str, ...]] = field(default_factory=dict)  # kept run -> the deleted runs it reads
    folders: tuple[Path, ...] = ()
    size_bytes: int = 0
    human_labels: int = 0  # pairs a person labelled (the Label screen): work, not a rerun, to lose

    @property
    def ids(self) -> list[str]:
        return [str(run["id"]) for run in self.runs]

    def problem(self, *, children: bool, force: bool) -> str | None:
        """The one-line reason to refuse (with the flag that overrides it), or None."""
        if self.active:
            return (f"{_names(self.active)} {'is' if len(self.active) == 1 else 'are'} still running: "
                    f"stop {'it' if len(self.active) == 1 else 'them'} first (lactchain runs kill ID)")
        if self.children and not children:
            return (f"{len(self.children)} child run(s) would be left without their parent ({_names(self.children)}): "
                    "add --children to delete them too")
        if self.used_by and not force:
            readers = ", ".join(f"{kept} reads {_names(gone)}" for kept, gone in self.used_by.items())
            return f"kept runs read runs being deleted ({readers}): add --force to delete anyway"
        return None

    def summary(self) -> str:
        n = len(self.runs)
        labels = f", {self.human_labels} pair(s) labelled by hand" if self.human_labels else ""
        return f"{n} run{'s' if n != 1 else ''}, {human_bytes(self.size_bytes)} on disk{labels}"


def plan_delete(registry: Any, run_ids: Iterable[str]) -> DeletePlan:
    """The plan for deleting `run_ids` (ids or unique prefixes; RunNotFound otherwise) and
    every descendant. Dead "running" runs are reaped first, so only live ones block."""
    reap_dead_runs(registry)
    asked: dict[str, dict[str, Any]] = {}
    for run_id in run_ids:
        run = registry.get_run(run_id)
        asked.setdefault(str(run["id"]), run)
    runs = {**asked, **{str(child["id"]): child for child in registry.descendants(asked)}}
    used_by: dict[str, list[str]] = {}
    for run_id, run in runs.items():
        for reader in registry.runs_naming(run_id) + _resumed_parent(registry, run):
            if reader not in runs and run_id not in used_by.get(reader, []):
                used_by.setdefault(reader, []).append(run_id)
    folders = tuple(folder for folder in (run_folder(registry, run) for run in runs.values()) if folder is not None)
    return DeletePlan(
        runs=tuple(runs.values()),
        children=tuple(run_id for run_id in runs if run_id not in asked),
        active=tuple(run_id for run_id, run in runs.items() if run["status"] in ACTIVE),
        used_by={reader: tuple(gone) for reader, gone in sorted(used_by.items())},
        folders=folders,
        size_bytes=sum(folder_size(folder) for folder in folders),
        human_labels=len(registry.pairs(list(runs), labeler="human", status=("labeled", "tie"))) if runs else 0,
    )


def _resumed_parent(registry: Any, run: dict[str, Any]) -> list[str]:
    """[the parent] when it reads this run: a pipeline still running goes on from its
    finished phases (their critic checkpoint, adapter, elites), and `runs resume` of a
    stopped one does. Not a comparison (it keeps its cells as files), nor a run that is
    itself a resume of it."""
    if not run.get("parent_id") or registry.tags(run["id"]).get(RESUMES_TAG) == run["parent_id"]:
        return []
    parent = registry.get_run(run["parent_id"])
    if parent["kind"] != "pipeline" or registry.params(parent["id"]).get("compare"):
        return []
    if parent["status"] in ACTIVE:
        return [str(parent["id"])]
    try:
        check_resumable(registry, parent)
    except NotResumable:
        return []
    return [str(parent["id"])]


def delete_runs(registry: Any, plan: DeletePlan) -> list[str]:
    """Delete the plan's runs (rows in one transaction), then their folders. Returns the
    folders that could not be removed, each with the reason (the rows are gone anyway)."""
    live = [run_id for run_id in plan.ids if registry.get_run(run_id)["status"] in ACTIVE]
    if live:  # started (resumed) since the plan was made
        raise ValueError(f"{_names(live)} started running since: stop it first (lactchain runs kill ID)")
    with registry.transaction():
        for run_id in reversed(plan.ids):  # descendants first: no child is ever orphaned mid-way
            registry.delete_run(run_id)
    return remove_folders(plan.folders)


def remove_folders(folders: Iterable[Path]) -> list[str]:
    """Remove each folder (a link: the link only, never what it points at); the ones that
    could not be removed, each with the reason."""
    left: list[str] = []
    for folder in folders:
        errors: list[str] = []
        if folder.is_symlink():  # a link a user made: drop the link, never what it points at
            folder.unlink()
        else:
            shutil.rmtree(folder, onerror=lambda _f, path, exc: errors.append(f"{path}: {exc[1]}"))
        if errors:
            left.append(f"{folder} ({errors[0]})")
    return left


def run_sizes(registry: Any) -> list[tuple[dict[str, Any], int]]:
    """Every run with the bytes its folder holds, biggest first (`runs du`: what to delete)."""
    sized = []
    for run in registry.list_runs():
        folder = run_folder(registry, run)
        sized.append((run, folder_size(folder) if folder is not None else 0))
    return sorted(sized, key=lambda pair: -pair[1])


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def run_folder(registry: Any, run: dict[str, Any]) -> Path | None:
    """The run's own folder, `<runs_dir>/<kind>-<8 hex>`, when it is there: only a folder
    named as the registry names runs (an id read from a hostile file -- `..`, the registry's
    own file name -- never points the delete anywhere else)."""
    run_id = str(run["id"])
    if not re.fullmatch(rf"{re.escape(str(run.get('kind')))}-[0-9a-f]{{8}}", run_id):
        return None
    folder = Path(registry.runs_dir) / run_id
    return folder if folder.is_symlink() or folder.is_dir() else None


def run_of_folder(registry: Any, folder: Path) -> str | None:
    """The run id a path under the registry's runs folder belongs to (runs/<id>/...), or
    None for a path elsewhere (the reverse of `run_folder`, unchecked)."""
    try:
        parts = Path(folder).resolve().relative_to(Path(registry.runs_dir).resolve()).parts
    except (ValueError, OSError):
        return None
    return parts[0] if parts else None


def folder_size(folder: Path) -> int:
    """Bytes of the files under `folder` (a link counts nothing: it is not the run's)."""
    if folder.is_symlink():
        return 0
    total = 0
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                pass
    return total


def _names(ids: Iterable[str], most: int = 4) -> str:
    ids = list(ids)
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")
