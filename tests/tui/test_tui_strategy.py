"""Strategy prompt editor: validate, save a version to the registry, apply, restore."""

from __future__ import annotations

from textual.widgets import DataTable, TextArea

from lactchain.prompts import DEFAULT_STRATEGY
from tui.widgets.strategy_editor import StrategyEditor
from tui_helpers import palette, settle, type_keys


async def _open_editor(app, pilot):  # noqa: ANN001, ANN202
    await pilot.press("ctrl+e")
    await settle(app, pilot)
    editor = app.screen.query_one(StrategyEditor)
    assert app.screen.focused is editor.query_one(TextArea)
    return editor


async def _listed_versions(app) -> list:  # noqa: ANN001
    """The rows of the editor's versions table, opened on the Lab's grid."""
    async with app.run_test(size=(120, 40)) as pilot:
        editor = await _open_editor(app, pilot)
        await settle(app, pilot)
        table = editor.query_one("#strategy-versions", DataTable)
        return [table.get_row_at(i) for i in range(table.row_count)]


def _message(editor: StrategyEditor) -> str:
    return str(editor.query_one("#strategy-message").render())


async def test_saved_prompt_version_is_in_the_registry(make_app, registry):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        editor = await _open_editor(app, pilot)
        editor.set_text("Go east until the wall, then north.")
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        versions = registry.prompts()
        assert [v["text"] for v in versions] == ["Go east until the wall, then north."]
        assert versions[0]["env"] == "grid"  # written for the env the Lab plays: listed under it
        assert "saved as version 1" in _message(editor)
        assert editor.query_one("#strategy-versions", DataTable).row_count == 1
        # Not live until applied.
        assert app.lab_session.strategy == DEFAULT_STRATEGY
        await pilot.press("ctrl+g")
        await settle(app, pilot)
        assert app.lab_session.strategy == "Go east until the wall, then north."
        await pilot.press("escape", "s")  # escape leaves the editor for the grid
        await settle(app, pilot)
        assert "Go east until the wall, then north." in app.lab_session.history[-1].prompt
        # the version is the grid's: on Blackjack the editor lists none, and says whose strategy it
        # now holds (not the grid's last save); back on the grid it is there
        await palette(app, pilot, "play blackjack", "Lab: play blackjack")
        await settle(app, pilot)
        assert editor.query_one("#strategy-versions", DataTable).row_count == 0
        assert _message(editor).startswith("blackjack's built-in strategy")
        await palette(app, pilot, "play grid", "Lab: play grid")
        await settle(app, pilot)
        assert editor.query_one("#strategy-versions", DataTable).row_count == 1


async def test_invalid_strategy_gives_a_clear_message_and_saves_nothing(make_app, registry):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        editor = await _open_editor(app, pilot)
        editor.set_text("   ")
        await pilot.press("ctrl+t")
        assert "invalid strategy" in _message(editor) and "empty" in _message(editor)
        assert editor.query_one("#strategy-message").has_class("-error")
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert registry.prompts() == []
        await pilot.press("ctrl+g")
        assert app.lab_session.strategy == DEFAULT_STRATEGY
        editor.set_text("Turn left first.")
        await pilot.press("ctrl+t")
        assert "valid strategy" in _message(editor) and editor.query_one("#strategy-message").has_class("-ok")


async def test_browse_and_restore_an_earlier_version(make_app, registry):
    registry.save_prompt("first strategy", note="v1 note")
    registry.save_prompt("second strategy")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        editor = await _open_editor(app, pilot)
        table = editor.query_one("#strategy-versions", DataTable)
        assert table.row_count == 2  # newest first
        table.focus()
        await pilot.press("down")  # version 1
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        assert editor.text == "first strategy"
        assert app.lab_session.strategy == "first strategy"
        assert "restored version 1" in _message(editor)
        # Saving the restored text unchanged adds no duplicate version ...
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert registry.get_prompt()["version"] == 2 and "identical to version 1" in _message(editor)
        # ... an edit of it is a new version whose parent is the restored one.
        editor.set_text("first strategy, then walk straight to the goal")
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        newest = registry.get_prompt()
        assert newest["version"] == 3 and newest["parent_version"] == 1 and newest["text"].startswith("first strategy,")


