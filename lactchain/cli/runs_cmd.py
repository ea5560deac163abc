"""`lactchain runs ...`: browse the run registry and control background jobs."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from lactchain.cli.common import DbOption, JsonOption, console, fail, finite, open_existing, print_json, shown
from lactchain.jobs import ACTIVE, kill_run, pid_alive, reap_dead_runs, show_dead
from lactchain.runs.key_metrics import key_metrics_first
from lactchain.safe_text import printable, shell_line
from lactchain.paths import default_db_path
from lactchain.runs.registry import Registry, RunNotFound
from lactchain.runs.schema import NOTE_TAG, RUN_KINDS, RUN_STATUSES, check_user_tag, is_system_tag

app = typer.Typer(help="Browse the run registry (runs, params, metrics, artifacts).", no_args_is_help=True)

_STATUS_STYLE = {"SCHEDULED": "cyan", "RUNNING": "yellow", "FINISHED": "green", "FAILED": "red", "KILLED": "magenta"}


def _db_path(db: Optional[Path]) -> Path:
    return db.expanduser().absolute() if db is not None else default_db_path()


def _get_run(reg: Registry, run_id: str) -> dict[str, Any]:
    try:
        return reg.get_run(run_id)
    except RunNotFound as exc:
        fail(str(exc))
        raise  # unreachable: fail() exits


_open_existing = open_existing  # the registry at --db, which must exist


def _fmt_time(ms: int | None, short: bool = False) -> str:
    fmt = "%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S"
    return datetime.fromtimestamp(ms / 1000).strftime(fmt) if ms else "-"


def _duration_s(run: dict[str, Any]) -> float | None:
    """Seconds from start to end (or to now while the run is active)."""
    if not run.get("started_ms"):
        return None
    end = run.get("ended_ms") or int(time.time() * 1000)
    return max(0.0, (end - run["started_ms"]) / 1000)


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _fmt_value(value: Any) -> str:
    """A stored value for a Rich table: numbers short; text with its control characters
    shown (never obeyed) and its markup escaped (never interpreted)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else shown(value)


def _status(status: str) -> str:
    return f"[{_STATUS_STYLE.get(status, 'white')}]{status}[/]"


