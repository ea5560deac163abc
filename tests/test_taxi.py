"""Taxi: gymnasium's TaxiEnv as a captioned text env, plugged in through the env seam
(one module, one registration line): its dynamics are gymnasium's, its starts are
gymnasium's 300, its optimum is value iteration over gymnasium's table P."""

from __future__ import annotations

import json
import random

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.toy_text.taxi import TaxiEnv
from gymnasium.utils.env_checker import check_env

from lactchain.envs.catalog import ENVS, TextEnv, env_name, make_env
from lactchain.envs.replay import decision_states, execute_from, reachable_states
from lactchain.envs.taxi import (
    TAXI_MOVES,
    TaxiState,
    TaxiTextEnv,
    parse_taxi_state,
    start_states,
)
from lactchain.loop.evaluate import evaluate_actor
from lactchain.models.actor import Sample
from lactchain.moves import STRICT, format_moves
from lactchain.prompts import PromptSpec
from lactchain.runs.registry import Registry
from lactchain.loop.rollout import RolloutConfig, run_rollouts

# The optimum's mean return over the starts of seeds 0..99 (value iteration over P, gamma 1:
# the best episode return is 21 - the shortest delivery's moves).
OPTIMAL_MEAN_RETURN_SEEDS_0_99 = 7.69


def seeded_starts(n: int = 100) -> list[TaxiState]:
    env = make_env("taxi")
    out = []
    for seed in range(n):
        env.reset(seed=seed)
        out.append(env.state)
    return out


def test_registered_through_the_catalog_and_gymnasium():
    assert ENVS["taxi"] == "LactChain/Taxi-v0" and env_name("LactChain/Taxi-v0") == "taxi"
    env = make_env("taxi")
    assert isinstance(env, TextEnv) and isinstance(env, TaxiTextEnv)
    assert env.moves == TAXI_MOVES == ("south", "north", "east", "west", "pickup", "dropoff")
    assert env.stochastic is False and env.fixed_start is None
    with pytest.raises(ValueError, match="allowed moves: south, north"):
        make_env("taxi", moves=("move forward", "turn left"))
    with pytest.raises(ValueError, match="taxi's moves are south, north"):
        make_env("taxi", moves=("south", "north"))
    with pytest.raises(ValueError, match=">= 1"):
        TaxiTextEnv(max_actions=0)
    assert (TaxiTextEnv(max_actions=3, max_moves_per_action=2).max_actions,
            TaxiTextEnv(max_actions=3, max_moves_per_action=2).max_moves_per_action) == (3, 2)


def test_check_env_passes():
    check_env(TaxiTextEnv(render_mode="ansi"))
    check_env(gym.make("LactChain/Taxi-v0", render_mode="ansi").unwrapped)


def test_start_states_are_gymnasiums_initial_distribution():
    starts = start_states()
    game = TaxiEnv()
    support = {int(s) for s in np.flatnonzero(game.initial_state_distrib)}
    assert len(starts) == 300 == len(support) and {s.index() for s in starts} == support
    assert np.allclose(game.initial_state_distrib[list(support)], 1 / 300)  # uniform
    assert all(s.passenger != "taxi" and s.passenger != s.destination for s in starts)
    assert make_env("taxi").start_states() == starts
    # a seeded reset draws from it, as gymnasium's does, and replays from its seed
    assert seeded_starts(20) == seeded_starts(20) and set(seeded_starts(50)) <= set(starts)


def test_states_round_trip_and_bad_ones_name_the_field():
    env = make_env("taxi")
    for s in range(500):
        state = TaxiState.from_index(s)
        assert state.index() == s
        assert env.parse_state(state.as_dict()) == state == env.parse_state(json.loads(json.dumps(state.as_dict())))
    assert parse_taxi_state((2, 3, 4, 1)) == TaxiState(2, 3, "taxi", "green")
    assert parse_taxi_state({"taxi_row": 0, "taxi_col": 0, "passenger": "Red", "destination": "BLUE"}) == \
        TaxiState(0, 0, "red", "blue")
    for bad, field in (({"taxi_row": 5, "taxi_col": 0, "passenger": "red", "destination": "blue"}, "taxi_row"),
                       ({"taxi_row": 1, "taxi_col": 1.5, "passenger": "red", "destination": "blue"}, "taxi_col"),
                       ({"taxi_row": 1, "taxi_col": 1, "passenger": "car", "destination": "blue"}, "passenger"),
                       ({"taxi_row": 1, "taxi_col": 1, "passenger": "red", "destination": "taxi"}, "destination"),
                       ({"taxi_row": 1}, "missing")):
        with pytest.raises(ValueError, match=field):
            env.parse_state(bad)
    assert env.is_terminal(TaxiState(0, 4, "green", "green")) and not env.is_terminal(start_states()[0])


