"""Scenes: validation, landmark queries, the flat's descriptions and renders, gymnasium's
checker, the planner on 8x8, the JSON round trip, `lactchain env show --scene`."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import lactchain.envs  # noqa: F401 - registers the ids
from lactchain.envs import ENV_ID, ORIENTATIONS, GridWorldEnv, Planner, State
from lactchain.envs.gridworld import render_ansi
from lactchain.envs.scenes import AT, RELATIONS, SCENES, Landmark, Scene, _ORIENTATIONS, get_scene

FLAT = get_scene("flat")


def test_bundled_scenes():
    assert list(SCENES) == ["empty", "flat", "rooms", "maze"]
    empty = get_scene("empty")
    assert (empty.size, empty.goal, empty.start, empty.landmarks) == (4, (3, 3), (0, 0, "east"), ())
    assert get_scene(None) is empty and get_scene(" FLAT ") is FLAT and get_scene(FLAT) is FLAT
    assert FLAT.size == 8 and FLAT.names == ("fridge", "bathtub", "sofa", "bed")
    assert len({m.colour for m in FLAT.landmarks}) == 4 and len({m.letter for m in FLAT.landmarks}) == 4
    assert _ORIENTATIONS == ORIENTATIONS


def test_unknown_scene_and_landmark_are_one_line_errors():
    with pytest.raises(ValueError) as err:
        get_scene("castle")
    assert str(err.value) == "unknown scene 'castle'; known scenes: empty, flat, rooms, maze, or a scene JSON file"
    with pytest.raises(ValueError) as err:
        FLAT.landmark("piano")
    assert str(err.value) == "unknown landmark 'piano' in scene 'flat'; known landmarks: fridge, bathtub, sofa, bed"
    with pytest.raises(ValueError, match="unknown landmark 'sofa' in scene 'empty'; known landmarks: none"):
        get_scene("empty").relation((0, 0), "sofa")
    with pytest.raises(ValueError, match="unknown scene"):
        GridWorldEnv(scene="castle")


@pytest.mark.parametrize("landmarks, size, match", [
    ([Landmark("sofa", [(1, 1), (2, 1)], "#ff0000"), Landmark("bed", [(2, 1)], "#00ff00")], 4,
     r"'bed' and 'sofa' overlap at \(2, 1\)"),
    ([Landmark("sofa", [(3, 1), (4, 1)], "#ff0000")], 4, r"landmark 'sofa' cell \(4, 1\) is outside the 4x4 grid"),
    ([Landmark("sofa", [(1, 1)], "#ff0000"), Landmark("Sofa", [(2, 2)], "#00ff00")], 4, "two landmarks are called 'Sofa'"),
    ([Landmark("bed", [(1, 1)], "#ff0000"), Landmark("bath", [(2, 2)], "#00ff00")], 4, "share the letter 'B'"),
])
def test_scene_validation(landmarks, size, match):
    with pytest.raises(ValueError, match=match):
        Scene("bad", size=size, landmarks=tuple(landmarks))


@pytest.mark.parametrize("kwargs, match", [
    (dict(name="", cells=[(0, 0)], colour="#ff0000"), "needs a name"),
    (dict(name="sofa", cells=[], colour="#ff0000"), "has no cells"),
    (dict(name="sofa", cells=[(0, 0), (0, 0)], colour="#ff0000"), "lists a cell twice"),
    (dict(name="sofa", cells=[(0, 0), (2, 0)], colour="#ff0000"), "not one connected piece"),
    (dict(name="sofa", cells=[(0, 0.5)], colour="#ff0000"), "whole number"),
    (dict(name="sofa", cells=[(0, 0)], colour="red"), "colour must be '#rrggbb'"),
    (dict(name="garden", cells=[(0, 0)], colour="#00ff00"), "marks the goal"),
    (dict(name="sofa", cells=[(0, 0)], colour="#ff0000", letter="12"), "one letter"),
])
def test_landmark_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Landmark(**kwargs)


def test_scene_goal_and_start_validation():
    with pytest.raises(ValueError, match=r"the goal \(4, 4\) is outside the 4x4 grid"):
        Scene("bad", goal=(4, 4))
    with pytest.raises(ValueError, match="start orientation 'up'"):
        Scene("bad", start=(0, 0, "up"))
    with pytest.raises(ValueError, match="size must be at least 2"):
        Scene("bad", size=1, goal=(0, 0))
    # landmarks are walkable: goal and start may lie on one
    on = Scene("on", goal=(1, 1), start=(1, 1, "north"), landmarks=(Landmark("rug", [(1, 1)], "#aa5500"),))
    assert on.landmark_at((1, 1)) == "rug"


def test_landmark_at():
    assert FLAT.landmark_at((0, 7)) == "fridge" and FLAT.landmark_at(State(7, 1, "north")) == "bathtub"
    assert FLAT.landmark_at((3, 3)) == "sofa" and FLAT.landmark_at((5, 6)) == "bed"
    assert FLAT.landmark_at((0, 0)) is None and FLAT.landmark_at((7, 7)) is None


@pytest.mark.parametrize("cell, expected", [
    ((3, 3), ("sofa", "at")),
    ((3, 4), ("sofa", "north of")),  # level with the sofa's span: straight north
    ((2, 2), ("sofa", "south of")),
    ((5, 3), ("sofa", "east of")),
    ((1, 3), ("sofa", "west of")),
    ((0, 0), ("sofa", "south-west of")),  # sofa 5 steps, fridge 6, bathtub 7
    ((6, 0), ("bathtub", "west of")),
    ((6, 3), ("bathtub", "north-west of")),
    ((1, 7), ("fridge", "east of")),
    ((1, 5), ("fridge", "south-east of")),
    ((6, 7), ("bed", "north-east of")),
    ((4, 4), ("bed", "south of")),  # bed (4, 5) and sofa (4, 3) both 1 step away: the tie goes by name
    ((7, 4), ("bathtub", "north of")),  # bathtub 2 steps, bed 3
])
def test_nearest_landmark(cell, expected):
    assert FLAT.nearest_landmark(cell) == expected
    assert expected[1] in RELATIONS


def test_distance_and_relation_to_a_named_landmark():
    assert FLAT.distance((0, 0), "sofa") == 5 and FLAT.distance((3, 3), "SOFA") == 0
    assert FLAT.relation((0, 0), "bathtub") == "west of" and FLAT.relation((7, 7), "fridge") == "east of"
    assert FLAT.relation((7, 1), "bathtub") == AT
    assert get_scene("empty").nearest_landmark((0, 0)) is None


def test_json_round_trip():
    data = json.loads(json.dumps(FLAT.as_dict()))
    assert Scene.from_dict(data) == FLAT and get_scene(data) == FLAT
    assert Scene.from_dict(get_scene("empty").as_dict()) == get_scene("empty")
    env = GridWorldEnv(scene=data)
    assert env.scene == FLAT and env.size == 8 and env.goal == (7, 7)
    with pytest.raises(ValueError, match="unknown fields"):
        Scene.from_dict({**data, "doors": []})
    with pytest.raises(ValueError, match="missing"):
        Scene.from_dict({**data, "landmarks": [{"name": "sofa", "cells": [[0, 1]]}]})


def test_env_takes_size_goal_start_from_the_scene_unless_given():
    env = GridWorldEnv(scene="flat")
    assert (env.size, env.goal, env.start) == (8, (7, 7), State(0, 0, "east")) and env.scene is FLAT
    env = GridWorldEnv(scene="flat", goal=(6, 7), start=(1, 0, "north"))
    assert env.goal == (6, 7) and env.start == State(1, 0, "north")
    assert env.scene.goal == (6, 7) and env.scene.start == (1, 0, "north") and env.scene.landmarks == FLAT.landmarks
    with pytest.raises(ValueError, match="outside the 6x6 grid"):
        GridWorldEnv(scene="flat", size=6, goal=(5, 5))  # the bathtub at x=7 no longer fits
    assert GridWorldEnv().scene == get_scene("empty")


def test_describe_mentions_the_nearest_landmark_on_flat_and_is_unchanged_on_empty():
    env = GridWorldEnv(scene="flat")
    assert env.describe(State(0, 0, "east")) == (
        "The grid world is 8x8. You are at (x=0, y=0) facing east. The goal is 7 steps ahead and 7 steps to your "
        "left. You are south-west of the sofa, 5 steps from it.")
    assert env.describe(State(3, 3, "north")).endswith("You are at the sofa.")
    assert env.describe(State(7, 3, "north")).endswith("You are north of the bathtub, 1 step from it.")
    plain = GridWorldEnv()
    assert plain.describe(State(0, 0, "east")) == (
        "The grid world is 4x4. You are at (x=0, y=0) facing east. The goal is 3 steps ahead and 3 steps to your left.")
    assert plain.critic_text(State(1, 2, "west")) == "x=1 y=2 facing west; goal x=3 y=3; grid 4x4"
    assert env.critic_text(State(3, 3, "west")) == "x=3 y=3 facing west; goal x=7 y=7; grid 8x8; scene flat: at sofa"


def test_ansi_render_marks_landmarks_with_letters_and_a_legend():
    env = GridWorldEnv(scene="flat", render_mode="ansi")
    env.reset()
    env.step(["move forward"] * 7)  # along the south wall onto the bathtub
    text = env.render()
    lines = text.splitlines()
    assert lines[1] == "7 | F |   |   |   |   |   |   | G |"
    assert lines[9] == "3 |   |   | S | S | S |   |   |   |"
    assert lines[15] == "0 | . | . | . | . | . | . | . | > |"  # the agent stands on the bathtub
    assert lines[13] == "1 |   |   |   |   |   |   |   | T |"
    assert lines[-1] == "  F fridge, T bathtub, S sofa, B bed"
    # without landmarks: no legend, same text as before scenes
    assert render_ansi(4, State(0, 0, "east"), (3, 3)) == GridWorldEnv(render_mode="ansi").render()
    assert GridWorldEnv(render_mode="ansi").render().splitlines()[-1] == "    0   1   2   3"


def test_rgb_render_paints_landmarks_in_their_colour():
    env = GridWorldEnv(scene="flat", render_mode="rgb_array")
    env.reset()
    img = env.render()
    assert img.shape == (8 * 32, 8 * 32, 3)

    def pixel(x: int, y: int, at: int = 4):  # a point inside cell (x, y), `at` pixels from its corner
        return tuple(int(v) for v in img[(7 - y) * 32 + at, x * 32 + at])

    assert pixel(3, 3) == FLAT.landmark("sofa").rgb == (0xff, 0x70, 0x43)
    assert pixel(0, 7) == FLAT.landmark("fridge").rgb and pixel(5, 5) == FLAT.landmark("bed").rgb
    assert pixel(3, 4) == (240, 240, 240)  # an empty cell
    env.step(["move forward"] * 7)
    img = env.render()
    assert pixel(7, 1) == FLAT.landmark("bathtub").rgb
    assert pixel(7, 0, at=16) != FLAT.landmark("bathtub").rgb  # the agent stands there


def test_gym_make_with_a_scene_passes_the_env_checker():
    env = gym.make(ENV_ID, scene="flat", render_mode="ansi")
    check_env(env.unwrapped, skip_render_check=False)
    obs, info = env.reset()
    assert env.unwrapped.size == 8 and "sofa" in info["description"]
    env.close()


def test_planner_solves_flat_from_every_start_state():
    env = GridWorldEnv(scene="flat")
    planner = Planner(env)
    starts = env.start_states()
    assert len(starts) == 8 * 8 * 4 - 4
    for start in starts:
        plan = planner.plan(start)
        assert len(plan) == planner.distance(start)
        env.reset(options={"state": start})
        done = False
        for i in range(0, len(plan), env.max_moves_per_action):
            _, _, done, _, info = env.step(plan[i : i + env.max_moves_per_action])
        assert done and info["reached_goal"], start


def test_cli_env_show_scene(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from lactchain.cli import app

    runner = CliRunner(env={"COLUMNS": "160"})

    def show(*args: str):
        return runner.invoke(app, ["env", "show", *args])

    result = show("--scene", "flat", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["size"] == 8 and data["scene"] == FLAT.as_dict() and data["optimal_move_count"] == 15
    assert "F fridge, T bathtub, S sofa, B bed" in data["grid"]
    monkeypatch.chdir(tmp_path)  # what it prints is a scene file, as --scene's help says
    (tmp_path / "flat.json").write_text(result.stdout)
    assert get_scene("flat.json") == FLAT
    shown = show("--scene", "flat.json")
    assert shown.exit_code == 0 and "scene flat" in shown.output, shown.output
    (tmp_path / "folder").mkdir()
    assert "folder is a folder; give a scene's JSON file" in " ".join(show("--scene", "./folder").output.split())
    result = show("--scene", "flat")
    assert result.exit_code == 0 and "scene flat" in result.output and "#ff7043" in result.output
    result = show("--scene", "castle")
    assert result.exit_code != 0 and "unknown scene 'castle'; known scenes: empty, flat" in result.output
    result = show("--scene", "flat", "--size", "5")
    assert result.exit_code != 0 and "--size and --scene" in result.output


def test_worlds_compare_by_what_they_play(tmp_path, monkeypatch):
    """A run records a scene file by the path typed; the console holds the scene it read; the
    default scene may be named or left out: each pair plays alike (an adapter's "learned
    elsewhere" note must not fire on them). An edited copy of a bundled scene, still named
    after it, is another world; a file that is gone is known by its path only."""
    from lactchain.envs.world import same_world, world_label

    mine = tmp_path / "my.json"
    mine.write_text(json.dumps({**FLAT.as_dict(), "name": "my-flat"}))
    edited = {**FLAT.as_dict(), "goal": [6, 7]}  # `env show --scene flat --json`, edited: still named flat
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    monkeypatch.chdir(tmp_path)
    read = {"env": "grid", "scene": get_scene("my.json").as_dict()}  # what the console's Lab holds
    assert same_world({"env": "grid", "scene": "./my.json"}, read) and world_label(read) == "grid my-flat"
    assert same_world({"env": "grid", "scene": str(mine)}, {"env": "grid", "scene": "my.json"})
    assert same_world({"env": "grid", "scene": "my.json"}, {"env": "grid", "scene": "flat"})  # the same layout
    assert same_world({"env": "grid", "scene": "empty"}, {"env": "grid"})
    assert not same_world({"env": "grid", "scene": "flat"}, {"env": "grid", "scene": "edited.json"})
    assert not same_world({"env": "grid", "scene": "my.json"}, {"env": "grid", "scene": "my.json",
                                                                 "state_text": "coords"})
    assert not same_world({"env": "grid", "scene": "gone/x.json"}, {"env": "grid", "scene": "flat"})
