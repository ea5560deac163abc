"""Options and output helpers shared by every command group."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import click
import typer

from lactchain.envs.catalog import env_name
from lactchain.jobs.output import console, err_console
from lactchain.safe_text import printable

DbOption = Annotated[
    Optional[Path],
    typer.Option(
        "--db",
        envvar="LACTCHAIN_DB",
        help="Run registry file (SQLite); run folders go beside it. Default: $LACTCHAIN_DB, else "
             "$LACTCHAIN_RUNS/registry.db ($LACTCHAIN_RUNS: ./runs).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]


def print_json(obj: Any) -> None:
    """Machine-readable output on stdout, nothing else on it."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
    sys.stdout.flush()


def finite(value: Any) -> Any:
    """Option callback: refuse nan and inf, which parse as floats and pass min/max."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def known_env(value: Any) -> Any:
    """Option callback: a short env name or gymnasium id, normalised to the short name."""
    try:
        return env_name(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


EnvOption = Annotated[str, typer.Option(
    "--env", callback=known_env,
    help="Environment: a short name (lactchain env list: grid, blackjack, ...) or its gymnasium id.")]


def shown(value: object) -> str:
    """Stored or user text for a Rich table or line: control characters shown (never
    obeyed), markup escaped (never interpreted)."""
    from rich.markup import escape

    return escape(printable(value))


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error on stderr and exit with `code`."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(printable(message, keep_newlines=False))}", soft_wrap=True,
                      highlight=False, emoji=False)
    raise typer.Exit(code)


# ---- jobs: every long command runs in the foreground or detached -------------------

DetachOption = Annotated[
    bool,
    typer.Option("--detach", help="Run as a background job (survives logout); prints the run id and returns."),
]
RunIdOption = Annotated[Optional[str], typer.Option("--run-id", hidden=True, help="Adopt this scheduled run (set by --detach).")]
SKIP_ON_RELAUNCH = {"detach", "run_id", "db"}


def relaunch_argv(ctx: click.Context) -> list[str]:
    """Rebuild this command's argv from its parsed parameters (minus --detach/--db/--run-id),
    so `--detach` can start the very same command in a new session."""
    path = []
    c: click.Context | None = ctx
    while c is not None and c.parent is not None:
        path.append(c.info_name)
        c = c.parent
    argv = list(reversed(path))
    for param in ctx.command.params:
        if param.name in SKIP_ON_RELAUNCH:
            continue
        value = ctx.params.get(param.name)
        if value is None:
            continue
        if param.param_type_name == "argument":
            argv.extend(str(v) for v in (value if isinstance(value, (list, tuple)) else [value]))
            continue
        opt = max(param.opts, key=len)
        if getattr(param, "is_flag", False) and isinstance(value, bool):
            if value:
                argv.append(opt)
            elif param.secondary_opts:
                argv.append(max(param.secondary_opts, key=len))
            continue
        for v in value if getattr(param, "multiple", False) else [value]:
            argv.extend([opt, str(getattr(v, "value", v))])
    return argv


def open_registry(db: Optional[Path]):
    """The registry a command writes to. An explicit --db (or $LACTCHAIN_DB) must be in
    an existing folder: a typo must not silently create folders and an empty registry."""
    from lactchain.runs.registry import Registry

    if db is not None:
        folder = db.expanduser().absolute().parent
        if not folder.is_dir():
            fail(f"--db {db}: folder {folder} does not exist; create it first (mkdir -p {folder})")
    return _said_upgrade(Registry(db))


def open_existing(db: Optional[Path], reading: bool = False):
    """The registry a command only reads (or controls): it must exist and be one. An
    empty file is refused, never turned into a registry (`reading`: read-only when the
    file, its folder or the disk refuse writes)."""
    from lactchain.paths import default_db_path
    from lactchain.runs.registry import Registry

    path = db.expanduser().absolute() if db is not None else default_db_path()
    if not path.exists():
        fail(f"no registry at {path}")
    if path.is_file() and path.stat().st_size == 0:
        fail(f"--db {path}: is an empty file, not a registry; point --db at a registry (e.g. runs/registry.db)")
    return _said_upgrade(Registry.open_for_reading(path) if reading else Registry(path))


def _said_upgrade(registry: Any) -> Any:
    """The registry, once its upgrade (if this open made one) is said on stderr."""
    if registry.upgrade_note:
        err_console.print(registry.upgrade_note, style="yellow", markup=False, highlight=False, soft_wrap=True)
    return registry


def checked_or_fail(check: Callable[..., Any], *args: Any) -> Any:
    """A job-layer check (lactchain.jobs.checks) whose refusal ends the command in one line."""
    from lactchain.config import ConfigError

    try:
        return check(*args)
    except ConfigError as exc:
        fail(str(exc))


def check_models(actor: Optional[str] = None, critic: Optional[str] = None) -> None:
    """Fail (one line) on an unknown or wrong-kind --actor/--critic before any run exists."""
    from lactchain.jobs import checks

    checked_or_fail(checks.check_models, actor, critic)


def resolve_adapter(registry: Any, spec: Optional[str]) -> Optional[str]:
    """An adapter folder from a path or a run id's latest adapter (one line when neither)."""
    from lactchain.jobs import checks

    return checked_or_fail(checks.resolve_adapter, registry, spec)


def print_started(registry: Any, run_id: str, as_json: bool) -> None:
    """What `--detach` prints: the run id (and where its log goes)."""
    if as_json:
        print_json({"run_id": run_id, "status": "SCHEDULED", "log": str(registry.run_dir(run_id) / "log.txt")})
    else:
        console.print(f"started [bold]{run_id}[/] in the background; follow it with "
                      f"[cyan]lactchain runs logs {run_id} --follow[/]")


def print_result(result: dict[str, Any], as_json: bool, render: Optional[Callable[[dict[str, Any]], None]]) -> None:
    """A finished job's result: JSON, the command's own rendering, or as it is."""
    if as_json:
        print_json(result)
    elif render is not None:
        render(result)
    else:
        console.print(result)
