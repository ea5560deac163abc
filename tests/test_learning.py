"""The pieces that make the loop learn: labelers (critic / rollout / oracle) and their
ranking accuracy, the TD critic, best-of-K fine-tuning with its shared-prefix loss,
the elite memory, the collapse alarm and the configs' validation. Tiny models only."""

from __future__ import annotations

import math

import pytest
import torch

from lactchain.envs import GridWorldEnv, Planner, State, all_states
from lactchain.loop.evaluate import answer_diversity, evaluate_actor
from lactchain.loop.labelers import (
    Candidate,
    Group,
    OracleLabeler,
    RolloutLabeler,
    execute_from,
    make_labeler,
    ranking_accuracy,
)
from lactchain.moves import MOVE_FORWARD as F
from lactchain.moves import TURN_LEFT as L
from lactchain.loop.config import PipelineConfig
from lactchain.loop.bookkeeping import EliteBuffer
from lactchain.prompts import PromptSpec
from lactchain.train.actor_config import TrainActorConfig
from lactchain.train.critic_td import TDConfig, bellman_targets, fit_critic_td, random_transitions
from lactchain.train.rft import encode_rows, nll_loss, train_rft

GAMMA = 0.9


pytestmark = pytest.mark.usefixtures("one_thread")


def group_of(env: GridWorldEnv, state: State, move_lists: list[list[str]]) -> Group:
    g = Group(state, PromptSpec().render(env.describe(state)))
    for moves in move_lists:
        reward, nxt, done = execute_from(env, state, moves)
        g.candidates.append(Candidate(list(moves), "", "strict", reward, nxt, done))
    return g


# ---- labelers -----------------------------------------------------------------------------

def test_oracle_labeler_ranks_the_planners_optimal_list_first_on_every_state():
    env = GridWorldEnv()
    planner = Planner(env)
    vstar = planner.values(GAMMA)
    oracle = OracleLabeler(env, GAMMA)
    groups = []
    for s in all_states(4):
        plan = [] if planner.is_goal(s) else planner.plan(s)
        if not plan or len(plan) > env.max_moves_per_action:
            # Goal cells need nothing; a 9-move state needs two actions, and under a per-action
            # discount its best FIRST action is a short one (the rest is discounted).
            continue
        groups.append(group_of(env, s, [plan, [L], [F, F], [L, L, F]]))
    oracle.score(groups)
    assert len(groups) >= 50
    for g in groups:
        best = max(g.candidates, key=lambda c: c.advantage)
        assert best.advantage == pytest.approx(max(c.advantage for c in g.candidates))
        assert g.candidates[0].advantage >= best.advantage - 1e-9, g.state  # the plan is never beaten
        assert g.baseline == pytest.approx(vstar[g.state])
        for c in g.candidates:  # A = r + gamma V*(s') (1 - done) - V*(s), and never > 0 under V*
            expected = c.reward + (0 if c.done else GAMMA * vstar[c.next_state]) - vstar[g.state]
            assert c.advantage == pytest.approx(expected)
            assert c.advantage <= 1e-9


def test_ranking_accuracy_on_a_hand_built_batch():
    env = GridWorldEnv()
    oracle = OracleLabeler(env, GAMMA)
    s = State(0, 0, "east")  # three forward, turn left, three forward is optimal
    good = [F, F, F, L, F, F, F]
    pairs = [
        {"state": s.as_dict(), "chosen": good, "rejected": [L]},  # right
        {"state": s.as_dict(), "chosen": [F], "rejected": [L, L]},  # right: progress beats spinning
        {"state": s.as_dict(), "chosen": [L], "rejected": good},  # wrong
        {"state": s.as_dict(), "chosen": [L, L, L, L], "rejected": [L, L, L, L, L, L, L, L]},  # both end facing east
    ]
    out = ranking_accuracy(pairs, oracle)
    # The last pair: same state after both, but 4 vs 8 moves -> not a tie, chosen is better.
    assert out == {"ranking_accuracy": pytest.approx(3 / 4), "ranking_pairs": 4, "ranking_ties": 0}
    tie = {"state": s.as_dict(), "chosen": good, "rejected": good + [L]}  # the goal ends the list: same outcome
    out = ranking_accuracy(pairs + [tie], oracle)
    assert out["ranking_ties"] == 1 and out["ranking_accuracy"] == pytest.approx(3 / 4)


