"""Run lifecycle for every long command: foreground or detached, heartbeat, cancel.

A job is always a `lactchain ...` CLI command. `--detach` re-launches the same
command in a new session (stdin /dev/null, output to runs/<id>/log.txt) and
returns the run id at once, so the job outlives the TUI and the SSH session.
Inside the job, `run_context` owns the registry row: RUNNING with pid/pgid and a
heartbeat, FINISHED on success, KILLED on SIGTERM/SIGINT (after the job's own
checkpoint hook), FAILED with the traceback on a crash. A run whose process
vanished without a word (kill -9, reboot) is found by `reap_dead_runs`.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

HEARTBEAT_S = 5.0
STALE_AFTER_S = 60.0
ACTIVE = ("SCHEDULED", "RUNNING")
PROGRESS_METRIC = "progress"  # 0..1 of a run's work: the console's Jobs list draws it as a column


class Cancelled(Exception):
    """Raised inside a job when it receives SIGTERM/SIGINT."""


@dataclass
class RunHandle:
    """What a running job sees of its own registry row."""

    registry: Any
    run_id: str
    dir: Path
    _on_cancel: list[Callable[[], None]] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)
    quiet: bool = False  # the caller prints JSON: progress bars leave nothing behind
    stop_at: float | None = None  # time.time() by which a budgeted phase should wrap up (bench learn)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.registry.log_metrics(self.run_id, metrics, step=step)

    def on_cancel(self, fn: Callable[[], None]) -> None:
        """Register a checkpoint hook that runs before the run is marked KILLED."""
        self._on_cancel.append(fn)

    def out_of_time(self) -> bool:
        """Past this phase's budget: a trainer keeps what it has learnt and returns
        (not a cancel: the run goes on to its evaluation)."""
        return self.stop_at is not None and time.time() >= self.stop_at

    def check_cancelled(self) -> None:
        """Call at safe points (between steps) to stop cleanly after a SIGTERM."""
        if self.cancelled.is_set():
            raise Cancelled("received a termination signal")


def _heartbeat(registry: Any, run_id: str, stop: threading.Event) -> None:
    warned = False
    while not stop.wait(HEARTBEAT_S):
        try:
            registry.heartbeat(run_id)
        except Exception:  # a busy db must never kill the job
            pass
        try:
            restored = registry.restore_deleted_files() if hasattr(registry, "restore_deleted_files") else None
        except Exception as exc:  # a restore that fails leaves the warning below
            restored = None
            print(f"warning: could not restore the registry's files ({exc})", file=sys.stderr, flush=True)
        if restored:
            print(f"warning: {restored}; run {run_id} goes on", file=sys.stderr, flush=True)
        elif not warned and not registry_file_present(registry):
            warned = True  # once, in the job's log: its rows now go nowhere anyone will read
            print(f"warning: the registry {registry.path} was replaced by another file while run {run_id} runs: "
                  "what it records from now on is lost (its files in the run folder are kept); stop it and "
                  "start it again on a registry", file=sys.stderr, flush=True)


def registry_file_present(registry: Any) -> bool:
    """The registry file this process opened is still the one on disk (same inode)."""
    path, opened = getattr(registry, "path", None), getattr(registry, "opened_inode", None)
    if path is None or opened is None:
        return True
    try:
        return os.stat(path).st_ino == opened
    except OSError:
        return False


def own_process_group() -> int:
    """This process's group when the process leads it (a detached job: its own
    session), else 0. A foreground job shares its caller's group (a shell script,
    cron, CI), and `kill_run` must never signal the caller and its siblings."""
    pgid = os.getpgid(0)
    return pgid if pgid == os.getpid() else 0


@contextmanager
def run_context(
    registry: Any,
    kind: str,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    parent_id: str | None = None,
    run_id: str | None = None,
    cmd: Sequence[str] | None = None,
    quiet: bool = False,
) -> Iterator[RunHandle]:
    """Create (or adopt, when launched detached) a run and keep its status true."""
    if run_id is None:
        run_id = registry.create_run(kind, name=name, params=params or {}, parent_id=parent_id, cmd=list(cmd or sys.argv))
    elif params:
        registry.log_params(run_id, params)
    handle = RunHandle(registry, run_id, registry.run_dir(run_id), quiet=quiet)
    registry.start_run(run_id, pid=os.getpid(), pgid=own_process_group())
    owns_run_env = "LACTCHAIN_RUN_ID" not in os.environ  # the outermost run of this process names its Ray namespace
    if owns_run_env:
        os.environ["LACTCHAIN_RUN_ID"] = run_id

    previous: dict[int, Any] = {}

    def _signal(signum: int, _frame: Any) -> None:
        # First signal: ask the job to stop at its next safe point (between steps),
        # so no registry write is cut in half. A second one stops it right away.
        if handle.cancelled.is_set():
            raise Cancelled(f"received {signal.Signals(signum).name} twice")
        handle.cancelled.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, _signal)
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(registry, run_id, stop), daemon=True)
    beat.start()
    try:
        yield handle
        if handle.cancelled.is_set():
            raise Cancelled("stopped early on a termination signal")
    except (Cancelled, KeyboardInterrupt):
        handle.cancelled.set()
        for fn in handle._on_cancel:
            try:
                fn()
            except Exception:
                traceback.print_exc()
        registry.end_run(run_id, "KILLED", exit_code=-signal.SIGTERM, error="cancelled by signal")
        raise Cancelled("cancelled") from None
    except BaseException as exc:
        if isinstance(exc, SystemExit) and not exc.code:
            _finish(registry, run_id)
            raise
        try:
            registry.end_run(run_id, "FAILED", exit_code=1, error=traceback.format_exc())
        except Exception as mark_error:  # e.g. a full disk: the job's own error matters more
            print(f"warning: could not mark run {run_id} FAILED in the registry ({mark_error}); "
                  "`lactchain runs list` marks it once the registry can be written", file=sys.stderr, flush=True)
        raise
    else:
        _finish(registry, run_id)
    finally:
        stop.set()
        if owns_run_env:
            os.environ.pop("LACTCHAIN_RUN_ID", None)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _finish(registry: Any, run_id: str) -> None:
    """FINISHED; a run that tracked its progress reads 1 (one that ended on its time budget,
    a comparison whose last cell ran out of minutes, stopped short of its plan's fraction)."""
    progress = registry.latest_metrics(run_id).get(PROGRESS_METRIC)
    if progress is not None and progress < 1.0:
        registry.log_metric(run_id, PROGRESS_METRIC, 1.0)
    registry.end_run(run_id, "FINISHED", exit_code=0)


def detach(
    registry: Any,
    kind: str,
    argv: Sequence[str],
    name: str | None = None,
    params: dict[str, Any] | None = None,
    parent_id: str | None = None,
) -> str:
    """Launch `lactchain <argv> --run-id ID` in its own session; return the run id.

    The child adopts the SCHEDULED run; its stdout/stderr go to runs/<id>/log.txt.
    """
    run_id = registry.create_run(kind, name=name, params=params or {}, parent_id=parent_id, cmd=["lactchain", *argv])
    spawn(registry, run_id, [sys.executable, "-m", "lactchain.cli", *argv, "--run-id", run_id,
                             "--db", str(registry.path)])
    return run_id


def spawn(registry: Any, run_id: str, argv: Sequence[str]) -> None:
    """Start `argv` for a SCHEDULED run in its own session (stdin /dev/null, output to
    runs/<id>/log.txt) and record its pid/pgid and log in the run's row."""
    log_path = registry.run_dir(run_id) / "log.txt"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log_path, "ab") as log, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(list(argv), stdin=devnull, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env, close_fds=True)
    registry.update_run(run_id, pid=proc.pid, pgid=proc.pid, log_path=str(log_path))


