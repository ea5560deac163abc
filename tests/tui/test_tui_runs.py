"""Runs screen: table, filter, sort, detail, log tail, overlay, load adapter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, TabbedContent

from tui.screens.runs import PAGE, FilterError, RunsScreen, fetch_runs, parse_filter
from tui.widgets.log_tail import LogTail
from tui_helpers import add_run, palette, settle, type_keys


def _ids(table: DataTable) -> list[str]:
    return [str(table.get_row_at(i)[1]) for i in range(table.row_count)]


async def test_a_sort_chosen_by_keys_typed_together_is_applied(make_app, registry):
    """`O` then `k` typed as one burst: the chooser opens and takes the `k` (both reached
    the Runs screen before it showed: nothing sorted, the chooser stayed open)."""
    from tui.widgets.confirm import ChooseScreen

    critic = add_run(registry, "critic")
    play = add_run(registry, "play", offset_s=10)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        app.screen.query_one("#runs-table", DataTable).focus()
        await type_keys(pilot, "O", "k")
        assert not isinstance(app.screen, ChooseScreen) and app.screen.sort_column == "kind"
        assert _ids(app.screen.query_one("#runs-table", DataTable)) == [critic, play]  # kind a-z; newest first before


def test_filter_terms_run_in_the_registry(registry):
    critic = registry.create_run("critic", name="baseline", status="RUNNING", cmd=["lactchain", "train-critic"])
    registry.create_run("play", name="smoke test")
    assert parse_filter("kind:train-critic status:run base") == (["base"], {"kind": "critic", "status": "run"})

    def ids(query):  # noqa: ANN001, ANN202
        return [r["id"] for r in fetch_runs(registry, {}, query)[0]]

    assert ids("kind:critic status:run") == [critic] == ids("kind:train-critic") == ids("baseline")
    assert ids("status:finished") == [] and ids("kind:critic nope") == []
    assert ids("train-critic") == []  # free text does not search the command line
    assert fetch_runs(registry, {}, "smoke")[1:] == (1, 2)  # matching, of all
    with pytest.raises(FilterError, match="status:bogus matches no status; use one of scheduled, running"):
        parse_filter("status:bogus")
    with pytest.raises(FilterError, match="kind:xyz matches no run's kind here; kinds: critic, play"):
        fetch_runs(registry, {}, "kind:xyz")


async def test_runs_beyond_the_first_page_are_counted_and_reachable(make_app, registry):
    needle = registry.create_run("critic", name="the very first run")
    with registry.transaction():
        for i in range(PAGE + 20):
            registry.create_run("play", name=f"bulk {i}")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        screen = app.screen
        summary = str(screen.query_one("#runs-summary").render())
        assert f"{PAGE}/{PAGE + 21} runs" in summary and "filter to reach the rest" in summary
        await pilot.press("slash", *"very first")
        await settle(app, pilot)
        assert _ids(screen.query_one("#runs-table", DataTable)) == [needle]
        assert f"1/1 runs matching (of {PAGE + 21})" in str(screen.query_one("#runs-summary").render())


async def test_runs_table_filter_sort_and_detail(make_app, registry):
    a = add_run(registry, "train-critic", params={"epochs": 3, "lr": 0.001},
                metrics={"loss": [1.0, 0.5, 0.25]}, offset_s=0, duration_s=300,
                log_lines=[f"epoch {i} loss {1 / (i + 1):.3f}" for i in range(50)])
    b = add_run(registry, "play", status="FAILED", metrics={"success": [0.5]}, offset_s=60, duration_s=5)
    c = add_run(registry, "play", status="RUNNING", offset_s=120)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one("#runs-table", DataTable)
        assert _ids(table) == [c, b, a]  # newest first
        assert "loss=0.25" in str(table.get_row_at(2)[3])
        # filter
        await pilot.press("slash", *"kind:play")
        await pilot.pause()
        assert _ids(table) == [c, b]
        await type_keys(pilot, *" status:failed", "enter")
        await pilot.pause()
        assert _ids(table) == [b]
        screen.query_one("#runs-filter", Input).value = "status:bogus"  # an error, not an empty table
        await settle(app, pilot)
        assert "status:bogus matches no status" in str(screen.query_one("#runs-summary").render())
        assert _ids(table) == [b]
        screen.query_one("#runs-filter", Input).value = ""
        await pilot.pause()
        # sort: created newest first -> created oldest first -> kind (a-z) -> kind (z-a)
        table.focus()
        newest_first = _ids(table)
        await pilot.press("o")
        await pilot.pause()
        assert screen.sort_column == "created" and _ids(table) == newest_first[::-1]
        await pilot.press("o")
        await pilot.pause()
        assert screen.sort_column == "kind" and _ids(table)[-1] == a
        await pilot.press("o")
        await pilot.pause()
        assert screen.sort_column == "kind" and _ids(table)[0] == a
        await pilot.press("o", "o", "o")  # status both ways, on to duration
        await pilot.pause()
        # O, then one key per column: no cycling through the others; its key again flips it
        await pilot.press("O", "i")
        await pilot.pause()
        assert (screen.sort_column, screen.sort_reverse) == ("id", False) and _ids(table) == sorted(_ids(table))
        await pilot.press("O", "i")
        await pilot.pause()
        assert (screen.sort_column, screen.sort_reverse) == ("id", True) and _ids(table) == sorted(_ids(table))[::-1]
        await pilot.press("O", "c")
        await pilot.pause()
        assert (screen.sort_column, screen.sort_reverse) == ("created", True) and _ids(table) == newest_first
        await pilot.press("O", "escape")  # cancelled: as it was
        await pilot.pause()
        assert screen.sort_column == "created" and app.screen is screen
        # detail of the train-critic run
        table.move_cursor(row=_ids(table).index(a))
        await settle(app, pilot)
        info = str(screen.query_one("#run-info").render())
        assert "epochs = 3" in info and "loss = 0.25" in info and "train-critic" in info
        assert "cmd: lactchain train-critic" in info  # a shell line to copy, not a python list
        log = screen.query_one(LogTail)
        assert log.line_count == 50 and log.lines[-1] == "epoch 49 loss 0.020"
        # the log keeps following the file
        with open(registry.get_run(a)["log_path"], "a") as fh:
            fh.write("epoch 50 done\n")
        log.poll()
        assert log.lines[-1] == "epoch 50 done"
        # chart of the selected metric
        assert screen._chart_key == "loss"


async def test_overlay_and_load_adapter(make_app, registry):
    a = add_run(registry, "train-actor", params={"actor": "tiny"}, metrics={"loss": [3, 2, 1]}, adapter=True)
    b = add_run(registry, "train-actor", params={"actor": "tiny"}, metrics={"loss": [4, 3]}, offset_s=10)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        screen = app.screen
        table = screen.query_one("#runs-table", DataTable)
        table.focus()
        await pilot.press("space", "down", "space")
        await settle(app, pilot)
        assert screen.marked == {a, b}
        await pilot.press("m")
        await settle(app, pilot)
        assert screen.query_one("#runs-tabs", TabbedContent).active == "tab-chart"
        assert screen.query_one("#run-chart").plt is not None
        # b has no adapter: a warning, the actor is untouched
        table.move_cursor(row=0)
        await settle(app, pilot)
        assert screen.selected_id == b
        await pilot.press("a")
        assert app.current_mode == "runs"
        # a has one: the app reloads the actor with it and shows the Lab
        table.move_cursor(row=1)
        await settle(app, pilot)
        calls = []
        app.load_actor = lambda spec, adapter=None: calls.append((spec, adapter))
        await pilot.press("a")
        await settle(app, pilot)
        assert app.current_mode == "lab"
        assert calls == [("tiny", a)]


async def test_a_on_a_pipeline_loads_its_actor_even_one_made_before_the_adapter_artifact(make_app, registry):
    """A pipeline's adapter may be named only by its saved loop state (made before pipelines
    recorded an `adapter` artifact): `a` hands its id to the loader, which resolves it."""
    pipeline = add_run(registry, "pipeline", params={"actor": "tiny"})
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        screen = app.screen
        screen.query_one("#runs-table", DataTable).focus()
        await settle(app, pilot)
        assert screen.selected_id == pipeline
        calls = []
        app.load_actor = lambda spec, adapter=None: calls.append((spec, adapter))
        await pilot.press("a")
        await settle(app, pilot)
        assert calls == [("tiny", pipeline)] and app.current_mode == "lab"


async def test_an_adapter_learned_in_another_world_loads_with_a_note_saying_where(make_app, registry):
    """`a` on a Taxi pipeline while the Lab plays the grid loads its actor (transfer is a fair
    experiment) and a warning toast says where it learned and the options that play there;
    one learned on the grid loads without a word."""
    from lactchain.bench.rollout import random_adapter

    runs = {}
    for env in ("taxi", "grid"):
        runs[env] = registry.create_run("pipeline", params={"actor": "tiny", "env": env})
        registry.add_artifact(runs[env], "adapter", random_adapter("tiny", registry.run_dir(runs[env]) / "adapter"))
    app = make_app(actor=None, actor_spec="tiny")
    async with app.run_test(size=(120, 40)) as pilot:
        for env, run_id in runs.items():
            app.load_actor("tiny", run_id)
            await settle(app, pilot)
            assert app.actor_status == f"tiny + {run_id} ✓", app.actor_status
        notes = [n.message for n in app._notifications if "learned on" in n.message]
        assert notes == [f"note: adapter {runs['taxi']} learned on taxi (run {runs['taxi']}); the Lab plays grid: "
                         "pass --env taxi to play where it learned"]
        app.load_actor("tiny", "actor-00000000")  # no such run: the load fails, the grid's adapter stays loaded
        await settle(app, pilot)
        assert app.actor_status == f"tiny + {runs['grid']} ✓ (reload failed)", app.actor_status
        assert app.live_actor == ("tiny", runs["grid"])  # what steps record and jobs pre-fill: the one playing
        await palette(app, pilot, "play taxi", "Lab: play taxi")  # the grid's adapter loaded, the Lab on Taxi
        await settle(app, pilot)
        notes = [n.message for n in app._notifications if "learned on" in n.message]
        assert notes[-1] == (f"note: adapter {runs['grid']} learned on grid (run {runs['grid']}); the Lab plays "
                             "taxi: pass --env grid to play where it learned")


async def test_adapter_none_leaves_the_remembered_adapter_for_the_next_session(make_app, db_path, registry):
    """`lactchain-tui --adapter none`: this session's actor without it; the next plain start
    gets it back (as `--critic none`). An actor loaded without an adapter in a session that
    did not say none is remembered so."""
    from tui import console_state

    console_state.save(db_path, actor="smollm2-135m", adapter="actor-1234")  # an adapter of the default actor
    app = make_app(actor=None, actor_spec="tiny", load_models=True)
    app.keep_saved_adapter = True  # what main does for `--actor tiny --adapter none`
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        assert app.actor_status == "tiny ✓", app.actor_status
    assert console_state.models_to_reopen(db_path, "smollm2-135m", None, None)[0] == "actor-1234"
    assert console_state.models_to_reopen(db_path, "tiny", None, None)[0] is None  # never tiny + that adapter
    app = make_app(actor=None, actor_spec="tiny", load_models=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        assert app.actor_status == "tiny ✓", app.actor_status
    assert console_state.models_to_reopen(db_path, "tiny", None, None)[0] is None


def test_a_remembered_adapter_or_critic_whose_run_was_deleted_is_dropped_with_a_note(db_path, registry):
    """The last session had a pipeline's adapter and a critic run loaded; both runs were
    deleted since: the next start opens without them, says so once, and forgets them (it
    once opened with `actor: failed` and two load errors). Runs still there, presets and
    folders still there are reopened."""
    from tui import console_state
    from tui.app import _gone_from

    kept = registry.create_run("critic")
    console_state.save(db_path, actor="tiny", adapter="pipeline-89106024", critic="critic-aa028cf4")
    notes: list[str] = []
    opened = console_state.models_to_reopen(db_path, "tiny", None, None, gone=_gone_from(db_path), notes=notes)
    assert opened == (None, None)
    assert notes == ["the last session's critic critic-aa028cf4 is gone (its run was deleted); opened without it",
                     "the last session's adapter pipeline-89106024 is gone (its run was deleted); opened without it"]
    assert console_state.load(db_path)["adapter"] is None and console_state.load(db_path)["critic"] is None
    for critic in (kept, "minilm-l6", str(db_path.parent)):
        console_state.save(db_path, critic=critic)
        assert console_state.models_to_reopen(db_path, "tiny", None, None, gone=_gone_from(db_path)) == (None, critic)
    console_state.save(db_path, critic=str(db_path.parent / "removed-critic"))
    notes = []
    assert console_state.models_to_reopen(db_path, "tiny", None, "none", gone=_gone_from(db_path), notes=notes) == \
        (None, None) and notes == []  # the command line's word stands: nothing checked, nothing forgotten
    console_state.models_to_reopen(db_path, "tiny", None, None, gone=_gone_from(db_path), notes=notes)
    assert notes == [f"the last session's critic {db_path.parent / 'removed-critic'} is gone (its folder was "
                     "removed); opened without it"]


def test_the_console_takes_an_adapter_as_the_cli_does(registry):
    """The console's --adapter (and `a` on Runs) goes through the CLI's check: a pipeline's id
    gives its latest adapter, a run without one (naming its children that have one) and an
    adapter trained on another actor are one-line refusals before any model loads."""
    import json

    from lactchain.artifact_checks import ADAPTER_META
    from lactchain.bench.rollout import random_adapter
    from tui.models import resolve_adapter

    pipeline = registry.create_run("pipeline", cmd=["lactchain", "pipeline"])
    folder = random_adapter("tiny", registry.run_dir(pipeline) / "adapter")
    registry.add_artifact(pipeline, "adapter", folder)
    assert resolve_adapter(pipeline, registry, base="tiny") == folder
    assert resolve_adapter(folder, None) == folder  # a folder needs no registry
    bare = registry.create_run("actor", cmd=["lactchain", "train-actor"])
    with pytest.raises(ValueError, match=f"run {bare} \\(actor\\) has no saved adapter"):
        resolve_adapter(bare, registry)
    with pytest.raises(ValueError, match="no registry to look it up in"):
        resolve_adapter(pipeline, None)
    comparison = registry.create_run("pipeline", cmd=["lactchain", "bench", "learn", "--compare", "rft,dpo"])
    cell = registry.create_run("pipeline", parent_id=comparison)
    registry.add_artifact(cell, "adapter", folder)
    with pytest.raises(ValueError, match=f"has no saved adapter; child runs that have one: {cell} "):
        resolve_adapter(comparison, registry)  # a comparison's adapters are its cells'
    (Path(folder) / ADAPTER_META).write_text(json.dumps({"base": "smollm2-135m"}))
    with pytest.raises(ValueError, match="was trained on smollm2-135m, not tiny"):
        resolve_adapter(pipeline, registry, base="tiny")


async def test_a_long_key_metrics_cell_is_cut_so_every_column_stays_in_view(make_app, registry):
    """A comparison's key metrics (three cells' success rates) run to ~120 characters; cut to
    METRICS_WIDTH, kind, duration and created stay on a 160-column terminal over SSH."""
    from tui.screens.runs import METRICS_WIDTH

    long = add_run(registry, "pipeline", metrics={f"grpo-explore256-seed{i}/success_rate": [0.5] for i in range(3)})
    short = add_run(registry, "eval", metrics={"success_rate": [0.25]}, offset_s=10)
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        table = app.screen.query_one("#runs-table", DataTable)
        cut = str(table.get_row(long)[3])
        assert len(cut) == METRICS_WIDTH and cut.endswith("…")
        assert cut.startswith("grpo-explore256-seed0/success_rate=0.5 grpo-explore256-seed1/")
        assert str(table.get_row(short)[3]) == "success_rate=0.25"  # a short one as it is
        assert sum(column.get_render_width(table) for column in table.columns.values()) <= 160 - 4  # borders


async def test_kill_asks_first_and_resume_says_why_not(make_app, registry):
    from tui.widgets.confirm import ConfirmScreen
    from tui_helpers import live_job

    killed = registry.create_run("play", cmd=["lactchain", "play"])
    registry.end_run(killed, "KILLED")
    with live_job(registry, "critic") as (proc, running):
        app = make_app()
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(app, pilot)
            screen = app.screen
            table = screen.query_one("#runs-table", DataTable)
            table.focus()
            table.move_cursor(row=_ids(table).index(running))
            await settle(app, pilot)
            await pilot.press("K")
            await settle(app, pilot)
            assert isinstance(app.screen, ConfirmScreen)
            assert "`R` resumes it later" in app.screen.question  # a critic checkpoints: the promise holds
            await pilot.press("n")  # not killed
            await settle(app, pilot)
            assert proc.poll() is None and registry.get_run(running)["status"] == "RUNNING"
            await pilot.press("K", "y")
            await settle(app, pilot)
            assert proc.wait(timeout=10) != 0
            # resume: the CLI's own reason, in one toast
            table.move_cursor(row=_ids(table).index(killed))
            await settle(app, pilot)
            await pilot.press("R")
            for _ in range(60):
                await pilot.pause(0.2)
                if any("not resumed" in n.title for n in app._notifications):
                    break
            (note,) = [n for n in app._notifications if "not resumed" in n.title]
            assert "play runs cannot be resumed" in note.message and "RuntimeError" not in note.message


def test_the_kill_dialog_promises_a_resume_only_where_runs_resume_gives_one(registry):
    from lactchain.runs.resume import NotResumable, check_resumable, kill_outcome

    for kind in ("critic", "actor", "pipeline", "dt", "strategy", "judge"):
        assert "`R` resumes it later" in kill_outcome(kind)
    for kind in ("eval", "play", "pairs"):
        assert "`R`" not in kill_outcome(kind) and "start it again" in kill_outcome(kind)
        run = registry.create_run(kind, cmd=["lactchain", kind])
        registry.end_run(run, "KILLED")
        with pytest.raises(NotResumable, match="cannot be resumed"):
            check_resumable(registry, registry.get_run(run))


async def test_pipeline_children_sit_under_it_and_the_key_metric_comes_first(make_app, registry):
    pipe = registry.create_run("pipeline", name="loop")
    phases = [registry.create_run(kind, name=f"{kind} (iteration 1)", parent_id=pipe) for kind in ("pairs", "actor")]
    other = registry.create_run("eval", name="later eval")
    registry.log_metrics(other, {"mean_return": 3.0, "success_rate": 0.25})
    registry.log_metrics(phases[1], {"batches_per_s": 9.0, "loss": 0.4})
    best = registry.create_run("eval", name="best eval")
    registry.log_metrics(best, {"success_rate": 0.75})
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        screen = app.screen
        table = screen.query_one("#runs-table", DataTable)
        ids = _ids(table)
        at = ids.index(pipe)
        assert set(ids[at + 1:at + 3]) == set(phases)  # right under their pipeline
        assert str(table.get_row_at(ids.index(phases[1]))[4]) == "└ actor"
        assert str(table.get_row_at(ids.index(phases[1]))[3]).startswith("loss=0.4")  # not batches_per_s
        assert str(table.get_row_at(ids.index(other))[3]).startswith("success_rate=0.25")
        screen.sort_column, screen.sort_reverse = "metrics", True
        screen.populate()
        assert _ids(table)[:3] == [best, phases[1], other]  # by each run's key metric, runs without one last


async def test_the_board_tab_shows_the_selected_runs_env_leaderboard(make_app, registry):
    """A baseline run trained for real (value iteration on Blackjack); the Board tab ranks
    it beside random play and the optimum with the exact expected return."""
    from lactchain.baselines.train import train_baseline
    from lactchain.jobs import run_context

    with run_context(registry, "baseline", name="value-iteration on blackjack",
                     params={"agent": "value-iteration", "env": "blackjack"}) as handle:
        train_baseline(handle, "blackjack", "value-iteration", 1)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        screen.query_one("#runs-table", DataTable).focus()
        await pilot.press("enter")
        await settle(app, pilot)
        screen.query_one("#runs-tabs", TabbedContent).active = "tab-board"
        await settle(app, pilot)
        await screen.workers.wait_for_complete()
        await settle(app, pilot)
        assert "leaderboard: blackjack" in str(screen.query_one("#board-title").render())
        table = screen.query_one("#board-table", DataTable)
        agents = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert set(agents) == {"value-iteration", "optimum (oracle)", "random"}
        assert agents[-1] == "random"  # ranked by the exact expected return


async def test_x_exports_the_marked_runs_for_tensorboard(make_app, registry):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    a = add_run(registry, "train-actor", params={"actor": "tiny"}, metrics={"loss": [3, 2, 1]})
    b = add_run(registry, "train-actor", params={"actor": "tiny"}, metrics={"loss": [4, 3]}, offset_s=10)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        table = app.screen.query_one("#runs-table", DataTable)
        table.focus()
        await pilot.press("space", "down", "space", "x")
        await settle(app, pilot)
        out = registry.runs_dir / "exports"
        for run_id, losses in ((a, [3, 2, 1]), (b, [4, 3])):
            events = EventAccumulator(str(out / run_id))
            events.Reload()
            assert [e.value for e in events.Scalars("loss")] == losses


async def test_the_chart_opens_on_a_metric_with_a_curve(make_app, registry):
    """A trainer's run logs a one-point final_loss beside its per-step loss: the chart opens
    on the loss curve, not on the alphabetically first key."""
    run_id = add_run(registry, "actor", metrics={"final_loss": [0.3], "loss": [0.9, 0.6, 0.3], "accuracy": [1.0]})
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        screen = app.screen
        assert screen.selected_id == run_id
        assert screen._chart_key == "loss"


async def test_equals_compares_the_marked_runs_side_by_side(make_app, registry):
    """Mark two runs with space, `=`: their params and metrics side by side, the setting
    that differs first and bold; fewer than two marked is a warning, not a screen."""
    from rich.cells import cell_len
    from rich.text import Text

    from tui.widgets.compare import CompareScreen

    long_text = "Turn toward the goal, then walk straight to it; never turn twice in a row. " * 2
    a = add_run(registry, "train-actor", params={"actor": "tiny", "loss": "simpo", "strategy_text": long_text},
                metrics={"loss": [3, 2, 1]})
    wide_text = "ゴールに向かって曲がり、まっすぐ歩く。🙂" * 6  # two cells a character: cut by cells, not characters
    b = add_run(registry, "train-actor", params={"actor": "tiny", "loss": "dpo", "strategy_text": wide_text},
                metrics={"loss": [4, 3]}, offset_s=10)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await settle(app, pilot)
        app.screen.query_one("#runs-table", DataTable).focus()
        await pilot.press("space", "equals_sign")
        await settle(app, pilot)
        assert not isinstance(app.screen, CompareScreen)  # one marked: a warning
        await pilot.press("down", "space", "equals_sign")
        await settle(app, pilot)
        assert isinstance(app.screen, CompareScreen)
        table = app.screen.query_one("#compare-table", DataTable)
        rows = [[c.plain if isinstance(c, Text) else str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        order = {str(col.key.value): i for i, col in enumerate(table.ordered_columns)}
        first = rows[0]
        assert first[1] == "loss" and first[0] == "params"  # the differing param leads
        assert {first[order[a]], first[order[b]]} == {"simpo", "dpo"}
        assert table.get_row_at(0)[1].style == "bold"
        metric = next(r for r in rows if r[1] == "loss" and r is not first)
        assert {metric[order[a]], metric[order[b]]} == {"1", "3"}
        # a 150-character strategy text does not push the second run off an 80-column screen
        assert sum(col.get_render_width(table) for col in table.ordered_columns) <= 80
        strategy = next(r for r in rows if r[1] == "strategy_text")
        assert strategy[order[a]].endswith("…") and long_text.startswith(strategy[order[a]][:-1])
        assert strategy[order[b]].endswith("…") and wide_text.startswith(strategy[order[b]][:-1])
        assert cell_len(strategy[order[b]]) <= table.ordered_columns[order[b]].get_render_width(table) - 2
        await pilot.press("escape")
        await settle(app, pilot)
        assert not isinstance(app.screen, CompareScreen)


async def test_a_screen_switch_back_keeps_its_footer_keys_and_still_follows_a_theme_change(make_app):
    """Keys 1-5 do not remount a screen's footer keys or restyle it when nothing changed
    (what made a switch slow), but a theme changed while the screen was away reaches it."""
    from tui.widgets.footer import FittedFooter

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        runs = app.screen
        keys = list(runs.query_one(FittedFooter).children)
        background = runs.styles.background
        assert keys and isinstance(runs, RunsScreen)
        await pilot.press("1")
        await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        assert app.screen is runs and list(runs.query_one(FittedFooter).children) == keys
        await pilot.press("1")
        await settle(app, pilot)
        app.theme = "textual-light" if app.current_theme.dark else "textual-dark"
        await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        assert runs.styles.background != background


async def _runs_at(app, pilot, run_id: str) -> DataTable:  # noqa: ANN001
    """The Runs screen with its table focused on `run_id`'s row."""
    await pilot.press("2")
    await settle(app, pilot)
    table = app.screen.query_one("#runs-table", DataTable)
    table.focus()
    table.move_cursor(row=_ids(table).index(run_id))
    await settle(app, pilot)
    return table


