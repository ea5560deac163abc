"""The Archive screen: an archive run's trajectories (filled by the real CLI in this
process), the filter, the replay on the grid pane with its annotations, verification
by replay (a corrupted row is caught and named), the empty and broken states, and one
snapshot at 100x30."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input

from lactchain.archive.store import read_rows, write_rows
from lactchain.archive.describe import describe_rule, order_correct
from lactchain.envs import State
from lactchain.archive.trajectories import Trajectory, verify
from tui.screens.archive import ArchiveScreen, current_annotation, filter_hint, parse_filter, row_matches
from tui.widgets.compact_grid import CompactGridView
from tui_helpers import FIXED_MS, open_archive, palette, pressing, settle, static_text

WRONG = "Goes to the bathtub, then the fridge."  # an LLM-style description in the wrong order


def _fill(db: Path, capsys, behaviours: int = 80) -> tuple[str, Path]:
    """`lactchain archive fill` in this process; (run id, archive file) read back from the
    registry (under a running app, the CLI's stdout goes to the app, not to capsys)."""
    from cli_helpers import run_cli
    from lactchain.runs.registry import Registry

    code, _, err = run_cli(["archive", "fill", "--scene", "flat", "--behaviours", str(behaviours), "--db", str(db),
                            "--json"], capsys)
    assert code == 0, err
    reg = Registry.open_for_reading(db)
    try:
        run_id = reg.list_runs(kind="archive", limit=1)[0]["id"]
        return run_id, Path(reg.latest_artifact(run_id, "archive")["path"])
    finally:
        reg.close()


def _describe(path: Path) -> list[dict]:
    """Every row gets the rule describer's text; row 0 also a wrong second description."""
    rows = read_rows(path)
    for row in rows:
        text = describe_rule(row)
        row["descriptions"] = [{"describer": "rule", "model": None, "prompt_version": "rule-v1", "text": text,
                                "order_correct": order_correct(row, text)}]
    rows[0]["descriptions"].append({"describer": "llm", "model": "smollm2-135m", "prompt_version": "v1",
                                    "text": WRONG, "order_correct": order_correct(rows[0], WRONG)})
    write_rows(path, rows)
    return rows


@pytest.fixture
def archive(registry, db_path, capsys):
    run_id, path = _fill(db_path, capsys)
    registry.update_run(run_id, created_ms=FIXED_MS)  # a fixed clock for the selector's label
    return run_id, path, _describe(path)


def _keys(table: DataTable) -> list[str]:
    return [str(table.get_row_at(i)[1]) for i in range(table.row_count)]


async def _select(screen: ArchiveScreen, pilot, index: int) -> None:  # noqa: ANN001
    screen.query_one("#archive-table", DataTable).move_cursor(row=screen.shown.index(index), animate=False)
    await pilot.pause()
    assert screen.selected == index


def test_filter_terms_and_the_annotation_in_force():
    assert parse_filter("Sofa landmark:bed policy:random nope:x verify:fail") == (
        ["sofa", "nope:x"], [("landmark", "bed"), ("policy", "random"), ("verify", "fail")])
    assert parse_filter('desc:"Stops at" bed') == (["bed"], [("desc", "stops at")])
    assert parse_filter('desc:"stops at') == ([], [("desc", "stops at")])  # still typing
    assert parse_filter("sofa's") == (["sofa's"], [])
    row = {"key": "4,3|bathtub>sofa", "bd": {"final": [4, 3], "visited": ["bathtub", "sofa"]},
           "policy": {"kind": "planner-landmarks"},
           "descriptions": [{"text": "Passes the bathtub, and stops at the sofa."}]}
    assert row_matches(row, ["sofa"], []) and row_matches(row, ["4,3|bath"], [])
    assert row_matches(row, [], [("landmark", "bath"), ("policy", "planner"), ("desc", "stops at")])
    assert not row_matches(row, [], [("landmark", "bed")]) and not row_matches(row, ["fridge"], [])
    assert row_matches(row, [], [("verify", "fail")], "step 0: ...", verified=True)
    assert not row_matches(row, [], [("verify", "ok")], "step 0: ...", verified=True)
    assert not row_matches(row, [], [("verify", "ok")])  # not verified yet
    notes = [{"t": 0}, {"t": 1}, {"t": 4}]
    assert [current_annotation(notes, t) for t in range(6)] == [0, 1, 1, 1, 2, 2]
    assert current_annotation([], 3) is None


async def test_the_table_lists_every_row_and_filters_by_landmark(make_app, archive):
    run_id, _, rows = archive
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_archive(app, pilot)
        table = screen.query_one("#archive-table", DataTable)
        assert screen.run_id == run_id and _keys(table) == [r["key"] for r in rows]
        assert f"{len(rows)}/{len(rows)} trajectories" in static_text(screen, "#archive-summary")
        first = table.get_row_at(0)
        assert str(first[2]) == rows[0]["policy"]["kind"] and str(first[3]) == str(len(rows[0]["path"]) - 1)
        assert str(first[5]).startswith(rows[0]["descriptions"][0]["text"][:20])

        await pilot.press("slash")
        assert screen.focused is screen.query_one("#archive-filter", Input)
        screen.query_one("#archive-filter", Input).value = "landmark:sofa"
        await pilot.pause()
        sofa = [r["key"] for r in rows if "sofa" in r["bd"]["visited"]]
        assert 0 < len(sofa) < len(rows) and _keys(table) == sofa
        assert f"{len(sofa)}/{len(rows)} trajectories (filtered)" in static_text(screen, "#archive-summary")
        screen.query_one("#archive-filter", Input).value = "policy:random-walk landmark:bed"
        await pilot.pause()
        assert _keys(table) == [r["key"] for r in rows
                                if r["policy"]["kind"] == "random-walk" and "bed" in r["bd"]["visited"]]
        screen.query_one("#archive-filter", Input).value = 'desc:"passes no landmark"'
        await pilot.pause()
        assert _keys(table) == [r["key"] for r in rows if "Passes no landmark" in r["descriptions"][0]["text"]]
        assert all(not r["bd"]["visited"] for r in rows if r["key"] in _keys(table))
        # a value no trajectory has: an empty table says why, with the values there are
        screen.query_one("#archive-filter", Input).value = "landmark:piano"
        await pilot.pause()
        summary = static_text(screen, "#archive-summary")
        assert _keys(table) == [] and "no trajectory has landmark 'piano'; here: " in summary and "sofa" in summary
        screen.query_one("#archive-filter", Input).value = "verify:maybe"
        await pilot.pause()
        assert _keys(table) == [r["key"] for r in rows]  # not verified yet: every row is '?'
        screen.query_one("#archive-filter", Input).value = "landmark:sofa landmark:bed bd:99,99"
        await pilot.pause()
        assert "no trajectory has bd '99,99'" in static_text(screen, "#archive-summary")


def test_a_filter_hint_names_the_term_that_matches_nothing():
    rows = [{"key": "4,3|bathtub>sofa", "bd": {"final": [4, 3], "visited": ["bathtub", "sofa"]},
             "policy": {"kind": "planner-landmarks"}, "descriptions": [{"text": "Stops at the sofa."}]},
            {"key": "1,1|", "bd": {"final": [1, 1], "visited": []}, "policy": {"kind": "random-walk"}}]
    assert filter_hint(rows, [("landmark", "piano")]) == "no trajectory has landmark 'piano'; here: bathtub, sofa"
    assert filter_hint(rows, [("policy", "genius")]) == \
        "no trajectory has policy 'genius'; here: planner-landmarks, random-walk"
    assert filter_hint(rows, [("desc", "fridge")]) == "no description contains 'fridge'"
    assert filter_hint(rows, [("verify", "maybe")]).startswith("verify:maybe: use verify:ok, verify:fail")
    assert filter_hint(rows, [("landmark", "sofa"), ("policy", "random")]) == ""  # each matches; together none


async def test_stepping_the_replay_moves_the_agent_and_highlights_the_annotation(make_app, archive, monkeypatch):
    monkeypatch.setattr("tui.screens.archive.PLAY_S", 0.05)
    _, _, rows = archive
    index = min((i for i, r in enumerate(rows) if len(r["annotations"]) >= 3), key=lambda i: len(rows[i]["path"]))
    row = rows[index]
    notes = row["annotations"]
    assert len(notes) >= 3
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_archive(app, pilot)
        await _select(screen, pilot, index)
        grid = screen.query_one("#archive-grid", CompactGridView)
        last = len(row["path"]) - 1

        def pose(t: int) -> State:
            p = row["path"][t]
            return State(p["x"], p["y"], p["orientation"])

        assert screen.t == last and grid.model.agent == pose(last)  # a row opens on its whole path
        assert grid.model.landmarks and grid.model.size == 8
        await pilot.press("home")
        assert grid.model.agent == pose(0) and grid.model.path == (pose(0),)
        target = notes[2]["t"]
        for t in range(1, target + 1):
            await pilot.press("right")
            assert screen.t == t and grid.model.agent == pose(t)
        assert len(grid.model.path) == target + 1
        lines = static_text(screen, "#archive-annotations").splitlines()
        assert [line for line in lines if line.startswith("▸")] == [f"▸ t={target} {notes[2]['text']}"]
        assert static_text(screen, "#archive-replay").startswith(f"step {target}/{last}")
        await pilot.press("left")
        lines = static_text(screen, "#archive-annotations").splitlines()
        highlighted = next(line for line in lines if line.startswith("▸"))
        assert highlighted == f"▸ t={notes[1]['t']} {notes[1]['text']}"
        await pilot.press("end")
        assert screen.t == last and grid.model.agent == pose(last)
        # the trajectory pane: BD, both descriptions with order marks
        detail = static_text(screen, "#archive-detail") + "\n" + static_text(screen, "#archive-descriptions")
        assert f"BD ({row['bd']['final'][0]},{row['bd']['final'][1]})" in detail
        assert row["descriptions"][0]["text"] in detail.replace("\n  ", " ")

        drawn: list[tuple[int, bool, str]] = []  # every step drawn: the fast clock may finish before we look
        show_step = screen.show_step

        def record() -> None:
            show_step()
            drawn.append((screen.t, screen.playing, static_text(screen, "#archive-replay")))

        screen.show_step = record
        await pilot.press("space")  # at the end: plays again from the start
        t0, playing, shown = drawn[0]
        assert t0 == 0 and playing and "▶ playing" in shown
        for _ in range(200):
            if not screen.playing:
                break
            await pilot.pause(0.05)
        assert not screen.playing and screen.t == last and grid.model.agent == pose(last)


async def test_verify_marks_every_row_and_names_a_corrupted_ones_mismatch(make_app, archive):
    _, path, rows = archive
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await palette(app, pilot, "verify ar", "Verify archive")  # from the Lab: opens the screen, verifies
        screen = app.screen
        assert isinstance(screen, ArchiveScreen)
        table = screen.query_one("#archive-table", DataTable)
        assert {str(table.get_row_at(i)[0]) for i in range(table.row_count)} == {"✓"}
        assert f"{len(rows)}/{len(rows)} verify" in static_text(screen, "#archive-summary")
        assert "✓ verifies by replay" in static_text(screen, "#archive-detail")

        # corrupt one row's actions on disk: `v` verifies what the file holds now
        victim = next(i for i, r in enumerate(rows) if len(r["actions"]) >= 2 and "turn left" in r["actions"][1])
        bad = json.loads(json.dumps(rows))
        bad[victim]["actions"][1] = ["turn right" if m == "turn left" else m for m in bad[victim]["actions"][1]]
        write_rows(path, bad)
        await pilot.press("v")
        await settle(app, pilot)
        marks = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert marks[victim] == "✗" and marks.count("✓") == len(rows) - 1
        assert f"{len(rows) - 1}/{len(rows)} verify" in static_text(screen, "#archive-summary")
        await _select(screen, pilot, victim)
        problem = str(verify(Trajectory.from_dict(bad[victim])))
        assert problem.startswith("step 1:")
        assert f"✗ {problem}" in " ".join(static_text(screen, "#archive-detail").split("\n"))
        screen.query_one("#archive-filter", Input).value = "verify:fail"
        await pilot.pause()
        assert _keys(table) == [rows[victim]["key"]]


async def test_no_archive_a_missing_file_and_a_truncated_one(make_app, registry, db_path, capsys):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_archive(app, pilot)
        message = static_text(screen, "#archive-message")
        assert "`lactchain archive fill --scene flat` creates one" in message and len(message.splitlines()) == 1
        assert not screen.query_one("#archive-main").display
        await pilot.press("v", "right", "space")  # nothing to do: no crash
        await settle(app, pilot)

        _, path = _fill(db_path, capsys, behaviours=12)
        path.write_text(path.read_text()[:-20])  # cut mid-row
        await pilot.press("f5")
        await settle(app, pilot)
        message = static_text(screen, "#archive-message")
        assert "is not JSON (a truncated archive?)" in message and not screen.query_one("#archive-main").display
        path.unlink()
        await pilot.press("f5")
        await settle(app, pilot)
        assert "is missing" in static_text(screen, "#archive-message")
        await pilot.press("v")
        await settle(app, pilot)
        assert "is missing" in static_text(screen, "#archive-message") and app.screen is screen


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=["100x30", "80x24"])
def test_archive_screen_snapshot(snap_compare, make_app, fixed_ids, utc, archive, size):
    _, _, rows = archive

    assert len(rows) > 20
    assert snap_compare(make_app(), terminal_size=size,
                        run_before=pressing(("5",), ("v",), ("down", "home", "right", "right", "right")))


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_dt_instruct_modal_snapshot(snap_compare, make_app, fixed_ids, utc, archive, size):
    """The decision transformer's modal over the Archive (no dt run yet: it says how to
    train one), at both sizes."""
    assert snap_compare(make_app(), terminal_size=size, run_before=pressing(("5",), ("i",)))


async def test_at_80x24_the_archive_table_shows_several_trajectories(make_app, archive):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("5")
        await settle(app, pilot)
        table = app.screen.query_one("#archive-table", DataTable)
        grid = app.screen.query_one("#archive-grid")
        assert table.content_region.height - 1 >= 5  # rows under the header, not 2
        assert grid.content_region.height >= 8  # the 8x8 flat scene still fits beside it
