"""How short jobs (collect-pairs, evaluate, the Motif jobs) print their scalar results."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from lactchain.cli.common import console


def result_table(title: str, result: dict[str, Any]) -> None:
    """A run's scalar results as a two-column table (the non-JSON output of short commands)."""
    table = Table(title=title, show_header=False)
    for key, value in result.items():
        if isinstance(value, (int, float, str, bool)):
            table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)