async def test_the_applied_version_is_live_again_after_a_restart(make_app, registry):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        editor = await _open_editor(app, pilot)
        editor.set_text("Turn to face the goal, then walk.")
        await pilot.press("ctrl+s")
        await pilot.press("ctrl+g")
        await settle(app, pilot)
    again = make_app()
    async with again.run_test(size=(120, 40)) as pilot:
        await settle(again, pilot)
        assert again.lab_session.strategy == "Turn to face the goal, then walk."
        editor = again.screen.query_one(StrategyEditor)
        assert editor.text == "Turn to face the goal, then walk." and editor.live_version == 1


async def test_evaluate_this_strategy_launches_an_evaluate_job_with_its_version(make_app, registry):
    """ctrl+o saves the editor's text (if new), asks how many start states, launches
    `lactchain evaluate --strategy V --states N` with the console's actor (the planner actor
    is no model, so the default is used) and shows the score beside the version when the
    run ends."""
    from tui.jobs_bridge import LaunchResult
    from tui.widgets.confirm import AskScreen

    launched = []

    def launcher(request):  # noqa: ANN001, ANN202 - stands in for the job layer (run by the Jobs tests)
        launched.append(request.argv)
        return LaunchResult(tuple(request.argv), registry.create_run("eval", cmd=request.argv), "")

    app = make_app(launcher=launcher)
    async with app.run_test(size=(120, 40)) as pilot:
        editor = await _open_editor(app, pilot)
        editor.set_text("Walk to the goal by the shortest path.")
        await pilot.press("ctrl+o")
        await settle(app, pilot)
        assert registry.get_prompt()["text"] == "Walk to the goal by the shortest path."
        # how many start states: 8 (a quick check) unless told; a bad answer is said, not launched
        ask = app.screen
        assert isinstance(ask, AskScreen) and ask.query_one("#ask-value").value == "8"
        ask.query_one("#ask-value").value = "ten"
        await pilot.press("enter")
        assert "give a number of start states" in str(ask.query_one("#ask-error").render()) and not launched
        ask.query_one("#ask-value").value = "8"
        await pilot.press("enter")
        for _ in range(50):  # not settle(): the editor follows the run until it ends, below
            await pilot.pause(0.1)
            if launched and "evaluating version 1" in _message(editor):
                break
        (argv,) = launched
        assert argv[argv.index("--strategy") + 1] == "1" and "evaluate" in argv
        assert argv[argv.index("--actor") + 1] == "smollm2-135m" and argv[argv.index("--states") + 1] == "8"
        assert "evaluating version 1" in _message(editor)
        # the job ends (as `lactchain evaluate` records it): the score lands beside the version
        (run,) = registry.list_runs(kind="eval")
        registry.log_params(run["id"], {"strategy_version": 1})
        registry.log_metrics(run["id"], {"success_rate": 0.5, "states": 8.0})
        registry.end_run(run["id"], "FINISHED")
        table = editor.query_one("#strategy-versions", DataTable)
        for _ in range(50):
            await pilot.pause(0.1)
            if table.row_count and str(table.get_row_at(0)[1]) == "50% of 8":
                break
        assert str(table.get_row_at(0)[1]) == "50% of 8"
        assert "version 1: success 0.50 on 8 start states" in _message(editor)


async def test_a_searchs_versions_are_listed_ranked_with_their_scores(make_app, registry):
    """A strategy search saves scored versions: the editor lists hand-saved versions first,
    then the search's best first, with the score column."""
    mine = registry.save_prompt("Mine, saved by hand.")
    low = registry.save_prompt("Searched, low.", score=0.25, run_id="strategy-1")
    high = registry.save_prompt("Searched, high.", score=0.75, run_id="strategy-1")
    rows = await _listed_versions(make_app())
    assert [str(r[0]).strip() for r in rows] == [str(mine), str(high), str(low)]
    assert [str(r[1]) for r in rows] == ["", "0.75", "0.25"]


async def test_the_editor_lists_the_searches_of_the_env_it_plays_and_names_their_scene(make_app, registry):
    """A score is a search's own world: on the grid the editor lists the grid searches'
    versions (a scene's or a state text's named in its note) and the grid's hand-saved ones
    (and those saved before versions named an env), never a Blackjack search's or a version
    saved by hand for Taxi."""
    flat = registry.create_run("strategy", params={"env": "grid", "scene": "flat", "state_text": "coords"})
    cards = registry.create_run("strategy", params={"env": "blackjack"})
    older = registry.save_prompt("Saved before versions named an env.")
    registry.save_prompt("Mine, for Taxi.", env="taxi")
    mine = registry.save_prompt("Mine, saved by hand.", env="grid")
    on_flat = registry.save_prompt("Searched on flat.", score=0.5, run_id=flat, note="edits, round 1")
    registry.save_prompt("Searched on Blackjack.", score=0.9, run_id=cards)
    rows = await _listed_versions(make_app())
    assert [str(r[0]).strip() for r in rows] == [str(mine), str(older), str(on_flat)]
    assert str(rows[2][3]) == "flat, coords text: edits, round 1"


