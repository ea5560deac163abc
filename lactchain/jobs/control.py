"""Starting and resuming jobs from values rather than a command line: the door the console
uses (no CLI subprocess, nothing parsed from stdout) and `runs resume` shares. (A benchmark
chains the lab's jobs as child runs of its own run: `launch.run_child`.)

`start_job` does what a job's CLI command does with `--detach`: build the config (a bad
value is a one-line ConfigError), run the checks that need no registry, then the ones that
do, and only then create the SCHEDULED run and spawn `python -m lactchain.jobs` in its own
session. It returns the run id as soon as the child is started.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from lactchain.config import ConfigError
from lactchain.jobs import launch
from lactchain.jobs.table import BY_COMMAND, job_of_run
from lactchain.runs.lifecycle import detach as detach_argv
from lactchain.runs.lifecycle import reap_dead_runs, strip_detach
from lactchain.runs.resume import RESUMES_TAG, NotResumable, check_resumable, process_owner


def start_job(registry: Any, command: str, values: Mapping[str, Any], cmd: Sequence[str] | None = None) -> str:
    """Detach job `command` with its config built from `values` (config field names or
    their flags without dashes, text as a form holds it); `cmd` is the command line that
    would do the same, recorded for `runs show`. Raises ConfigError before any run exists."""
    job, config, params = checked(registry, command, values)
    return launch.detach(registry, job, config, params, cmd=cmd)


def checked(registry: Any, command: str, values: Mapping[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """(job, config, params to record) for `command` and `values`, after every check a job's
    CLI command makes before its run exists (ConfigError: the one-line reason)."""
    job = BY_COMMAND.get(command)
    if job is None:
        raise ConfigError(f"unknown job {command!r}; one of {', '.join(sorted(BY_COMMAND))}")
    config, params = launch.checked_config(registry, job, values)
    return job, config, params


def resume_run(registry: Any, run_id: str) -> str:
    """Continue a KILLED or FAILED run as a new detached child run; its id. A job of the
    table re-reads the config saved in its folder; a run made before the job layer re-runs
    its recorded command line. Raises NotResumable (why not) or RunNotFound."""
    reap_dead_runs(registry)
    run = registry.get_run(run_id)
    check_resumable(registry, run)
    job = job_of_run(registry, run)
    if job is not None:
        new_id = launch.resume(registry, job, run)
    else:
        owner = process_owner(registry, run)
        if owner is not None:  # a part of another run's process: its command line is that run's
            raise NotResumable(f"run {run['id']} ran inside {owner}, as a part of it: resume that "
                               f"(`lactchain runs resume {owner}`), which goes on at its first unfinished part")
        argv = strip_detach(list(run["cmd"][1:])) + ["--resume-from", run["id"]]
        new_id = detach_argv(registry, run["kind"], argv, name=f"resume {run['id']}", parent_id=run["id"])
    registry.set_tag(new_id, RESUMES_TAG, run["id"])  # a resume of a resume is resumable in its turn
    return new_id
