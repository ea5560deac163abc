"""Planner: BFS move distances, optimal move lists and V*, checked by hand and in the env."""

from __future__ import annotations

import pytest

from lactchain.envs import GridWorldEnv, Planner, State, all_states, apply_move
from lactchain.moves import ALL_MOVES, MOVE_FORWARD, TURN_LEFT

F, L = MOVE_FORWARD, TURN_LEFT
STATES_4 = all_states(4)
GOAL = (3, 3)


@pytest.fixture(scope="module")
def planner():
    return Planner(GridWorldEnv())


@pytest.fixture(scope="module")
def planner_right():
    return Planner(GridWorldEnv(moves=ALL_MOVES))


def test_all_states_covers_every_pose():
    assert len(STATES_4) == 64 == len(set(STATES_4))
    assert {s.orientation for s in STATES_4} == {"north", "east", "south", "west"}


# Hand-checked distances on the default 4x4 grid, goal (3, 3). Left turns cycle
# north -> west -> south -> east -> north, so facing east from north takes 3 left turns.
#
# (0,0,east):  F F F (to (3,0)), L (east->north), F F F                      = 7
# (0,0,north): F F F (to (0,3)), L L L (north->west->south->east), F F F     = 9
#              (turning first is worse: L L L to east, F F F, L, F F F      = 10)
# (0,0,south): L (south->east), then the 7 moves above                       = 8
# (0,0,west):  L L (west->south->east), then 7                               = 9
# (3,2,north): F                                                              = 1
# (3,2,east):  L, F                                                           = 2
# (3,2,south): L L (south->east->north), F                                    = 3
# (3,2,west):  L L L (west->south->east->north), F                            = 4
# (2,3,north): L L L (north->west->south->east), F                            = 4
# (2,3,east):  F                                                              = 1
# At the goal cell, in any orientation                                        = 0
#
# With 'turn right' too: (0,0,north) F F F, R, F F F = 7; (0,0,west) R (west->north)
# + 7 = 8; (3,2,west) R, F = 2; (2,3,north) R, F = 2; (0,0,south) is still 8 (L then 7);
# (3,2,south) still 3 (two turns either way).
HAND_DISTANCES = [
    (State(0, 0, "east"), 7, 7),
    (State(0, 0, "north"), 9, 7),
    (State(0, 0, "south"), 8, 8),
    (State(0, 0, "west"), 9, 8),
    (State(3, 2, "north"), 1, 1),
    (State(3, 2, "east"), 2, 2),
    (State(3, 2, "south"), 3, 3),
    (State(3, 2, "west"), 4, 2),
    (State(2, 3, "north"), 4, 2),
    (State(2, 3, "east"), 1, 1),
    (State(3, 3, "north"), 0, 0),
    (State(3, 3, "east"), 0, 0),
    (State(3, 3, "south"), 0, 0),
    (State(3, 3, "west"), 0, 0),
]


@pytest.mark.parametrize("state, default_moves, with_right", HAND_DISTANCES, ids=str)
def test_hand_checked_distances(planner, planner_right, state, default_moves, with_right):
    assert planner.distance(state) == default_moves
    assert planner_right.distance(state) == with_right


def test_turn_right_never_lengthens_and_sometimes_shortens(planner, planner_right):
    shorter = 0
    for s in STATES_4:
        assert planner_right.distance(s) <= planner.distance(s)
        shorter += planner_right.distance(s) < planner.distance(s)
    assert shorter > 0


@pytest.mark.parametrize("moves", [("move forward", "turn left"), ALL_MOVES], ids=["default", "turn-right"])
def test_distances_satisfy_the_bellman_equation(moves):
    """d(goal) = 0 and d(s) = 1 + min over moves of d(next) everywhere else: the
    defining property of shortest move counts, checked independently of the BFS."""
    p = Planner(GridWorldEnv(moves=moves))
    for s in STATES_4:
        d = p.distance(s)
        assert d is not None, s
        if (s.x, s.y) == GOAL:
            assert d == 0
        else:
            assert d == 1 + min(p.distance(apply_move(s, m, 4).state) for m in moves), s


def run_plan(env: GridWorldEnv, state: State, plan: list[str]) -> tuple[int, float, bool]:
    """Execute `plan` from `state` in chunks of max_moves_per_action; return
    (moves executed, total undiscounted reward, reached goal)."""
    env.reset(options={"state": state.as_dict()})
    k = env.max_moves_per_action
    executed, total, done, reached = 0, 0.0, False, (state.x, state.y) == env.goal
    for i in range(0, len(plan), k):
        assert not done
        _, reward, done, truncated, info = env.step(plan[i : i + k])
        assert not truncated
        executed += info["moves_executed"]
        total += reward
        reached = reached or info["reached_goal"]
    return executed, total, reached


@pytest.mark.parametrize("state", STATES_4, ids=str)
def test_plan_reaches_goal_in_distance_moves(planner, state):
    env = GridWorldEnv()
    plan = planner.plan(state)
    d = planner.distance(state)
    assert len(plan) == d
    executed, total, reached = run_plan(env, state, plan)
    assert reached
    assert executed == d
    assert (env.state.x, env.state.y) == GOAL
    if d:
        assert total == 100.0 - d


