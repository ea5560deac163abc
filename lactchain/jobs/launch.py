"""Starting a job: checked first, then in the foreground or as a detached process.

A detached job is `python -m lactchain.jobs JOB runs/<id>/config.json --run-id ID
--db DB` in its own session (stdin /dev/null, output to runs/<id>/log.txt). The
config saved in the run folder is what the child runs and what `runs resume`
re-reads, so a job never depends on re-parsing a command line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lactchain.config import Config, ConfigError, flag_of, flat_fields
from lactchain.jobs.checks import check_adoptable, check_models, check_references, run_notes
from lactchain.jobs.output import err_console
from lactchain.jobs.ranks import check_gpus_fit, processes_of, run_ranks
from lactchain.jobs.spec import Job
from lactchain.runs.lifecycle import run_context, spawn, strip_detach
from lactchain.runs.resume import process_owner
from lactchain.machine import code_tags

CONFIG_FILE = "config.json"


def precheck(job: Job, config: Config) -> None:
    """The checks that need no registry (models, an engine, the GPUs), so a refusal leaves
    no registry file behind."""
    params = config.to_params()
    check_models(params.get("actor"), params.get("critic"))
    check_gpus_fit(config)
    if job.precheck is not None:
        job.precheck(config)


def prepare(registry: Any, job: Job, config: Config) -> dict[str, Any]:
    """The checks that need the registry (after `precheck`), before the run exists;
    returns the params to record (the config's, plus the strategy text actually
    rendered and the job's extras)."""
    params = config.record_params()
    strategy = check_references(registry, params, job.kind)
    if "strategy" in params:  # what the run renders, recorded (a file may change later)
        params.update(strategy.params())
    if job.prepare is not None:
        params.update(job.prepare(registry, config) or {})
    return params


def config_values(job: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` keyed by config field name, empty ones left out (the config's default)."""
    names = {flag_of(f)[2:]: f.name for _, f in flat_fields(job.config)}
    out = {}
    for key, value in values.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        out[names.get(key, key)] = value.strip() if isinstance(value, str) else value
    return out


def checked_config(registry: Any, job: Job, values: Mapping[str, Any]) -> tuple[Config, dict[str, Any]]:
    """(config, params to record) for `job` from `values`, after every check its CLI command
    makes before a run exists (ConfigError: the one-line reason)."""
    config = job.config.from_params(config_values(job, values))
    precheck(job, config)
    return config, prepare(registry, job, config)


def run_child(handle: Any, job: Job, values: Mapping[str, Any]) -> dict[str, Any]:
    """Run `job` here as a child run of `handle`'s (a benchmark chaining the lab's jobs),
    checked as its command would be; a kill of the parent stops before the next child."""
    handle.check_cancelled()
    config, params = checked_config(handle.registry, job, values)
    return run_here(handle.registry, job, config, params, quiet=True, parent_id=handle.run_id)


def child_steps(handle: Any, *jobs: Job) -> Callable[[str, Mapping[str, Any]], dict[str, Any]]:
    """`step(command, values)` for a benchmark whose steps are `jobs`: each a child run of
    `handle`'s (`run_child`)."""
    by_command = {job.command: job for job in jobs}
    return lambda command, values: run_child(handle, by_command[command], values)


def save_config(folder: Path, job: Job, config: Config) -> Path:
    """The config a detached job and a later resume read back."""
    path = Path(folder) / CONFIG_FILE
    path.write_text(json.dumps({"job": job.command, "kind": job.kind, "config": config.to_params()}, indent=2,
                               default=str))
    return path


def load_config(job: Job, path: str | os.PathLike) -> Config:
    """The config saved by `save_config`, validated again (a hand-edited file is input)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable job config ({exc}); it is written by --detach") from None
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        raise ConfigError(f"{path}: not a job config (expected {{\"job\": ..., \"config\": {{...}}}})")
    if data.get("job") not in (None, job.command):
        raise ConfigError(f"{path}: a {data['job']} config, not {job.command}")
    return job.config.from_params(data["config"])


def detach(registry: Any, job: Job, config: Config, params: dict[str, Any], *, name: str | None = None,
           parent_id: str | None = None, cmd: Sequence[str] | None = None) -> str:
    """Create the SCHEDULED run, save its config, start the child in its own session;
    returns the run id at once."""
    run_id = registry.create_run(job.kind, name=name or job.name(config), params=params, parent_id=parent_id,
                                 cmd=list(cmd or ["python", "-m", "lactchain.jobs", job.command]))
    try:
        config_path = save_config(registry.run_dir(run_id), job, config)
    except OSError as exc:  # a run folder it cannot write (read-only, full disk): no SCHEDULED row left behind
        registry.delete_run(run_id)
        raise ConfigError(f"cannot write the job's config in {registry.runs_dir / run_id} ({exc.strerror or exc}); "
                          "make the runs folder writable (or free space) and launch again") from None
    spawn(registry, run_id, [sys.executable, "-m", "lactchain.jobs", job.command, str(config_path), "--run-id", run_id,
                             "--db", str(registry.path)])
    return run_id


def run_here(registry: Any, job: Job, config: Config, params: dict[str, Any], *, run_id: str | None = None,
             name: str | None = None, cmd: Sequence[str] | None = None, quiet: bool = False,
             parent_id: str | None = None) -> dict[str, Any]:
    """Run the job in this process inside a registry-tracked run (adopting `run_id`
    when a detach scheduled it); returns {"run_id": ..., **result}."""
    if run_id is not None:
        check_adoptable(registry, run_id, job.kind)
    with run_context(registry, job.kind, name=name or job.name(config), params=params, run_id=run_id,
                     cmd=cmd, quiet=quiet, parent_id=parent_id) as handle:
        for key, value in code_tags().items():  # the code this process runs, for `runs show`
            registry.set_tag(handle.run_id, key, value)
        say_notes(start_notes(registry, params))  # given for another world: on a terminal and in the log
        config_path = save_config(handle.dir, job, config) if run_id is None else handle.dir / CONFIG_FILE
        if processes_of(config) > 1:  # DDP: the ranks run the job's body, this process keeps the run
            return {"run_id": handle.run_id, **run_ranks(handle, job.command, config_path, processes_of(config))}
        return {"run_id": handle.run_id, **job.run(handle, config)}


def start_notes(registry: Any, params: Mapping[str, Any] | str) -> list[str]:
    """`checks.run_notes` of a run's params (or of the run with this id), as advice only: a
    registry busy with the child that just started, a file gone meanwhile, give no notes
    rather than a failed start."""
    try:
        return run_notes(registry, registry.params(params) if isinstance(params, str) else params)
    except Exception:  # noqa: BLE001
        return []


def say_notes(notes: Sequence[str]) -> None:
    """A run's start notes (`checks.run_notes`) on stderr, in yellow."""
    for note in notes:
        err_console.print(note, style="yellow", markup=False, highlight=False, soft_wrap=True)


def resume(registry: Any, job: Job, run: dict[str, Any]) -> str:
    """Start a detached child run that continues `run` from its config (the resume
    field pointing at the old run); the new run's id."""
    path = registry.run_dir(run["id"]) / CONFIG_FILE
    config = load_config(job, path)
    if job.resume_field is not None:
        config = config.replace(**{job.resume_field: run["id"]})
    precheck(job, config)
    params = prepare(registry, job, config)
    cmd = ["lactchain", *job.command.split()]  # a benchmark's child recorded the benchmark's argv: not its own
    if run.get("cmd") and process_owner(registry, run) is None:
        cmd = list(run["cmd"])
    if job.resume_field is not None:  # the command line that would do the same, for `runs show`
        cmd = [*strip_detach(cmd), "--resume-from", run["id"]]
    return detach(registry, job, config, params, name=f"resume {run['id']}", parent_id=run["id"], cmd=cmd)