def test_rollout_labeler_scores_by_the_returns_greedy_play_really_gets(tiny_actor):
    env = GridWorldEnv(moves=tiny_actor.moves)
    labeler = RolloutLabeler(tiny_actor, env, GAMMA, horizon=3)
    states = [State(0, 0, "east"), State(2, 1, "north"), State(1, 3, "west")]
    groups = [group_of(env, s, [[F], [L, F], [F, F, F, L, F, F, F]]) for s in states]
    labeler.score(groups)

    def greedy_return(state: State) -> float:
        """Play the actor greedily, one generate call per action, straight in the env."""
        env.reset(options={"state": state.as_dict()})
        g, discount = 0.0, 1.0
        for _ in range(3):
            if (env.state.x, env.state.y) == env.goal:
                break
            sample = tiny_actor.generate([PromptSpec(moves=tiny_actor.moves).render(env.describe())], temperature=0.0)[0]
            _, reward, terminated, _, _ = env.step(sample.moves)
            g += discount * reward
            discount *= GAMMA
            if terminated:
                break
        return g

    for g in groups:
        assert g.baseline == pytest.approx(greedy_return(g.state))
        for c in g.candidates:
            cont = 0.0 if c.done else GAMMA * greedy_return(c.next_state)
            assert c.advantage == pytest.approx(c.reward + cont - g.baseline)
    # The candidate that reaches the goal in one list scores its real reward, no continuation.
    assert groups[0].candidates[2].done and groups[0].candidates[2].reward == pytest.approx(93.0)


def test_make_labeler_names_what_is_missing():
    env = GridWorldEnv()
    with pytest.raises(ValueError, match="needs a trained critic"):
        make_labeler("critic", env=env, gamma=GAMMA)
    with pytest.raises(ValueError, match="needs the actor"):
        make_labeler("rollout", env=env, gamma=GAMMA)
    with pytest.raises(ValueError, match="needs a judge or the actor"):
        make_labeler("judge", env=env, gamma=GAMMA)
    with pytest.raises(ValueError, match="labeler must be one of critic, rollout, oracle, judge"):
        make_labeler("psychic", env=env, gamma=GAMMA)


# ---- TD critic ------------------------------------------------------------------------------

def test_bellman_targets_take_the_best_sampled_action():
    env = GridWorldEnv()
    s = State(3, 2, "north")
    v = {st: 0.0 for st in all_states(4)}
    transitions = random_transitions(env, 64, seed=1)
    targets = bellman_targets([t for t in transitions if t.state == s], v, GAMMA)
    assert targets[s] == pytest.approx(99.0)  # one forward reaches the goal: -1 + 100


def test_td_critic_learns_the_optimal_ranking_of_states():
    from lactchain.models.critic import Critic
    from lactchain.train.critic import spearman_vs_optimal

    critic = Critic.load("tiny", device="cpu")
    before = spearman_vs_optimal(critic, GAMMA)
    transitions = random_transitions(critic.env, 96, seed=0)
    _, metrics = fit_critic_td(critic, transitions, TDConfig(rounds=6, backbone_steps=2, head_steps=150))
    assert metrics["spearman_vstar"] > 0.9 > before


def test_spearman_is_pearson_of_average_ranks_and_zero_where_undefined():
    """What the critic's fit to V* and Motif's reward model report, without scipy."""
    import numpy as np

    from lactchain.train.ranks import spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 400]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # ties share their mean rank: [1, 2.5, 2.5, 4] against [1, 2, 3, 4]
    assert spearman([5, 7, 7, 9], [0.1, 0.2, 0.3, 0.4]) == pytest.approx(np.corrcoef([1, 2.5, 2.5, 4], [1, 2, 3, 4])[0, 1])
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0 and spearman([2.0], [1.0]) == 0.0
    with pytest.raises(ValueError, match="one length"):
        spearman([1, 2], [1, 2, 3])


def test_td_config_rejects_bad_values():
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        TDConfig(rounds=0)
    with pytest.raises(ValueError, match="gamma must be in"):
        TDConfig(gamma=1.0)
    with pytest.raises(ValueError, match="both 0"):
        TDConfig(head_steps=0, backbone_steps=0)


# ---- best-of-K fine-tuning -------------------------------------------------------------------

def rows_from_planner(env: GridWorldEnv, states: list[State]) -> list[dict]:
    planner = Planner(env)
    prompt = PromptSpec(moves=env.moves)
    return [{"prompt": prompt.render(env.describe(s)), "chosen": planner.plan(s)[: env.max_moves_per_action]}
            for s in states]


