"""The TUI's only door to background jobs: launch, resume and kill them through the job
layer (`lactchain.jobs.control`), in this process: no CLI subprocess, no output parsing.

A launch does what `lactchain <command> ... --detach` does (the same config, the same
checks, the same SCHEDULED run and detached `python -m lactchain.jobs` child in its own
session), so jobs outlive the TUI and the TUI re-attaches by reading the registry. The
command line that would do the same (`JobRequest.argv`) is what the Jobs form previews
and what the run records as its command.

JOB_FORMS is generated from the job table's configs (`lactchain.jobs.JOBS`): the
fields a config marks `form=...`, with their flag, label, default, choices and help.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Field:
    name: str  # CLI option without dashes, e.g. "episodes"
    label: str
    default: str = ""
    choices: tuple[str, ...] = ()  # non-empty -> a Select
    help: str = ""
    flag: bool = False  # boolean switch: "--name" when true
    multi: bool = False  # comma-separated value -> the option repeated once per item
    # A reference checked against the registry before launch (`check_form`; numbers and
    # choices are the job config's): "strategy" (a saved version or a file), "engine"
    # (vllm only where it is installed), "run:KIND" (a run id of that kind, or a folder
    # where the CLI takes one), or "" (nothing to look up).
    check: str = ""


@dataclass(frozen=True)
class JobForm:
    command: str  # CLI sub-command, e.g. "train-critic"
    title: str
    fields: tuple[Field, ...]


def form_of(job: Any) -> JobForm:
    """A job's form, generated from its config: the fields marked `form=True`, with
    their flag, label, default, choices, help and check."""
    from lactchain.config import choices_of, default_of, field_type, flag_of, flat_fields, is_list

    fields = []
    for owner, f in flat_fields(job.config):
        meta = f.metadata
        if not meta.get("form"):
            continue
        tp, _ = field_type(owner, f)
        default = default_of(f)
        text = ",".join(map(str, default)) if isinstance(default, list) else "" if default is None else str(default)
        suggest = meta.get("suggest")
        offered = choices_of(f) or (suggest() if callable(suggest) else tuple(suggest or ()))
        fields.append(Field(flag_of(f)[2:], meta.get("label") or f.name.replace("_", " ").capitalize(), text,
                            choices=tuple(map(str, offered)), help=meta.get("help", ""), flag=tp is bool,
                            multi=is_list(tp), check=meta.get("check") or ""))
    return JobForm(job.command, job.title, tuple(fields))


# The console's job menu, in this order; every form is generated from its job's config.
FORM_ORDER = ("train-critic", "collect-pairs", "train-actor", "evaluate", "pipeline", "play", "strategy search",
              "collect", "judge", "train-reward", "bandit", "reward-agents")


def _forms() -> tuple[JobForm, ...]:
    from lactchain.jobs.table import BY_COMMAND

    return tuple(form_of(BY_COMMAND[c]) for c in FORM_ORDER)


JOB_FORMS = _forms()
FORMS_BY_COMMAND = {f.command: f for f in JOB_FORMS}
JOB_KINDS = tuple(f.command for f in JOB_FORMS)  # the commands the Jobs form launches


def job_run_kinds() -> frozenset[str]:
    """The run kinds those commands create (train-actor -> actor, ...): what the Jobs table lists."""
    from lactchain.jobs.table import BY_COMMAND

    return frozenset(BY_COMMAND[c].kind for c in JOB_KINDS if c in BY_COMMAND)


CONSOLE_ONLY_ACTORS = ("oracle",)  # the console's planner actor: no model, not a CLI preset


def cli_actor(console_actor: str | None) -> tuple[str, str]:
    """The actor a job should use: the console's own, unless it has no CLI model (then the
    form default, and why)."""
    if console_actor and console_actor not in CONSOLE_ONLY_ACTORS:
        return console_actor, ""
    from lactchain.jobs.parts import ActorPart

    return ActorPart().actor, f" (the console's actor {console_actor or 'none'} is not a model)"


def build_argv(command: str, values: Mapping[str, Any], db_path: str | os.PathLike | None,
               prefix: Sequence[str] = ("lactchain",)) -> list[str]:
    """`lactchain <command> --opt value ... --detach --json --db <db>`: the command line that
    launches what the form launches (shown and recorded; never run). Empty values are left out."""
    form = FORMS_BY_COMMAND.get(command)
    if form is None:
        raise ValueError(f"unknown job {command!r}; one of {', '.join(JOB_KINDS)}")
    argv = list(prefix) + command.split()  # "strategy search": a group
    for field in form.fields:
        value = values.get(field.name, field.default)
        if field.flag:
            if value in (True, "true", "1", "yes", "on"):
                argv.append(f"--{field.name}")
            continue
        text = "" if value is None else str(value).strip()
        items = [t.strip() for t in text.split(",") if t.strip()] if field.multi else [text] if text else []
        for item in items:
            argv += [f"--{field.name}", item]
    argv += ["--detach", "--json"]
    if db_path is not None:
        argv += ["--db", str(db_path)]
    return argv


def check_form(registry: Any, command: str, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field name, problem) for each value the CLI would refuse, found before launching
    so the form can point at the field (the CLI still checks everything itself).
    Runs on the registry thread: run-id fields are looked up there."""
    problems = []
    problems += _config_problems(command, values)
    for field in FORMS_BY_COMMAND[command].fields:
        text = str(values.get(field.name, "") or "").strip()
        if not text or not field.check:
            continue
        for item in [t.strip() for t in text.split(",") if t.strip()] if field.multi else [text]:
            why = _check_value(registry, field.check, item)
            if why:
                problems.append((field.name, f"{field.label}: {why}"))
    return problems


