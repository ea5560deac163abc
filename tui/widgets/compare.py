"""CompareScreen: two or three runs side by side (lactchain.runs.compare): the params
that differ first (bold), the shared ones dimmed, then the latest metrics. Every run's
column fits the screen; a longer value ends in an ellipsis (`lactchain runs compare` and
the Info tab show it whole)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from lactchain.safe_text import printable
from tui.format import clip


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else printable(value, keep_newlines=False)


def _column_width(screen_width: int, key_width: int, runs: int) -> int:
    """Each run's column: the runs share what the modal (95 % of the screen, less its border,
    padding and the table's scrollbar) leaves beside the section and key columns, so all of
    them stay in view (one long value, such as a strategy text, pushed the second run off
    the screen)."""
    inner = int(screen_width * 0.95) - 6
    gaps = 2 * (runs + 2)  # the DataTable's cell padding
    return max(12, (inner - len("metrics") - key_width - gaps) // max(1, runs))


class CompareScreen(ModalScreen[None]):
    """Esc or q closes it."""

    BINDINGS = [("escape", "dismiss", "Close"), ("q", "dismiss", "Close")]
    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen > Vertical { width: 95%; height: 90%; border: thick $accent; background: $surface; padding: 0 1; }
    CompareScreen #compare-title { height: auto; }
    CompareScreen DataTable { height: 1fr; }
    """

    def __init__(self, comparison: Any) -> None:
        super().__init__()
        self.comparison = comparison

    def compose(self) -> ComposeResult:
        runs = self.comparison.runs
        differing = sum(1 for s, _, _, d in self.comparison.rows if s == "params" and d)
        with Vertical():
            yield Static(Text(f"{len(runs)} runs · {differing} params differ (bold) · esc closes", style="bold"),
                         id="compare-title")
            yield DataTable(id="compare-table", zebra_stripes=True, cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one("#compare-table", DataTable)
        rows = self.comparison.rows
        key_width = min(40, max((len(printable(k)) for _, k, _, _ in rows), default=3))
        width = _column_width(self.app.size.width, key_width, len(self.comparison.runs))
        table.add_column("", key="section")
        table.add_column("key", key="key", width=key_width)
        for run in self.comparison.runs:
            table.add_column(clip(printable(f"{run['id']} ({run.get('kind')})"), width), key=str(run["id"]),
                             width=width)
        section = None
        for sec, key, values, differs in rows:
            style = "bold" if differs else "dim" if sec == "params" else ""
            table.add_row(Text(sec if sec != section else "", style="dim"),
                          Text(clip(printable(key), key_width), style=style),
                          *(Text(clip(_cell(v), width), style=style) for v in values))
            section = sec
        table.focus()
