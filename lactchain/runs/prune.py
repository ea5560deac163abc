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
from lactchain.runs.delete import folder_size, remove_folders, run_folder, run_of_folder
from lactchain.runs.lifecycle import reap_dead_runs
from lactchain.runs.resume import CHECKPOINTS, RESUMES_TAG, lineage, pipeline_phase

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
    named = list({(run := registry.get_run(run_id))["id"]: run for run_id in run_ids}.values())  # a prefix and
    done = {run["id"] for run in done_runs(registry)} if named else set()  # the id name one run once
    for run in named:
        if run["id"] not in done:
            raise ValueError(_why_kept(registry, run))
    return prunable(registry, named or done_runs(registry))


def done_runs(registry: Any) -> list[dict[str, Any]]:
    """The runs whose checkpoints nothing will resume from: FINISHED runs and KILLED or FAILED
    ones whose every `runs resume` is done too (finished, or stopped and itself resumed to
    the end), and stopped phases of a pipeline (a pipeline's resume redoes its unfinished
    phase; the phase itself is not resumed); minus every run in the lineage of a run that
    is not done (a run still running or stopped reads its lineage's newest checkpoint: a
    `--resume-from` of a finished run, a second resume of a stopped one)."""
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
        if pipeline_phase(registry, run):
            return True
        resumes = resumed_by.get(run["id"], [])
        return bool(resumes) and all(done(later, seen | {run["id"]}) for later in resumes)

    finished = {run["id"]: run for run in runs if done(run, frozenset())}
    for run in runs:
        if run["id"] not in finished:
            for earlier in lineage(registry, run["id"]):
                finished.pop(earlier["id"], None)
                for source in _resumed_folders(registry, earlier):  # `--resume-from runs/<id>/checkpoints/...`
                    finished.pop(source, None)
    return list(finished.values())


def _resumed_folders(registry: Any, run: dict[str, Any]) -> list[str]:
    """The runs whose folders hold a checkpoint folder this run resumes from by path."""
    values = (registry.params(run["id"]).get(key) for key in ("resume", "resume_from"))
    return [owner for value in values if isinstance(value, str) and value
            and (owner := run_of_folder(registry, Path(value))) is not None]


def _why_kept(registry: Any, run: dict[str, Any]) -> str:
    if run["status"] in ("RUNNING", "SCHEDULED"):
        return f"{run['id']} is {run['status']}: prune it once it ended"
    if run["status"] in ("KILLED", "FAILED"):
        return (f"{run['id']} is {run['status']}: its checkpoints are what `lactchain runs resume` continues from; "
                "prune finished runs (or stopped ones whose resumes all finished) only")
    return (f"{run['id']} is {run['status']}, but a run not yet finished resumes from its checkpoints "
            "(a --resume-from of it, or a stopped resume); prune it once that one finished")


def prunable(registry: Any, runs: Iterable[dict[str, Any]]) -> PrunePlan:
    """Of `runs`, those with a trainer checkpoints folder, and its size (no check of their
    status: `runs du` reads it of `done_runs` without writing anything)."""
    kept = [(run, folder) for run in runs if (folder := _checkpoints(registry, run)) is not None]
    return PrunePlan(runs=tuple(run for run, _ in kept), folders=tuple(folder for _, folder in kept),
                     sizes=tuple(folder_size(folder) for _, folder in kept))


def prune_checkpoints(registry: Any, plan: PrunePlan) -> list[str]:
    """Remove the plan's checkpoint rows (one transaction), then their folders. Returns the
    folders that could not be removed, each with the reason. A run resumed since the plan
    (the console's R while the question waited) is refused, removing nothing (ValueError)."""
    reap_dead_runs(registry)
    done = {run["id"] for run in done_runs(registry)}
    for run_id in plan.ids:
        if run_id not in done:
            raise ValueError(f"{_why_kept(registry, registry.get_run(run_id))} (it changed since the plan; "
                             "nothing was removed)")
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
