"""Quit and reopen: the console comes back as it was left (the Runs filter and sort, the
Jobs form shown, the Lab's tab; the critic and adapter it had loaded)."""

from __future__ import annotations

from textual.widgets import Input, Select, TabbedContent

from tui import console_state
from tui_helpers import add_run, settle


async def test_quit_and_reopen_restores_filter_sort_form_and_tab(make_app, registry, db_path):
    add_run(registry, "play")
    add_run(registry, "critic", offset_s=10)
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("t")  # the Critic tab
        await settle(app, pilot)
        await pilot.press("2", "slash", *"kind:play", "enter", "o", "o")  # filtered, sorted by kind
        await settle(app, pilot)
        runs = app.screen
        left = (runs.query_one("#runs-filter", Input).value, runs.sort_column, runs.sort_reverse)
        await pilot.press("4")
        await settle(app, pilot)
        app.screen.query_one("#job-command", Select).value = "train-actor"
        await settle(app, pilot)
    assert left[0] == "kind:play" and left[1] != "created"

    again = make_app()
    async with again.run_test(size=(140, 40)) as pilot:
        await settle(again, pilot)
        assert again.screen.query_one("#lab-tabs", TabbedContent).active == "tab-critic"
        await pilot.press("2")
        await settle(again, pilot)
        runs = again.screen
        assert (runs.query_one("#runs-filter", Input).value, runs.sort_column, runs.sort_reverse) == left
        await pilot.press("4")
        await settle(again, pilot)
        assert again.screen.query_one("#job-command", Select).value == "train-actor"
        assert again.screen.query("#train-actor--loss")  # its fields, not the first form's


def test_the_critic_and_adapter_a_session_loaded_come_back_unless_told_otherwise(db_path):
    db_path.parent.mkdir(parents=True)  # the registry's folder, where the console's state file sits beside it
    console_state.save(db_path, actor="smollm2-135m", adapter="actor-1234", critic="critic-5678")
    assert console_state.models_to_reopen(db_path, "smollm2-135m", None, None) == ("actor-1234", "critic-5678")
    assert console_state.models_to_reopen(db_path, "smollm2-135m", "a.lora", "tiny") == ("a.lora", "tiny")
    assert console_state.models_to_reopen(db_path, "tiny", None, None) == (None, "critic-5678")  # other actor
    # 'none' (as --actor none): this session without them, not the last session's
    assert console_state.models_to_reopen(db_path, "smollm2-135m", "none", "None") == (None, None)
    console_state.save(db_path, critic=None)  # a load that failed is not offered again
    assert console_state.models_to_reopen(db_path, "tiny", None, None) == (None, None)