def test_every_move_is_gymnasiums_transition():
    """The text env moves as gymnasium's own TaxiEnv.step does (it reads the same table P
    without TaxiEnv.step's draw): one move from any state lands where gymnasium's lands."""
    env, game = make_env("taxi", max_moves_per_action=1), TaxiEnv()
    game.reset(seed=0)
    for s in range(500):
        state = TaxiState.from_index(s)
        if state.delivered:
            continue
        for a, move in enumerate(TAXI_MOVES):
            game.s = s
            s2, r, done, _, _ = game.step(a)
            reward, nxt, terminated = execute_from(env, state, [move])
            assert (reward, nxt.index(), terminated) == (r, s2, done)


def test_captions_say_what_happened():
    env = make_env("taxi")
    env.reset(options={"state": TaxiState(1, 0, "red", "green")})
    assert env.describe() == ("The taxi is at row 1, column 0. The passenger waits at Red, 1 step north of the "
                              "taxi, and wants to go to Green.")
    _, r, term, trunc, info = env.step(["north", "pickup", "pickup", "east", "east"])
    assert info["caption"] == ("drove north, picked up the passenger at Red, pickup failed: the passenger is already "
                               "in the taxi (-10), drove east, hit a wall going east")
    assert (r, term, trunc, info["moves_executed"], info["success"]) == (-14.0, False, False, 5, False)
    assert env.describe() == ("The taxi is at row 0, column 1. The passenger is in the taxi and wants to go to Green, "
                              "3 steps east of the taxi.")
    env.reset(options={"state": TaxiState(2, 2, "red", "green")})
    _, r, _, _, info = env.step(["pickup", "pickup", "dropoff"])
    assert info["caption"] == ("pickup failed: no passenger here twice (-10 each), drop-off failed: no passenger in "
                               "the taxi (-10)") and r == -30.0
    env.reset(options={"state": TaxiState(0, 4, "taxi", "green")})
    _, r, term, _, info = env.step(["dropoff", "north", "north"])
    assert info["caption"] == "dropped off the passenger at Green: delivered (+20); 2 moves after the delivery ignored"
    assert (r, term, info["success"], info["moves"]) == (20.0, True, True, ["dropoff"])
    env.reset(options={"state": TaxiState(2, 2, "taxi", "green")})
    _, r, _, _, info = env.step(["dropoff", "south", "south", "south"])
    assert info["caption"] == "drop-off failed: not at a stop (-10), drove south twice, hit a wall going south"
    env.reset(options={"state": TaxiState(0, 0, "taxi", "green")})
    _, r, term, _, info = env.step(["dropoff"])  # at another stop: the passenger gets out there
    assert info["caption"] == "dropped off the passenger at Red, not their destination" and not term and r == -1.0
    assert env.state == TaxiState(0, 0, "red", "green")


def test_limits_and_truncation():
    env = make_env("taxi", max_actions=2, max_moves_per_action=3)
    env.reset(options={"state": TaxiState(2, 2, "red", "green")})
    _, r, term, trunc, info = env.step(["north"] * 5)
    assert info["caption"] == "drove north twice, hit a wall going north; 2 extra moves ignored (limit 3)"
    assert (r, term, trunc, info["moves_dropped"]) == (-3.0, False, False, 2)
    _, _, term, trunc, info = env.step([])
    assert trunc and not term and info["caption"] == "did nothing (empty move list); out of actions (2)"
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([1, 4]))  # indices into env.moves, as action_space.sample() gives
    assert info["moves"] == ["north", "pickup"]
    with pytest.raises(ValueError, match="list of moves"):
        env.step("north")


