"""Helpers shared by the TUI tests (imported by name: tests/tui is on sys.path)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from contextlib import contextmanager
from typing import Any

from lactchain.runs.registry import Registry
from tui.app import LactChainApp

FIXED_MS = 1_790_000_000_000  # 2026-09-21: a fixed clock for snapshot data


async def settle(app: LactChainApp, pilot) -> None:  # noqa: ANN001
    """Let workers finish (a cancelled one is fine: exclusive workers replace each other)
    and their messages land."""
    from textual.worker import WorkerCancelled

    for _ in range(3):
        waited = list(app.workers)
        for worker in waited:
            try:
                await worker.wait()
            except WorkerCancelled:
                pass
        await pilot.pause()
        if not waited and not list(app.workers):  # nothing ran and nothing started: the app is quiet
            return


async def type_keys(pilot, *keys: str) -> None:  # noqa: ANN001
    """Keys sent back to back, as a fast typist's (or a paste's) reach the app in one read,
    then the app settled once. Each is still handled in order (the app's message queue);
    Pilot's `press` instead waits for the CPU to go idle after every key (~60 ms a key)."""
    import unicodedata

    from textual import events
    from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key

    app = pilot.app
    for key in keys:  # named and spelt as Pilot's press does ("/" is the key "slash", as a terminal sends it)
        if len(key) == 1 and not key.isalnum():
            key = _character_to_key(key)
        try:
            char = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
        except KeyError:
            char = key if len(key) == 1 else None
        event = events.Key(key, char)
        event.set_sender(app)
        app._driver.send_message(event)  # what Pilot's press sends, less its waits
    await settle(app, pilot)


async def tables_sized(app: LactChainApp, pilot) -> None:  # noqa: ANN001
    """A DataTable sizes its columns to new rows when its message queue goes idle
    (Textual's `DataTable._on_idle`): on a loaded machine a snapshot once caught the Lab's
    table before that, its columns cut to their old widths. Pause until none is pending on
    three pauses in a row (a worker's last row can land just after a quiet check: once more,
    the Blackjack Lab's steps table under a loaded full run)."""
    from textual.widgets import DataTable

    quiet = 0
    for _ in range(60):
        tables = app.screen.query(DataTable)
        pending = any(t._require_update_dimensions or t._updated_cells or t._new_rows for t in tables)  # noqa: SLF001
        quiet = 0 if pending else quiet + 1
        if quiet >= 3:
            return
        await pilot.pause()


def pressing(*groups: tuple[str, ...], then=None):  # noqa: ANN001, ANN202
    """A snapshot's run_before: the app settled, each group of keys pressed (settled after
    each), then `then(pilot)` if given, settled too, and every table's columns sized."""
    async def run_before(pilot) -> None:  # noqa: ANN001
        app = pilot.app
        await settle(app, pilot)
        for keys in groups:
            await pilot.press(*keys)
            await settle(app, pilot)
        if then is not None:
            await then(pilot)
            await settle(app, pilot)
        await tables_sized(app, pilot)
        await asyncio.sleep(0)

    return run_before


def static_text(screen: Any, selector: str) -> str:
    """What a Static widget shows, as plain text."""
    from textual.widgets import Static

    return str(screen.query_one(selector, Static).render())


async def open_archive(app: LactChainApp, pilot) -> Any:  # noqa: ANN001
    """Key 5: the Archive screen, settled."""
    from tui.screens.archive import ArchiveScreen

    await pilot.press("5")
    await settle(app, pilot)
    assert isinstance(app.screen, ArchiveScreen)
    return app.screen


async def open_job_form(app: LactChainApp, pilot, command: str) -> Any:  # noqa: ANN001
    """Key 4: the Jobs screen with `command`'s form chosen, settled."""
    from textual.widgets import Select

    from tui.screens.jobs import JobsScreen

    await pilot.press("4")
    await settle(app, pilot)
    assert isinstance(app.screen, JobsScreen)
    app.screen.query_one("#job-command", Select).value = command
    await settle(app, pilot)
    return app.screen


def add_run(reg: Registry, kind: str, *, status: str = "FINISHED", params: dict | None = None,
            metrics: dict[str, list[float]] | None = None, offset_s: int = 0, duration_s: int = 60,
            log_lines: list[str] | None = None, adapter: bool = False, name: str | None = None) -> str:
    run_id = reg.create_run(kind, name=name, params=params or {}, status="SCHEDULED", cmd=["lactchain", kind])
    start = FIXED_MS + offset_s * 1000
    fields: dict[str, Any] = {"status": status, "created_ms": start, "started_ms": start}
    if status not in ("RUNNING", "SCHEDULED"):
        fields["ended_ms"] = start + duration_s * 1000
    if log_lines is not None:
        log = reg.run_dir(run_id) / "log.txt"
        log.write_text("\n".join(log_lines) + "\n")
        fields["log_path"] = str(log)
    reg.update_run(run_id, **fields)
    for key, values in (metrics or {}).items():
        for step, value in enumerate(values):
            reg.log_metric(run_id, key, value, step=step)
    if adapter:
        folder = reg.run_dir(run_id) / "adapter"
        folder.mkdir(exist_ok=True)
        reg.add_artifact(run_id, "adapter", folder)
    return run_id


def add_critic_pairs(reg: Registry, n: int = 3) -> list[int]:
    run_id = reg.create_run("collect-pairs", status="FINISHED")
    rows = []
    starts = [(0, 0, "east"), (1, 2, "north"), (2, 1, "west"), (0, 3, "south")]
    for i in range(n):
        x, y, o = starts[i % len(starts)]
        rows.append({
            "state": {"x": x, "y": y, "orientation": o},
            "prompt": f"prompt {i}",
            "chosen": ["move forward", "move forward"],
            "rejected": ["turn left"],
            "chosen_score": 1.5 + i,
            "rejected_score": -0.5,
            "labeler": "critic",
            "status": "labeled",
            "meta": {"v_state": 0.1},
        })
    return reg.add_pairs(run_id, rows)


async def palette(app: LactChainApp, pilot, query: str, title: str, timeout: float = 15.0) -> None:  # noqa: ANN001
    """Open the command palette, type `query`, wait until `title` is the highlighted hit, run it."""
    import asyncio

    from textual.command import CommandList, CommandPalette

    await pilot.press("ctrl+p")
    for _ in range(int(timeout / 0.05)):
        if isinstance(app.screen, CommandPalette):
            break
        await pilot.pause(0.05)
    await type_keys(pilot, *query)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        commands = app.screen.query(CommandList)
        if commands:
            command_list = commands.first()
            index = command_list.highlighted
            if index is not None and command_list.option_count:
                prompt = str(command_list.get_option_at_index(index).prompt)
                if prompt.splitlines()[0].strip().startswith(title):
                    break
        await pilot.pause(0.05)
    else:
        raise AssertionError(f"{title!r} never became the highlighted palette hit for {query!r}")
    await pilot.press("enter")
    await settle(app, pilot)


@contextmanager
def live_job(registry, kind):
    """A RUNNING run of `kind` backed by a real process in its own session."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    run_id = registry.create_run(kind, status="RUNNING")
    registry.update_run(run_id, pid=proc.pid, pgid=proc.pid)
    try:
        yield proc, run_id
    finally:
        if proc.poll() is None:
            proc.kill()
