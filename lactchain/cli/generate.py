"""Typer commands generated from the job table: parse, check, call.

Each job's options are its config's fields (`lactchain.config.option` metadata:
flag, help, bounds, the off switch of a boolean), plus the options every job has:
--db, --detach, --json and the hidden --run-id. Adding a field to a config adds the
option to `--help`, to the console's form and to the run's params.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Callable, Optional

import typer

from lactchain.cli.common import (
    DbOption, DetachOption, JsonOption, RunIdOption, fail, open_registry, print_result, print_started, relaunch_argv,
)
from lactchain.config import ConfigError, default_of, field_type, flag_of, flat_fields, help_panel, is_list
from lactchain.jobs.spec import Job
from lactchain.runs.lifecycle import Cancelled


def _annotation(owner: type, f: Any) -> tuple[Any, Any]:
    """(typer annotation, default) of one config field, in its --help panel (`help_panel`)."""
    tp, optional = field_type(owner, f)
    meta = f.metadata
    if not flag_of(f).startswith("-"):  # a positional argument, e.g. RUN
        py_type = list[str] if is_list(tp) else str
        return Annotated[py_type, typer.Argument(metavar=flag_of(f), help=meta.get("help", ""))], ...
    names = [flag_of(f)]
    if tp is bool and meta.get("negative"):  # an on/off pair; without one, a plain flag
        names = [f"{flag_of(f)}/{meta['negative']}"]
    if meta.get("short"):
        names.append(meta["short"])
    kwargs: dict[str, Any] = {"help": meta.get("help", ""), "rich_help_panel": help_panel(owner, f.name)}
    if tp in (int, float):
        if meta.get("min") is not None:
            kwargs["min"] = meta["min"]
        if meta.get("max") is not None:
            kwargs["max"] = meta["max"]
    default = default_of(f)
    if is_list(tp):
        py_type: Any = Optional[list[str]]
        default = None
    elif tp in (int, float, bool, str):
        py_type = Optional[tp] if optional or default is None else tp
    else:  # unions such as `str | int` (e.g. 'all' or a number): text, the config converts it
        py_type = Optional[str] if optional or default is None else str
        default = None if default is None else str(default)
    return Annotated[py_type, typer.Option(*names, **kwargs)], default


def job_parameters(job: Job) -> list[inspect.Parameter]:
    """The command's parameters: the config's CLI fields, then the common ones."""
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    for owner, f in flat_fields(job.config):
        if not f.metadata.get("cli", True):
            continue
        annotation, default = _annotation(owner, f)
        if default is ...:  # a required positional argument
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation))
        else:
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=annotation))
    common = {"db": DbOption, "detach": DetachOption, "run_id": RunIdOption, "as_json": JsonOption}
    for name, annotation in common.items():
        if name == "detach" and not job.detachable:
            continue
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                        default=None if name in ("db", "run_id") else False, annotation=annotation))
    return params


def command_line(ctx: typer.Context) -> list[str]:
    return ["lactchain", *relaunch_argv(ctx)]


def make_command(job: Job, render: Callable[[dict[str, Any]], None] | None = None) -> Callable[..., None]:
    """The typer command of a job: build the config (one-line error on a bad value),
    check its references, then detach or run it here and print the result."""
    from lactchain.jobs import launch

    def command(ctx: typer.Context, **values: Any) -> None:
        db, detach = values.pop("db", None), values.pop("detach", False)
        run_id, as_json = values.pop("run_id", None), values.pop("as_json", False)
        values = {k: v for k, v in values.items() if v is not None}
        try:
            config = job.config.from_params(values)
            launch.precheck(job, config)
        except ConfigError as exc:
            fail(str(exc))
        cmd = command_line(ctx)
        with open_registry(db) as registry:  # closed on return: an in-process caller keeps no connection
            try:
                params = registry.params(run_id) if run_id else launch.prepare(registry, job, config)
                if detach:  # the child's log says the notes too; the terminal that started it, here
                    rid = launch.detach(registry, job, config, params, cmd=cmd)
                    launch.say_notes(launch.start_notes(registry, params))
                else:
                    result = launch.run_here(registry, job, config, params, run_id=run_id, cmd=cmd, quiet=as_json)
            except ConfigError as exc:
                fail(str(exc))
            except Cancelled:
                fail("cancelled; the run is marked KILLED", code=130)
            if detach:
                print_started(registry, rid, as_json)
                return
        print_result(result, as_json, render)

    command.__signature__ = inspect.Signature(job_parameters(job))  # type: ignore[attr-defined]
    command.__doc__ = job.doc
    command.__name__ = job.command.split()[-1].replace("-", "_")
    return command


