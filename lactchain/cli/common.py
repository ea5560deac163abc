"""Options and output helpers shared by every command group."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import click
import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)

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


class LineLog:
    """Plain progress lines on stderr, for a detached job's log.txt (Rich draws no live
    bar into a file, so the console's Log tab would stay empty until the end): at most
    one per `every_s` seconds, plus forced ones. Silent on a terminal: the bar shows it."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s, self.last = every_s, float("-inf")
        self.enabled = not sys.stderr.isatty()

    def __call__(self, message: str, force: bool = False) -> None:
        import time

        now = time.monotonic()
        if self.enabled and (force or now - self.last >= self.every_s):
            self.last = now
            print(message, file=sys.stderr, flush=True)


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


def check_models(actor: Optional[str] = None, critic: Optional[str] = None) -> None:
    """Fail (one line) on an unknown or wrong-kind --actor/--critic before any run exists."""
    from lactchain.models.presets import ACTOR, CRITIC, check_spec

    for spec, role in ((actor, ACTOR), (critic, CRITIC)):
        if spec is not None:
            try:
                check_spec(spec, role)
            except ValueError as exc:
                fail(f"--{role} {spec}: {exc}" if spec not in str(exc) else str(exc))


def strategy_of(handle: Any, strategy: Optional[str], env: Optional[str] = None) -> Any:
    """The job's strategy, resolved once in its body (it was checked before the run)."""
    from lactchain.strategies import resolve_strategy

    return resolve_strategy(handle.registry, strategy, env)


def resolve_adapter(registry: Any, spec: Optional[str]) -> Optional[str]:
    """An adapter folder from a path, or from a run id's latest `adapter` artifact
    (a one-line error when it is neither)."""
    from lactchain.registry import RunNotFound

    if not spec:
        return None
    if Path(spec).is_dir():
        return str(Path(spec))
    try:
        run = registry.get_run(spec)
    except RunNotFound as exc:
        fail(f"--adapter {spec}: {exc}")
    art = registry.latest_artifact(run["id"], "adapter")
    if art is None:
        fail(f"--adapter {spec}: not a folder, and run {run['id']} ({run['kind']}) has no saved adapter")
    return art["path"]


def run_of_kind(registry: Any, option: str, spec: str, kinds: tuple[str, ...] = (), what: str = "") -> dict[str, Any]:
    """The run an option names, or a one-line failure: no such run, or a run of another kind
    (`what` words the expected kind, e.g. 'a judge run')."""
    from lactchain.registry import RunNotFound

    try:
        run = registry.get_run(spec)
    except RunNotFound as exc:
        fail(f"{option} {spec}: {exc}")
    if kinds and run["kind"] not in kinds:
        fail(f"{option} {spec}: run {run['id']} is a {run['kind']} run; expected {what or ' or '.join(kinds)}")
    return run


def check_references(registry: Any, params: dict[str, Any], kind: Optional[str] = None) -> Any:
    """Fail (one line) when --adapter, --strategy, --resume-from, --critic-run or
    --episodes-from name nothing usable, before a run is created for the command.
    Returns the resolved --strategy (the built-in one when none is given)."""
    def run_of(option: str, spec: str, kinds: tuple[str, ...] = ()) -> dict[str, Any]:
        return run_of_kind(registry, option, spec, kinds)

    resolve_adapter(registry, params.get("adapter"))
    for spec in params.get("pairs_from") or []:
        run_of("--pairs-from", spec)
    from lactchain.strategies import StrategyError, resolve_strategy

    try:
        strategy = resolve_strategy(registry, params.get("strategy"), params.get("env"))
    except StrategyError as exc:
        fail(str(exc))
    resume = params.get("resume_from")
    if resume and kind and not Path(resume).is_dir():
        run_of("--resume-from", resume, (kind,))
    if params.get("critic_run"):
        run = run_of("--critic-run", params["critic_run"], ("critic",))
        if registry.latest_artifact(run["id"], "critic") is None:
            fail(f"--critic-run {params['critic_run']}: run {run['id']} has no critic checkpoint yet")
    for spec in params.get("episodes_from") or []:
        run = run_of("--episodes-from", spec, ("play", "eval", "rollout"))
        if not registry.counts(run["id"])["steps"]:
            fail(f"--episodes-from {spec}: run {run['id']} has no stored steps; play some episodes first")
    return strategy


def check_adoptable(registry: Any, run_id: str, kind: str) -> None:
    """`--run-id` only adopts a SCHEDULED run of this command's kind (the row `--detach`,
    `runs resume` or the console created for it); never a run that already ran."""
    from lactchain.registry import RunNotFound

    try:
        run = registry.get_run(run_id)
    except RunNotFound:
        fail(f"--run-id {run_id}: no such run; --run-id is set by --detach, leave it out to start a new run")
    if run["id"] != run_id or run["status"] != "SCHEDULED" or run["kind"] != kind:
        fail(f"--run-id {run_id}: run {run['id']} is a {run['status']} {run['kind']} run; only a SCHEDULED {kind} "
             "run can be adopted (leave --run-id out to start a new run)")


def run_job(
    ctx: click.Context,
    *,
    kind: str,
    db: Optional[Path],
    detach: bool,
    run_id: Optional[str],
    params: dict[str, Any],
    body: Callable[..., dict[str, Any]],
    as_json: bool,
    name: Optional[str] = None,
    render: Optional[Callable[[dict[str, Any]], None]] = None,
) -> None:
    """The one path every long command takes: detach, or run `body(handle)` inside a
    registry-tracked run and print its result (JSON or `render`)."""
    from lactchain import jobs

    check_models(ctx.params.get("actor"), ctx.params.get("critic"))
    registry = open_registry(db)
    strategy = check_references(registry, ctx.params, kind)
    if "strategy" in ctx.params:  # what the run renders, recorded (a file may change later)
        params = {**params, **strategy.params()}
    if detach:
        rid = jobs.detach(registry, kind, relaunch_argv(ctx), name=name, params=params)
        if as_json:
            print_json({"run_id": rid, "status": "SCHEDULED", "log": str(registry.run_dir(rid) / "log.txt")})
        else:
            console.print(f"started [bold]{rid}[/] in the background; follow it with [cyan]lactchain runs logs {rid} --follow[/]")
        return
    if run_id is not None:
        check_adoptable(registry, run_id, kind)
    try:
        cmd = ["lactchain", *relaunch_argv(ctx)]
        with jobs.run_context(registry, kind, name=name, params=params, run_id=run_id, cmd=cmd) as handle:
            result = {"run_id": handle.run_id, **body(handle)}
    except jobs.Cancelled:
        fail("cancelled; the run is marked KILLED", code=130)
    if as_json:
        print_json(result)
    elif render is not None:
        render(result)
    else:
        console.print(result)
