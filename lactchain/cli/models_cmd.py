"""`lactchain models ...`: list the model presets and prepare them offline."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from lactchain.cli.common import JsonOption, console, fail, print_json
from lactchain.models.presets import DEFAULT_ACTOR, PRESETS, ModelNotAvailable, list_presets, prepare, preset_status
from lactchain.paths import models_dir

app = typer.Typer(help="List model presets and prepare them (offline).", no_args_is_help=True)


@app.command("list")
def list_cmd(as_json: JsonOption = False) -> None:
    """Show every preset: its role (actor / critic), whether it is ready, and its source."""
    rows = []
    for preset in list_presets():
        ready, detail = preset_status(preset.name)
        rows.append(
            {
                "name": preset.name,
                "role": preset.role,
                "ready": ready,
                "default": preset.default,
                "detail": detail,
                "source": preset.source,
                "description": preset.description,
            }
        )
    if as_json:
        print_json({"models_dir": str(models_dir()), "presets": rows})
        return
    table = Table(title=f"Model presets (prepared copies in {models_dir()})")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("ready", no_wrap=True)
    table.add_column("detail / source", overflow="fold")
    for row in rows:
        name = row["name"] + ("\n[dim](default)[/]" if row["default"] else "")
        ready = "[green]yes[/]" if row["ready"] else "[yellow]no[/]"
        table.add_row(name, row["role"], ready, f"{row['detail']}\n[dim]{row['source']}[/]")
    console.print(table)


@app.command("prepare")
def prepare_cmd(
    name: Annotated[
        Optional[str],
        typer.Argument(metavar="NAME", help=f"Preset, local folder or cached hub id. Default: {DEFAULT_ACTOR}.", show_default=False),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Make a model ready to load offline (e.g. convert smollm2-135m from GGUF once)."""
    if name is not None and not name.strip():
        fail(f"give a preset name, a local folder or a cached hub id, not an empty string (default: {DEFAULT_ACTOR})")
    name = name or DEFAULT_ACTOR
    known, detail = preset_status(name)
    if not known and detail.startswith(f"unknown model {name!r}"):  # before a progress bar is drawn
        fail(detail)
    if name in PRESETS and PRESETS[name].prepare_fn is None:  # built in memory by whoever loads it
        if as_json:
            print_json({"name": name, "path": None, "ready": known, "detail": detail})
        else:
            console.print(f"[green]ready:[/] {name}: {detail}; nothing to prepare")
        return
    try:
        if as_json:
            path = prepare(name)
        else:
            with Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            ) as bar:
                task = bar.add_task(f"{name}: starting", total=1.0)

                def report(step: str, fraction: Optional[float]) -> None:
                    if fraction is None:
                        bar.update(task, description=f"{name}: {step}")
                    else:
                        bar.update(task, description=f"{name}: {step}", completed=max(0.0, min(1.0, fraction)))

                path = prepare(name, progress=report)
                bar.update(task, completed=1.0)
    except NotImplementedError as exc:
        fail(str(exc), code=1)
    except (ModelNotAvailable, ValueError, OSError, RuntimeError) as exc:
        fail(str(exc))
    ready, detail = preset_status(name)
    if as_json:
        print_json({"name": name, "path": str(path), "ready": ready, "detail": detail})
        return
    console.print(f"[green]ready:[/] {name} -> {path}")
