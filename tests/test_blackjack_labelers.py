"""Labelers and the critic on a stochastic env: candidates compared on the same deals,
the oracle's exact expected return of a move list, and fitted value iteration that is
not fooled by lucky cards."""

from __future__ import annotations

import random

import pytest
import torch

from lactchain.envs.blackjack import BlackjackSolver, Hand
from lactchain.envs.catalog import make_env
from lactchain.loop.labelers import (
    Group,
    OracleLabeler,
    ValueLabeler,
    deal_seeds,
    execute_candidate,
    execute_from,
    ranking_accuracy,
)
from lactchain.moves import HIT, STICK
from lactchain.train.critic_td import Transition, bellman_targets, double_max

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def env():
    return make_env("blackjack")


@pytest.mark.parametrize("moves", [[HIT, HIT, STICK], [HIT]])
def test_plan_return_is_the_expected_return_of_playing_the_list(env, moves):
    """Exact over the infinite deck, checked against 8k seeded deals (then optimal play
    if the list leaves the hand open)."""
    solver, hand, n = BlackjackSolver(), Hand(12, 10, False), 8_000
    total = squares = 0.0
    for i in range(n):
        reward, _, done = execute_from(env, hand, moves, seed=i)
        ret = reward
        while not done:  # an open hand goes on with the optimal move
            env_state = env.state
            _, r, done, _, _ = env.step([solver.action(env_state)])
            ret += r
        total, squares = total + ret, squares + ret * ret
    mean = total / n
    stderr = ((squares / n - mean * mean) / n) ** 0.5
    assert abs(mean - solver.plan_return(hand, moves)) < 4 * stderr


def test_the_optimal_move_alone_is_worth_v_star_from_every_deal(env):
    solver = env.solver()
    for hand in env.start_states():
        assert solver.plan_return(hand, [solver.action(hand)], start=True) == pytest.approx(solver.start_value(hand))


def test_every_candidate_of_a_group_meets_the_same_cards(env):
    group = Group(Hand(12, 10, False), "", seeds=deal_seeds(env, 7, 6))
    for moves in ([HIT, STICK], [HIT, HIT, STICK], [STICK]):
        group.candidates.append(execute_candidate(env, group, moves))
    assert all(len(c.outcomes) == 6 for c in group.candidates)
    hit_once, hit_twice, _ = group.candidates
    # Same deal, same first card: the two hitting lists' first sums agree deal by deal
    # (where the first hit did not already bust both).
    for (_, s1, d1), (_, s2, d2) in zip(hit_once.results(), hit_twice.results()):
        if not (d1 and d2 and s1.player_sum > 21 and s2.player_sum > 21):
            assert s1.dealer_card == s2.dealer_card == 10
    grid = make_env("grid")
    assert deal_seeds(grid, 7, 6) == (None,)  # a deterministic env plays each list once


def test_the_oracle_ranks_blackjack_lists_by_their_exact_value_not_by_luck(env):
    solver = env.solver()
    hand = Hand(16, 10, False)  # hit (barely) beats stick; hitting twice is much worse
    group = Group(hand, "", seeds=deal_seeds(env, 1, 1))
    for moves in ([STICK], [HIT], [HIT, HIT, STICK]):
        group.candidates.append(execute_candidate(env, group, moves))
    OracleLabeler(env, 0.9).score([group])
    adv = {tuple(c.moves): c.advantage for c in group.candidates}
    assert adv[(HIT,)] == pytest.approx(0.0, abs=1e-12)  # the optimal move: A = 0
    assert adv[(HIT, HIT, STICK)] < adv[(STICK,)] < 0
    assert group.baseline == pytest.approx(solver.value(hand))
    pairs = [{"state": hand.as_dict(), "chosen": [HIT], "rejected": [STICK], "meta": {}},
             {"state": hand.as_dict(), "chosen": [HIT, HIT, STICK], "rejected": [STICK], "meta": {}}]
    assert ranking_accuracy(pairs, OracleLabeler(env, 0.9))["ranking_accuracy"] == 0.5


def test_value_labelers_average_the_advantage_over_the_deals(env):
    hand = Hand(20, 6, False)
    group = Group(hand, "", seeds=deal_seeds(env, 3, 200))
    group.candidates.append(execute_candidate(env, group, [STICK]))
    ValueLabeler("zero", lambda states: [0.0] * len(states), 0.9).score([group])
    c = group.candidates[0]
    assert c.advantage == pytest.approx(sum(r for r, _, _ in c.outcomes) / 200)
    assert c.advantage == pytest.approx(env.solver().plan_return(hand, [STICK]), abs=0.15)


