"""Walls on the console's grids: the Lab's GridView (a scene given to the app's env),
the Archive's replay grid (the archive's scene) and the Labelling grids (the scene of
the pair's run) draw every wall cell of a walled scene (rooms) as a solid block, and
nothing of the kind on the empty scene; the Lab refuses a wall as a start cell.

The checks read what the widgets paint (`render_line`: padding and border included),
find each grid row by its y label and cut the cells at the grid's column positions."""

from __future__ import annotations

import re
from pathlib import Path

from rich.style import Style
from textual.widget import Widget

from lactchain.envs import State
from lactchain.envs.scenes import get_scene
from tui.widgets.compact_grid import CompactGridView
from tui.widgets.grid import LABEL_W, WALL_GLYPH, WALL_STYLE, GridView
from tui_helpers import add_critic_pairs, add_run, open_archive, settle

ROOMS = get_scene("rooms")
WALLS = frozenset(ROOMS.walls)
ROW = re.compile(r"(?<![\d│])(\d+) │")  # a grid row's label and its left border


def painted(widget: Widget) -> list[str]:
    """The widget's lines as painted on screen."""
    return [render_line_text(widget, y) for y in range(widget.size.height)]


def render_line_text(widget: Widget, y: int) -> str:
    return "".join(segment.text for segment in widget.render_line(y))


def painted_cells(widget: GridView) -> dict[tuple[int, int], str]:
    """(x, y) -> the cell's painted text, for every cell of the grid."""
    n, w = widget.model.size, widget.cell_width
    cells: dict[tuple[int, int], str] = {}
    for line in painted(widget):
        m = ROW.search(line)
        if m is None or not 0 <= int(m.group(1)) < n:
            continue
        left = m.end()  # the first cell's first column (just after the label's │)
        y = int(m.group(1))
        for x in range(n):
            start = left + x * (w + 1)
            cells[(x, y)] = line[start:start + w]
    assert len(cells) == n * n, f"found {len(cells)} cells of {n}x{n}"
    return cells


def assert_walls_drawn(widget: GridView, walls: frozenset) -> None:
    cells = painted_cells(widget)
    w = widget.cell_width
    for cell, text in cells.items():
        if cell in walls:
            assert text == WALL_GLYPH * w, f"wall {cell} painted {text!r}"
        else:
            assert WALL_GLYPH not in text, f"open cell {cell} painted {text!r}"
    colour = Style.parse(WALL_STYLE).color  # the wall's dark colour too, not only its glyph
    painted_walls = [seg for y in range(widget.size.height) for seg in widget.render_line(y) if WALL_GLYPH in seg.text]
    assert painted_walls and all(seg.style.color.triplet == colour.triplet for seg in painted_walls)


def assert_no_walls(widget: GridView) -> None:
    painted_cells(widget)  # the grid is there
    assert not any(WALL_GLYPH in line for line in painted(widget))
    assert widget.model.walls == frozenset()


def click_offset(grid: GridView, cell: tuple[int, int]) -> tuple[int, int]:
    """Where to click `cell`, relative to the widget (its border and padding included)."""
    n, w = grid.model.size, grid.cell_width
    cx = LABEL_W + cell[0] * (w + 1) + w // 2
    cy = 1 + 2 * (n - 1 - cell[1])
    return grid.content_region.x - grid.region.x + cx, grid.content_region.y - grid.region.y + cy


# ---- the Lab ------------------------------------------------------------------------

async def test_the_lab_draws_the_rooms_walls_and_refuses_a_wall_start(make_app):
    app = make_app(env_kwargs={"scene": "rooms"})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        grid = app.screen.query_one(GridView)
        assert grid.model.size == 8 and grid.model.walls == WALLS
        assert_walls_drawn(grid, WALLS)
        assert any(line.strip().endswith(f"{WALL_GLYPH} wall") for line in painted(grid))  # the legend
        start = app.lab_session.start

        grid.cursor = State(3, 0, "north")  # a wall: enter refuses it
        await pilot.pause()
        assert "wall: not a start" in str(app.screen.query_one("#lab-status").render())
        assert "×" in painted_cells(grid)[(3, 0)]  # the cursor shows on the wall
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.lab_session.start == start
        assert any("(3, 0) is a wall" in n.message for n in app._notifications)

        await pilot.click(GridView, offset=click_offset(grid, (3, 4)))  # a click on a wall: refused too
        await settle(app, pilot)
        assert app.lab_session.start == start
        assert sum("is a wall" in n.message for n in app._notifications) == 2

        await pilot.click(GridView, offset=click_offset(grid, (1, 4)))  # the doorway: a start
        await settle(app, pilot)
        assert (app.lab_session.start.x, app.lab_session.start.y) == (1, 4)
        assert_walls_drawn(grid, WALLS)  # still drawn after the reset

        await pilot.press("e")  # the oracle plays round the walls to the goal
        await settle(app, pilot)
        snap = app.lab_session.snapshot()
        assert snap.done and snap.success and not any((s.x, s.y) in WALLS for s in snap.path)
        assert_walls_drawn(grid, WALLS)


