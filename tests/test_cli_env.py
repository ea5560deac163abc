"""`lactchain env show`: the exact optimum from the start state, as tables or JSON."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from lactchain.cli import app
from lactchain.envs import GridWorldEnv, State

# Wide help output whatever terminal runs the tests (typer's help console reads COLUMNS).
runner = CliRunner(env={"COLUMNS": "160"})


def flat(text: str) -> str:
    """Whitespace-collapsed output: rich wraps long lines to the terminal width."""
    return " ".join(text.split())


def show(*args: str):
    return runner.invoke(app, ["env", "show", *args])


def reaches_goal(data: dict) -> bool:
    """Replay the reported plan in a fresh env (in chunks the env accepts)."""
    env = GridWorldEnv(size=data["size"], goal=(data["goal"]["x"], data["goal"]["y"]), moves=data["moves"])
    env.reset(options={"state": data["start"]})
    plan, k = data["optimal_moves"], env.max_moves_per_action
    executed, reached = 0, False
    for i in range(0, len(plan), k):
        *_, info = env.step(plan[i : i + k])
        executed += info["moves_executed"]
        reached = reached or info["reached_goal"]
    return reached and executed == len(plan)


def test_json_default_size():
    result = show("--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["size"] == 4
    assert data["start"] == {"x": 0, "y": 0, "orientation": "east"}
    assert data["goal"] == {"x": 3, "y": 3}
    assert data["moves"] == ["move forward", "turn left"]
    assert data["optimal_move_count"] == 7 == len(data["optimal_moves"])
    assert data["optimal_moves"] == ["move forward"] * 3 + ["turn left"] + ["move forward"] * 3
    assert data["v_star_start"] == pytest.approx(100 - 7)  # one action of 7 moves reaches the goal
    assert "G" in data["grid"] and ">" in data["grid"]
    assert reaches_goal(data)


def test_json_size_6():
    result = show("--size", "6", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["size"] == 6
    assert data["goal"] == {"x": 5, "y": 5}
    # 5 east, turn left, 5 north.
    assert data["optimal_move_count"] == 11
    # 11 moves > 8 per action: -3 now, then 8 moves to the goal: -3 + 0.99 * 92.
    assert data["v_star_start"] == pytest.approx(-3 + 0.99 * 92)
    assert reaches_goal(data)


def test_json_turn_right():
    result = show("--turn-right", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert "turn right" in data["moves"]
    assert data["optimal_move_count"] == 7
    assert reaches_goal(data)


def test_table_output():
    result = show()
    assert result.exit_code == 0, result.output
    out = flat(result.stdout)
    assert "(7 moves)" in out
    assert "GridWorld 4x4" in out
    assert "['move forward', 'move forward', 'move forward', 'turn left'," in out
    assert "93.00" in out


@pytest.mark.parametrize("size", ["1", "0", "-3"])
def test_bad_size_is_a_clear_error(size):
    result = show("--size", size)
    assert result.exit_code != 0
    assert isinstance(result.exception, SystemExit)  # a clean exit, not a traceback
    assert "size must be at least 2" in flat(result.output)
    assert "Traceback" not in result.output


def test_non_integer_size_is_rejected():
    result = show("--size", "big")
    assert result.exit_code != 0
    assert "size" in result.output


@pytest.mark.parametrize("args", [["--help"], ["env", "--help"], ["env", "show", "--help"]])
def test_help(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output
    if args[-2:] == ["show", "--help"]:
        assert "--size" in result.output and "--json" in result.output


def test_start_state_reported_matches_env():
    data = json.loads(show("--json").stdout)
    assert State(**data["start"]) == GridWorldEnv().start


def test_env_blackjack_prints_the_exact_optimal_policy():
    result = runner.invoke(app, ["env", "blackjack", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["policy"]["hard 20"]["10"] == "stick" and out["policy"]["hard 11"]["6"] == "hit"
    assert out["policy"]["soft 18"]["9"] == "hit" and out["policy"]["soft 18"]["7"] == "stick"
    assert out["win_rate"] == pytest.approx(0.4329, abs=1e-4) and out["expected_return"] == pytest.approx(-0.0431, abs=1e-4)
    assert len(out["policy"]) == 28 and out["v_star"]["hard 21"]["10"] > 0.8
    table = runner.invoke(app, ["env", "blackjack"])
    assert table.exit_code == 0 and "soft 18" in table.output and "win rate 0.4329" in table.output
