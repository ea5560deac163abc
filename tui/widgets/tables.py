"""Keep a DataTable in sync with fresh rows without flicker (toolong-style stability).

Same keys in the same order: only the changed cells are updated, so the cursor and
scroll position stay put while a running job's duration and metrics tick. Otherwise
the table is rebuilt and the cursor goes back to the row it was on.
"""

from __future__ import annotations

from typing import Any, Sequence

from rich.text import Text
from textual.widgets import DataTable

from tui.format import safe

Row = tuple[str, Sequence[Any]]  # (row key, cells)


def plain_cells(*values: Any) -> list[Any]:
    """Cells a DataTable shows as typed: a str would be read as Rich markup (a stored
    `[link=...]` made a link) and its control characters sent to the terminal; here both
    are shown, never obeyed. A `Text` keeps its style, its text made safe the same way."""
    out: list[Any] = []
    for value in values:
        if isinstance(value, Text):
            plain = safe(value.plain, keep_newlines=False)
            out.append(value if plain == value.plain else Text(plain, style=value.style))
        elif isinstance(value, str):
            out.append(Text(safe(value, keep_newlines=False)))
        else:
            out.append(value)
    return out


def sync_table(table: DataTable, rows: Sequence[Row], keep: str | None = None) -> bool:
    """Show `rows`; returns True if the table was rebuilt."""
    shown = getattr(table, "_lactchain_rows", None)
    rows = [(key, plain_cells(*cells)) for key, cells in rows]
    fresh = [(key, [str(c) for c in cells]) for key, cells in rows]
    if shown is not None and [k for k, _ in shown] == [k for k, _ in fresh]:
        columns = [c.key for c in table.ordered_columns]
        for (key, old), (_, new), (_, cells) in zip(shown, fresh, rows):
            for i, (a, b) in enumerate(zip(old, new)):
                if a != b:
                    table.update_cell(key, columns[i], cells[i], update_width=True)  # else "12m5" of "12m57s"
        table._lactchain_rows = fresh
        return False
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    table._lactchain_rows = fresh
    keys = [k for k, _ in fresh]
    if keep is not None and keep in keys:
        table.move_cursor(row=keys.index(keep), animate=False)
    return True


def reset_table(table: DataTable) -> None:
    table._lactchain_rows = None
    table.clear()
