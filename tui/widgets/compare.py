"""CompareScreen: two or three runs side by side (lactchain.runs.compare): the params
that differ first (bold), the shared ones dimmed, then the latest metrics."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from lactchain.safe_text import printable


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else printable(value, keep_newlines=False)


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
        table.add_column("", key="section")
        table.add_column("key", key="key")
        for run in self.comparison.runs:
            table.add_column(printable(f"{run['id']} ({run.get('kind')})"), key=str(run["id"]))
        section = None
        for sec, key, values, differs in self.comparison.rows:
            style = "bold" if differs else "dim" if sec == "params" else ""
            table.add_row(Text(sec if sec != section else "", style="dim"), Text(printable(key), style=style),
                          *(Text(_cell(v), style=style) for v in values))
            section = sec
        table.focus()
