"""Captioned Blackjack: the gymnasium contract, captions per event, the exact optimum
against basic strategy and against play, seeded replay, and Q-learning reaching the
optimum's win rate."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from lactchain.baselines.tabular import (
    QLearner,
    RandomPolicy,
    SolverPolicy,
    episode_seed,
    play_episode,
    score_policy,
)
from lactchain.envs.blackjack import (
    BLACKJACK_MOVES,
    BlackjackSolver,
    BlackjackTextEnv,
    Hand,
    card_name,
    hand_cards,
    parse_hand,
    start_hands,
)
from lactchain.envs.catalog import TextEnv, env_id, env_name, make_env
from lactchain.moves import HIT, STICK


@pytest.fixture(scope="module")
def solver() -> BlackjackSolver:
    return BlackjackSolver()


def test_blackjack_is_a_checked_gymnasium_env_made_by_id():
    env = gym.make("LactChain/Blackjack-v0", disable_env_checker=True).unwrapped
    check_env(env, skip_render_check=True)
    assert isinstance(env, TextEnv) and isinstance(make_env("blackjack"), BlackjackTextEnv)
    assert env_id("blackjack") == "LactChain/Blackjack-v0" and env_name("LactChain/Blackjack-v0") == "blackjack"
    with pytest.raises(ValueError, match="unknown env 'chess'; known envs: grid"):
        env_id("chess")
    with pytest.raises(ValueError, match="allowed moves: hit, stick"):
        make_env("blackjack", moves=("move forward", "turn left"))


def _sum(cards: list[int]) -> int:
    total = sum(cards)
    return total + 10 if 1 in cards and total + 10 <= 21 else total


def test_every_event_is_captioned_from_the_real_cards():
    """Hit and drew X, bust, stick, the dealer's cards and final total, win/lose/draw and
    naturals, each checked against the cards the game dealt."""
    env = BlackjackTextEnv()
    seen: set[str] = set()
    for seed in range(400):
        _, info = env.reset(seed=seed)
        cards = info["player_cards"]
        if _sum(cards) == 21:
            assert info["caption"].startswith("dealt a natural (") and "an ace" in info["caption"]
            seen.add("natural dealt")
        else:
            assert info["caption"].startswith(f"dealt {card_name(cards[0])} and {card_name(cards[1])}")
            assert f"(sum {_sum(cards)})" in info["caption"]
        moves = [HIT, STICK] if seed % 3 == 0 else ([HIT, HIT, HIT] if seed % 3 == 1 else [STICK])
        _, reward, terminated, _, info = env.step(moves)
        caption, player, dealer = info["caption"], info["player_cards"], info["dealer_cards"]
        hits = re.findall(r"hit and drew (an? \w+) \(sum (\d+)\)", caption)
        assert [name for name, _ in hits] == [card_name(c) for c in player[2:]]  # every card drawn, in order
        assert [int(total) for _, total in hits] == [_sum(player[:k]) for k in range(3, len(player) + 1)]
        seen.update(["hit"] if hits else [])
        if _sum(player) > 21:
            assert f"bust with {_sum(player)}" in caption and reward == -1.0 and info["outcome"] == "lost"
            seen.add("bust")
        if "stuck on" in caption:
            seen.add("stick")
            assert terminated and f"stuck on {_sum(player)}" in caption
            final = _sum(dealer)
            assert (f"bust with {final}" if final > 21 else f"final total {final}") in caption
            seen.add("dealer bust" if final > 21 else "dealer total")
            if len(dealer) > 2:
                assert "and drew" in caption
            if reward == 1.0:
                assert "won" in caption and info["success"]
                seen.add("won with a natural" if "natural" in caption else "won")
            elif reward == -1.0:
                assert f"lost {_sum(player)} to {final}" in caption and not info["success"]
                seen.add("lost")
            else:
                assert f"draw at {_sum(player)}" in caption and final == _sum(player)
                seen.add("draw")
    assert seen >= {"natural dealt", "hit", "bust", "stick", "dealer total", "dealer bust", "won", "lost", "draw",
                    "won with a natural"}, seen


def test_moves_after_the_hand_ends_are_ignored_and_an_open_hand_waits():
    env = BlackjackTextEnv(max_actions=2)
    env.reset(seed=5, options={"state": {"player_sum": 20, "dealer_card": 6, "usable_ace": False}})
    _, _, terminated, _, info = env.step([STICK, HIT, HIT])
    assert terminated and info["moves_executed"] == 1 and "2 moves after the hand ended ignored" in info["caption"]
    env.reset(seed=5, options={"state": {"player_sum": 5, "dealer_card": 6, "usable_ace": False}})
    _, reward, terminated, truncated, info = env.step([HIT])
    assert not terminated and not truncated and reward == 0.0 and env.state.player_sum > 5
    _, reward, terminated, truncated, info = env.step([])
    assert truncated and not terminated and reward == 0.0 and "the hand is void" in info["caption"]


def test_a_hand_replays_exactly_from_its_seed():
    env = BlackjackTextEnv()

    def play(seed: int) -> list[tuple]:
        out = [env.reset(seed=seed)[1]["caption"]]
        while True:
            _, reward, terminated, truncated, info = env.step([HIT] if env.state.player_sum < 15 else [STICK])
            out.append((info["caption"], reward, tuple(info["player_cards"]), tuple(info["dealer_cards"])))
            if terminated or truncated:
                return out

    assert play(11) == play(11)
    assert len({str(play(s)) for s in range(20)}) > 15  # different seeds deal different hands


def test_start_states_are_the_270_deals_and_set_the_hand():
    hands = start_hands()
    assert len(hands) == len(set(hands)) == 270
    env = BlackjackTextEnv()
    for hand in hands[::7]:
        env.reset(seed=1, options={"state": hand.as_dict()})
        assert env.state == hand and _sum(hand_cards(hand)) == hand.player_sum
        assert parse_hand(hand.as_dict()) == hand
    for bad, message in [({"player_sum": 3, "dealer_card": 5, "usable_ace": False}, "player_sum 3 is not a hand sum"),
                         ({"player_sum": 11, "dealer_card": 5, "usable_ace": True}, "12..21 with a usable ace"),
                         ({"player_sum": 15, "dealer_card": 11, "usable_ace": False}, "dealer_card must be 1"),
                         ({"player_sum": 15}, "missing"), ("15", "a hand is")]:
        with pytest.raises(ValueError, match=message):
            parse_hand(bad)


def test_the_exact_optimum_is_basic_strategy(solver):
    """Sutton & Barto's optimal policy for this game (Figure 5.2)."""
    for up in range(1, 11):
        for total in range(17, 22):
            assert solver.action(Hand(total, up, False)) == STICK  # stick on hard 17+
        for total in range(4, 12):
            assert solver.action(Hand(total, up, False)) == HIT  # hit hard 11 or less
        for total in (19, 20, 21):
            assert solver.action(Hand(total, up, True)) == STICK
        for total in (13, 14, 15, 16):
            assert solver.action(Hand(total, up, False)) == (STICK if 2 <= up <= 6 else HIT)
        assert solver.action(Hand(12, up, False)) == (STICK if 4 <= up <= 6 else HIT)
        assert solver.action(Hand(18, up, True)) == (HIT if up in (1, 9, 10) else STICK)
    final = solver.dealer_final(10)
    assert final[20] == pytest.approx(0.3422, abs=1e-4) and final[22] == pytest.approx(0.2121, abs=1e-4)
    assert sum(final.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("hand", [Hand(16, 10, False), Hand(12, 4, False), Hand(18, 9, True), Hand(11, 6, False)])
def test_v_star_matches_the_played_return_of_the_optimal_policy(solver, hand):
    env, policy = BlackjackTextEnv(), SolverPolicy(solver)
    n, total, squares = 6000, 0.0, 0.0
    for i in range(n):
        env.reset(seed=episode_seed(3, i), options={"state": hand.as_dict()})
        ret = 0.0
        while True:
            _, reward, terminated, truncated, _ = env.step([policy.act(env.state)])
            ret += reward
            if terminated or truncated:
                break
        total, squares = total + ret, squares + ret * ret
    mean = total / n
    stderr = ((squares / n - mean * mean) / n) ** 0.5
    assert abs(mean - solver.value(hand)) < 4 * stderr, (mean, solver.value(hand), stderr)


def test_a_random_policy_is_far_below_the_optimum(solver):
    env = BlackjackTextEnv()
    random_score = score_policy(env, RandomPolicy(BLACKJACK_MOVES, seed=0), 3000, seed=9)
    optimal = score_policy(env, SolverPolicy(solver), 3000, seed=9)
    assert optimal["win_rate"] > random_score["win_rate"] + 0.08
    assert solver.expected_return() == pytest.approx(-0.0431, abs=5e-4)


@pytest.mark.e2e
def test_q_learning_on_the_true_reward_reaches_the_optimal_win_rate(solver):
    """100k training hands, then 100k seeded evaluation hands: within 1 point of the exact
    optimum's win rate (the DP's, over the real deal distribution)."""
    env = BlackjackTextEnv()
    learner = QLearner(BLACKJACK_MOVES, epsilon=0.1, seed=0).train(env, 100_000, seed=1)
    score = score_policy(env, learner, 100_000, seed=7)
    print(f"q-learning win rate {score['win_rate']:.4f} vs optimum {solver.win_rate():.4f}")
    assert abs(score["win_rate"] - solver.win_rate()) < 0.01
    _, info, steps = play_episode(env, learner, episode_seed(7, 0))
    assert steps and steps[-1]["done"] and info["caption"] == steps[-1]["caption"]

