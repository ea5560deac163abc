"""Harder worlds: scenes with walls (the planner routes around them, V* by hand), the
bundled rooms and maze, scene files (round trip, one-line refusals that create no run),
the seed's coordinates-only state text, and the loop on a walled scene end to end."""

from __future__ import annotations

import json

import pytest

from lactchain.envs import GridWorldEnv, Planner, State
from lactchain.envs.gridworld import render_ansi, render_rgb, WALL_RGB
from lactchain.envs.scenes import SCENES, Scene, get_scene, load_scene_file
from lactchain.moves import ALL_MOVES, MOVE_FORWARD, TURN_LEFT, TURN_RIGHT
from lactchain.prompts import PromptSpec
from lactchain.runs.registry import Registry

F, L, R = MOVE_FORWARD, TURN_LEFT, TURN_RIGHT
# 3x3, goal in the south-east corner, a wall between it and the start:
#   y=2  .  .  .
#   y=1  .  #  .
#   y=0  S  #  G
HOOK = Scene("hook", size=3, goal=(2, 0), start=(0, 0, "north"), walls=((1, 0), (1, 1)))


def test_a_wall_blocks_a_forward_move_like_the_border():
    env = GridWorldEnv(scene=HOOK, moves=ALL_MOVES)
    env.reset(options={"state": {"x": 0, "y": 0, "orientation": "east"}})
    _, reward, done, _, info = env.step([F])
    assert env.state == State(0, 0, "east") and reward == -1.0 and not done
    assert info["caption"] == "bumped the east wall"


def test_the_planner_routes_around_walls_and_v_star_is_the_hand_count():
    """From (0, 0) facing north: up 2, turn right, east 2, turn right, down 2 = 8 moves
    (without the walls: turn right, 2 forward = 3)."""
    env = GridWorldEnv(scene=HOOK, moves=ALL_MOVES, max_moves_per_action=4)
    planner = Planner(env)
    start = State(0, 0, "north")
    assert planner.plan(start) == [F, F, R, F, F, R, F, F] and planner.distance(start) == 8
    assert Planner(GridWorldEnv(size=3, goal=(2, 0), moves=ALL_MOVES)).distance(start) == 3
    # Two actions of at most 4 moves: -4 now, then -4 + 100 one step later.
    assert planner.value(start, 0.9) == pytest.approx(-4 + 0.9 * 96)
    assert all((s.x, s.y) not in HOOK.walls for s in planner.values(0.9))  # no state inside a wall
    assert len(env.start_states()) == (9 - 2 - 1) * 4


def test_bundled_walled_scenes_are_solvable_from_every_start_state():
    assert {"rooms", "maze"} <= set(SCENES)
    for name in ("rooms", "maze"):
        env = GridWorldEnv(scene=name)
        planner = Planner(env)
        assert env.walls and all(planner.distance(s) is not None for s in env.start_states())
    rooms = GridWorldEnv(scene="rooms")
    assert len(rooms.start_states()) == (64 - 11 - 1) * 4
    # The doorways are the only ways between rooms: the straight line east from the start is blocked.
    assert (3, 0) in rooms.walls and (3, 1) not in rooms.walls