def test_the_optimum_by_value_iteration_over_P_and_its_plans_earn_it():
    solver = make_env("taxi").solver()
    starts = seeded_starts(100)
    returns = [solver.optimal_return(s) for s in starts]
    assert sum(returns) / len(returns) == pytest.approx(OPTIMAL_MEAN_RETURN_SEEDS_0_99)
    env = make_env("taxi")  # 8 moves per action, 20 actions
    for seed, (start, best) in enumerate(zip(starts, returns)):
        plan = solver.plan(start)
        assert len(plan) == solver.distance(start) and best == 21 - len(plan)
        env.reset(seed=seed)
        assert env.state == start
        total, done = 0.0, False
        for k in range(0, len(plan), env.max_moves_per_action):
            _, r, done, _, info = env.step(plan[k:k + env.max_moves_per_action])
            total += r
        assert done and info["success"] and total == best
    # the plans are shortest: no list of fewer moves delivers (breadth-first over P)
    table = solver.table
    for start in starts[:10]:
        frontier, seen, depth = {start.index()}, {start.index()}, 0
        while not any(table["done"][s].any() for s in frontier):
            frontier = {int(table["next"][s, a]) for s in frontier for a in range(6)} - seen
            seen |= frontier
            depth += 1
        assert depth + 1 == solver.distance(start)


def test_action_level_values_satisfy_bellman_over_move_lists():
    """V*(s) under a per-action discount: no move list does better than V*, and the best
    split of a shortest delivery into lists reaches it."""
    env, gamma = make_env("taxi"), 0.9
    solver = env.solver()
    vstar = solver.values(gamma)
    assert len(vstar) == 400 and set(start_states()) <= set(vstar)
    rng = random.Random(0)
    for s in rng.sample(sorted(vstar, key=lambda x: x.index()), 30):
        for _ in range(30):
            moves = [rng.choice(TAXI_MOVES) for _ in range(rng.randint(0, env.max_moves_per_action))]
            r, nxt, done = execute_from(env, s, moves)
            assert r + (0.0 if done else gamma * vstar[nxt]) <= vstar[s] + 1e-9
        plan, best = solver.plan(s), float("-inf")
        for k in range(1, min(env.max_moves_per_action, len(plan)) + 1):
            r, nxt, done = execute_from(env, s, plan[:k])
            best = max(best, r + (0.0 if done else gamma * vstar[nxt]))
        assert best == pytest.approx(vstar[s]) and solver.value(s, gamma) == pytest.approx(vstar[s])
    assert solver.value(start_states()[0]) == solver.values()[start_states()[0]]  # gamma 0.99 by default
    with pytest.raises(ValueError, match="gamma"):
        solver.values(1.0)


def test_reachable_states_reach_the_passenger_in_the_taxi():
    env = make_env("taxi", max_moves_per_action=1)
    states = reachable_states(env)
    assert states[:300] == start_states() and len(states) == 400
    assert all(not s.delivered for s in states) and sum(s.passenger == "taxi" for s in states) == 100


def test_the_critic_and_the_loop_act_from_the_riding_passengers_states_too():
    """No episode starts with the passenger in the taxi, but every delivery passes there:
    a critic fitted on the start states alone backs V up from riding states it never
    fitted (its Spearman with V* stayed near 0), and an actor trained on start states only
    never learns to drive a passenger home. Every non-terminal state an action reaches
    from a decision state is a decision state; the grid's and Blackjack's are their starts."""
    from lactchain.train.critic_td import random_transitions

    env = make_env("taxi")
    states = decision_states(env)
    assert states[:300] == start_states() and len(states) == len(set(states)) == 400
    assert {s.passenger for s in states[300:]} == {"taxi"}
    rng = random.Random(0)
    for s in states:
        moves = [rng.choice(TAXI_MOVES) for _ in range(8)]
        _, nxt, done = execute_from(env, s, moves)
        assert done or nxt in set(states)
    drawn = random_transitions(env, 2, seed=0)
    assert len(drawn) == 800 and sum(t.state.passenger == "taxi" for t in drawn) == 200
    for name in ("grid", "blackjack"):
        other = make_env(name)
        assert decision_states(other) == list(other.start_states())