def test_lactchain_tui_scene_opens_the_lab_on_a_walled_scene_or_a_scene_file(tmp_path, monkeypatch):
    """`lactchain-tui --scene rooms` (or a scene JSON file: its name is no bundled scene's)
    is how the Lab gets a scene: the env it plays has the walls."""
    import json

    from tui.app import LactChainApp, main

    from lactchain.envs.world import same_world

    seen, worlds = [], []
    monkeypatch.setattr(LactChainApp, "run", lambda self: (seen.append(self.lab_session.snapshot()),
                                                           worlds.append(self.lab_session.world)))
    db = str(tmp_path / "r.db")
    assert main(["--scene", "rooms", "--db", db, "--actor", "none"]) == 0
    mine = tmp_path / "my_rooms.json"
    mine.write_text(json.dumps({**ROOMS.as_dict(), "name": "my rooms", "walls": [[3, 0], [3, 2]]}))
    assert main(["--scene", str(mine), "--db", db, "--actor", "none"]) == 0
    assert [snap.walls for snap in seen] == [tuple(sorted(WALLS)), ((3, 0), (3, 2))]
    # an adapter learned with `--scene my_rooms.json` learned where the Lab plays: no note
    assert same_world(worlds[1], {"env": "grid", "scene": str(mine)})
    assert not same_world(worlds[1], worlds[0])


async def test_the_lab_on_the_empty_scene_draws_no_walls(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        grid = app.screen.query_one(GridView)
        assert grid.model.size == 4
        assert_no_walls(grid)
        assert not any("wall" in line for line in painted(grid))  # no legend line


# ---- the Archive --------------------------------------------------------------------

def _fill(db: Path, capsys, scene: str) -> None:
    from cli_helpers import run_cli

    code, _, err = run_cli(["archive", "fill", "--scene", scene, "--behaviours", "20", "--db", str(db), "--json"],
                           capsys)
    assert code == 0, err


async def test_the_archive_draws_the_walls_of_its_scene(make_app, registry, db_path, capsys):
    # (the registry fixture creates the db's folder, which `archive fill --db` requires)
    _fill(db_path, capsys, "rooms")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_archive(app, pilot)
        grid = screen.query_one("#archive-grid", CompactGridView)
        assert grid.display and screen.replay.scene.name == "rooms"
        assert grid.model.walls == WALLS
        assert_walls_drawn(grid, WALLS)
        # the compact grid joins neighbouring walls: the y=4 row's wall (2..4, 4) is one block
        (row4,) = [line for line in painted(grid) if ROW.search(line) and ROW.search(line).group(1) == "4"]
        assert WALL_GLYPH * (3 * grid.cell_width + 2) in row4
        await pilot.press("home")  # another step of the replay: the walls stay
        await pilot.pause()
        assert_walls_drawn(grid, WALLS)


async def test_the_archive_of_the_empty_scene_draws_no_walls(make_app, registry, db_path, capsys):
    _fill(db_path, capsys, "empty")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_archive(app, pilot)
        grid = screen.query_one("#archive-grid", CompactGridView)
        assert grid.display and grid.model.size == 4
        assert_no_walls(grid)


# ---- the Labelling screen -----------------------------------------------------------

async def test_labelling_draws_the_walls_of_the_pairs_scene(make_app, registry):
    run_id = add_run(registry, "collect-pairs", params={"env": "grid", "scene": "rooms"})
    (rooms_pair,) = registry.add_pairs(run_id, [{
        "state": {"x": 0, "y": 5, "orientation": "south"}, "prompt": "p",
        "chosen": ["turn left", "move forward", "move forward"], "rejected": ["move forward"],
        "chosen_score": 1.0, "rejected_score": -1.0, "labeler": "critic", "status": "labeled", "meta": {},
    }])
    (empty_pair,) = add_critic_pairs(registry, 1)  # a run without a scene: the default grid
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        await settle(app, pilot)
        screen = app.screen
        assert screen.current.pair["id"] == rooms_pair and screen.current.scene == "rooms"
        assert "scene rooms" in str(screen.query_one("#label-state").render())
        for side in ("a", "b"):
            grid = screen.query_one(f"#label-grid-{side}", GridView)
            assert grid.display and grid.model.size == 8 and grid.model.walls == WALLS
            assert_walls_drawn(grid, WALLS)
        # "move forward" from (0, 5) facing south bumps into the wall at (0, 4)
        moved = [screen.query_one(f"#label-grid-{s}", GridView).model.agent for s in ("a", "b")]
        assert State(0, 5, "south") in moved

        await pilot.press("n")  # skip: the next pair is on the empty grid
        await settle(app, pilot)
        assert screen.current.pair["id"] == empty_pair and screen.current.scene is None
        for side in ("a", "b"):
            grid = screen.query_one(f"#label-grid-{side}", GridView)
            assert grid.model.size == 4
            assert_no_walls(grid)
