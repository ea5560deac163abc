"""The k-armed bandit testbed (seed 004): the gymnasium env, the agents, the vectorised
simulator against the single-run agents in the env loop, the textbook numbers, and
`lactchain bandit` / `lactchain bench bandit` end to end."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lactchain.envs  # noqa: F401 - registers ArmedBanditTestbed-v0
from lactchain.baselines.bandits import SPEC_FORMS, make_agent, parse_agents, simulate
from lactchain.runs.registry import Registry
from tests.cli_helpers import run_cli

ALL_AGENTS = ["eps:0.1", "eps:0.01", "eps-const:0.1:0.1", "optimistic:5", "ucb:2", "gradient:0.1"]
E_MAX_OF_10_NORMALS = 1.5387527308  # E[max q*] for 10 arms, q* ~ N(0, 1) (numerical integral)


def play(env, agent, seed: int, agent_seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """One episode of seed 004's loop: rewards, optimal flags, and the best arm's mean."""
    env.reset(seed=seed)
    agent.reset(agent_seed)
    best_mean = float(env.unwrapped.arm_means.max())
    rewards, optimal, done = [], [], False
    while not done:
        arm = agent.get_action()
        _, reward, terminated, truncated, info = env.step(arm)
        done = terminated or truncated
        agent.observe(arm, reward, info)
        rewards.append(reward)
        optimal.append(info["optimal"])
    return np.array(rewards), np.array(optimal), best_mean


def test_registered_as_the_seed_asks_and_passes_check_env():
    spec = gym.spec("ArmedBanditTestbed-v0")
    assert (spec.max_episode_steps, spec.nondeterministic, spec.reward_threshold) == (1000, True, 1.0)
    assert spec.kwargs == {"num_arms": 10, "stationary": True}
    env = gym.make("ArmedBanditTestbed-v0")
    assert env.action_space == gym.spaces.Discrete(10) and env.observation_space == gym.spaces.Discrete(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
        check_env(gym.make("ArmedBanditTestbed-v0", num_arms=4, stationary=False, render_mode="ansi").unwrapped)
    assert not [str(w.message) for w in caught if "gymnasium" in w.filename]
    obs, info = env.reset(seed=3)
    assert obs == 0 and info["best_arm"] == int(np.argmax(env.unwrapped.arm_means))
    ends = [env.step(0)[2:4] for _ in range(1000)]
    assert ends[-1] == (False, True) and not any(t or tr for t, tr in ends[:-1])  # truncated at step 1000 only
    with pytest.raises(ValueError, match="arm"):
        gym.make("ArmedBanditTestbed-v0").unwrapped.step(10)


def test_env_is_seeded_and_nonstationary_arms_walk():
    def rollout(seed: int, **kw) -> list:
        env = gym.make("ArmedBanditTestbed-v0", **kw)
        env.reset(seed=seed)
        return [env.step(a % 10)[1:] for a in range(50)]

    assert rollout(7) == rollout(7)
    assert rollout(7) != rollout(8)
    env = gym.make("ArmedBanditTestbed-v0", stationary=False, render_mode="ansi").unwrapped
    env.reset(seed=1)
    assert not env.arm_means.any() and env.step(4)[4]["optimal"]  # all arms equal: any pull is optimal
    for _ in range(99):
        env.step(0)
    assert 0 < np.abs(env.arm_means).max() < 0.6 and "best arm" in env.render()


def test_simulator_is_seeded():
    a, b, c = (simulate(["eps:0.1", "gradient:0.1"], runs=20, steps=50, seed=s) for s in (1, 1, 2))
    for name in a:
        np.testing.assert_array_equal(a[name].avg_reward, b[name].avg_reward)
        np.testing.assert_array_equal(a[name].optimal_pct, b[name].optimal_pct)
    assert not np.array_equal(a["eps:0.1"].avg_reward, c["eps:0.1"].avg_reward)


def test_single_run_agents_follow_the_contract():
    env = gym.make("ArmedBanditTestbed-v0", max_episode_steps=30)
    for spec in ["random", *ALL_AGENTS]:
        agent = make_agent(spec, num_arms=10, seed=0)
        assert isinstance(agent.rng, np.random.Generator) and agent.name == spec
        first = play(env, agent, seed=5, agent_seed=11)[0]
        again = play(env, agent, seed=5, agent_seed=11)[0]  # reset(seed) restarts the agent exactly
        np.testing.assert_array_equal(first, again)


def test_every_agent_beats_random():
    curves = simulate(["random", *ALL_AGENTS], runs=100, steps=500, seed=3)
    floor = curves["random"].avg_reward[250:].mean()
    assert abs(floor) < 0.1 and abs(curves["random"].optimal_pct.mean() - 10) < 1.5
    for name in ALL_AGENTS:
        assert curves[name].avg_reward[250:].mean() > floor + 0.9, name
        assert curves[name].optimal_pct[250:].mean() > 40, name


def test_textbook_shape():
    """Sutton & Barto fig. 2.2 / 2.4: eps 0.1 ends near 1.4 and 80 % optimal; UCB (c=2)
    overtakes eps-greedy after a few hundred steps."""
    curves = simulate(["eps:0.1", "ucb:2"], runs=200, steps=1000, seed=0)
    eps, ucb = curves["eps:0.1"].final(100), curves["ucb:2"]
    assert 1.25 < eps["avg_reward"] < 1.55 and 72 < eps["optimal_pct"] < 88
    assert ucb.avg_reward[300:].mean() > curves["eps:0.1"].avg_reward[300:].mean() + 0.05
    assert ucb.optimal_pct[300:].mean() > curves["eps:0.1"].optimal_pct[300:].mean()


def test_vectorised_simulator_agrees_with_the_env_loop():
    """eps 0.1 over steps 500..1000: the simulator (1000 runs) against the single-run agent
    in the gymnasium env (16 episodes). Most of a run's reward is its best arm's luck
    (sd ~0.6 across problems), so the env side subtracts each problem's best mean and adds
    back its expectation: the same quantity, with ~6x less spread."""
    env = gym.make("ArmedBanditTestbed-v0")
    agent = make_agent("eps:0.1")
    adjusted, optimal = [], []
    for i in range(16):
        rewards, opt, best_mean = play(env, agent, seed=100 + i, agent_seed=i)
        adjusted.append(rewards[500:].mean() - best_mean + E_MAX_OF_10_NORMALS)
        optimal.append(opt[500:].mean() * 100)
    sim = simulate(["eps:0.1"], runs=1000, steps=1000, seed=4)["eps:0.1"]
    assert abs(np.mean(adjusted) - sim.avg_reward[500:].mean()) < 0.1
    assert abs(np.mean(optimal) - sim.optimal_pct[500:].mean()) < 20


def test_specs_are_checked():
    assert parse_agents(" eps:0.1, ucb:2 ,") == ["eps:0.1", "ucb:2"]
    for bad in ["foo", "eps", "eps:abc", "eps:2", "eps-const:0.1:0", "gradient:0", "ucb:nan", "eps:0.1,eps:0.1", ""]:
        with pytest.raises(ValueError) as err:
            parse_agents(bad)
        assert "\n" not in str(err.value)
        if bad and "," not in bad:
            assert SPEC_FORMS in str(err.value)


def test_cli_writes_the_run_metrics_and_plot(tmp_path, capsys):
    db = tmp_path / "registry.db"
    code, out, err = run_cli(["bandit", "--agents", "eps:0.1,ucb:2", "--runs", "30", "--steps", "95", "--db", db,
                              "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert set(result["agents"]) == {"eps:0.1", "ucb:2"} and result["last_steps"] == 95
    reg = Registry(db)
    run = reg.get_run(result["run_id"])
    assert (run["kind"], run["status"]) == ("baseline", "FINISHED")
    history = reg.metric_history(run["id"], "ucb:2/optimal_pct")
    assert [h["step"] for h in history] == [*range(10, 100, 10), 95]  # every 10th step, and the last
    assert set(reg.metric_keys(run["id"])) == {f"{a}/{k}" for a in ("eps:0.1", "ucb:2")
                                               for k in ("avg_reward", "optimal_pct")}
    (plot,) = reg.artifacts(run["id"], "plot")
    assert plot["path"] == result["plot"] and open(plot["path"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert reg.params(run["id"])["agents"] == ["eps:0.1", "ucb:2"]


def test_cli_prints_a_table(tmp_path, capsys):
    db = tmp_path / "registry.db"
    code, out, err = run_cli(["bandit", "--agents", "random", "--runs", "5", "--steps", "20", "--nonstationary",
                              "--db", db], capsys)
    assert code == 0, err
    assert "non-stationary" in out and "% optimal" in out and "random" in out


@pytest.mark.parametrize("argv", [["--runs", "0"], ["--steps", "-3"], ["--arms", "0"], ["--agents", "foo"],
                                  ["--agents", "eps:x"], ["--agents", "ucb:2,ucb:2"]])
def test_cli_bad_input_is_one_line_and_creates_no_run(tmp_path, capsys, argv):
    db = tmp_path / "registry.db"
    code, out, err = run_cli(["bandit", *argv, "--db", db], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    assert not db.exists()


def test_cli_help_and_bench(capsys):
    code, out, _ = run_cli(["bandit", "--help"], capsys)
    assert code == 0 and "eps-const:EPS:ALPHA" in out and "--nonstationary" in out
    code, out, err = run_cli(["bench", "bandit", "--agents", "eps:0.1,gradient:0.1", "--runs", "10", "--steps", "30",
                              "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["seconds"] > 0 and set(result["agents"]) == {"eps:0.1", "gradient:0.1"}
