"""What a running job shows: progress on stderr (a bar on a terminal, plain lines in a
detached job's log), never on stdout, which carries the result (`--json`); and the
report a benchmark job leaves in its run folder."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from lactchain.runs.lifecycle import PROGRESS_METRIC
from lactchain.safe_text import printable



class SafeConsole(Console):
    """A Rich console that never sends a control character it was given as text: an ESC
    in a path, a run name or a log line (a title change, a clear-screen, an OSC 8 link)
    is printed as its visible escape (`lactchain.safe_text.printable`), whatever the
    caller forgot. Markup in stored text is the caller's to escape (`cli.common.shown`)."""

    def render_str(self, text: str, **kwargs: Any) -> Any:
        return super().render_str(printable(text, keep_cr=True), **kwargs)


# No emoji codes: stored text such as "START:END:STEPS" must not turn into pictures.
console = SafeConsole(emoji=False)
err_console = SafeConsole(stderr=True, emoji=False)


class LineLog:
    """Plain progress lines on stderr, for a detached job's log.txt (Rich draws no live
    bar into a file, so the console's Log tab would stay empty until the end): at most
    one per `every_s` seconds, plus forced ones. Silent on a terminal: the bar shows it."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s, self.last = every_s, float("-inf")
        self.enabled = not sys.stderr.isatty()

    def __call__(self, message: str, force: bool = False) -> None:
        now = time.monotonic()
        if self.enabled and (force or now - self.last >= self.every_s):
            self.last = now
            print(message, file=sys.stderr, flush=True)


def eta_text(seconds: float | None) -> str:
    """'ETA 42s', 'ETA 3m05s', 'ETA 2h07m'; 'ETA ?' before anything is done."""
    if seconds is None:
        return "ETA ?"
    s = int(round(seconds))
    if s < 60:
        return f"ETA {s}s"
    if s < 3600:
        return f"ETA {s // 60}m{s % 60:02d}s"
    return f"ETA {s // 3600}h{s % 3600 // 60:02d}m"




class JobProgress:
    """A long job's progress where a person watching it looks: a line in its log (done /
    total, rate, ETA) at most every `every_s` seconds (and at the ends), and the
    `progress` metric (0..1) that the console's Jobs list draws per row."""

    def __init__(self, handle: Any, label: str, unit: str, every_s: float = 2.0) -> None:
        self.handle, self.label, self.unit, self.every_s = handle, label, unit, every_s
        self.started, self.last, self.steps = time.monotonic(), float("-inf"), 0
        self.line = LineLog(every_s=0.0)  # this throttles; the log gets the line, a terminal has the bar

    def __call__(self, done: float, total: int, note: str = "", force: bool = False, share: bool = False) -> None:
        """`share`: `done` counts parts of units (episodes under way), so the line says
        `45% of 3 episodes` rather than a count that is not one."""
        now = time.monotonic()
        if not (force or now - self.last >= self.every_s):
            return
        self.last, self.steps, total = now, self.steps + 1, max(1, total)
        fraction = min(1.0, max(0.0, done / total))
        eta = (now - self.started) / fraction * (1 - fraction) if fraction > 0 else None
        head = f"{fraction:.0%} of {total} {self.unit}" if share else f"{int(done)}/{total} {self.unit} ({fraction:.0%})"
        parts = [f"{self.label}: {head}", note, eta_text(eta)]
        self.line(" · ".join(p for p in parts if p))
        self.handle.log_metrics({PROGRESS_METRIC: fraction}, step=self.steps)

    def rollout(self, at: Any) -> None:
        """`run_rollouts`' on_progress: episodes (live ones by their share of the action
        budget), env steps per second."""
        rate = f"{at.env_steps / at.seconds:.1f} env steps/s" if at.seconds > 0 else ""
        self(at.done, at.total, f"{at.finished} ended" + (f" · {rate}" if rate else ""), force=at.finished == at.total,
             share=True)


def progress_bar(label: str, quiet: bool) -> Any:
    """A job's progress bar on stderr (label, bar, done/total, the job's stats field,
    elapsed time); `quiet` (the caller prints JSON) leaves nothing behind."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                    TimeElapsedColumn(), console=err_console, transient=quiet)


def stage_lines(handle: Any, prefix: str = "timing ") -> Callable[[str], None]:
    """A benchmark's 'now timing X' hook: a kill lands here at the latest (a benchmark
    with long stages checks inside them too), and the stage is said: a line in a detached
    job's log, a dim line on a terminal (none when the caller prints JSON)."""
    line = LineLog()

    def stage(what: str) -> None:
        handle.check_cancelled()
        if line.enabled:
            line(f"{prefix}{what}", force=True)
        elif not handle.quiet:
            err_console.print(f"{prefix}{what}", style="dim", highlight=False, markup=False)

    return stage


def write_report(report: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def record_report(handle: Any, report: dict[str, Any], filename: str, what: str) -> dict[str, Any]:
    """A benchmark's report as `filename` in its run folder, registered as the run's
    `report` artifact; returns what the job returns: the report and where it is."""
    path = write_report(report, handle.dir / filename)
    handle.registry.add_artifact(handle.run_id, "report", str(path), meta={"what": what})
    return {**report, "report": str(path)}
