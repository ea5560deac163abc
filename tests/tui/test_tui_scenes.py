"""The Lab in a scene: the flat's landmarks on the grid pane (letter, colour, legend),
an episode across the 8x8 grid, and `lactchain-tui --scene`."""

from __future__ import annotations

from lactchain.envs import State
from lactchain.envs.scenes import get_scene
from tui.widgets.grid import GridModel, GridView
from tui_helpers import settle

FLAT = get_scene("flat")


def _cell_text(grid: GridView, x: int, y: int):
    return grid._cell(x, y)


async def test_the_lab_draws_the_flats_landmarks_and_plays_to_the_goal(make_app):
    app = make_app(env_kwargs={"scene": "flat"})
    async with app.run_test(size=(120, 40)) as pilot:
        grid = app.screen.query_one(GridView)
        model = grid.model
        assert model.size == 8 and model.goal == (7, 7) and [m.name for m in model.landmarks] == list(FLAT.names)
        assert grid.cell_width == 3  # 8 cells fit the left pane
        text = grid.render()
        lines = text.plain.splitlines()
        assert lines[-1].split() == ["F", "fridge", "T", "bathtub", "S", "sofa", "B", "bed"]
        assert lines[1].startswith("7 │ F │") and lines[9].startswith("3 │   │   │ S │ S │ S │")
        sofa = _cell_text(grid, 3, 3)
        assert sofa.plain.strip() == "S" and f"on {FLAT.landmark('sofa').colour}" in str(sofa.spans[-1].style)
        assert grid.size.height == 2 * 8 + 2 + 1  # the legend's line
        assert "sofa" in app.lab_session.env.describe()

        await pilot.press("e")  # the oracle plays the episode
        await settle(app, pilot)
        snap = app.lab_session.snapshot()
        assert snap.done and snap.success and (snap.state.x, snap.state.y) == (7, 7)
        assert any(FLAT.landmark_at(s) == "bathtub" for s in snap.path)  # the planner crosses the bathtub
        crossed = _cell_text(grid, 7, 1)
        assert crossed.plain == "T· "  # its letter, and the path's dot beside it
        assert "at goal" in str(app.screen.query_one("#lab-status").render())


async def test_the_default_grid_has_no_landmarks(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        grid = app.screen.query_one(GridView)
        assert grid.model.landmarks == () and grid.cell_width == 7
        assert grid.size.height == 2 * 4 + 2
        await pilot.pause()


def test_a_grid_model_without_landmarks_defaults_to_none():
    assert GridModel().landmarks == () and GridModel(agent=State(0, 0, "east")) == GridModel(agent=State(0, 0, "east"))


def test_tui_scene_option(tmp_path, capsys, monkeypatch):
    from tui.app import LactChainApp, main

    seen = {}
    monkeypatch.setattr(LactChainApp, "run", lambda self: seen.setdefault("scene", self.lab_session.env.scene))
    assert main(["--scene", "flat", "--db", str(tmp_path / "r.db"), "--actor", "none"]) == 0
    assert seen["scene"] == FLAT
    assert main(["--scene", "castle", "--db", str(tmp_path / "r.db"), "--actor", "none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --scene: unknown scene 'castle'; known scenes: empty, flat, rooms, maze, "
                   "or a scene JSON file"]
    assert main(["--env", "blackjack", "--scene", "flat", "--db", str(tmp_path / "r.db"), "--actor", "none"]) == 2
    assert "scenes are the grid's" in capsys.readouterr().err