@app.command("list")
def list_runs(
    kind: Annotated[Optional[str], typer.Option("--kind", "-k", help=f"Only runs of this kind: {', '.join(RUN_KINDS)}.")] = None,
    status: Annotated[
        Optional[str], typer.Option("--status", "-s", help=f"Only runs with this status: {', '.join(RUN_STATUSES)}.")
    ] = None,
    parent: Annotated[Optional[str], typer.Option("--parent", "-p", help="Only the child runs of this run (a "
                                                  "pipeline's phases, a comparison's cells): id or prefix.")] = None,
    search: Annotated[Optional[str], typer.Option("--search", "-q", help="Only runs whose id, name, kind, status, "
                                                  "error or your tags (a note) contain this text (any case), as the "
                                                  "console's filter.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Show at most this many runs.")] = 50,
    wide: Annotated[bool, typer.Option("--wide", "-w", help="Every latest metric and the full name (several lines "
                                                            "per run); default: one line per run, its key metric.")
                    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first: one line each with status, duration and the metric that
    says how it is doing (its kind's key metric); --wide for every metric."""
    if kind is not None and kind not in RUN_KINDS:
        fail(f"unknown kind {kind!r}; use one of {', '.join(RUN_KINDS)}")
    if status is not None:
        status = status.upper()
        if status not in RUN_STATUSES:
            fail(f"unknown status {status!r}; use one of {', '.join(RUN_STATUSES)}")
    path = _db_path(db)
    if not path.exists():  # a read command must not create an empty registry
        runs: list[dict[str, Any]] = []
    else:
        with open_existing(db, reading=True) as reg:
            dead = reap_dead_runs(reg)
            if parent is None and search is None:
                runs = show_dead(reg.list_runs(kind=kind, limit=None if status else limit), dead)
            else:
                fields = {"parent_id": _get_run(reg, parent)["id"]} if parent is not None else {}
                found, _ = reg.search_runs([search] if search else [], fields)
                runs = show_dead([r for r in found if kind is None or r["kind"] == kind], dead)
            runs = [r for r in runs if status is None or r["status"] == status][:limit]
            for run in runs:
                run["duration_s"] = _duration_s(run)
                run["latest_metrics"] = reg.latest_metrics(run["id"])
    if as_json:
        print_json(runs)
        return
    if not runs:
        picked = any(v is not None for v in (kind, status, parent, search))
        console.print(f"No runs{' match' if picked else ''} in {shown(path)}." if path.exists()
                      else f"No registry at {shown(path)} yet.")
        return
    table = Table(title=f"runs in {shown(path)}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  show_edge=False, collapse_padding=True)
    # id, status, created and duration never shrink (an id is copied from here); the metric
    # and the name take what is left (one line each unless --wide).
    table.add_column("id", no_wrap=True, min_width=max(len(r["id"]) for r in runs))
    table.add_column("status", no_wrap=True, min_width=max(len(r["status"]) for r in runs))
    table.add_column("created", no_wrap=True, min_width=11)
    table.add_column("took", no_wrap=True, justify="right", min_width=6)
    metric_text = {}
    for run in runs:
        keys = key_metrics_first(run["kind"], run["latest_metrics"])
        metric_text[run["id"]] = "\n".join(f"{k if wide else k.split('/')[-1]}={_fmt_value(run['latest_metrics'][k])}"
                                     for k in keys[: None if wide else 1]) or "-"
    table.add_column("key metric" if not wide else "metrics (key first)", no_wrap=not wide,
                     overflow="fold" if wide else "ellipsis",
                     min_width=None if wide else min(24, max(len(t) for t in metric_text.values())))
    table.add_column("name", no_wrap=not wide, overflow="fold" if wide else "ellipsis", ratio=1)
    for run in runs:
        table.add_row(escape(run["id"]), _status(run["status"]), _fmt_time(run["created_ms"], short=True),
                      _fmt_duration(run["duration_s"]), _fmt_value(metric_text[run["id"]]), _fmt_value(run["name"] or run["kind"]))
    console.print(table)


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or a unique prefix of one.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one run: its fields, params, tags, latest metrics, artifacts and row counts."""
    with open_existing(db, reading=True) as reg:
        dead = reap_dead_runs(reg)
        run = show_dead([_get_run(reg, run_id)], dead)[0]
        rid = run["id"]
        run["duration_s"] = _duration_s(run)
        counts = reg.counts(rid)
        info = {
            "run": run,
            "params": reg.params(rid),
            "tags": reg.tags(rid),
            "latest_metrics": reg.latest_metrics(rid),
            "artifacts": reg.artifacts(rid),
            "counts": {k: counts[k] for k in ("episodes", "steps", "pairs", "metrics", "artifacts")},
            "children": [r["id"] for r in reg.list_runs(parent_id=rid)],
        }
    if as_json:
        print_json(info)
        return

    fields = Table(show_header=False, box=None, title=f"run {rid}", title_justify="left")
    fields.add_column(style="bold")
    fields.add_column()
    for key, value in run.items():
        if key.endswith("_ms"):  # a date now, so not labelled in milliseconds (--json keeps the number)
            key, value = key.removesuffix("_ms"), _fmt_time(value)
        elif key == "status":
            value = _status(value)
        elif key == "duration_s":
            key, value = "duration", _fmt_duration(value)
        elif key == "cmd" and value:
            value = shell_line(value)
        elif key == "error" and value and "Traceback (most recent call last)" in str(value):
            # a crash stores its whole traceback: its last line here, the rest where it belongs
            value = f"{str(value).strip().splitlines()[-1]} (the traceback: lactchain runs show {rid} --json)"
        fields.add_row(key, value if key == "status" else _fmt_value(value))
    if info["tags"].get(NOTE_TAG):  # your note beside the fields (the tags table has it too)
        fields.add_row(NOTE_TAG, _fmt_value(info["tags"][NOTE_TAG]))
    if info["children"]:
        fields.add_row("children", _fmt_value(", ".join(info["children"])))
    fields.add_row("rows", ", ".join(f"{k} {n}" for k, n in info["counts"].items()))
    console.print(fields)

    for title, mapping in (("params", info["params"]), ("tags", info["tags"]),
                           ("latest metrics", info["latest_metrics"])):
        if mapping:
            table = Table(title=title, title_justify="left")
            table.add_column("key")
            table.add_column("value", overflow="fold")
            for key, value in mapping.items():
                table.add_row(_fmt_value(key), _fmt_value(value))
            console.print(table)
    if info["artifacts"]:
        table = Table(title="artifacts", title_justify="left")
        for column in ("id", "kind", "step", "path", "created"):
            table.add_column(column, overflow="fold")
        for art in info["artifacts"]:
            table.add_row(str(art["id"]), _fmt_value(art["kind"]), _fmt_value(art["step"]), _fmt_value(art["path"]),
                          _fmt_time(art["created_ms"]))
        console.print(table)


@app.command("compare")
def compare(
    run_ids: Annotated[list[str], typer.Argument(help="2 or 3 runs: ids or unique prefixes.", metavar="RUN")],
    differing: Annotated[bool, typer.Option("--differing", help="Only the params that differ.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Runs side by side: params that differ first (bold), then the shared ones, then
    the latest metrics, the kind's key metric first."""
    from lactchain.runs.compare import compare_runs

    with open_existing(db, reading=True) as reg:
        try:
            table = compare_runs(reg, run_ids, all_params=not differing)
        except (RunNotFound, ValueError) as exc:
            fail(str(exc))
            return
    if as_json:
        print_json(table.as_dict())
        return
    out = Table(box=box.SIMPLE_HEAD, title=f"compare {' · '.join(r['id'] for r in table.runs)}", title_justify="left")
    out.add_column("", style="dim")
    out.add_column("key", overflow="fold")
    for run in table.runs:
        out.add_column(shown(run["id"]), overflow="fold")
    section = None
    for sec, key, values, differs in table.rows:
        style = "bold" if differs else "dim" if sec == "params" else ""
        out.add_row(sec if sec != section else "", shown(key), *(_fmt_value(v) for v in values), style=style)
        section = sec
    console.print(out)


FORCE_REAP_S = 5.0  # how long `runs kill --force` waits for the killed process to be gone


@app.command("kill")
def kill(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or a unique prefix of one.")],
    force: Annotated[bool, typer.Option("--force", help="SIGKILL instead of SIGTERM (no checkpoint).")] = False,
    wait: Annotated[float, typer.Option("--wait", callback=finite, min=0, help="Seconds to wait for the run to stop.")] = 0.0,
    db: DbOption = None,
) -> None:
    """Stop a background job. SIGTERM lets it save a checkpoint and end as KILLED."""
    import signal

    with _open_existing(db) as reg:
        run = _get_run(reg, run_id)
        if run["status"] not in ACTIVE:
            fail(f"run {run['id']} is not running (status {run['status']})")
        if not kill_run(reg, run["id"], signal.SIGKILL if force else signal.SIGTERM):
            reap_dead_runs(reg)
            fail(f"run {run['id']} has no live process; it is now {reg.get_run(run['id'])['status']}")
        deadline = time.time() + wait
        while time.time() < deadline and reg.get_run(run["id"])["status"] in ACTIVE:
            time.sleep(0.2)
        if force:  # SIGKILL cannot be caught, but the process takes a moment to go: reap it once gone
            gone_by = time.time() + max(wait, FORCE_REAP_S)
            while time.time() < gone_by and pid_alive(run.get("pid")):
                time.sleep(0.05)
            reap_dead_runs(reg)
        console.print(f"signalled {run['id']}; status {_status(reg.get_run(run['id'])['status'])}")


@app.command("logs")
def logs(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or a unique prefix of one.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines until the run ends.")] = False,
    tail: Annotated[int, typer.Option("--tail", "-n", min=0, help="Lines to show from the end (0 = all).")] = 0,
    db: DbOption = None,
) -> None:
    """Print a run's log (runs/<id>/log.txt), optionally following it live. Detached runs
    (--detach, console jobs) write one; a run in the foreground printed to its terminal."""
    import sys

    from lactchain.runs.logs import holding_log, run_log

    with _open_existing(db, reading=True) as reg:
        run = _get_run(reg, run_id)
        log_path = run_log(reg, run)
        if not log_path.exists():
            parent = holding_log(reg, run)
            inside = (f"; it ran inside {parent['id']}, whose log holds its lines: lactchain runs logs {parent['id']}"
                      if parent else "")
            fail(f"run {run['id']} has no log at {log_path} (only detached runs write one){inside}")
        with open(log_path, "r", errors="replace") as fh:
            lines = fh.readlines()
            # A log holds what the job printed, stored text included: escapes are shown, not obeyed.
            sys.stdout.writelines(printable(line, keep_cr=True) for line in (lines[-tail:] if tail else lines))
            sys.stdout.flush()
            while follow:
                chunk = fh.read()
                if chunk:
                    sys.stdout.write(printable(chunk, keep_cr=True))
                    sys.stdout.flush()
                    continue
                reap_dead_runs(reg)
                if reg.get_run(run["id"])["status"] not in ACTIVE:
                    sys.stdout.write(printable(fh.read(), keep_cr=True))
                    break
                time.sleep(0.5)


@app.command("resume")
def resume(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="A KILLED or FAILED training run.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a killed or failed training run from its last checkpoint, as a new
    background run (child of the old one) with the same parameters."""
    from lactchain.config import ConfigError
    from lactchain.jobs.control import resume_run
    from lactchain.runs.resume import NotResumable

    with _open_existing(db) as reg:
        run = _get_run(reg, run_id)
        try:
            new_id = resume_run(reg, run["id"])
        except (NotResumable, ConfigError) as exc:  # ConfigError: what its config names is gone
            fail(str(exc))
    if as_json:
        print_json({"run_id": new_id, "resumes": run["id"]})
    else:
        console.print(f"resuming {run['id']} as [bold]{new_id}[/]; follow with [cyan]lactchain runs logs {new_id} -f[/]")


@app.command("tag")
def tag(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, or a unique prefix of one.")],
    pairs: Annotated[list[str], typer.Argument(help="KEY=VALUE to set, KEY= to remove, e.g. 'note=lr too high'.",
                                               metavar="KEY=VALUE", show_default=False)],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Tag a run with your own words: `note=...` is shown by `runs show` and the console's
    Info tab, and found by `runs list -q` and the console's filter. Keys lactchain writes
    itself (code.*, generation, replicas, resumes, warning) are refused."""
    tags: dict[str, str | None] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            shown = pair if len(pair) <= 60 else pair[:57] + "..."
            fail(f"{shown!r}: give KEY=VALUE (KEY= removes the tag), e.g. 'note=lr too high'")
        try:
            check_user_tag(key, value)
        except ValueError as exc:
            fail(str(exc))
        tags[key] = value or None
    with _open_existing(db) as reg:
        run = _get_run(reg, run_id)
        with reg.transaction():
            for key, value in tags.items():
                reg.set_tag(run["id"], key, value)
        mine = {k: v for k, v in reg.tags(run["id"]).items() if not is_system_tag(k)}
    if as_json:
        print_json({"run_id": run["id"], "tags": mine})
        return
    console.print(f"{run['id']}: " + (", ".join(f"{escape(shown(k))}={escape(shown(v))}" for k, v in mine.items())
                                      or "no tags of yours"))


def _run_lines(runs: list[dict[str, Any]], sizes: list[str] | None = None, title: str | None = None) -> Table:
    """One line per run (id, kind, status, [size,] created, name): what `runs du` and
    `runs delete` list."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  collapse_padding=True)
    for column in ("id", "kind", "status"):  # never shrunk: an id is copied from here
        table.add_column(column, no_wrap=True, min_width=max([len(str(r[column])) for r in runs] or [2]))
    if sizes is not None:
        table.add_column("size", no_wrap=True, justify="right", min_width=9)
    table.add_column("created", no_wrap=True, min_width=11)
    table.add_column("name", no_wrap=True, overflow="ellipsis", ratio=1)
    for i, run in enumerate(runs):
        table.add_row(escape(run["id"]), escape(run["kind"]), _status(run["status"]),
                      *([sizes[i]] if sizes is not None else []), _fmt_time(run["created_ms"], short=True),
                      _fmt_value(run["name"] or run["kind"]))
    return table


@app.command("du")
def disk_usage(
    top: Annotated[int, typer.Option("--top", "-n", min=1, help="Show the N biggest runs.")] = 20,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """The runs whose folders take the most disk (checkpoints, adapters, datasets), biggest
    first, and the total: what `runs delete` would free."""
    from lactchain.runs.delete import human_bytes, run_sizes

    from lactchain.runs.prune import done_runs, prunable

    with _open_existing(db, reading=True) as reg:
        sized = run_sizes(reg)
        folder = reg.runs_dir
        checkpoints = prunable(reg, done_runs(reg)).size_bytes
    total = sum(size for _, size in sized)
    if as_json:
        print_json({"runs_dir": str(folder), "total_bytes": total, "prunable_checkpoint_bytes": checkpoints,
                    "runs": [{"id": run["id"], "kind": run["kind"], "status": run["status"], "bytes": size}
                             for run, size in sized[:top]]})
        return
    console.print(_run_lines([run for run, _ in sized[:top]], sizes=[human_bytes(size) for _, size in sized[:top]],
                             title=f"biggest run folders in {shown(folder)}"))
    console.print(f"{len(sized)} runs, {human_bytes(total)} in their folders; free some with "
                  "[cyan]lactchain runs delete RUN[/] (or --status FAILED)")
    if checkpoints:
        console.print(f"{human_bytes(checkpoints)} of it are trainer checkpoints no run resumes from (resume state, "
                      "not results): [cyan]lactchain runs prune[/] frees it and keeps their adapters")


@app.command("delete")
def delete(
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Runs to delete: ids or unique prefixes.",
                                                           metavar="RUN", show_default=False)] = None,
    status: Annotated[Optional[str], typer.Option("--status", "-s", help="Also every run with this status "
                                                  "(FAILED, KILLED or FINISHED), e.g. --status FAILED.")] = None,
    kind: Annotated[Optional[str], typer.Option("--kind", "-k", help=f"With --status: only runs of this kind "
                                                f"({', '.join(RUN_KINDS)}).")] = None,
    children: Annotated[bool, typer.Option("--children", help="Also delete their child runs (a pipeline's phases, "
                                                              "a run resumed from one).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Delete even runs that kept runs read (their critic, "
                                                        "adapter, pairs or archive).")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (needed where nobody can answer).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be deleted.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete runs: their registry rows (params, metrics, steps, pairs, artifacts) and
    their folders under runs/ (checkpoints, adapters, logs). Asks first; refuses running
    runs, child runs not asked for (--children) and runs other kept runs read (--force)."""
    from lactchain.runs.delete import delete_runs, human_bytes, plan_delete

    if status is not None and status.upper() not in RUN_STATUSES:
        fail(f"--status {status!r}: use one of {', '.join(RUN_STATUSES)}")
    if status is not None and status.upper() in ACTIVE:
        fail(f"--status {status.upper()}: running runs are stopped with `lactchain runs kill`, not deleted")
    if kind is not None and status is None:
        fail("--kind picks among the runs of --status; give --status too (or name the runs)")
    if kind is not None and kind not in RUN_KINDS:
        fail(f"--kind {kind!r}: use one of {', '.join(RUN_KINDS)}")
    if not run_ids and status is None:
        fail("name the runs to delete (ids or prefixes), or pick them with --status")
    with _open_existing(db) as reg:
        reap_dead_runs(reg)  # a job that died is FAILED before --status picks
        picked = [r["id"] for r in reg.list_runs(kind=kind, status=status.upper())] if status else []
        if status and not picked and not run_ids:
            fail(f"no {status.upper()} runs{f' of kind {kind}' if kind else ''} in {reg.path}")
        try:
            plan = plan_delete(reg, [*(run_ids or []), *picked])
        except RunNotFound as exc:
            fail(str(exc))
        problem = plan.problem(children=children, force=force)
        if problem:
            fail(problem)
        if not _go_ahead(plan, plan.summary(), None, ("delete", "deleting", "deleted"), yes, dry_run, as_json):
            return
        try:
            left = delete_runs(reg, plan)
        except (ValueError, RunNotFound) as exc:  # started, or deleted by someone else, since the plan
            fail(str(exc))
    runs = f"{len(plan.runs)} run{'s' if len(plan.runs) != 1 else ''}"
    _report(plan, left, f"deleted {runs}, freed {human_bytes(plan.size_bytes)}" if not left else f"deleted {runs}",
            as_json)


def _go_ahead(plan: Any, summary: str, sizes: list[str] | None, verbs: tuple[str, str, str], yes: bool,
              dry_run: bool, as_json: bool) -> bool:
    """List the plan's runs; then a dry run says what would go (False), else ask where
    someone can answer (a no: "nothing deleted", exit 1) or fail where nobody can, unless
    --yes (True: go ahead). `verbs`: ("delete", "deleting", "deleted")."""
    import sys

    verb, doing, done = verbs
    if not as_json:
        console.print(_run_lines(list(plan.runs), sizes=sizes))
    if dry_run:
        if as_json:
            print_json({"dry_run": True, "runs": plan.ids, "bytes": plan.size_bytes})
        else:
            console.print(f"would {verb} {summary} (--dry-run: nothing {done})")
        return False
    if yes:
        return True
    if not sys.stdin.isatty():
        fail(f"{doing} {summary} needs a yes: add --yes (or look first with --dry-run)")
    if not typer.confirm(f"{verb} {summary}?", default=False):
        console.print(f"nothing {done}")
        raise typer.Exit(1)
    return True


def _report(plan: Any, left: list[str], done_line: str, as_json: bool) -> None:
    """What a delete or a prune did: JSON, or `done_line` and the folders it could not remove."""
    if as_json:
        print_json({"dry_run": False, "runs": plan.ids, "bytes": plan.size_bytes, "folders_left": left})
        return
    console.print(done_line)
    for line in left:
        console.print(f"[yellow]could not remove {escape(line)}[/]")


@app.command("prune")
def prune(
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Finished runs to prune: ids or unique prefixes "
                                                           "(default: every finished run, and every stopped run "
                                                           "whose resumes all finished).", metavar="RUN",
                                                           show_default=False)] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (needed where nobody can answer).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be removed.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove the trainer checkpoints of finished runs (`checkpoints/`: the adapter again with
    optimizer, scheduler and RNG state, kept to resume a stopped run) and keep everything else:
    adapters, critics, logs, metrics. A KILLED or FAILED run keeps them (it resumes from them)
    until every `runs resume` of it finished."""
    from lactchain.runs.delete import human_bytes
    from lactchain.runs.prune import plan_prune, prune_checkpoints

    with _open_existing(db) as reg:
        try:
            plan = plan_prune(reg, run_ids or [])
        except (ValueError, RunNotFound) as exc:
            fail(str(exc.args[0]) if isinstance(exc, RunNotFound) else str(exc))
        if not plan.runs:
            if as_json:
                print_json({"dry_run": dry_run, "runs": [], "bytes": 0})
            else:
                console.print("no finished run (nor stopped run whose resumes all finished) keeps trainer "
                              "checkpoints: nothing to prune")
            return
        summary = f"the checkpoints of {len(plan.runs)} run{'s' if len(plan.runs) != 1 else ''}, " \
                  f"{human_bytes(plan.size_bytes)}"
        sizes = [human_bytes(size) for size in plan.sizes]
        if not _go_ahead(plan, summary, sizes, ("remove", "removing", "removed"), yes, dry_run, as_json):
            return
        try:
            left = prune_checkpoints(reg, plan)
        except ValueError as exc:  # resumed since the plan
            fail(str(exc))
    _report(plan, left, f"removed {summary}; their adapters stay" if not left else
            f"removed the checkpoints' rows of {len(plan.runs)} runs", as_json)


@app.command("export")
def export(
    run_ids: Annotated[list[str], typer.Argument(help="Runs to export: ids or unique prefixes.", metavar="RUN")],
    fmt: Annotated[str, typer.Option("--format", help="tensorboard (event files: `tensorboard --logdir OUT`) or csv "
                                                      "(metrics.csv and params.json).")] = "tensorboard",
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into, one sub-folder per run.")] = Path(
        "exports"),
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export runs where people look: every logged metric at its step and time, and the
    params (TensorBoard hparams beside the final metrics, or CSV + JSON)."""
    from lactchain.runs.export import FORMATS, export_runs

    if fmt not in FORMATS:
        fail(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    target = out.expanduser()
    if target.exists() and not target.is_dir():
        fail(f"--out {target}: is a file; give a folder (it is created when missing)")
    with _open_existing(db, reading=True) as reg:
        try:
            folders = export_runs(reg, run_ids, target, fmt)
        except RunNotFound as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"--out {target}: cannot write there ({exc.strerror or exc}); give a folder you can write to")
    if as_json:
        print_json({"format": fmt, "folders": [str(f) for f in folders]})
        return
    for folder in folders:
        console.print(f"exported {folder.name} -> {folder}")
    if fmt == "tensorboard":
        console.print(f"open with: [cyan]tensorboard --logdir {target}[/]")