async def _until(app, pilot, done) -> None:  # noqa: ANN001
    """Settles until `done()` holds (a registry call and a refresh are a few ticks away), at most 20 times."""
    for _ in range(20):
        await settle(app, pilot)
        if done():
            return


async def test_d_deletes_the_marked_runs_with_their_children_after_naming_who_reads_them(make_app, registry):
    """D asks first (n keeps everything), says which child runs go along, which kept run
    reads a deleted one and which loaded model comes from one, then deletes rows and
    folders; a running run is refused in a toast."""
    from tui.widgets.confirm import ConfirmScreen

    pipe = registry.create_run("pipeline", name="loop")
    phase = registry.create_run("critic", name="critic (iteration 0)", parent_id=pipe)
    reader = registry.create_run("pairs", name="reads the critic", params={"critic_run": phase})
    running = registry.create_run("play", name="still going")
    registry.start_run(running, pid=os.getpid())  # this process: alive
    for run_id in (pipe, phase, reader):
        registry.end_run(run_id, "FINISHED")
        (registry.run_dir(run_id) / "weights.bin").write_bytes(b"w" * 2048)
    adapter = registry.run_dir(pipe) / "adapter"  # the console plays an adapter of a run D deletes
    adapter.mkdir()
    app = make_app(adapter=str(adapter), critic_spec=phase[:-2])  # and its critic, named by a prefix
    async with app.run_test(size=(120, 40)) as pilot:
        table = await _runs_at(app, pilot, running)
        await pilot.press("D")
        await settle(app, pilot)
        assert not isinstance(app.screen, ConfirmScreen)  # refused: a toast says to stop it first
        assert any(f"{running} is still running: stop it first" in n.message for n in app._notifications)
        table.move_cursor(row=_ids(table).index(pipe))
        await settle(app, pilot)
        await pilot.press("D")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        question = app.screen.question
        assert "Delete 2 runs and their folders (4.0 KB)?" in question and "1 child run(s)" in question
        assert f"{reader} reads {phase}" in question
        assert f"has its adapter ({adapter}) and critic ({phase[:-2]}) loaded" in " ".join(question.split())
        await pilot.press("n")
        await settle(app, pilot)
        assert {r["id"] for r in registry.list_runs()} == {pipe, phase, reader, running}
        await pilot.press("D")
        await settle(app, pilot)
        await pilot.press("y")
        info = app.screen.query_one("#run-info")
        await _until(app, pilot, lambda: pipe not in _ids(table) and pipe not in str(info.render()))
        assert pipe not in str(info.render())  # Info moved off the deleted run
        assert {r["id"] for r in registry.list_runs()} == {reader, running}
        assert set(_ids(table)) == {reader, running}
        assert not (registry.runs_dir / pipe).exists() and not (registry.runs_dir / phase).exists()
        assert (registry.runs_dir / reader / "weights.bin").exists()


async def test_n_writes_a_note_that_info_shows_and_the_filter_finds(make_app, registry):
    noted = registry.create_run("critic", name="first try")
    other = registry.create_run("critic", name="second try")
    registry.set_tag(other, "code.commit", "cafe1234")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        table = await _runs_at(app, pilot, noted)
        await pilot.press("N")
        await settle(app, pilot)
        await type_keys(pilot, *"lr too high")
        await pilot.press("enter")
        await settle(app, pilot)
        assert registry.tags(noted) == {"note": "lr too high"}
        def info() -> str:
            return str(app.screen.query_one("#run-info").render())

        await _until(app, pilot, lambda: "note: lr too high" in info())
        assert "note: lr too high" in info() and "tags" in info()
        await pilot.press("slash")
        await type_keys(pilot, *"too high")
        await _until(app, pilot, lambda: _ids(table) == [noted])
        assert _ids(table) == [noted]
        app.screen.query_one("#runs-filter", Input).value = "cafe1234"  # lactchain's own tags are not searched
        await _until(app, pilot, lambda: not _ids(table))
        assert _ids(table) == []
