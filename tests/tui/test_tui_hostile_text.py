"""Stored hostile text (terminal escapes, Rich markup) is shown, never obeyed, on every
screen that shows it: a run's name, params, error, command, tags, artifacts and log, a
strategy version's text and note."""

from __future__ import annotations

import re

from textual.widgets import DataTable, TabbedContent, TabPane

from tui_helpers import settle

HOSTILE = "\x1b]0;pwned\x07\x1b[2J[bold red]boom[/] \x9b31m:end:"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what a terminal would obey


def shown(app) -> str:  # noqa: ANN001
    """Every character the screen would send to the terminal, as text."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


def plant(registry) -> str:  # noqa: ANN001
    run_id = registry.create_run("play", name=HOSTILE, params={"strategy_text": HOSTILE, "strategy": HOSTILE},
                                 cmd=["lactchain", "play", HOSTILE])
    registry.set_tag(run_id, "note", HOSTILE)
    registry.log_metrics(run_id, {"success_rate": 0.5, HOSTILE: 1.0}, step=1)
    registry.end_run(run_id, "FAILED", error=HOSTILE)
    registry.run_dir(run_id).mkdir(parents=True, exist_ok=True)
    (registry.run_dir(run_id) / "log.txt").write_text(f"line one {HOSTILE}\n")
    registry.add_artifact(run_id, "strategy", str(registry.run_dir(run_id) / f"{HOSTILE}.txt"))
    archive = registry.create_run("archive", name="archive", params={"source_run": HOSTILE})
    registry.end_run(archive, "FINISHED")
    registry.save_prompt(HOSTILE, note=HOSTILE, score=0.5, run_id="strategy-1")
    return run_id


async def test_hostile_stored_text_is_shown_escaped_on_every_screen(make_app, registry):
    plant(registry)
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        seen = {}

        async def look(where: str) -> None:
            await settle(app, pilot)
            seen[where] = shown(app)
            for tabs in app.screen.query(TabbedContent):  # every tab of the screen (Info, Log, Strategy, ...)
                for pane in tabs.query(TabPane):
                    tabs.active = pane.id
                    await settle(app, pilot)
                    seen[f"{where} {pane.id}"] = shown(app)

        for key in ("1", "2", "3", "4", "5"):
            await pilot.press(key)
            await look(key)
            tables = list(app.screen.query(DataTable))
            for table in tables[:1] if key in ("2", "4", "5") else []:  # open each run / job / archive
                for row in range(table.row_count):
                    table.move_cursor(row=row)
                    await look(f"{key} row {row}")
        leaks = {where: [line for line in text.splitlines() if RAW.search(line) or ("boom" in line and "[bold red]boom"
                                                                                      not in line)]
                 for where, text in seen.items()}  # an escape obeyed, or markup read as markup
        assert not any(leaks.values()), {where: lines for where, lines in leaks.items() if lines}
        app.notify(f"cannot load {HOSTILE}")  # a toast naming stored text: shown as typed, never read as markup
        await pilot.pause()
        toast = list(app._notifications)[-1]
        assert toast.markup is False and not RAW.search(toast.message) and "[bold red]boom[/]" in toast.message
        assert any("\\x1b]0;pwned\\x07" in text for text in seen.values())
        assert any("[bold red]boom[/]" in text for text in seen.values())
