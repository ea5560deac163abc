"""Every action has a footer binding and a command-palette entry; ctrl+q quits."""

from __future__ import annotations

from textual.command import CommandPalette

from lactchain.prompts import DEFAULT_STRATEGY
from tui.app import LactChainApp
from tui.commands import COMMANDS, bindings_for
from tui.screens.archive import ArchiveScreen
from tui.screens.jobs import JobsScreen
from tui.screens.lab import LabScreen
from tui.screens.labelling import LabellingScreen
from tui.screens.runs import RunsScreen
from tui_helpers import settle
from tui.widgets.strategy_editor import StrategyEditor
from tui_helpers import palette

REQUIRED = {"Step", "Run episode", "Open runs", "Open labelling", "New job"}


def _actions(bindings) -> set[str]:  # noqa: ANN001
    return {b.action if hasattr(b, "action") else b[1] for b in bindings}


def test_every_command_is_bound_where_it_lives():
    owners = {"app": LactChainApp, "lab": LabScreen, "runs": RunsScreen, "labels": LabellingScreen, "jobs": JobsScreen,
              "archive": ArchiveScreen}
    for command in COMMANDS:
        owner = StrategyEditor if command.target == "StrategyEditor" else owners[command.scope]
        assert command.action in _actions(owner.BINDINGS), command.title
        assert command.show, f"{command.title} is hidden from the footer"
    assert REQUIRED <= {c.title for c in COMMANDS}
    titles = [c.title for c in COMMANDS]
    assert len(titles) == len(set(titles))


def test_screen_bindings_all_come_from_the_command_table():
    for scope, screen in (("lab", LabScreen), ("runs", RunsScreen), ("labels", LabellingScreen), ("jobs", JobsScreen),
                          ("archive", ArchiveScreen)):
        from_table = _actions(bindings_for(scope))
        extra = _actions(screen.BINDINGS) - from_table
        assert extra <= {"focus_table", "focus_grid"}, (scope, extra)


async def test_palette_lists_the_commands_and_runs_them(make_app, registry):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert REQUIRED <= titles
        # the key hints survive rendering (markup would eat "[a]", "[b]", "[f5]")
        from rich.text import Text

        helps = {c.title: Text.from_markup(c.help).plain for c in app.get_system_commands(app.screen)}
        assert helps["Choose A"].endswith("[a]") and helps["Refresh runs"].endswith("[f5]")
        await pilot.press("escape")
        await palette(app, pilot, "open runs", "Open runs")
        assert app.current_mode == "runs"
        # A Lab command from another screen switches back to the Lab and runs there.
        await palette(app, pilot, "run episode", "Run episode")
        assert app.current_mode == "lab"
        assert app.lab_session.snapshot().done
        # A command aimed at a widget inside a tab (the strategy editor) reaches it.
        await palette(app, pilot, "save strategy", "Save strategy version")
        assert [v["text"] for v in registry.prompts()] == [DEFAULT_STRATEGY]


async def test_number_keys_switch_screens_and_ctrl_q_quits(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        for key, mode in (("2", "runs"), ("3", "labels"), ("4", "jobs"), ("5", "archive"), ("1", "lab")):
            await pilot.press(key)
            await pilot.pause()
            assert app.current_mode == mode
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.return_code == 0


async def test_a_switch_back_to_a_mounted_screen_is_painted_at_once(make_app):
    """Textual holds repaints for 50 ms after a switch to mask a mount (`App._batch_count`);
    a screen already mounted has nothing to mask, so no hold is taken."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.switch_mode("runs")  # first visit: mounts, held
        assert app._batch_count == 1
        for _ in range(100):  # the hold ends on its timer
            await pilot.pause(0.05)
            if not app._batch_count:
                break
        # nor is it marked stale (a return would reparse every CSS source, ~0.2 s)
        assert app.screen._css_update_count == app._css_update_count
        app.switch_mode("lab")  # both mounted from here on
        assert app._batch_count == 0 and app.current_mode == "lab"
        app.switch_mode("runs")
        assert app._batch_count == 0 and app.current_mode == "runs"
        await pilot.pause()
        assert app.screen.query("#runs-table")


def test_importing_the_tui_pulls_in_no_model_libraries():
    import subprocess
    import sys

    code = ("import sys, tui.app; heavy = sorted(m for m in ('torch', 'transformers', 'xgrammar', 'peft', 'trl') "
            "if m in sys.modules); print(heavy); sys.exit(1 if heavy else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_console_refuses_a_mistyped_or_foreign_db_in_one_line(tmp_path, capsys):
    """`lactchain-tui --db` with a missing folder, a directory or another app's SQLite
    file: one line and exit 2, before any screen draws; nothing is created or changed."""
    import sqlite3

    from tui.app import main

    missing = tmp_path / "no" / "such" / "r.db"
    foreign = tmp_path / "notes.db"
    with sqlite3.connect(foreign) as raw:
        raw.execute("CREATE TABLE notes (body TEXT)")
    before = foreign.read_bytes()
    for db, words in ((missing, "does not exist"), (tmp_path, "is a directory"), (foreign, "another application")):
        assert main(["--db", str(db), "--actor", "none"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err
    assert not (tmp_path / "no").exists() and foreign.read_bytes() == before


async def test_question_mark_shows_and_hides_every_key_of_the_screen(make_app):
    from textual.widgets import HelpPanel

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        app.screen.query_one("#runs-table").focus()
        await pilot.press("question_mark")
        await settle(app, pilot)
        assert app.screen.query(HelpPanel)
        keys = {binding.key for _, binding, _, _ in app.screen.active_bindings.values()}
        assert {"x", "K", "R", "l", "question_mark"} <= keys  # what the panel lists: tui.commands' Runs keys
        await pilot.press("question_mark")
        await settle(app, pilot)
        assert not app.screen.query(HelpPanel)


async def test_the_footer_says_esc_while_a_text_field_has_the_focus(make_app):
    """Keys typed in a field are text (`n` in a form field is a letter): the footer says
    how to get back to the screen's keys, and says nothing once the field is left."""
    from textual.widgets import Input, Label

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        await settle(app, pilot)
        app.screen.query(Input).first().focus()
        await settle(app, pilot)
        hints = [str(w.render()) for w in app.screen.query(".-esc-hint").results(Label)]
        assert hints and "esc" in hints[0]
        await pilot.press("escape")
        await settle(app, pilot)
        assert not app.screen.query(".-esc-hint")
