"""The collect's beam search over the labeler's values (lactchain.loop.search): lists grown
a move at a time toward the states a value function rates, scored exactly as the labeler
scores a whole list."""

from __future__ import annotations

import pytest

from lactchain.config import ConfigError
from lactchain.envs.catalog import make_env
from lactchain.envs.replay import decision_states, execute_from
from lactchain.loop.labelers import Group, OracleLabeler, execute_candidate
from lactchain.loop.config import PipelineConfig
from lactchain.loop.search import add_search, beam_lists

GAMMA = 0.9


def oracle_advantages(oracle: OracleLabeler, state, lists) -> list[float]:
    group = Group(state, "")
    group.candidates = [execute_candidate(oracle.env, group, moves) for moves in lists]
    oracle.score([group])
    return [c.advantage for c in group.candidates]


@pytest.mark.parametrize("env_name", ["grid", "taxi"])
def test_with_exact_values_the_search_finds_an_optimal_action_from_every_state(env_name):
    """The exact V* (a diagnostic here) makes R + gamma V*(s') the optimal action's value,
    so a search that keeps the right prefixes must find, from every state, a list the
    oracle rates optimal -- on Taxi that is a drive to the passenger, or a drive with them,
    of up to 8 moves, which 256 random lists found for 14 % of the states."""
    env = make_env(env_name)
    oracle = OracleLabeler(env, GAMMA)
    cache: dict = {}
    for state in decision_states(env):
        lists, moves_run = beam_lists(env, state, oracle.values, GAMMA, beam=8, cache=cache)
        assert 1 <= len(lists) <= 8 and moves_run > 0
        advantages = oracle_advantages(oracle, state, lists)
        assert advantages[0] > -1e-6, (state, lists[0])
        assert advantages == sorted(advantages, reverse=True)  # best first, as it scored them


def test_scores_are_the_labelers_own_and_lists_join_groups_once():
    env = make_env("taxi")
    oracle = OracleLabeler(env, GAMMA)
    state = env.start_states()[17]
    lists, _ = beam_lists(env, state, oracle.values, GAMMA, beam=4, cache={})
    whole = []  # each kept list scored as the labeler scores it: executed whole, R + gamma V(s')
    for moves in lists:
        reward, nxt, done = execute_from(env, state, moves)
        assert len(moves) <= env.max_moves_per_action
        whole.append(reward + (0.0 if done else GAMMA * oracle.vstar[nxt]))
    assert whole == sorted(whole, reverse=True) and len(set(lists)) == 4
    group = Group(state, "")
    group.candidates.append(execute_candidate(env, group, lists[0], source="sample"))
    added, moves_run = add_search([group], env, oracle.values, GAMMA, beam=4)
    assert added == 3 and moves_run > 0  # the actor already said the best one
    assert [c.source for c in group.candidates] == ["sample", "search", "search", "search"]


def test_search_needs_a_value_function_and_a_deterministic_env():
    with pytest.raises(ConfigError, match="search-beam searches over a value function"):
        PipelineConfig(actor="tiny", critic="tiny", search_beam=4, labeler="rollout")
    with pytest.raises(ConfigError, match="search-beam needs a deterministic env"):
        PipelineConfig(actor="tiny", critic="tiny", env="blackjack", search_beam=4)
    with pytest.raises(ConfigError, match="--search-beam -1: must be at least 0"):
        PipelineConfig(actor="tiny", critic="tiny", search_beam=-1)
    with pytest.raises(ValueError, match="deterministic env"):
        add_search([], make_env("blackjack"), lambda states: [0.0] * len(states), GAMMA, beam=2)
