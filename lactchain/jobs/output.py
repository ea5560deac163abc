"""What a running job shows: progress on stderr (a bar on a terminal, plain lines in a
detached job's log), never on stdout, which carries the result (`--json`)."""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console

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


def progress_bar(label: str, quiet: bool) -> Any:
    """A job's progress bar on stderr (label, bar, done/total, the job's stats field,
    elapsed time); `quiet` (the caller prints JSON) leaves nothing behind."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                    TimeElapsedColumn(), console=err_console, transient=quiet)
