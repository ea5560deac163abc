"""Small text formatters shared by the screens (pure functions, easy to pin in tests)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from rich.cells import cell_len

# The key metric of a run kind is the library's (the CLI's `runs list` shows the same one first).
from lactchain.runs.key_metrics import KEY_METRICS, default_metric, key_metrics_first  # noqa: F401 - re-exported
from lactchain.safe_text import printable


def safe(value: Any, keep_newlines: bool = True) -> str:
    """Stored or typed text for a widget: control characters shown as escapes, never sent
    to the terminal (a title change, a clear-screen). The console's one path for text
    from runs, files, datasets and users (the CLI's is the same `printable`); widgets
    given a `Text` show Rich markup as typed."""
    return printable("" if value is None else value, keep_newlines=keep_newlines)


def now_ms() -> int:
    return int(time.time() * 1000)


def fmt_ts(ms: int | float | None, seconds: bool = True) -> str:
    """Local wall-clock time of a millisecond timestamp: '11-22 01:07:33' (or '11-22 01:07')."""
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%m-%d %H:%M:%S" if seconds else "%m-%d %H:%M")


def fmt_duration(seconds: float | None) -> str:
    """Compact duration: 42s, 3m05s, 2h07m, 3d04h."""
    if seconds is None or seconds < 0:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def run_duration(run: Mapping[str, Any], now: int | None = None) -> float | None:
    """Seconds a run took (or has taken so far, if it is still running)."""
    start = run.get("started_ms") or None
    if not start:
        return None
    end = run.get("ended_ms") or None
    if end is None:
        if str(run.get("status", "")).upper() != "RUNNING":
            return None
        end = now if now is not None else now_ms()
    return max(0.0, (end - start) / 1000)


def fmt_value(value: Any, width: int | None = None) -> str:
    """Numbers with 4 significant digits, everything else as str."""
    if isinstance(value, bool):
        text = str(value)
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        text = f"{value:.4g}"
    elif value is None:
        text = "-"
    else:
        text = printable(value, keep_newlines=False)
    return clip(text, width)


def clip(text: str, width: int | None) -> str:
    """`text` cut to `width` terminal cells, the last one an ellipsis when it was cut. Cells,
    not characters: a CJK character or an emoji takes two, and a cut by characters let such
    a note overflow its column and lose its ellipsis."""
    if width is None or cell_len(text) <= width:
        return text
    kept, used = [], 0
    for char in text:  # whole characters up to width - 1 cells (a wide one that would straddle is left out)
        used += cell_len(char)
        if used > max(1, width - 1):
            break
        kept.append(char)
    return "".join(kept) + "…"


def fmt_progress(metrics: Mapping[str, Any] | None, status: str, width: int = 6) -> str:
    """'▇▇▇░░░ 45%' from a job's `progress` metric (0..1, see `lactchain.jobs.output.JobProgress`);
    '' for a job that reports none."""
    value = (metrics or {}).get("progress")
    if isinstance(value, Mapping):
        value = value.get("value")
    if not isinstance(value, (int, float)):
        return ""
    fraction = 1.0 if status == "FINISHED" else min(1.0, max(0.0, float(value)))
    filled = int(round(fraction * width))
    return "▇" * filled + "░" * (width - filled) + f" {fraction:4.0%}"


def fmt_metrics(metrics: Mapping[str, Any] | None, keys: Iterable[str] | None = None, limit: int = 3,
                width: int | None = None) -> str:
    """'loss=0.231 success=0.75' from a latest-metrics mapping (key -> value or row), cut to
    `width` characters (a table's cell: one long row must not push every row's other columns off)."""
    if not metrics:
        return ""
    items = []
    wanted = list(keys) if keys is not None else sorted(k for k in metrics if k != "progress")  # its own column
    for key in wanted:
        if key not in metrics:
            continue
        value = metrics[key]
        if isinstance(value, Mapping):
            value = value.get("value")
        items.append(f"{key}={fmt_value(value)}")
        if len(items) >= limit:
            break
    return clip(" ".join(items), width)




def fmt_run_metrics(run: Mapping[str, Any], limit: int, width: int | None = None) -> str:
    """A run's latest metrics (its `_metrics`) for a table cell, its kind's key metric first
    (the Runs and Jobs tables alike)."""
    metrics = run.get("_metrics")
    return fmt_metrics(metrics, keys=key_metrics_first(str(run.get("kind")), metrics), limit=limit, width=width)


SHORT_MOVES = {"move forward": "F", "turn left": "L", "turn right": "R", "hit": "H", "stick": "S"}


def short_moves(moves: Sequence[str]) -> str:
    """A move list in one glance: ['move forward', 'turn left'] -> 'FL' (empty -> '∅'); a
    move of another env's vocabulary by its first letter, upper case ('pickup' -> 'P')."""
    return "".join(SHORT_MOVES.get(m, m[:1].upper() or "?") for m in moves) or "∅"


def short_state(s: Any) -> str:
    """A state in a table cell: its own `short()` where it has one (the grid's pose
    '(0,3)E', a Blackjack hand '15 v 10', 'soft 17 v A'); anything else as its str."""
    short = getattr(s, "short", None)
    return str(short()) if callable(short) else str(s)