def test_the_loop_collects_elites_for_the_riding_passenger_and_searches_with_its_critic(tmp_path):
    from loop_helpers import run_tiny_loop
    from lactchain.loop.config import PipelineConfig

    cfg = PipelineConfig(actor="tiny", critic="tiny", env="taxi", iterations=1, samples=2, explore=2,
                         search_beam=2, td_rounds=1, td_lists_per_state=2, eval_states=4, actor_epochs=1)
    _, params, _, reg = run_tiny_loop(tmp_path, cfg, "tiny rft on taxi")
    pairs_run = next(r["id"] for r in reg.list_runs() if r["kind"] == "pairs")
    metrics = reg.latest_metrics(pairs_run)
    riding = [p for p in reg.pairs(run_ids=[pairs_run]) if p["state"]["passenger"] == "taxi"]
    reg.close()
    assert metrics["elites"] == 400 and params["search_beam"] == 2
    assert riding and "passenger is in the taxi" in riding[0]["prompt"]
    assert 0 < metrics["searched"] <= 800  # at most 2 new lists a state
    # the prefixes the search tried count as env moves: from each of the 400 states, the 6
    # one-move lists, then 2 x 6 lists of each length 2..8 (never fewer than 2 left open)
    assert metrics["env_moves"] >= 400 * (6 + 12 * sum(range(2, 9)))


class PromptReadingTaxiOracle:
    """Plans from the state it READS in the prompt (the env's `plan_from_prompt`)."""

    moves = TAXI_MOVES

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, prompts, **_kw):
        self.prompts.extend(prompts)
        out = []
        for p in prompts:
            moves = TaxiTextEnv.plan_from_prompt(p)[:8]
            out.append(Sample(format_moves(moves), moves, STRICT, 0.0, 0))
        return out


def test_rollouts_and_evaluation_against_the_optimum(tmp_path):
    reg = Registry(tmp_path / "r.db")
    run = reg.create_run("play")
    actor = PromptReadingTaxiOracle()
    summary = run_rollouts(actor, RolloutConfig(episodes=6, n_envs=3, seed=1, env="taxi"), registry=reg, run_id=run)
    assert all(e.success for e in summary.episodes) and summary.as_dict()["mean_optimal_ratio"] == 1.0
    assert "Taxi: The taxi is at row" in actor.prompts[0] and "1. south\n2. north" in actor.prompts[0]
    assert actor.prompts[0].count("You drive a taxi") == 1  # the default strategy
    steps = reg.steps(run_id=run)
    assert {"taxi_row", "taxi_col", "passenger", "destination"} == set(steps[0]["state"]) and all(s["caption"] for s in steps)
    assert sum(s["done"] for s in steps) == 6 and all("delivered" in s["caption"] for s in steps if s["done"])
    result = evaluate_actor(PromptReadingTaxiOracle(), env="taxi", states=12, n_envs=6)
    assert result["states"] == 12 and result["success_rate"] == 1.0 and result["mean_optimal_ratio"] == 1.0
    assert result["parse_failure_rate"] == 0.0


def test_seam_members():
    env = make_env("taxi")
    env.reset(options={"state": TaxiState(3, 1, "yellow", "blue")})
    f = env.state_features(env.state)
    assert f.dtype == np.float32 and f.shape == (14,) and f[-3:].tolist() == [0.25, -0.25, 0.0]
    assert env.critic_text(env.state) == "taxi row 3 col 1; passenger yellow; destination blue"
    assert env.render_text().splitlines()[4] == "| |T: | : |"
    assert env.headline(env.state) == env.describe()
    assert env.state.short() == "(3,1) Y>B"
    prompt = PromptSpec.for_env(env).render(env.describe())
    assert TaxiTextEnv.plan_from_prompt(prompt) == env.solver().plan(env.state)
    assert "Walls block moving east or west between columns 0 and 1 in rows 3 and 4, between columns 1 and 2 " \
           "in rows 0 and 1 and between columns 2 and 3 in rows 3 and 4." in env.default_strategy


def test_play_and_evaluate_take_env_taxi_with_the_tiny_actor(tmp_path, lc):
    db = tmp_path / "registry.db"
    code, stdout, err = lc("play", "--actor", "tiny", "--env", "taxi", "--episodes", "2", "--envs", "2",
                           "--max-actions", "3", "--db", db, "--json")
    assert code == 0, err
    out = json.loads(stdout)
    reg = Registry(db)
    assert reg.params(out["run_id"])["env"] == "taxi"
    steps = reg.steps(run_id=out["run_id"])
    assert steps and all(set(s["moves"]) <= set(TAXI_MOVES) for s in steps) and all(s["caption"] for s in steps)
    assert all(s["parse_mode"] == "strict" for s in steps)  # the tiny vocabulary has taxi's moves
    code, stdout, err = lc("evaluate", "--actor", "tiny", "--env", "taxi", "--states", "4", "--max-actions", "2",
                           "--db", db, "--json")
    assert code == 0, err
    assert json.loads(stdout)["states"] == 4