def test_double_max_is_not_fooled_by_noise():
    """16 move lists whose returns are all coin flips (true value 0): on average over
    200 draws, the plain max of their means is far above 0, the double estimate is not."""
    rng = random.Random(0)
    naive, double = [], []
    for _ in range(200):
        samples = {(f"list{i}",): [rng.choice((-1.0, 1.0)) for _ in range(16)] for i in range(16)}
        naive.append(max(sum(ys) / len(ys) for ys in samples.values()))
        double.append(double_max(samples))
    assert sum(naive) / 200 > 0.3
    assert abs(sum(double) / 200) < 0.05
    # One list that is really better still wins.
    samples = {(f"list{i}",): [rng.choice((-0.5, 0.5)) for _ in range(16)] for i in range(16)}
    samples[("good",)] = [1.0] * 16
    assert double_max(samples) == pytest.approx(1.0)


def test_blackjack_targets_group_lists_by_the_moves_the_env_reads(env):
    hand = Hand(20, 6, False)
    after_stick = [Transition(hand, (STICK, HIT, HIT), 1.0, hand, True),
                   Transition(hand, (STICK,), -1.0, hand, True)]
    assert env.canonical_moves((STICK, HIT, HIT)) == (STICK,)
    # Both are the same list to the env: one key with mean 0, not a max of +1.
    assert bellman_targets(after_stick, {}, 0.9, env)[hand] == pytest.approx(0.0)
    assert bellman_targets(after_stick, {}, 0.9)[hand] == 1.0  # deterministic rule: the max


def test_the_critic_learns_blackjack_values_by_td_on_seeded_deals(env):
    from lactchain.models.critic import Critic
    from lactchain.train.critic_td import TDConfig, fit_critic_td, random_transitions

    critic = Critic.load("tiny", env="blackjack")
    assert critic.state_texts([Hand(15, 10, True)]) == ["sum 15 soft; dealer 10"]
    transitions = random_transitions(critic.env, 16, seed=0)
    assert len(transitions) == 16 * 270
    _, metrics = fit_critic_td(critic, transitions, TDConfig(rounds=6, lists_per_state=16, seed=0))
    assert metrics["spearman_vstar"] > 0.3  # V ranks the 270 deals like the exact V*


def test_policy_return_is_the_exact_value_of_a_fixed_answer_per_hand(env):
    """The optimal answers are worth V* on every deal; 'always hit then stick' is worth
    what 30k seeded deals of it return (within 4 standard errors); an empty answer
    leaves the hand open until it is void (0)."""
    solver, hands = env.solver(), env.start_states()
    optimal = {h: [solver.action(h)] for h in hands}
    for h in hands[::17]:
        assert solver.policy_return(h, optimal) == pytest.approx(solver.start_value(h))
    hit_stick = {h: [HIT, STICK] for h in hands}
    exact = sum(solver.policy_return(h, hit_stick) for h in hands) / len(hands)
    n = 30_000
    rewards = [execute_from(env, hands[i % len(hands)], [HIT, STICK], seed=i)[0] for i in range(n)]
    mean = sum(rewards) / n
    stderr = ((sum(r * r for r in rewards) / n - mean * mean) / n) ** 0.5
    assert abs(mean - exact) < 4 * stderr
    assert solver.policy_return(Hand(15, 10, False), {Hand(15, 10, False): []}) == 0.0


def test_the_rollout_labeler_plays_seeded_deals_on_blackjack(env):
    """The greedy look-ahead is reproducible on a stochastic env (seeded deals), even
    where a deal leads to a hand the look-ahead never reached (asked for then)."""
    from dataclasses import dataclass

    from lactchain.loop.labelers import RolloutLabeler

    @dataclass
    class Answer:
        text: str
        moves: list[str]
        mode: str = "strict"

    class HitBelowTwenty:  # a fixed policy read from the prompt: hit on sums 10..19, else stick
        moves = (HIT, STICK)

        def generate(self, prompts, **_kw):
            return [Answer("['hit']", [HIT]) if "sum is 1" in p else Answer("['stick']", [STICK]) for p in prompts]

    actor = HitBelowTwenty()
    labeler = RolloutLabeler(actor, env, 0.9, horizon=3)
    states = env.start_states()[:40]
    first = labeler.greedy_returns(states)
    assert first == labeler.greedy_returns(states)  # the same deals again
    assert all(-1.0 <= g <= 1.0 for g in first) and any(g != 0.0 for g in first)
