"""Batched lock-step rollouts and `lactchain play` on a real tiny actor and registry."""

from __future__ import annotations

import json

import pytest
import torch

from lactchain.envs import Planner, GridWorldEnv, State
from lactchain.runs.registry import Registry
from lactchain.loop.rollout import RolloutConfig, run_rollouts

torch.set_num_threads(1)

PLAY_KEYS = {"run_id", "episodes", "success_rate", "mean_return", "mean_optimal_ratio", "parse_failure_rate",
             "lenient_parse_rate",
             "env_steps_per_s"}


class CountingActor:
    """Wraps the real tiny actor to count generate calls and batch sizes."""

    def __init__(self, actor):
        self.actor, self.moves, self.calls = actor, actor.moves, []

    def generate(self, prompts, **kw):
        self.calls.append(len(prompts))
        return self.actor.generate(prompts, **kw)


def test_lockstep_one_generate_per_step_and_refill(tiny_actor, tmp_path):
    counting = CountingActor(tiny_actor)
    reg = Registry(tmp_path / "r.db")
    run = reg.create_run("play")
    cfg = RolloutConfig(episodes=5, n_envs=3, start="random", seed=3, env_kwargs={"max_actions": 4})
    summary = run_rollouts(counting, cfg, registry=reg, run_id=run)
    # Never more prompts than envs; the batch is full while episodes are pending.
    assert max(counting.calls) == 3 and all(n <= 3 for n in counting.calls)
    assert sum(counting.calls) == summary.env_steps
    assert len(summary.episodes) == 5
    episodes, steps = reg.episodes(run), reg.steps(run_id=run)
    assert len(episodes) == 5 and len(steps) == summary.env_steps
    for ep in episodes:
        rows = sorted((s for s in steps if s["episode_id"] == ep["id"]), key=lambda s: s["t"])
        assert [s["t"] for s in rows] == list(range(ep["length"]))
        assert rows[0]["state"] == ep["start_state"]
        # States chain: each step starts where the previous one ended.
        for a, b in zip(rows, rows[1:]):
            assert b["state"] == a["next_state"]
        assert rows[-1]["done"] and not any(r["done"] for r in rows[:-1])
        assert ep["return"] == pytest.approx(sum(r["reward"] for r in rows))


def test_rollout_steps_replay_in_the_env(tiny_actor, tmp_path):
    """Every stored step is what the env really does with those moves from that state."""
    reg = Registry(tmp_path / "r.db")
    run = reg.create_run("play")
    run_rollouts(tiny_actor, RolloutConfig(episodes=4, n_envs=4, start="random", seed=1), registry=reg, run_id=run)
    env = GridWorldEnv()
    for row in reg.steps(run_id=run):
        env.reset(options={"state": row["state"]})
        _, reward, terminated, _, info = env.step(row["moves"])
        assert env.state.as_dict() == row["next_state"]
        assert reward == row["reward"] and row["caption"].startswith(info["caption"])


def test_optimal_ratio_and_success_are_measured_against_the_planner():
    """An oracle actor that plays the BFS plan succeeds everywhere with ratio 1."""

    class Oracle:
        moves = ("move forward", "turn left")

        def __init__(self):
            self.planner = Planner(GridWorldEnv())

        def generate(self, prompts, **kw):
            import re

            out = []
            for p in prompts:
                x, y, o = re.search(r"You are at \(x=(\d+), y=(\d+)\) facing (\w+)", p).groups()
                plan = self.planner.plan(State(int(x), int(y), o))
                out.append(type("S", (), {"text": str(plan), "moves": plan[:8], "mode": "strict", "logprob": 0.0})())
            return out

    summary = run_rollouts(Oracle(), RolloutConfig(episodes=12, n_envs=4, start="random", seed=0)).as_dict()
    assert summary["success_rate"] == 1.0
    assert summary["mean_optimal_ratio"] == pytest.approx(1.0)
    assert summary["parse_failure_rate"] == 0.0


# `lactchain play` in this process (`lc`): the console script's own process and its pure JSON
# stdout are test_cli_runs' (an interpreter start-up here cost 2-7 s a test).
def test_play_json_schema_and_registry_rows(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("play", "--actor", "tiny", "--episodes", "5", "--envs", "2", "--start", "random",
                           "--max-actions", "4", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    assert PLAY_KEYS <= set(out)
    assert out["episodes"] == 5
    assert 0.0 <= out["success_rate"] <= 1.0 and 0.0 <= out["parse_failure_rate"] <= 1.0
    reg = Registry(db)
    run = reg.get_run(out["run_id"])
    assert run["status"] == "FINISHED" and run["kind"] == "play"
    assert len(reg.episodes(run["id"])) == 5
    assert len(reg.steps(run_id=run["id"])) == out["env_steps"]
    assert reg.params(run["id"])["envs"] == 2
    assert reg.latest_metrics(run["id"])["success_rate"] == pytest.approx(out["success_rate"])


def test_play_rejects_bad_start(tmp_path, lc):
    code, _, err = lc("play", "--actor", "tiny", "--start", "sideways", "--db", tmp_path / "r.db")
    assert code != 0
    assert "fixed" in err and "random" in err


@pytest.mark.e2e
def test_smollm2_plays_and_records(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("play", "--actor", "smollm2-135m", "--episodes", "2", "--envs", "2", "--max-actions", "2",
                           "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    reg = Registry(db)
    steps = reg.steps(run_id=out["run_id"])
    assert len(reg.episodes(out["run_id"])) == 2 and len(steps) == out["env_steps"] >= 2
    assert out["parse_failure_rate"] == 0.0  # constrained decoding: always a valid list
    assert all(s["parse_mode"] == "strict" and s["moves"] for s in steps)
    assert all("<|im_start|>" in s["prompt"] or "grid world" in s["prompt"] for s in steps)


def test_same_seed_gives_the_same_episodes_at_any_number_of_envs(tiny_actor, tmp_path):
    """Sampling is seeded per episode and step, not per batch: --envs changes the speed,
    never which moves an episode samples."""
    reg = Registry(tmp_path / "r.db")

    def episodes(n_envs: int) -> list[tuple]:
        run = reg.create_run("play")
        cfg = RolloutConfig(episodes=6, n_envs=n_envs, start="random", seed=5, temperature=1.0, constrained=False,
                            env_kwargs={"max_actions": 3})
        summary = run_rollouts(tiny_actor, cfg, registry=reg, run_id=run)
        steps = reg.steps(run_id=run)
        by_idx = {e["id"]: e["idx"] for e in reg.episodes(run)}
        moves = sorted((by_idx[s["episode_id"]], s["t"], s["completion"]) for s in steps)
        return [(e.idx, e.total_return, e.length) for e in sorted(summary.episodes, key=lambda e: e.idx)] + moves

    one = episodes(1)
    assert episodes(3) == one and episodes(6) == one
    assert len({m[2] for m in one if len(m) == 3}) > 1  # really sampled: not one answer everywhere


def test_evaluate_batches_its_states_as_the_loops_evaluation_does():
    """`lactchain evaluate` steps as many envs at once as the loop's evaluation: all 60 grid
    start states in one batch (16 took 1.4x as long on 2 CPU cores, same answers)."""
    from lactchain.jobs.rollouts import EvaluateConfig
    from lactchain.loop.config import PipelineConfig

    assert EvaluateConfig().envs == PipelineConfig().n_envs == 64