def test_shared_prefix_loss_equals_the_plain_full_sequence_loss():
    from lactchain.models.actor import Actor

    actor = Actor.load("tiny", device="cpu")
    env = GridWorldEnv()
    encoded = encode_rows(actor, rows_from_planner(env, [State(0, 0, "east"), State(2, 1, "west"), State(1, 1, "south")]))
    shared = nll_loss(actor.model, encoded, actor.pad_token_id)
    # The same NLL, each row on its own through the plain forward pass.
    total, count = 0.0, 0
    for r in encoded:
        ids = torch.tensor([r.prompt + r.completion])
        logits = actor.model(input_ids=ids).logits[0, :-1]
        lp = torch.log_softmax(logits.float(), -1)[torch.arange(ids.shape[1] - 1), ids[0, 1:]]
        total += -lp[len(r.prompt) - 1 :].sum().item()
        count += len(r.completion)
    assert shared.item() == pytest.approx(total / count, rel=1e-4)
    # rows run whole (a GPU's default, SHARED_PREFIX_PAYS): the same loss
    assert nll_loss(actor.model, encoded, actor.pad_token_id, shared_prefix=False).item() == pytest.approx(
        total / count, rel=1e-4)


def test_rft_teaches_the_tiny_actor_its_targets(tmp_path):
    from lactchain.models.actor import Actor

    actor = Actor.load("tiny", device="cpu")
    env = GridWorldEnv(moves=actor.moves)
    states = [State(0, 0, "east"), State(3, 0, "north"), State(0, 3, "east"), State(2, 2, "north")]
    rows = rows_from_planner(env, states)
    prompts = [r["prompt"] for r in rows]

    def target_logprob() -> float:
        return sum(actor.completion_logprobs(prompts, [e.completion for e in encode_rows(actor, rows)])) / len(rows)

    before = target_logprob()
    out = train_rft(actor, rows, TrainActorConfig(loss="rft", epochs=40, lr=3e-3, batch_size=4), output_dir=tmp_path)
    after = target_logprob()
    assert after > before + 20  # nats per target list: from near-random to likely
    assert out["final_loss"] < out["train_loss"] and (tmp_path / "adapter" / "adapter_config.json").is_file()
    assert out["steps"] == 40 and actor.adapter == tmp_path / "adapter"
    assert out["shared_prefix"] is True  # a CPU's default


def test_rft_refuses_empty_or_bad_rows(tmp_path, tiny_actor):
    with pytest.raises(ValueError, match="no rft rows"):
        train_rft(tiny_actor, [], TrainActorConfig(loss="rft"), output_dir=tmp_path)
    with pytest.raises(ValueError, match="non-empty 'chosen'"):
        train_rft(tiny_actor, [{"prompt": "p", "chosen": []}], TrainActorConfig(loss="rft"), output_dir=tmp_path)
    with pytest.raises(ValueError, match="trains loss 'rft'"):
        train_rft(tiny_actor, [{"prompt": "p", "chosen": ["turn left"]}], TrainActorConfig(), output_dir=tmp_path)


def test_rft_through_train_actor_reads_max_steps_and_lora_settings(tmp_path):
    """train_actor(loss="rft") hands the whole config to train_rft: max_steps caps the
    steps (it was dropped before) and the LoRA settings reach the adapter."""
    import json

    from lactchain.models.actor import Actor
    from lactchain.train.actor import train_actor

    actor = Actor.load("tiny", device="cpu")
    env = GridWorldEnv(moves=actor.moves)
    rows = rows_from_planner(env, [State(0, 0, "east"), State(3, 0, "north")])
    config = TrainActorConfig(loss="rft", epochs=50.0, max_steps=2, batch_size=1, lr=1e-3, lora_r=4,
                              target_modules=["q_proj", "v_proj"])
    out = train_actor(actor, rows, config, output_dir=tmp_path)
    assert out["steps"] == 2 and out["loss_type"] == "rft"
    saved = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert saved["r"] == 4 and set(saved["target_modules"]) == {"q_proj", "v_proj"}
    with pytest.raises(ValueError, match="do not checkpoint"):
        train_actor(actor, rows, config, output_dir=tmp_path, resume_from_checkpoint=tmp_path)


# ---- elites, collapse alarm, config -----------------------------------------------------------

def test_elites_only_improve_and_re_enter_every_group():
    env = GridWorldEnv()
    oracle = OracleLabeler(env, GAMMA)
    s = State(0, 0, "east")
    elites = EliteBuffer()
    first = [group_of(env, s, [[L], [F]])]
    oracle.score(first)
    elites.update(first)
    assert elites.rows()[0]["chosen"] == [F]
    worse = [group_of(env, s, [[L], [L, L]])]
    elites.add_to(worse, env)  # the elite competes again
    oracle.score(worse)
    elites.update(worse)
    assert elites.rows()[0]["chosen"] == [F]
    better = [group_of(env, s, [[F, F, F, L, F, F, F]])]
    elites.add_to(better, env)
    oracle.score(better)
    elites.update(better)
    assert elites.rows()[0]["chosen"] == [F, F, F, L, F, F, F]


