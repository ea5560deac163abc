"""Options and output helpers shared by every command group."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import click
import typer

from lactchain.jobs.output import LineLog, console, err_console  # noqa: F401 - the commands' shared output

DbOption = Annotated[
    Optional[Path],
    typer.Option(
        "--db",
        envvar="LACTCHAIN_DB",
        help="Run registry file (SQLite). Default: runs/registry.db, or $LACTCHAIN_DB.",
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


def positive(value: Any) -> Any:
    """Option callback: a finite number above zero (a learning rate, a number of epochs)."""
    finite(value)
    if value is not None and value <= 0:
        raise typer.BadParameter(f"{value} must be above 0")
    return value


def known_env(value: Any) -> Any:
    """Option callback: a short env name or gymnasium id, normalised to the short name."""
    from lactchain.envs.catalog import env_name

    try:
        return env_name(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


EnvOption = Annotated[str, typer.Option(
    "--env", callback=known_env,
    help="Environment: a short name (lactchain env list: grid, blackjack, ...) or its gymnasium id.")]


def known_scene(value: Any) -> Any:
    """Option callback: a bundled scene's name (None: the default grid)."""
    if value is None:
        return None
    from lactchain.envs.scenes import get_scene

    try:
        return get_scene(value).name
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


SceneOption = Annotated[Optional[str], typer.Option(
    "--scene", callback=known_scene,
    help="The grid's scene: empty (the default 4x4) or flat (8x8 with a fridge, a bathtub, a sofa and a bed).")]


def scene_kwargs(env: str, scene: str | None) -> dict[str, Any]:
    """The env kwargs a --scene adds (refused, one line, on an env without scenes)."""
    if scene is None:
        return {}
    from lactchain.envs.catalog import env_class

    if not getattr(env_class(env), "has_scenes", False):
        fail(f"--scene {scene}: {env} has no scenes; drop --scene or use --env grid")
    return {"scene": scene}


DealsOption = Annotated[int, typer.Option(
    "--deals", min=1, max=1024,
    help="Stochastic envs (blackjack): deals every candidate of a start state is played on (the same cards for "
         "all of them); the labeler averages over them. The grid is deterministic and plays once.")]


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error on stderr and exit with `code`."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False, emoji=False)
    raise typer.Exit(code)


# ---- jobs: every long command runs in the foreground or detached -------------------

DetachOption = Annotated[
    bool,
    typer.Option("--detach", help="Run as a background job (survives logout); prints the run id and returns."),
]
StrategyOption = Annotated[Optional[str], typer.Option(
    "--strategy", help="Strategy prompt: a version saved in the registry (the console's editor, ctrl+s) or a "
                       "text file. Recorded in the run's params. Default: the built-in strategy.")]
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
    from lactchain.registry import Registry

    if db is not None:
        folder = db.expanduser().absolute().parent
        if not folder.is_dir():
            fail(f"--db {db}: folder {folder} does not exist; create it first (mkdir -p {folder})")
    return Registry(db)


def _one_line(check: Callable[..., Any], *args: Any) -> Any:
    """A job-layer check (lactchain.jobs.checks) whose refusal ends the command in one line."""
    from lactchain.config import ConfigError

    try:
        return check(*args)
    except ConfigError as exc:
        fail(str(exc))


def check_models(actor: Optional[str] = None, critic: Optional[str] = None) -> None:
    """Fail (one line) on an unknown or wrong-kind --actor/--critic before any run exists."""
    from lactchain.jobs import checks

    _one_line(checks.check_models, actor, critic)


def strategy_of(handle: Any, strategy: Optional[str], env: Optional[str] = None) -> Any:
    """The job's strategy, resolved once in its body (it was checked before the run)."""
    from lactchain.strategies import resolve_strategy

    return resolve_strategy(handle.registry, strategy, env)


def resolve_adapter(registry: Any, spec: Optional[str]) -> Optional[str]:
    """An adapter folder from a path or a run id's latest adapter (one line when neither)."""
    from lactchain.jobs import checks

    return _one_line(checks.resolve_adapter, registry, spec)


def run_of_kind(registry: Any, option: str, spec: str, kinds: tuple[str, ...] = (), what: str = "") -> dict[str, Any]:
    """The run an option names, or a one-line failure (no such run, or another kind)."""
    from lactchain.jobs import checks

    return _one_line(checks.run_of_kind, registry, option, spec, kinds, what)


def check_references(registry: Any, params: dict[str, Any], kind: Optional[str] = None) -> Any:
    """--adapter, --strategy, --resume-from, --critic-run, --episodes-from, --pairs-from
    must name something usable (one line otherwise); returns the resolved strategy."""
    from lactchain.jobs import checks

    return _one_line(checks.check_references, registry, params, kind)


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
