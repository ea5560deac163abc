"""Options and output helpers shared by every command group."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

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


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error on stderr and exit with `code`."""
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)