def test_walls_are_drawn_in_the_ansi_and_rgb_renders():
    env = GridWorldEnv(scene=HOOK)
    text = render_ansi(env.size, env.start, env.goal, walls=env.walls)
    assert text.splitlines()[3].startswith("1 |   |###|") and text.count("###") == 2
    img = render_rgb(env.size, env.start, env.goal, walls=env.walls)
    cell = img.shape[0] // 3
    assert tuple(img[2 * cell + cell // 2, 1 * cell + cell // 2]) == WALL_RGB  # (1, 0): bottom row, middle column


def test_a_scene_file_round_trips(tmp_path):
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(HOOK.as_dict()))
    assert load_scene_file(path) == HOOK and get_scene(str(path)) == HOOK
    assert json.loads(path.read_text())["walls"] == [[1, 0], [1, 1]]
    assert "walls" not in get_scene("flat").as_dict()  # a wall-less scene's dict is as it was


BAD_SCENES = {
    "wall on the goal": ({**HOOK.as_dict(), "walls": [[2, 0]]}, "a wall on the goal (2, 0)"),
    "goal unreachable": ({**HOOK.as_dict(), "walls": [[1, 0], [1, 1], [1, 2]]}, "the goal is unreachable from"),
    "overlapping cells": ({**HOOK.as_dict(), "walls": [[1, 0], [1, 0]]}, "wall (1, 0) is listed twice"),
    "wall on a landmark": ({**HOOK.as_dict(), "landmarks": [{"name": "sofa", "cells": [[1, 1]], "colour": "#ff0000"}]},
                           "wall (1, 1) overlaps the sofa"),
    "not JSON": ("{walls: [", "is not JSON (line 1"),
}


@pytest.mark.parametrize("case", list(BAD_SCENES))
def test_bad_scene_files_are_one_line_refusals_that_create_no_run(case, tmp_path, lc):
    data, message = BAD_SCENES[case]
    path = tmp_path / "bad.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    db = tmp_path / "registry.db"
    code, _, err = lc("pipeline", "--actor", "tiny", "--critic", "tiny", "--scene", path, "--db", db)
    assert code != 0 and message in err and f"scene file {path}" in err, err
    assert "Traceback" not in err and len([line for line in err.splitlines() if line.strip()]) == 1
    with Registry(db) as reg:
        assert reg.list_runs() == []


def test_coords_state_text_changes_every_prompt_and_the_critic_text():
    ego, coords = GridWorldEnv(), GridWorldEnv(state_text="coords")
    spec = PromptSpec.for_env(ego, moves=ego.moves)
    for s in ego.start_states():
        a, b = spec.render(ego.describe(s)), spec.render(coords.describe(s))
        assert a != b and "The goal is at (x=3, y=3)." in b and "steps" not in coords.describe(s)
        assert coords.critic_text(s) == f"{{x: {s.x}, y: {s.y}, orientation: {s.orientation}}}; goal {{x: 3, y: 3}}; " \
                                       "grid 4x4"
        assert ego.critic_text(s) != coords.critic_text(s)
    # The console's model-free oracle reads both texts (and the walls) back to the same plan.
    walled = GridWorldEnv(scene="rooms", state_text="coords")
    start = walled.start
    prompt = PromptSpec.for_env(walled, moves=walled.moves).render(walled.describe(start))
    assert "Walls at (x=3, y=0)," in prompt
    assert GridWorldEnv.plan_from_prompt(prompt) == Planner(walled).plan(start)
    with pytest.raises(ValueError, match="state_text must be one of egocentric, coords"):
        GridWorldEnv(state_text="polar")


def test_the_wall_list_is_in_the_prefix_every_state_of_a_scene_shares():
    # The actor's cache reuses the longest prefix a batch's prompts share; the walls are
    # the scene's, so they come before the pose, and what the agent faces stays per state.
    env = GridWorldEnv(scene="rooms")
    texts = [env.describe(s) for s in env.start_states()]
    walls = "The grid world is 8x8. Walls at (x=3, y=0),"
    assert all(t.startswith(walls) for t in texts)
    assert all(t.index("Walls at") < t.index("You are at") for t in texts)
    facing = [s for s in env.start_states() if "You are facing a wall." in env.describe(s)]
    assert 0 < len(facing) < len(texts)
    assert all(t.endswith("You are facing a wall.") for t in map(env.describe, facing))
    assert "Walls at" not in GridWorldEnv().describe(GridWorldEnv().start)


def test_a_state_inside_a_wall_is_refused():
    with pytest.raises(ValueError, match=r"state \(1, 1\) is inside a wall of scene 'hook'"):
        GridWorldEnv(scene=HOOK).reset(options={"state": {"x": 1, "y": 1, "orientation": "east"}})


def test_the_loop_runs_on_rooms_with_coords_and_records_its_world(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("pipeline", "--actor", "tiny", "--critic", "tiny", "--scene", "rooms", "--state-text",
                           "coords", "--iterations", "2", "--states", "8", "--eval-states", "8",
                           "--td-lists-per-state", "16", "--td-rounds", "2", "--explore", "8", "--actor-epochs", "1",
                           "--eval-max-actions", "8", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    reg = Registry(db)
    params = reg.params(out["run_id"])
    assert params["scene"] == "rooms" and params["state_text"] == "coords"
    # each evaluation and collect names its world itself (read alone: the leaderboard, runs compare)
    for child in reg.list_runs(parent_id=out["run_id"]):
        if child["kind"] in ("eval", "pairs"):
            own = reg.params(child["id"])
            assert (own["env"], own["scene"], own["state_text"]) == ("grid", "rooms", "coords"), own
            assert child["kind"] == "pairs" or own["max_actions"] == 8
    assert [row["iteration"] for row in out["curve"]] == [0, 1, 2]
    walls = get_scene("rooms").walls
    pairs_run = next(c["id"] for c in reg.list_runs(parent_id=out["run_id"]) if c["kind"] == "pairs")
    pairs = reg.pairs(run_ids=[pairs_run])
    assert pairs and all((p["state"]["x"], p["state"]["y"]) not in walls for p in pairs)
    assert all("Walls at (x=3, y=0)," in p["prompt"] and "The goal is at (x=7, y=7)." in p["prompt"] for p in pairs)


def test_bench_learn_transfers_zero_shot_to_the_scene_it_is_told(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("bench", "learn", "--actor", "tiny", "--critic", "tiny", "--budget-iterations", "1",
                           "--states", "8", "--eval-states", "8", "--td-lists-per-state", "16", "--td-rounds", "2",
                           "--explore", "8", "--actor-epochs", "1", "--transfer-scene", "rooms",
                           "--transfer-max-actions", "8", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    assert out["transfer"]["grid"] == "rooms" and out["transfer"]["states"] == len(GridWorldEnv(scene="rooms")
                                                                                   .start_states())
    assert Registry(db).params(out["run_id"])["transfer_scene"] == "rooms"
    code, _, err = lc("bench", "learn", "--actor", "tiny", "--transfer-scene", "castle", "--db", tmp_path / "x.db")
    assert code != 0 and "--transfer-scene 'castle': unknown scene 'castle'" in err
    code, _, err = lc("bench", "learn", "--actor", "tiny", "--env", "blackjack", "--transfer-scene", "rooms",
                      "--db", tmp_path / "x.db")
    assert code != 0 and "scenes are the grid's" in err