async def test_the_jobs_screen_launches_a_strategy_search(make_app, registry):
    """The Strategy search form (a command of the `strategy` group) mounts, previews and
    launches `lactchain strategy search ...`."""
    from textual.widgets import Input

    from tui.jobs_bridge import LaunchResult
    from tui_helpers import open_job_form

    launched: list[list[str]] = []

    def fake_launcher(request):  # noqa: ANN001, ANN202 - stands in for the job layer's detach
        launched.append(request.argv)
        return LaunchResult(tuple(request.argv), registry.create_run("strategy", cmd=request.argv), "")

    app = make_app(launcher=fake_launcher)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_job_form(app, pilot, "strategy search")
        screen.query_one("#strategy_search--rounds", Input).value = "3"
        await pilot.pause()
        assert str(screen.query_one("#job-argv").render()).startswith("lactchain strategy search")
        await pilot.press("ctrl+l")
        await settle(app, pilot)
        assert launched and launched[0][1:3] == ["strategy", "search"]
        assert launched[0][launched[0].index("--rounds") + 1] == "3"
        assert "--scene" not in launched[0]  # an option with no default stays unset (blank), not "empty"


async def test_at_80x24_the_editor_has_lines_to_type_in_and_the_actor_comes_back(make_app):
    from textual.widgets import TabbedContent

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        editor = await _open_editor(app, pilot)
        await settle(app, pilot)
        assert editor.query_one(TextArea).content_region.height >= 4  # was 0 lines at 80x24
        assert not app.screen.query_one("#actor-pane").display
        app.screen.query_one("#lab-tabs", TabbedContent).active = "tab-episode"
        await settle(app, pilot)
        assert app.screen.query_one("#actor-pane").display


async def test_unsaved_text_survives_the_console_ending_and_goes_once_saved(make_app, registry):
    """Typed, neither saved nor applied, then the console ends (quit, crash, a dropped SSH
    connection): the next session's editor holds that text again, not applied; once it is
    saved there is no draft to bring back."""
    from tui.widgets.strategy_editor import DRAFT_SAVE_S

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_editor(app, pilot)
        await type_keys(pilot, *"Hug the wall. ")  # typed at the top of the default strategy
        await pilot.pause(DRAFT_SAVE_S + 0.5)  # a second after the last key it is kept
    typed = "Hug the wall. " + DEFAULT_STRATEGY
    again = make_app()
    async with again.run_test(size=(120, 40)) as pilot:
        await settle(again, pilot)
        editor = again.screen.query_one(StrategyEditor)
        assert editor.text == typed and "unsaved text from the last session" in _message(editor)
        assert again.lab_session.strategy == DEFAULT_STRATEGY  # not applied: the user decides
        await _open_editor(again, pilot)
        await pilot.press("ctrl+s")
        await settle(again, pilot)
        assert [v["text"] for v in registry.prompts()] == [typed]
    third = make_app()
    async with third.run_test(size=(120, 40)) as pilot:
        await settle(third, pilot)
        assert not third.screen.query(StrategyEditor) or third.screen.query_one(StrategyEditor).text == DEFAULT_STRATEGY



async def test_applied_unsaved_text_comes_back_next_session_however_fast_the_keys(make_app):
    """ctrl+g on edited text applies it without saving a version: the next session reopens
    no version, so the text comes back as the editor's draft; pressed within the draft's
    second after the last key, the pending keep must not run after it."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_editor(app, pilot)
        await type_keys(pilot, *"Hug the wall. ", "ctrl+g")  # applied at once, inside the draft's second
        await settle(app, pilot)
        typed = "Hug the wall. " + DEFAULT_STRATEGY
        assert app.lab_session.strategy == typed
    again = make_app()
    async with again.run_test(size=(120, 40)) as pilot:
        await settle(again, pilot)
        editor = again.screen.query_one(StrategyEditor)
        assert editor.text == typed and "unsaved text from the last session" in _message(editor)
