"""Pruning trainer checkpoints: what a finished train-actor run no longer needs.

A finished run's result is its adapter (`--adapter RUN` starts from it; evaluate, play and
the console load it). The trainer checkpoints beside it (`checkpoints/checkpoint-N`: the
adapter again with the optimizer, scheduler and RNG state) exist to resume a stopped run,
and in a registry of benchmarks they are close to half the disk. `lactchain runs prune`
removes them from FINISHED runs, and from KILLED or FAILED runs only once a `runs resume`
of them finished (until then they are what it resumes from); it touches nothing else: the
adapter, the critic, logs and every row but the checkpoints'.
As with `runs delete`, rows go first, then folders, and only a `checkpoints` folder
directly in a run's own folder is ever removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from lactchain.runs.checkpoints import TRAINER_CHECKPOINTS
from lactchain.runs.delete import folder_size, remove_folders, run_folder
from lactchain.runs.lifecycle import reap_dead_runs
from lactchain.runs.resume import CHECKPOINTS, RESUMES_TAG

CHECKPOINT_KIND = CHECKPOINTS["actor"]  # the artifact kind a trainer's checkpoints are recorded as


@dataclass(frozen=True)
class PrunePlan:
    """The runs whose checkpoints would go, their folders and how much they hold."""

    runs: tuple[dict[str, Any], ...]
    folders: tuple[Path, ...]
    sizes: tuple[int, ...]  # bytes of each folder

    @property
    def ids(self) -> list[str]:
        return [str(run["id"]) for run in self.runs]

    @property
    def size_bytes(self) -> int:
        return sum(self.sizes)


def plan_prune(registry: Any, run_ids: Iterable[str] = ()) -> PrunePlan:
    """The checkpoints of `run_ids` (every run `done_runs` lists when none is named). A named
    run that still resumes from them is refused (ValueError, one line)."""
    reap_dead_runs(registry)
    named = [registry.get_run(run_id) for run_id in run_ids]
    done = {run["id"] for run in done_runs(registry)} if named else set()
    for run in named:
        if run["id"] not in done:
            raise ValueError(f"{run['id']} is {run['status']}: its checkpoints are what `lactchain runs resume` "
                             "continues from; prune finished runs (or stopped ones whose resume finished) only")
    return prunable(registry, named or done_runs(registry))


def done_runs(registry: Any) -> list[dict[str, Any]]:
    """The runs whose checkpoints nothing will resume from: the FINISHED ones, and a KILLED
    or FAILED run every `runs resume` of which is done too (finished, or stopped and itself
    resumed to the end). A run resumed twice, once to the end and once still stopped or
    running, keeps its checkpoints: the second resume may still read them (its lineage)."""
    runs = registry.list_runs()
    resumed_by: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        before = registry.tags(run["id"]).get(RESUMES_TAG)
        if before:
            resumed_by.setdefault(before, []).append(run)

    def done(run: dict[str, Any], seen: frozenset[str]) -> bool:
        if run["status"] == "FINISHED":
            return True
        if run["status"] not in ("KILLED", "FAILED") or run["id"] in seen:
            return False
        resumes = resumed_by.get(run["id"], [])
        return bool(resumes) and all(done(later, seen | {run["id"]}) for later in resumes)

    return [run for run in runs if done(run, frozenset())]


def prunable(registry: Any, runs: Iterable[dict[str, Any]]) -> PrunePlan:
    """Of `runs`, those with a trainer checkpoints folder, and its size (no check of their
    status: `runs du` reads it of the finished runs without writing anything)."""
    kept = [(run, folder) for run in runs if (folder := _checkpoints(registry, run)) is not None]
    return PrunePlan(runs=tuple(run for run, _ in kept), folders=tuple(folder for _, folder in kept),
                     sizes=tuple(folder_size(folder) for _, folder in kept))


def prune_checkpoints(registry: Any, plan: PrunePlan) -> list[str]:
    """Remove the plan's checkpoint rows (one transaction), then their folders. Returns the
    folders that could not be removed, each with the reason."""
    with registry.transaction():
        for run_id in plan.ids:
            registry.delete_artifacts(run_id, CHECKPOINT_KIND)
    return remove_folders(plan.folders)


def _checkpoints(registry: Any, run: dict[str, Any]) -> Path | None:
    """`<run folder>/checkpoints` when it is there (the run's own folder only: see `run_folder`)."""
    folder = run_folder(registry, run)
    if folder is None or folder.is_symlink():
        return None
    checkpoints = folder / TRAINER_CHECKPOINTS
    return checkpoints if checkpoints.is_symlink() or checkpoints.is_dir() else None
