"""Typing never drives the console: keys typed into any focused field (or any widget of
the strategy editor) type, and never switch screens or start a screen's action; escape
leaves any field, then 1-5 switch screens."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, TextArea

from tui_helpers import settle, type_keys

MODES = {"1": "lab", "2": "runs", "3": "labels", "4": "jobs", "5": "archive"}
# Every single-character key the console binds (screen and app keys), as a user would type them.
TYPED = "12345 sekrnpcvaoRKlmx/=dfgqyz"
KEYS = ["space" if char == " " else char for char in TYPED]


def _spy_actions(app) -> list[str]:  # noqa: ANN001
    """Observe (not replace) every action a key binding runs."""
    ran: list[str] = []
    run_action = app.run_action

    async def recording(action, default_namespace=None):  # noqa: ANN001, ANN202
        ran.append(str(action))
        return await run_action(action, default_namespace)

    app.run_action = recording
    return ran


@pytest.mark.slow
async def test_keys_typed_into_every_focused_field_never_switch_screens_or_start_actions(make_app):
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        checked = []
        for key, mode in MODES.items():
            await pilot.press("escape", key)  # a field of the last screen may still have the focus
            await settle(app, pilot)
            assert app.current_mode == mode
            if mode == "lab":
                await pilot.press("ctrl+e")  # the strategy tab: the editor's text and note
                await settle(app, pilot)
            fields = [w for w in app.screen.query("*") if isinstance(w, (Input, TextArea)) and w.focusable
                      and all(node.display for node in w.ancestors_with_self if node is not app)]
            for field in fields:
                field.focus()
                await settle(app, pilot)
                ran = _spy_actions(app)
                steps = app.lab_session.snapshot().actions_taken
                await type_keys(pilot, *KEYS)  # typed fast: each handled in turn, one wait at the end
                del app.run_action
                assert app.current_mode == mode, (mode, field.id)
                assert app.focused is field, (mode, field.id, app.focused)
                assert ran == [], (mode, field.id, ran)
                assert app.lab_session.snapshot().actions_taken == steps
                checked.append(f"{mode}:{field.id}")
        assert {"lab:strategy-text", "lab:strategy-note", "runs:runs-filter"} <= set(checked), checked


async def test_the_strategy_editors_other_widgets_never_run_lab_commands(make_app):
    """After the editor's text, Tab reaches the note field, then the versions table: a note
    typed with the focus on the table must not toggle decoding or start an episode."""
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+e")
        await settle(app, pilot)
        assert app.focused.id == "strategy-text"
        await pilot.press("tab")
        assert app.focused.id == "strategy-note"
        await pilot.press("tab")
        assert isinstance(app.focused, DataTable) and app.focused.id == "strategy-versions"
        constrained = app.lab_session.constrained
        ran = _spy_actions(app)
        for char in "face goal hint":
            await pilot.press("space" if char == " " else char)
        await settle(app, pilot)
        assert app.lab_session.constrained == constrained and app.lab_session.snapshot().actions_taken == 0
        assert not [a for a in ran if not a.startswith(("select_cursor", "cursor_"))], ran
        await pilot.press("escape")  # out of the editor: the grid has the focus, Lab keys work again
        await settle(app, pilot)
        await pilot.press("s")
        await settle(app, pilot)
        assert app.lab_session.snapshot().actions_taken == 1


async def test_escape_then_a_digit_switches_screens_from_every_focused_field(make_app):
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+e")  # into the strategy editor's text
        await settle(app, pilot)
        assert isinstance(app.focused, TextArea)
        await pilot.press("escape", "2")
        await settle(app, pilot)
        assert app.current_mode == "runs"
        await pilot.press("slash", "4")  # typed into the filter
        assert app.current_mode == "runs" and app.focused.value.endswith("4")
        for key, mode in MODES.items():
            for field in [w for w in app.screen.query("*") if isinstance(w, Input) and w.focusable][:1]:
                field.focus()
            await pilot.press("escape", key)
            await settle(app, pilot)
            assert app.current_mode == mode, (key, app.focused)


async def test_a_digit_pressed_right_after_switching_screens_switches_again(make_app):
    """`2` then `1` typed quickly: each screen opens with its table focused, never its
    filter (Runs' filter once caught the `1`, filtered by it and kept it for the next
    session)."""
    from tui import console_state

    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        for key in ("2", "5", "3", "4"):
            await type_keys(pilot, key, "1")  # as a terminal sends them: both queued before the first is handled
            assert app.current_mode == "lab", (key, app.focused)
        await pilot.press("2")
        assert app.current_mode == "runs" and isinstance(app.focused, DataTable)
        assert app.screen.query_one("#runs-filter", Input).value == ""
    assert console_state.load(app.db_path).get("runs", {}).get("filter", "") == ""


async def test_t_walks_the_lab_and_runs_tabs_by_keyboard_and_the_focus_stays(make_app):
    from textual.widgets import TabbedContent

    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        tabs = app.screen.query_one("#lab-tabs", TabbedContent)
        focused = app.focused
        seen = [tabs.active]
        for _ in range(3):
            await pilot.press("t")
            await settle(app, pilot)
            seen.append(tabs.active)
        assert seen == ["tab-episode", "tab-critic", "tab-strategy", "tab-episode"]
        assert app.focused is focused  # a Lab key is still a Lab key
        await pilot.press("s")
        await settle(app, pilot)
        assert app.lab_session.snapshot().actions_taken == 1
        await pilot.press("2")
        await settle(app, pilot)
        runs_tabs = app.screen.query_one("#runs-tabs", TabbedContent)
        shown = [runs_tabs.active]
        for _ in range(4):
            await pilot.press("t")
            await settle(app, pilot)
            shown.append(runs_tabs.active)
        assert shown == ["tab-info", "tab-chart", "tab-log", "tab-board", "tab-info"]


async def test_tab_in_a_run_id_field_takes_the_completion_then_moves_on(make_app, registry):
    play = registry.create_run("play", cmd=["lactchain", "play"])
    registry.end_run(play, "FINISHED")
    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        from tui_helpers import open_job_form

        jobs = await open_job_form(app, pilot, "train-critic")
        field = jobs.query_one("#train-critic--episodes-from", Input)
        field.focus()
        field.value = ""
        await pilot.press(*play[:6])
        for _ in range(30):  # the completion arrives from the registry
            await pilot.pause(0.1)
            if field._suggestion:
                break
        await pilot.press("tab")
        assert field.value == play and app.focused is field  # taken, and still here
        await pilot.press("tab")
        assert app.focused is not field  # nothing left to take: Tab moves on


async def test_alt_digit_and_a_quick_escape_digit_switch_screens_even_inside_a_field(make_app):
    """Terminals send alt+N (and escape then N typed quickly) as one sequence that Textual
    reads as the character a Mac's option+N types (¡ ™ £ ¢ ∞): bound on the app with
    priority, they switch screens from inside a field or the strategy editor, typing nothing."""
    from tui.commands import ALT_DIGITS

    app = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+e")  # into the strategy editor's text
        await settle(app, pilot)
        editor = app.focused
        assert isinstance(editor, TextArea)
        text = editor.text
        for key, mode in ALT_DIGITS.items():
            await pilot.press(key)
            await settle(app, pilot)
            assert app.current_mode == mode, key
        assert editor.text == text  # nothing typed
        await pilot.press("trade_mark_sign", "slash", "a")  # Runs, its filter focused, a letter typed
        await settle(app, pilot)
        assert app.current_mode == "runs" and isinstance(app.focused, Input) and app.focused.value == "a"
        await pilot.press("cent_sign")
        await settle(app, pilot)
        assert app.current_mode == "jobs"


async def test_tab_from_the_job_form_select_reaches_the_first_field(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4", "n", "tab")
        await settle(app, pilot)
        assert isinstance(app.focused, Input) and app.focused.id.startswith(app.screen.command.replace(" ", "-"))