def test_exploration_adds_distinct_random_lists_that_find_the_optimum():
    from lactchain.loop.preferences import add_exploration

    env = GridWorldEnv()
    oracle = OracleLabeler(env, GAMMA)
    states = [s for s in all_states(4) if (s.x, s.y) != env.goal]
    groups = [group_of(env, s, [[L]]) for s in states]
    added = add_exploration(groups, env, per_state=64, seed=3)
    assert added == sum(len(g.candidates) - 1 for g in groups) and added > 50 * len(states)
    for g in groups:
        assert len({tuple(c.moves) for c in g.candidates}) == len(g.candidates)  # no repeats
        for c in g.candidates[1:]:  # executed from the group's own state
            assert c.source == "explore" and (c.reward, c.next_state, c.done) == execute_from(env, g.state, c.moves)
    oracle.score(groups)
    best_is_optimal = [
        math.isclose(max(c.advantage for c in g.candidates), 0.0, abs_tol=1e-6) for g in groups]  # A* = 0 at V*
    assert sum(best_is_optimal) / len(groups) > 0.5  # random search alone often finds an optimal action


class ConstantActor:
    """A state-independent policy: the collapse the alarm must catch."""

    moves = (F, L)

    def generate(self, prompts, **kwargs):
        from lactchain.models.actor import Sample

        return [Sample("['move forward']", [F], "strict", 0.0, 3) for _ in prompts]


def test_collapse_alarm_fires_on_a_state_independent_actor(tiny_actor):
    out = evaluate_actor(ConstantActor(), states="all", max_actions=2)
    assert out["top_answer_share"] == 1.0 and out["distinct_answers"] == 1 and out["top_answer"] == [F]
    # A varied answer set stays under the alarm's 50 %.
    from types import SimpleNamespace

    varied = [SimpleNamespace(first_moves=[F] * (i % 4 + 1)) for i in range(60)]
    d = answer_diversity(varied)
    assert d["distinct_answers"] == 4 and d["top_answer_share"] == pytest.approx(0.25)


@pytest.mark.parametrize("kwargs, message", [
    ({"labeler": "psychic"}, "labeler must be one of"),
    ({"loss": "ppo"}, "loss must be one of"),
    ({"samples": 0}, "--samples 0: must be at least 1"),
    ({"n_envs": 5000}, "--n-envs 5000: must be at most 4096"),
    ({"loss": "simpo", "samples": 1}, "samples must be >= 2"),
    ({"temperature": 0.2}, "too low"),
    ({"gamma": 1.5}, "gamma must be in"),
    ({"cpo_alpha": 1.0}, "only applies to --loss simpo"),
    ({"kl_beta": 0.04}, "kl-beta 0.04: only applies to --loss grpo"),
    ({"loss": "grpo", "kl_beta": -1.0}, "kl"),
    ({"states": "some"}, "states must be 'all' or a number"),
    ({"eval_states": 0}, "eval-states must be 'all' or a number from 1 to"),
    ({"actor_lr": 0.0}, "must be > 0"),
])
def test_pipeline_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PipelineConfig.from_params(kwargs)  # flat, as the CLI and a run's params give them


def test_pipeline_config_params_are_its_fields():
    cfg = PipelineConfig(states="12")
    assert cfg.states == 12
    params = cfg.params()
    assert set(params) == set(PipelineConfig.help()) - {"deadline"}
    assert all(PipelineConfig.help()[k] for k in params)
    assert not math.isnan(params["actor_lr"])


def test_pipeline_losses_match_the_trainers():
    from lactchain.loop.config import LOSSES as PIPELINE_LOSSES
    from lactchain.train.actor import LOSSES as TRAINER_LOSSES

    assert set(PIPELINE_LOSSES) == set(TRAINER_LOSSES)


def test_elite_ties_go_to_the_shortest_list_then_the_incumbent():
    env = GridWorldEnv()
    oracle = OracleLabeler(env, GAMMA)
    s = State(3, 0, "north")  # three steps ahead reach the goal
    elites = EliteBuffer()
    first = [group_of(env, s, [[F, F, F, L, L], [F, F, F, L, L, L], [L]])]  # moves after the goal never run
    oracle.score(first)
    elites.update(first)
    assert elites.rows()[0]["chosen"] == [F, F, F, L, L]  # the shortest of the tied lists
    same = [group_of(env, s, [[F, F, F, L, F], [F, F, F, F, F, F]])]  # as good, no shorter
    elites.add_to(same, env)
    oracle.score(same)
    assert elites.update(same) == 0  # the incumbent stays: no churn
    shorter = [group_of(env, s, [[F, F, F]])]
    elites.add_to(shorter, env)
    oracle.score(shorter)
    assert elites.update(shorter) == 1 and elites.rows()[0]["chosen"] == [F, F, F]
