"""Policy-gradient baselines (lactchain.baselines.pg) on the real grid: features, learning
beyond the random agent, the issue's >= 95 % greedy target, determinism."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from lactchain.baselines.agent import Agent, RandomAgent, run_agent
from lactchain.baselines.pg import ActorCriticAgent, ReinforceAgent, state_features
from lactchain.envs.blackjack import Hand
from lactchain.envs.catalog import make_env
from lactchain.envs.gridworld import State

pytestmark = pytest.mark.usefixtures("one_thread")

# gamma, reward scale and episodes of the grid runs (REINFORCE first reached
# 100 % at 100-150 episodes over seeds 0-4, actor-critic at 50-100)
GRID = {"gamma": 0.9, "reward_scale": 0.01}
EPISODES = {ReinforceAgent: 300, ActorCriticAgent: 150}


def grid():
    return make_env("grid", max_moves_per_action=1, max_actions=30)


def train(cls, episodes: int, seed: int = 0):
    """The issue's protocol: episodes from uniformly random start states, then greedy from all 60."""
    env = grid()
    pool = env.start_states()
    starts = [pool[i] for i in np.random.default_rng(seed).integers(len(pool), size=episodes)]
    agent = cls(env, seed=seed, **GRID)
    summary = run_agent(env, agent, episodes, seed=1, starts=starts)
    return env, agent, summary


def greedy_success(env, agent) -> float:
    ev = run_agent(env, agent, len(env.start_states()), seed=2, learn=False, starts=env.start_states())
    return ev.successes / ev.episodes


@pytest.fixture(scope="module", params=[ReinforceAgent, ActorCriticAgent], ids=["reinforce", "actor-critic"])
def trained(request):
    return train(request.param, EPISODES[request.param])


def test_grid_features():
    env = grid()  # 4x4, goal (3, 3)
    f = state_features(env, State(0, 0, "east"))
    assert f.dtype == np.float32 and f.shape == (11,)
    # x, y | north east south west | dx dy | ahead left | blocked
    np.testing.assert_allclose(f, [0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 0])
    f = state_features(env, State(3, 1, "east"))  # facing the east wall, goal 2 cells to the left
    np.testing.assert_allclose(f, [1, 1 / 3, 0, 1, 0, 0, 0, 2 / 3, 0, 2 / 3, 1], rtol=1e-6)
    f = state_features(env, State(1, 3, "west"))  # goal 2 cells behind
    np.testing.assert_allclose(f[6:], [2 / 3, 0, -2 / 3, 0, 0], rtol=1e-6)


def test_blackjack_features_and_unknown_env():
    env = make_env("blackjack")
    np.testing.assert_allclose(state_features(env, Hand(15, 10, True)), [15 / 21, 1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(state_features(env, Hand(4, 1, False)), [4 / 21, 0.1, 0.0], rtol=1e-6)
    with pytest.raises(ValueError, match="bandit"):
        state_features(SimpleNamespace(name="bandit"), 0)


@pytest.mark.parametrize("cls", [ReinforceAgent, ActorCriticAgent])
def test_agent_contract(cls):
    agent = cls(grid(), seed=0)
    assert isinstance(agent, Agent) and agent.name and agent.training
    with pytest.raises(ValueError, match="gamma"):
        cls(grid(), gamma=1.5)


def test_reinforce_rejects_unknown_baseline():
    with pytest.raises(ValueError, match="baseline"):
        ReinforceAgent(grid(), baseline="median")


def test_trained_beats_random_and_reaches_target(trained):
    env, agent, summary = trained
    assert summary.env_steps > 0 and agent.updates > 0
    rnd = run_agent(env, RandomAgent(env.moves, seed=0), 60, seed=2, learn=False, starts=env.start_states())
    success = greedy_success(env, agent)
    assert success > rnd.successes / rnd.episodes
    assert success >= 0.95  # the target, greedy from all 60 start states


@pytest.mark.parametrize("cls", [ReinforceAgent, ActorCriticAgent])
def test_same_seed_same_greedy_policy(cls):
    runs = [train(cls, 20, seed=3) for _ in range(2)]
    actions = []
    for env, agent, _ in runs:
        agent.training = False
        actions.append([agent.get_action(s) for s in env.start_states()])
    assert actions[0] == actions[1]
    for p, q in zip(runs[0][1].actor.parameters(), runs[1][1].actor.parameters()):
        assert (p == q).all()
    assert runs[0][2].env_steps == runs[1][2].env_steps
