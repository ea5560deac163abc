"""Classic agents on the lab's envs: the agent contract, value iteration == the planner's
V*, and tabular learners that solve the grid from every start state."""

from __future__ import annotations

import random

import pytest

from lactchain.baselines.agent import Agent, RandomAgent, SolverAgent, run_agent
from lactchain.baselines.td import METHODS, Schedule, TabularAgent, ValueIterationAgent, value_iteration
from lactchain.envs import Planner
from lactchain.envs.catalog import make_env
from lactchain.runs.registry import Registry


@pytest.fixture(scope="module")
def grid():
    return make_env("grid", max_moves_per_action=1, max_actions=30)


def random_starts(env, n, seed):
    rng = random.Random(seed)
    return [rng.choice(env.start_states()) for _ in range(n)]


def test_value_iteration_equals_the_planners_v_star(grid):
    values, policy = value_iteration(grid, gamma=0.9)
    v_star = Planner(grid).values(0.9)
    assert set(values) == set(grid.start_states())
    assert max(abs(values[s] - v_star[s]) for s in values) < 1e-6
    assert set(policy.values()) <= set(grid.moves)


def test_value_iteration_refuses_a_stochastic_env():
    with pytest.raises(ValueError, match="blackjack is stochastic"):
        value_iteration(make_env("blackjack"))


@pytest.mark.parametrize("method", METHODS)
def test_tabular_learners_solve_the_grid_from_every_start_state(grid, method):
    agent = TabularAgent(grid.moves, method=method, gamma=0.9, alpha=0.5 if method != "mc" else 0.1,
                         epsilon=Schedule(1.0, 0.05, 20_000), seed=0)
    assert isinstance(agent, Agent)
    trained = run_agent(grid, agent, 3000, seed=1, starts=random_starts(grid, 3000, 0))
    result = run_agent(grid, agent, 60, seed=2, learn=False, starts=grid.start_states()).as_dict()
    assert result["success_rate"] == 1.0 and result["mean_optimal_ratio"] > 0.99
    assert trained.env_steps > 10_000 and agent.t == trained.env_steps  # every step learned from
    floor = run_agent(grid, RandomAgent(grid.moves), 60, seed=2, learn=False, starts=grid.start_states())
    assert floor.as_dict()["success_rate"] < 0.6


def test_the_solver_and_value_iteration_agents_play_the_optimum(grid):
    for agent in (SolverAgent(grid), ValueIterationAgent(grid)):
        out = run_agent(grid, agent, 60, seed=0, learn=False, starts=grid.start_states()).as_dict()
        assert out["success_rate"] == 1.0 and out["mean_optimal_ratio"] == 1.0


def test_value_iteration_on_blackjack_is_its_dp():
    env = make_env("blackjack")
    agent = ValueIterationAgent(env)
    solver = env.solver()
    assert all(agent.get_action(h) == solver.action(h) for h in env.start_states())


def test_runs_are_seeded_and_recorded_like_the_llms(tmp_path, grid):
    reg = Registry(tmp_path / "r.db")
    run = reg.create_run("baseline")
    starts = grid.start_states()[:5]

    def play():
        agent = TabularAgent(grid.moves, seed=3)
        return run_agent(grid, agent, 5, seed=4, starts=starts, registry=reg, run_id=run, record_steps=True)

    first, again = play(), play()
    assert first.returns == again.returns
    episodes = reg.episodes(run_id=run)
    assert len(episodes) == 10 and episodes[0]["start_state"] == starts[0].as_dict()
    steps = reg.steps(run_id=run)
    assert len(steps) == first.env_steps + again.env_steps
    assert all(len(s["moves"]) == 1 and s["moves"][0] in grid.moves for s in steps)


def test_schedules_and_bad_settings():
    assert Schedule.parse("1:0.1:10")(5) == pytest.approx(0.55)
    assert Schedule.parse("1:0.01:10:exp")(10) == pytest.approx(0.01)
    assert Schedule.parse("0.3")(1000) == 0.3
    with pytest.raises(ValueError, match="START:END:STEPS"):
        Schedule.parse("fast")
    with pytest.raises(ValueError, match="method must be one of q-learning, sarsa, mc"):
        TabularAgent(("hit", "stick"), method="dqn")
    with pytest.raises(ValueError, match="episodes must be >= 1"):
        run_agent(make_env("grid"), RandomAgent(("move forward",)), 0)