@pytest.mark.parametrize("size, moves", [(4, ALL_MOVES), (6, ("move forward", "turn left")), (5, ALL_MOVES)])
def test_plan_from_every_state_other_configs(size, moves):
    env = GridWorldEnv(size=size, goal=(size - 1, size - 1), moves=moves, max_moves_per_action=3, max_actions=50)
    p = Planner(env)
    for s in all_states(size):
        plan = p.plan(s)
        assert len(plan) == p.distance(s)
        executed, _, reached = run_plan(env, s, plan)
        assert reached and executed == len(plan), s


def test_plan_at_goal_is_empty(planner):
    assert planner.plan(State(3, 3, "south")) == []


def test_terminate_on_exit_does_not_change_distances(planner):
    p = Planner(GridWorldEnv(terminate_on_exit=True))
    assert all(p.distance(s) == planner.distance(s) for s in STATES_4)


def test_goal_elsewhere():
    env = GridWorldEnv(goal=(1, 0))
    p = Planner(env)
    assert p.distance(State(0, 0, "east")) == 1
    assert p.distance(State(1, 1, "south")) == 1
    assert p.plan(State(0, 0, "east")) == [F]


# ---- V* ---------------------------------------------------------------------------
@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.9, 0.99])
def test_value_within_one_action_is_100_minus_distance(gamma):
    """If the goal is d <= max_moves_per_action moves away, one action reaches it:
    V* = -d + 100, whatever gamma is."""
    env = GridWorldEnv()  # max_moves_per_action = 8
    p = Planner(env)
    values = p.values(gamma)
    checked = 0
    for s in STATES_4:
        d = p.distance(s)
        if (s.x, s.y) == GOAL:
            assert values[s] == 0.0
        elif d <= env.max_moves_per_action:
            assert values[s] == pytest.approx(100.0 - d), s
            checked += 1
    assert checked > 40


def test_value_of_start_matches_hand(planner):
    assert planner.value(State(0, 0, "east"), 0.99) == pytest.approx(93.0)


def test_value_needing_two_actions_default_limit(planner):
    # (0,0,north) is 9 moves away but an action holds at most 8: two actions.
    # Best split: 1 move now (reward -1), then the remaining 8 in one action
    # (reward 100 - 8 = 92) one step later: V* = -1 + gamma * 92.
    # (Splitting 8 then 1 would be -8 + gamma * 99, worse for gamma < 1.)
    assert planner.value(State(0, 0, "north"), 0.9) == pytest.approx(-1 + 0.9 * 92)  # 81.8
    assert planner.value(State(0, 0, "north"), 0.5) == pytest.approx(-1 + 0.5 * 92)  # 45.0


def test_value_needing_two_actions_small_limit():
    # max_moves_per_action = 2, (3,0,north) is 3 moves (F F F) away.
    # Split 1 + 2: -1 + g * (100 - 2) = -1 + 98 g   <- best (cost paid before discount is smaller)
    # Split 2 + 1: -2 + g * (100 - 1) = -2 + 99 g   (worse by 1 - g)
    p = Planner(GridWorldEnv(max_moves_per_action=2))
    assert p.value(State(3, 0, "north"), 0.9) == pytest.approx(-1 + 98 * 0.9)  # 87.2
    # Three actions with a limit of 1: -1 - g + g^2 * 99.
    p1 = Planner(GridWorldEnv(max_moves_per_action=1))
    assert p1.value(State(3, 0, "north"), 0.9) == pytest.approx(-1 - 0.9 + 0.81 * 99)


def _value_by_distance(d: int, k: int, gamma: float, memo: dict[int, float]) -> float:
    """V* as a function of the move distance only: the best first action walks n <= k
    moves along a shortest path; doing nothing (empty lists) forever is worth 0."""
    if d == 0:
        return 0.0
    if d not in memo:
        best = 0.0
        for n in range(1, min(k, d) + 1):
            best = max(best, -n + (100.0 if n == d else gamma * _value_by_distance(d - n, k, gamma, memo)))
        memo[d] = best
    return memo[d]


@pytest.mark.parametrize("k, gamma", [(8, 0.99), (2, 0.9), (3, 0.99), (1, 0.95)])
def test_value_iteration_matches_distance_recursion(k, gamma):
    p = Planner(GridWorldEnv(max_moves_per_action=k))
    values = p.values(gamma)
    memo: dict[int, float] = {}
    for s in STATES_4:
        assert values[s] == pytest.approx(_value_by_distance(p.distance(s), k, gamma, memo), abs=1e-6), s


@pytest.mark.parametrize("k", [8, 2])
def test_value_ordering_consistent_with_distance(k):
    p = Planner(GridWorldEnv(max_moves_per_action=k))
    values = p.values(0.99)
    off_goal = [s for s in STATES_4 if (s.x, s.y) != GOAL]
    for a in off_goal:
        for b in off_goal:
            da, db = p.distance(a), p.distance(b)
            if da < db:
                assert values[a] > values[b], (a, b)
            elif da == db:
                assert values[a] == pytest.approx(values[b])


def test_value_api(planner):
    values = planner.values(0.9)
    assert set(values) == set(STATES_4)
    assert planner.value(State(1, 2, "west"), 0.9) == pytest.approx(values[State(1, 2, "west")])
    with pytest.raises(ValueError, match="gamma"):
        planner.values(1.0)
    with pytest.raises(ValueError, match="gamma"):
        planner.values(-0.1)