def strip_detach(argv: Sequence[str]) -> list[str]:
    """The command line to re-launch: the same, minus --detach (and any --db/--run-id/
    --resume-from, which the launcher sets itself)."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--detach":
            continue
        if arg in ("--db", "--run-id", "--resume-from", "--resume"):
            skip = True
            continue
        if arg.startswith(("--db=", "--run-id=", "--resume-from=")):
            continue
        out.append(arg)
    return out


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as dead.
    try:
        with open(f"/proc/{int(pid)}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def reap_dead_runs(registry: Any, never_started_after_s: float = STALE_AFTER_S) -> dict[str, dict[str, Any]]:
    """Mark FAILED every active run whose process is gone (kill -9, reboot, OOM); returns
    {run id: the fields written}. Called whenever runs are listed, so a dead job is never
    shown as RUNNING; where the registry cannot be written, `show_dead` shows it anyway.
    """
    now = time.time() * 1000
    dead: dict[str, dict[str, Any]] = {}
    for run in registry.list_runs():
        if run["status"] not in ACTIVE or pid_alive(run.get("pid")):
            continue
        beat = run.get("heartbeat_ms") or run.get("created_ms") or now
        if run.get("pid") is None:
            if now - beat < never_started_after_s * 1000:
                continue  # being launched right now
            reason = "it was scheduled but no process ever took it"
        else:
            reason = f"its process {run['pid']} is gone; last heartbeat {(now - beat) / 1000:.0f} s ago"
        # It ended when it last said it was alive, not when somebody noticed.
        dead[run["id"]] = {"status": "FAILED", "ended_ms": int(beat), "error": f"died without reporting: {reason}"}
    for run_id, fields in dead.items():
        if getattr(registry, "readonly", False):
            continue
        try:
            with registry.transaction():
                if registry.get_run(run_id)["status"] in ACTIVE:  # not finished between our two reads
                    registry.update_run(run_id, **fields)
        except (sqlite3.OperationalError, ValueError):  # a full disk: shown by the caller, stored later
            pass
    return dead


def show_dead(runs: list[dict[str, Any]], dead: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs as the reaper sees them: a dead run reads FAILED even where it could not be
    written (read-only registry, full disk)."""
    return [{**run, **dead[run["id"]]} if run["id"] in dead and run["status"] in ACTIVE else run for run in runs]


def kill_run(registry: Any, run_id: str, sig: int = signal.SIGTERM) -> bool:
    """Send `sig` to a run's own process group (a detached job and its children), or
    to its process alone when it runs in someone else's group; True if signalled."""
    run = registry.get_run(run_id)
    pgid, pid = run.get("pgid"), run.get("pid")
    try:
        if pgid:
            os.killpg(int(pgid), sig)
        elif pid:
            os.kill(int(pid), sig)
        else:
            return False
    except ProcessLookupError:
        return False
    return True
