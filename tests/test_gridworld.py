"""GridWorldEnv: the contract users depend on (coordinates, moves, walls, rewards,
termination, truncation, limits, reset to an exact state, info text, rendering, gymnasium)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lactchain  # noqa: F401  registers LactChain/GridWorld-v0
from lactchain.envs import ENV_ID, ORIENTATIONS, GridWorldEnv, State, all_states, apply_move
from lactchain.envs.gridworld import render_ansi, render_rgb
from lactchain.moves import ALL_MOVES, MOVE_FORWARD, TURN_LEFT, TURN_RIGHT

F, L, R = MOVE_FORWARD, TURN_LEFT, TURN_RIGHT
ALL_STATES_4 = all_states(4)


def at(env: GridWorldEnv, x: int, y: int, orientation: str):
    return env.reset(options={"state": {"x": x, "y": y, "orientation": orientation}})


# ---- defaults ---------------------------------------------------------------------
def test_defaults():
    env = GridWorldEnv()
    obs, info = env.reset()
    assert env.size == 4
    assert env.goal == (3, 3)
    assert env.start == State(0, 0, "east")
    assert env.moves == (MOVE_FORWARD, TURN_LEFT)  # turn right is opt-in
    assert obs == {"x": 0, "y": 0, "orientation": ORIENTATIONS.index("east")}
    assert info["state"] == {"x": 0, "y": 0, "orientation": "east"}
    assert obs in env.observation_space


def test_turn_right_is_not_a_default_move():
    env = GridWorldEnv()
    env.reset()
    with pytest.raises(ValueError, match="turn right"):
        env.step([TURN_RIGHT])
    env = GridWorldEnv(moves=ALL_MOVES)
    env.reset()
    env.step([TURN_RIGHT])
    assert env.state == State(0, 0, "south")


# ---- turning and moving from every orientation ------------------------------------
TURN_LEFT_OF = {"north": "west", "west": "south", "south": "east", "east": "north"}
TURN_RIGHT_OF = {v: k for k, v in TURN_LEFT_OF.items()}
FORWARD_DELTA = {"north": (0, 1), "east": (1, 0), "south": (0, -1), "west": (-1, 0)}


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_turn_left_from_every_orientation(orientation):
    env = GridWorldEnv()
    at(env, 1, 2, orientation)
    obs, reward, terminated, truncated, info = env.step([TURN_LEFT])
    assert env.state == State(1, 2, TURN_LEFT_OF[orientation])
    assert obs["orientation"] == ORIENTATIONS.index(TURN_LEFT_OF[orientation])
    assert reward == -1.0 and not terminated and not truncated
    assert info["caption"] == "turned left"


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_turn_right_from_every_orientation(orientation):
    env = GridWorldEnv(moves=ALL_MOVES)
    at(env, 1, 2, orientation)
    _, reward, *_ = env.step([TURN_RIGHT])
    assert env.state == State(1, 2, TURN_RIGHT_OF[orientation])
    assert reward == -1.0
    # The pure transition agrees with the env.
    assert apply_move(State(1, 2, orientation), TURN_RIGHT, 4).state == env.state


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_four_left_turns_come_back(orientation):
    env = GridWorldEnv()
    at(env, 2, 1, orientation)
    _, reward, *_ = env.step([TURN_LEFT] * 4)
    assert env.state == State(2, 1, orientation)
    assert reward == -4.0


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_forward_from_every_orientation(orientation):
    env = GridWorldEnv()
    at(env, 1, 1, orientation)
    _, reward, terminated, _, info = env.step([MOVE_FORWARD])
    dx, dy = FORWARD_DELTA[orientation]
    assert env.state == State(1 + dx, 1 + dy, orientation)
    assert reward == -1.0 and not terminated
    assert info["caption"] == "moved forward"


def test_axes_x_east_y_north_origin_south_west():
    env = GridWorldEnv()
    env.reset()  # (0, 0) facing east
    env.step([F, F])
    assert (env.state.x, env.state.y) == (2, 0)
    env.step([L, F])  # east -> north, one step north
    assert env.state == State(2, 1, "north")


# ---- walls ------------------------------------------------------------------------
EDGE_CELL = {"north": (1, 3), "east": (3, 1), "south": (1, 0), "west": (0, 1)}


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_walls_clamp_by_default(orientation):
    env = GridWorldEnv()
    x, y = EDGE_CELL[orientation]
    at(env, x, y, orientation)
    _, reward, terminated, truncated, info = env.step([F])
    assert env.state == State(x, y, orientation)  # did not move
    assert reward == -1.0  # a bump still costs its move
    assert not terminated and not truncated
    assert info["caption"] == f"bumped the {orientation} wall"
    assert info["moves_executed"] == 1


def test_caption_collapses_repeats_and_mentions_bump():
    env = GridWorldEnv()
    at(env, 0, 1, "north")
    _, reward, *_, info = env.step([F, F, F])
    assert env.state == State(0, 3, "north")
    assert reward == -3.0
    assert info["caption"] == "moved forward twice, bumped the north wall"


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_terminate_on_exit(orientation):
    env = GridWorldEnv(terminate_on_exit=True, exit_penalty=-5.0)
    x, y = EDGE_CELL[orientation]
    at(env, x, y, orientation)
    _, reward, terminated, truncated, info = env.step([F, L, F])
    assert terminated and not truncated
    assert info["exited"] is True
    # -1 for the move that walked off, plus the exit penalty; the rest is not executed.
    assert reward == -1.0 + -5.0
    assert info["moves_executed"] == 1
    assert env.state == State(x, y, orientation)  # observation stays a valid cell
    assert "off the grid" in info["caption"]


def test_terminate_on_exit_moves_normally_inside():
    env = GridWorldEnv(terminate_on_exit=True)
    env.reset()
    _, reward, terminated, *_ = env.step([F, F])
    assert env.state == State(2, 0, "east") and reward == -2.0 and not terminated


# ---- rewards and termination ------------------------------------------------------
def test_optimal_list_reaches_goal_in_one_action():
    env = GridWorldEnv()
    env.reset()
    _, reward, terminated, truncated, info = env.step([F, F, F, L, F, F, F])
    assert env.state == State(3, 3, "north")
    assert reward == 100.0 - 7
    assert terminated and not truncated
    assert info["reached_goal"] is True
    assert info["moves_executed"] == 7
    assert "reached the goal" in info["caption"]


def test_goal_mid_list_stops_the_rest():
    env = GridWorldEnv()
    at(env, 3, 0, "north")
    _, reward, terminated, _, info = env.step([F, F, F, L, F, F])
    assert env.state == State(3, 3, "north")  # the trailing 'turn left, forward x2' never ran
    assert reward == 100.0 - 3
    assert terminated
    assert info["moves_executed"] == 3


def test_reward_is_minus_one_per_executed_move():
    env = GridWorldEnv()
    env.reset()
    _, reward, terminated, *_ = env.step([L, L, F, L])
    assert reward == -4.0 and not terminated


def test_empty_move_list_is_a_free_noop():
    env = GridWorldEnv()
    at(env, 1, 1, "south")
    obs, reward, terminated, truncated, info = env.step([])
    assert reward == 0.0
    assert not terminated and not truncated
    assert env.state == State(1, 1, "south")
    assert info["moves_executed"] == 0
    assert info["actions_taken"] == 1  # it still used up an action
    assert "empty" in info["caption"]


def test_max_actions_truncates_on_the_last_action():
    env = GridWorldEnv(max_actions=3)
    env.reset()
    for i in range(1, 4):
        _, _, terminated, truncated, info = env.step([L])
        assert not terminated
        assert truncated == (i == 3), i
    assert "out of actions" in info["caption"]


def test_reaching_goal_on_the_last_action_is_termination_not_truncation():
    env = GridWorldEnv(max_actions=2)
    env.reset()
    env.step([F, F, F])
    _, reward, terminated, truncated, _ = env.step([L, F, F, F])
    assert terminated and not truncated
    assert reward == 96.0


def test_max_moves_per_action_drops_extra_moves():
    env = GridWorldEnv(max_moves_per_action=2)
    env.reset()
    _, reward, _, _, info = env.step([L, L, L, L, L])
    assert env.state == State(0, 0, "west")  # only two left turns from east
    assert reward == -2.0
    assert info["moves_executed"] == 2
    assert info["moves_dropped"] == 3
    assert "3 extra moves ignored" in info["caption"]


def test_no_moves_dropped_within_the_limit():
    env = GridWorldEnv(max_moves_per_action=2)
    env.reset()
    *_, info = env.step([L, L])
    assert info["moves_dropped"] == 0
    assert "ignored" not in info["caption"]


# ---- action forms -----------------------------------------------------------------
def test_integer_actions_index_the_move_list():
    env = GridWorldEnv()
    env.reset()
    forward, left = env.moves.index(F), env.moves.index(L)
    action = [forward] * 3 + [np.int64(left)] + [forward] * 3
    _, reward, terminated, *_ = env.step(action)
    assert terminated and reward == 93.0


def test_action_space_samples_are_valid_actions():
    env = GridWorldEnv(max_actions=50)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(30):
        action = env.action_space.sample()
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs in env.observation_space
        assert info["moves_executed"] <= min(len(action), env.max_moves_per_action)
        if terminated or truncated:
            env.reset()


def test_case_and_spacing_of_move_strings_is_normalised():
    env = GridWorldEnv()
    env.reset()
    env.step(["Move_Forward", " TURN  LEFT "])
    assert env.state == State(1, 0, "north")


@pytest.mark.parametrize(
    "action, bad",
    [(["jump"], "jump"), ([F, "fly away"], "fly away"), ([7], "7"), ("move forward", "move forward")],
)
def test_bad_actions_raise_naming_the_value(action, bad):
    env = GridWorldEnv()
    env.reset()
    with pytest.raises(ValueError, match=bad):
        env.step(action)


# ---- reset to an exact state --------------------------------------------------------
@pytest.mark.parametrize("state", ALL_STATES_4, ids=str)
def test_reset_to_every_state(state):
    env = GridWorldEnv()
    obs, info = env.reset(options={"state": state.as_dict()})
    assert env.state == state
    assert obs == {"x": state.x, "y": state.y, "orientation": ORIENTATIONS.index(state.orientation)}
    assert obs in env.observation_space
    assert info["state"] == state.as_dict()
    assert f"(x={state.x}, y={state.y}) facing {state.orientation}" in info["description"]
    # The episode really continues from there.
    _, reward, terminated, *_ = env.step([TURN_LEFT])
    if (state.x, state.y) == env.goal:
        assert terminated and reward == 0.0 and env.state == state
    else:
        assert not terminated and reward == -1.0
        assert env.state == State(state.x, state.y, TURN_LEFT_OF[state.orientation])


def test_reset_accepts_state_objects_and_orientation_indices():
    env = GridWorldEnv()
    env.reset(options={"state": State(2, 1, "west")})
    assert env.state == State(2, 1, "west")
    env.reset(options={"state": {"x": 1, "y": 2, "orientation": ORIENTATIONS.index("south")}})
    assert env.state == State(1, 2, "south")
    env.reset()  # no options: back to the configured start
    assert env.state == State(0, 0, "east")


@pytest.mark.parametrize(
    "state, named",
    [
        ({"x": 4, "y": 0, "orientation": "east"}, r"\(4, 0\)"),
        ({"x": 0, "y": -1, "orientation": "east"}, r"\(0, -1\)"),
        ({"x": 1.5, "y": 0, "orientation": "east"}, "1.5"),
        ({"x": 0, "y": 0, "orientation": "up"}, "'up'"),
        ({"x": 0, "y": 0, "orientation": 7}, "7"),
        ({"x": 0, "y": 0}, "orientation"),
        ({"y": 0, "orientation": "east"}, "'x'"),
    ],
)
def test_impossible_states_raise_naming_the_bad_value(state, named):
    env = GridWorldEnv()
    with pytest.raises(ValueError, match=named):
        env.reset(options={"state": state})


def test_bad_construction_raises():
    with pytest.raises(ValueError, match="size"):
        GridWorldEnv(size=1)
    with pytest.raises(ValueError, match="goal"):
        GridWorldEnv(goal=(4, 4))
    with pytest.raises(ValueError, match="render_mode"):
        GridWorldEnv(render_mode="human")
    with pytest.raises(ValueError, match="dance"):
        GridWorldEnv(moves=[F, "dance"])


def test_reset_at_goal_then_step_terminates_without_reward():
    env = GridWorldEnv()
    _, info = at(env, 3, 3, "west")
    assert "already at the goal" in info["caption"]
    _, reward, terminated, _, info = env.step([F])
    assert terminated and reward == 0.0 and info["moves_executed"] == 0


# ---- info text --------------------------------------------------------------------
def test_info_description():
    env = GridWorldEnv()
    _, info = env.reset()
    text = info["description"]
    assert "4x4" in text
    assert "The goal is 3 steps ahead and 3 steps to your left." in text  # (3, 3) from (0, 0) facing east
    assert "(x=0, y=0) facing east" in text
    *_, info = env.step([F])
    assert "(x=1, y=0) facing east" in info["description"]


def test_description_follows_size_and_goal():
    env = GridWorldEnv(size=6, goal=(5, 2))
    _, info = env.reset()
    assert "6x6" in info["description"] and "The goal is 5 steps ahead and 2 steps to your left" in info["description"]


# ---- rendering --------------------------------------------------------------------
def _ansi_cells(text: str, size: int) -> dict[tuple[int, int], str]:
    cells = {}
    for line in text.splitlines():
        head, _, rest = line.partition("|")
        if not head.strip().isdigit():
            continue
        y = int(head.strip())
        for x, cell in enumerate(rest.split("|")[:size]):
            cells[(x, y)] = cell.strip()
    return cells


@pytest.mark.parametrize("orientation, glyph", [("north", "^"), ("east", ">"), ("south", "v"), ("west", "<")])
def test_render_ansi_glyphs(orientation, glyph):
    env = GridWorldEnv(render_mode="ansi")
    at(env, 1, 2, orientation)
    text = env.render()
    assert isinstance(text, str)
    cells = _ansi_cells(text, 4)
    assert len(cells) == 16
    assert cells[(1, 2)] == glyph
    assert cells[(3, 3)] == "G"
    assert sum(c in ("^", ">", "v", "<") for c in cells.values()) == 1


def test_render_ansi_north_is_up():
    text = render_ansi(4, State(0, 0, "east"), (3, 3))
    lines = [ln for ln in text.splitlines() if "|" in ln]
    assert "G" in lines[0] and lines[0].lstrip().startswith("3")
    assert ">" in lines[-1] and lines[-1].lstrip().startswith("0")


def test_render_rgb_array():
    env = GridWorldEnv(render_mode="rgb_array")
    env.reset()
    img = env.render()
    assert isinstance(img, np.ndarray)
    assert img.dtype == np.uint8
    assert img.ndim == 3 and img.shape[2] == 3 and img.shape[0] == img.shape[1] > 0
    # The goal (north-east, top-right) and the agent (south-west, bottom-left) differ in colour.
    h = img.shape[0]
    cell = h // 4
    goal_px = img[cell // 2, h - cell // 2]
    agent_px = img[h - cell // 2, cell // 2]
    assert not np.array_equal(goal_px, agent_px)
    # Moving the agent changes the image.
    env.step([F])
    assert not np.array_equal(env.render(), img)
    assert render_rgb(5, State(4, 4, "west"), (0, 0)).shape[:2] == (img.shape[0] * 5 // 4,) * 2


def test_render_without_mode_returns_none():
    env = GridWorldEnv()
    env.reset()
    assert env.render() is None


# ---- gymnasium --------------------------------------------------------------------
@pytest.mark.parametrize("render_mode", [None, "ansi", "rgb_array"])
def test_check_env_passes(render_mode):
    env = gym.make(ENV_ID, render_mode=render_mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warnings are fine; errors are not
        check_env(env.unwrapped)
    env.close()


def test_gym_make_after_import():
    env = gym.make("LactChain/GridWorld-v0", size=5, goal=(4, 4))
    obs, info = env.reset(seed=1)
    assert isinstance(env.unwrapped, GridWorldEnv)
    assert env.unwrapped.size == 5 and "5x5" in info["description"]
    obs, reward, terminated, truncated, info = env.step([F, F])
    assert obs == {"x": 2, "y": 0, "orientation": ORIENTATIONS.index("east")}
    assert reward == -2.0
    env.close()


@pytest.mark.parametrize("state, words", [
    (State(0, 0, "east"), "The goal is 3 steps ahead and 3 steps to your left."),
    (State(0, 0, "north"), "The goal is 3 steps ahead and 3 steps to your right."),
    (State(3, 1, "south"), "The goal is 2 steps behind you."),
    (State(2, 3, "north"), "The goal is 1 step to your right."),
    (State(3, 3, "west"), "You are on the goal."),
])
def test_description_says_where_the_goal_is_from_the_agents_view(state, words):
    text = GridWorldEnv().describe(state)
    assert text.endswith(words) and f"(x={state.x}, y={state.y}) facing {state.orientation}" in text