def _config_problems(command: str, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The job config's own validation of the form's values (bounds, choices, numbers):
    the one place the CLI and the launch check them too."""
    from lactchain.config import ConfigError
    from lactchain.jobs.launch import config_values
    from lactchain.jobs.table import BY_COMMAND

    form, job = FORMS_BY_COMMAND[command], BY_COMMAND[command]
    try:
        job.config.from_params(config_values(job, {f.name: values.get(f.name, "") for f in form.fields}))
    except ConfigError as exc:
        message = str(exc)
        name = next((f.name for f in form.fields if message.startswith(f"--{f.name} ") or
                     message.startswith(f"--{f.name}:")), "")
        label = next((f.label for f in form.fields if f.name == name), "")
        return [(name, f"{label}: {message}" if label else message)]
    return []


def _check_value(registry: Any, check: str, value: str) -> str | None:
    """A reference a form value makes (numbers and choices are the config's to check)."""
    if check == "engine":
        from lactchain.models.vllm_engine import VLLM_MISSING, vllm_installed

        return VLLM_MISSING if value == "vllm" and not vllm_installed() else None
    if check == "strategy":
        from lactchain.strategy.strategies import StrategyError, resolve_strategy

        try:
            resolve_strategy(registry, value)
        except StrategyError as exc:
            return str(exc).split(": ", 1)[-1]
        return None
    if check.startswith("run:"):
        kinds = run_kinds(check)
        if "actor" in kinds and Path(value).expanduser().is_dir():
            return None  # an adapter folder
        try:
            run = registry.get_run(value)
        except KeyError as exc:
            return str(exc.args[0] if exc.args else exc)
        if kinds and run["kind"] not in kinds:
            return f"{run['id']} is a {run['kind']} run, not {' or '.join(kinds)}"
    return None


def run_kinds(check: str) -> list[str]:
    """The run kinds a "run:KIND[,KIND...]" check takes (none: any run)."""
    return [kind for kind in check[4:].split(",") if kind]


def run_choices(registry: Any, check: str, limit: int = 200) -> list[str]:
    """Run ids to offer as completions in a run-id field of `check` (newest first)."""
    return [r["id"] for r in registry.list_runs(kind=run_kinds(check) or None, limit=limit)]


RESUME = "runs resume"  # a JobRequest that continues a run (values: {"run": RUN_ID})


@dataclass(frozen=True)
class JobRequest:
    """What the console asks of the job layer: a form's job with its values, or a resume."""

    command: str
    values: Mapping[str, Any]
    db_path: str | os.PathLike | None = None

    @property
    def argv(self) -> list[str]:
        """The command line that does the same (the form's preview, the run's recorded command)."""
        if self.command == RESUME:
            db = ["--db", str(self.db_path)] if self.db_path is not None else []
            return ["lactchain", "runs", "resume", str(self.values["run"]), "--json", *db]
        return build_argv(self.command, self.values, self.db_path)


@dataclass(frozen=True)
class LaunchResult:
    argv: tuple[str, ...]
    run_id: str | None
    output: str
    notes: tuple[str, ...] = ()  # what the job's start says (given for another world), for toasts


def launch_job(request: JobRequest) -> LaunchResult:
    """Start the request's job detached (or resume its run) through `lactchain.jobs`, on a
    registry connection of the calling worker thread; returns once the child is started.
    Raises RuntimeError with the one-line reason when a value, a reference or the run's
    state refuses it (nothing is created then)."""
    from lactchain.config import ConfigError
    from lactchain.jobs.control import resume_run, start_job
    from lactchain.jobs.launch import start_notes
    from lactchain.runs.registry import Registry, RunNotFound
    from lactchain.runs.resume import NotResumable

    argv = request.argv
    try:
        with Registry(request.db_path) as registry:
            if request.command == RESUME:
                run_id = resume_run(registry, str(request.values["run"]))
            else:
                run_id = start_job(registry, request.command, request.values, cmd=argv[:argv.index("--detach")])
            notes = tuple(start_notes(registry, run_id))  # advice: the job has started
    except (ConfigError, NotResumable, RunNotFound) as exc:
        raise RuntimeError(str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__) from None
    return LaunchResult(tuple(argv), run_id, f"started {run_id} in the background", notes)


def kill_job(registry: Any, run_id: str) -> str:
    """Ask a job to stop: SIGTERM to its process group (it checkpoints, then ends KILLED).
    Blocking but quick; runs on the registry thread."""
    from lactchain import jobs

    run = registry.get_run(run_id)
    if run["status"] not in jobs.ACTIVE:
        return f"{run['id']} is already {run['status']}"
    if jobs.kill_run(registry, run["id"]):
        return f"sent SIGTERM to {run['id']}"
    return f"{run['id']} has no live process (it will be marked FAILED when reaped)"
