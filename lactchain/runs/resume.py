"""Which runs can be resumed, and from what: the newest checkpoint on disk in a run's lineage.

A resumed run records where it came from (`resume_from` / `resume` in its params,
and the old run as its parent), so a resume that dies before its first checkpoint
can be resumed again: the walk goes back through the lineage to the newest
checkpoint that still exists. Short, deterministic runs (play, pairs, eval) are
not resumed: they are started again.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

# run kind -> artifact kind its checkpoints are stored as
CHECKPOINTS = {"critic": "critic", "actor": "checkpoint", "pipeline": "pipeline-state", "dt": "dt",
               "strategy": "strategy-search"}
# run kinds whose rows are their progress: a resume skips what the lineage already wrote
ROW_RESUMED = ("judge",)
_RESUME_PARAMS = ("resume_from", "resume")


# The command a researcher typed -> the run kind it records (`kind:train-critic` finds critic runs).
KIND_ALIASES = {"train-critic": "critic", "train-actor": "actor", "collect-pairs": "pairs", "evaluate": "eval",
                "labelling": "labels", "train-reward": "reward", "reward-agents": "agents"}


def kill_outcome(kind: str) -> str:
    """What stopping a run of this kind (or of the command that records it) leaves, for a
    Kill dialog that promises only what `runs resume` will do."""
    kind = KIND_ALIASES.get(kind, kind)
    if kind in CHECKPOINTS:
        return "It saves a checkpoint and ends KILLED; `R` resumes it later."
    if kind in ROW_RESUMED:
        return "It ends KILLED, keeping what it wrote; `R` resumes it later."
    return f"It ends KILLED; {kind} runs are short and keep no checkpoint: start it again to redo it."


class NotResumable(ValueError):
    """A run that `runs resume` must refuse, with the reason and what to do instead."""


def lineage(registry: Any, run_id: str) -> Iterator[dict[str, Any]]:
    """The run, then the run it resumed, and so on (cycles and missing runs end the walk)."""
    seen: set[str] = set()
    current: str | None = run_id
    while current and current not in seen:
        seen.add(current)
        try:
            run = registry.get_run(current)
        except KeyError:
            return
        yield run
        params = registry.params(run["id"])
        source = next((params[k] for k in _RESUME_PARAMS if params.get(k)), None)
        if source is None and run.get("parent_id"):
            parent = registry.get_run(run["parent_id"])
            source = parent["id"] if parent["kind"] == run["kind"] else None
        current = source if isinstance(source, str) and not Path(source).is_dir() else None


def latest_checkpoint(registry: Any, run_id: str, kind: str | None = None) -> dict[str, Any] | None:
    """The newest checkpoint artifact whose files exist and are whole (its manifest, where
    it has one, still matches: `runs.checkpoints.damage`), searching back through the
    lineage. A damaged newer one is passed over for an older whole one, and the log (stderr)
    says which; when some exist and none is whole, DamagedCheckpoint says so in one line (a
    resume from damaged files is refused, never started)."""
    from lactchain.runs.checkpoints import DamagedCheckpoint, damage

    damaged: tuple[dict[str, Any], str] | None = None
    for run in lineage(registry, run_id):
        artifact_kind = kind or CHECKPOINTS.get(run["kind"])
        if artifact_kind is None:
            break
        for art in reversed(registry.artifacts(run["id"], artifact_kind)):
            if not Path(art["path"]).exists():
                continue
            problem = damage(art["path"]) if Path(art["path"]).is_dir() else None
            if problem is None:
                if damaged is not None:
                    print(f"checkpoint {damaged[0]['path']} is damaged ({damaged[1]}); using the one before it, "
                          f"{art['path']}", file=sys.stderr)
                return art
            damaged = damaged or (art, problem)
    if damaged is not None:
        raise DamagedCheckpoint(f"checkpoint {damaged[0]['path']} is damaged ({damaged[1]}) and no whole one comes "
                                "before it; restore its files or train the run again")
    return None


RESUMES_TAG = "resumes"  # on a run made by `runs resume`: the run it continues (its parent)


def process_owner(registry: Any, run: dict[str, Any]) -> str | None:
    """The run whose process recorded this run's command line, when that is another run: a
    detached job's (`python -m lactchain.jobs ... --run-id OWNER`), or the parent's own
    command line (a cell of a benchmark run in the foreground); None for a run of its own."""
    cmd = [str(part) for part in run.get("cmd") or []]
    if "--run-id" in cmd and cmd.index("--run-id") + 1 < len(cmd):
        owner = cmd[cmd.index("--run-id") + 1]
        return owner if owner != run["id"] else None
    if run.get("parent_id") and cmd and list(registry.get_run(run["parent_id"]).get("cmd") or []) == cmd:
        return str(run["parent_id"])
    return None


def _benchmark_of_cells(registry: Any, run: dict[str, Any]) -> str | None:
    """The benchmark this run is a cell of, when that benchmark resumes cell by cell (bench
    strategy, bench learn --compare): the run whose process it ran in, else its parent
    (a foreground cell records the process's argv, the benchmark its own command line).
    A benchmark's other children (bench dt's training, bench motif's judge) resume alone."""
    for owner_id in dict.fromkeys(filter(None, (process_owner(registry, run), run.get("parent_id")))):
        if registry.tags(run["id"]).get(RESUMES_TAG) == owner_id:
            continue  # a resume of it, not a part
        try:
            owner = registry.get_run(owner_id)
        except (KeyError, ValueError):
            continue
        if resumes_by_cells(registry, owner):
            return str(owner_id)
    return None


def resumes_by_cells(registry: Any, run: dict[str, Any]) -> bool:
    """A benchmark of cells (bench strategy, bench learn --compare): a resume keeps its
    finished cells and runs the rest."""
    bench = [str(part) for part in (run.get("cmd") or [])][1:3]
    return bench == ["bench", "strategy"] or (bench == ["bench", "learn"] and bool(registry.params(run["id"]).get(
        "compare")))


def pipeline_phase(registry: Any, run: dict[str, Any]) -> bool:
    """A phase of a pipeline run (not a `runs resume` of the pipeline under it): resumed only
    with its pipeline, which redoes an unfinished phase."""
    parent = run.get("parent_id")
    if not parent or registry.tags(run["id"]).get(RESUMES_TAG) == parent:
        return False
    try:
        return registry.get_run(parent)["kind"] == "pipeline"
    except (KeyError, ValueError):  # the pipeline was deleted
        return False


def check_resumable(registry: Any, run: dict[str, Any]) -> None:
    """Raise NotResumable when `runs resume` must refuse this run."""
    if run["status"] not in ("KILLED", "FAILED"):
        raise NotResumable(f"run {run['id']} is {run['status']}; only KILLED or FAILED runs can be resumed")
    if run["kind"] not in CHECKPOINTS and run["kind"] not in ROW_RESUMED:
        raise NotResumable(f"{run['kind']} runs cannot be resumed (they are short and keep no checkpoint): "
                           f"start it again with its command (`lactchain runs show {run['id']}`)")
    if pipeline_phase(registry, run):
        raise NotResumable(f"run {run['id']} is a phase of pipeline {run['parent_id']}: resume the pipeline "
                           f"(`lactchain runs resume {run['parent_id']}`)")
    owner = _benchmark_of_cells(registry, run)
    if owner is not None:  # a cell: its command line is its benchmark's process
        raise NotResumable(f"run {run['id']} ran inside {owner}, as a part of it: resume that "
                           f"(`lactchain runs resume {owner}`), which goes on at its first unfinished part")
    if (carried := finished_resume(registry, run)) is not None:  # resumed again, it would do that work twice
        raise NotResumable(f"run {run['id']} was resumed to the end by {carried}: its result is {carried}'s "
                           f"(`lactchain runs show {carried}`); to run it again, start it with its command")
    if resumes_by_cells(registry, run):
        return  # a resume keeps the finished cells and runs the rest
    params = registry.params(run["id"])
    if list(run.get("cmd") or [])[1:3] == ["bench", "learn"]:
        raise NotResumable(f"run {run['id']} is a benchmark: it measures a time budget and is run again, not resumed "
                           "(a --compare benchmark resumes cell by cell)")
    if run["kind"] == "actor" and params.get("loss") == "rft":
        raise NotResumable(f"run {run['id']} trained with rft, which is short and keeps no checkpoint: start it again")
    try:
        saved = latest_checkpoint(registry, run["id"]) if run["kind"] not in ("pipeline", *ROW_RESUMED) else True
    except ValueError as exc:
        raise NotResumable(f"run {run['id']}: {exc}") from None
    if saved is None:
        raise NotResumable(f"run {run['id']} saved no checkpoint before it stopped (nor did the runs it resumed): "
                           f"start it again with its command (`lactchain runs show {run['id']}`)")
    if not run.get("cmd"):
        raise NotResumable(f"run {run['id']} has no recorded command to resume")


def finished_resume(registry: Any, run: dict[str, Any]) -> str | None:
    """The run that carried this one to the end, if any: a `runs resume` of it (or of a
    resume of it, ...) that FINISHED."""
    frontier, seen = [run["id"]], set()
    while frontier:
        run_id = frontier.pop(0)
        if run_id in seen:
            continue
        seen.add(run_id)
        for child in registry.list_runs(parent_id=run_id):
            if registry.tags(child["id"]).get(RESUMES_TAG) == run_id:
                if child["status"] == "FINISHED":
                    return str(child["id"])
                frontier.append(child["id"])
    return None
