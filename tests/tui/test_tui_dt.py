"""Decision transformer: act an instruction (a modal over the Archive screen): a real
tiny dt run trained in this process on a small flat archive acts a typed instruction;
the grid shows the path, beside it the annotations and the landmark-order verdict; the
no-dt-run and empty-instruction states are one line."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tui.screens.archive import ArchiveScreen
from tui.screens.dt_instruct import DtInstructScreen
from tui.widgets.compact_grid import CompactGridView
from tui_helpers import open_archive, settle, static_text

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--batch-size", "16", "--eval-every", "5",
        "--checkpoint-every", "10", "--threads", "1"]
INSTRUCTION = "Passes the sofa, then the bed, and stops north of the fridge."


def _fill(db, capsys) -> str:  # noqa: ANN001
    from cli_helpers import run_cli
    from lactchain.runs.registry import Registry

    code, _, err = run_cli(["archive", "fill", "--scene", "flat", "--behaviours", "60", "--db", str(db), "--json"],
                           capsys)
    assert code == 0, err
    reg = Registry.open_for_reading(db)
    try:
        return reg.list_runs(kind="archive", limit=1)[0]["id"]
    finally:
        reg.close()


async def _open_dt(app, pilot) -> DtInstructScreen:  # noqa: ANN001
    await open_archive(app, pilot)
    await pilot.press("i")
    await settle(app, pilot)
    assert isinstance(app.screen, DtInstructScreen)
    return app.screen


async def test_the_dt_acts_a_typed_instruction_on_the_grid(make_app, registry, db_path, capsys):
    from cli_helpers import run_cli

    archive = _fill(db_path, capsys)
    code, _, err = run_cli(["dt", "train", "--archive", archive, "--steps", "10", *TINY, "--db", str(db_path)],
                           capsys)
    assert code == 0, err
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open_dt(app, pilot)
        archive_screen = app.screen_stack[-2]
        row = archive_screen._row()
        assert row is not None
        from lactchain.archive.describe import describe_rule

        box = screen.query_one("#dt-instruction", Input)
        assert box.value == describe_rule(row)  # pre-filled with the selected row's rule description
        assert "dt run" in static_text(screen, "#dt-run")

        box.value = ""
        await pilot.press("enter")
        assert "type an instruction" in static_text(screen, "#dt-message")

        box.value = INSTRUCTION
        box.focus()
        await pilot.press("enter")
        await settle(app, pilot)
        result = screen.result
        assert result is not None and screen.error is None
        assert result["path"][0].x == row["path"][0]["x"] and result["path"][0].y == row["path"][0]["y"]
        assert len(result["moves"]) > 0 or result["stopped"]
        assert result["annotations"] and result["mentioned"] == ["sofa", "bed", "fridge"]
        await pilot.press("end")
        await pilot.pause()
        grid = screen.query_one("#dt-grid", CompactGridView)
        assert grid.display and len(grid.model.path) == len(result["path"]) and grid.model.agent == result["path"][-1]
        shown = static_text(screen, "#dt-result")
        assert "instruction order sofa > bed > fridge" in shown
        assert ("✓ order matches" in shown) == result["order_match"] and ("order" in shown)
        assert ("✗ order differs" in shown) != result["order_match"]
        assert f"{len(result['moves'])} move" in shown
        assert ("said STOP" in shown) == result["stopped"]
        assert f"t=0 {result['annotations'][0]['text']}" in shown
        await pilot.press("home")
        await pilot.pause()
        assert screen.t == 0 and len(grid.model.path) == 1
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ArchiveScreen)


async def test_without_a_dt_run_the_screen_says_how_to_train_one(make_app, registry, db_path, capsys):
    _fill(db_path, capsys)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open_dt(app, pilot)
        assert "`lactchain dt train --archive RUN` creates one" in static_text(screen, "#dt-run")
        screen.query_one("#dt-instruction", Input).value = INSTRUCTION
        await pilot.press("enter")
        await settle(app, pilot)
        assert screen.result is None and "lactchain dt train" in static_text(screen, "#dt-message")
        assert isinstance(app.screen, DtInstructScreen)  # no crash


async def test_a_dt_run_trained_on_another_scene_is_refused_in_one_line(make_app, registry, db_path, capsys):
    """The newest dt run learned the flat scene; the archive on screen (the newest) is on
    the empty one: acting says so and how to train one on it, nothing is drawn."""
    from cli_helpers import run_cli

    flat = _fill(db_path, capsys)
    code, _, err = run_cli(["dt", "train", "--archive", flat, "--steps", "5", *TINY, "--db", str(db_path)], capsys)
    assert code == 0, err
    code, _, err = run_cli(["archive", "fill", "--scene", "empty", "--behaviours", "30", "--db", str(db_path)], capsys)
    assert code == 0, err
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open_dt(app, pilot)
        assert screen.scene is not None and screen.scene.name == "empty"
        screen.query_one("#dt-instruction", Input).value = "Stops at the goal."
        await pilot.press("enter")
        await settle(app, pilot)
        message = static_text(screen, "#dt-message")
        assert screen.result is None
        assert "trained on scene 'flat', this archive is 'empty'" in message and "lactchain dt train" in message
        assert "\n" not in message.strip() and not screen.query_one("#dt-grid", CompactGridView).display
