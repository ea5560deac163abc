"""Pair building: from stored episodes (seed 000's "DPO 2") and from critic advantages."""

from __future__ import annotations

import pytest
import torch

from lactchain.envs import GridWorldEnv, Planner, State
from lactchain.loop.labelers import execute_from
from lactchain.moves import format_moves
from lactchain.loop.preferences import (
    Candidate,
    advantage,
    best_vs_worst,
    CollectConfig,
    collect_pairs,
    pairs_from_steps,
    sample_start_states,
    to_dataset,
)

torch.set_num_threads(1)


def _episode_rows(episode_id, start, move_lists):
    """Steps rows exactly as rollout.py writes them, from really stepping the env."""
    env = GridWorldEnv()
    env.reset(options={"state": start.as_dict()})
    rows = []
    for t, moves in enumerate(move_lists):
        before = env.state
        _, reward, terminated, truncated, _ = env.step(moves)
        rows.append({"episode_id": episode_id, "t": t, "state": before.as_dict(), "moves": moves,
                     "parse_mode": "strict", "reward": reward, "next_state": env.state.as_dict(),
                     "done": terminated or truncated, "completion": format_moves(moves)})
        if terminated:
            break
    return rows


def test_pairs_from_episodes_rank_matching_start_states_by_return():
    start = State(0, 0, "east")
    plan = Planner(GridWorldEnv()).plan(start)
    good = _episode_rows(1, start, [plan])
    bad = _episode_rows(2, start, [["turn left", "turn left"], plan])
    other = _episode_rows(3, State(2, 2, "north"), [["move forward"]])  # no partner state
    batch = pairs_from_steps(good + bad + other, gamma=0.9, margin=0.5)
    assert len(batch.pairs) == 1
    pair = batch.pairs[0]
    assert pair["state"] == start.as_dict()
    assert pair["chosen"] == plan and pair["rejected"] == ["turn left", "turn left"]
    assert pair["chosen_score"] > pair["rejected_score"] and pair["labeler"] == "episodes"


def test_identical_lists_and_small_margins_are_dropped_and_counted():
    s = State(0, 0, "east")
    same = [Candidate(["move forward"], "", "strict", -1, s, False, advantage=a) for a in (1.0, 2.0)]
    from collections import Counter

    dropped = Counter()
    assert best_vs_worst(same, margin=0.1, dropped=dropped) is None
    assert dropped["identical_lists"] == 2  # every candidate is counted once: kept or dropped
    close = [Candidate(["move forward"], "", "strict", -1, s, False, advantage=1.0),
             Candidate(["turn left"], "", "strict", -1, s, False, advantage=1.2)]
    assert best_vs_worst(close, margin=0.5, dropped=dropped) is None
    assert dropped["margin_too_small"] == 2
    failed = [Candidate([], "junk", "failed", 0, s, False), close[0]]
    assert best_vs_worst(failed, margin=0.0, dropped=dropped) is None
    assert dropped["parse_failure"] == 1


def test_advantage_bootstraps_only_when_not_done():
    assert advantage(-2, 50, 40, done=False, gamma=0.9) == pytest.approx(-2 + 45 - 40)
    assert advantage(97, 50, 40, done=True, gamma=0.9) == pytest.approx(97 - 40)


class ExactCritic:
    """V* from the planner: a perfect critic, to check the pair builder end to end."""

    def __init__(self, env, gamma):
        self.v = Planner(env).values(gamma)

    def values(self, states):
        return [self.v[State(**s) if isinstance(s, dict) else s] for s in states]


def test_collect_pairs_resets_to_each_sampled_state(tiny_actor):
    env = GridWorldEnv()
    states = sample_start_states(env, 12, seed=0)
    assert all((s.x, s.y) != env.goal for s in states)
    batch = collect_pairs(tiny_actor, ExactCritic(env, 0.9), states,
                          CollectConfig(samples=4, temperature=1.0, gamma=0.9, margin=0.1, seed=0))
    assert batch.pairs, batch.stats()
    assert batch.candidates == 48
    kept = 2 * len(batch.pairs)
    assert kept + sum(batch.dropped.values()) == batch.candidates
    for p in batch.pairs:
        assert p["chosen"] != p["rejected"] and p["margin"] > 0.1
        start = State(**p["state"])
        reward, nxt, _ = execute_from(env, start, p["chosen"])
        assert nxt.as_dict() == p["meta"]["chosen_next_state"] and reward == p["meta"]["chosen_reward"]


def test_collect_pairs_refuses_settings_that_cannot_make_pairs():
    with pytest.raises(ValueError, match="at least 2"):
        CollectConfig(samples=1)
    with pytest.raises(ValueError, match="temperature"):
        CollectConfig(samples=4, temperature=0.2)


def test_dataset_completions_end_with_eos_and_skip_empty_pairs(tiny_actor):
    pairs = [{"prompt": "p", "chosen": ["move forward"], "rejected": ["turn left"]},
             {"prompt": "p", "chosen": ["turn left"], "rejected": ["turn left"]}]
    ds = to_dataset(pairs, tiny_actor.chat_prompt, tiny_actor.tokenizer.eos_token)
    assert len(ds) == 1
    assert ds[0]["chosen"] == "['move forward']" + tiny_actor.tokenizer.eos_token
    assert ds[0]["prompt"] == tiny_actor.chat_prompt("p")
