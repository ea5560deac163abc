"""GRPO scores its samples under the grammar-masked policy that drew them
(lactchain.train.constrained_policy): real tiny actor, real token automaton, real
TRL trainer."""

from __future__ import annotations

import math

import pytest
import torch

from lactchain.models.move_automaton import states_along
from lactchain.train.actor_config import TrainActorConfig
from lactchain.train.constrained_policy import constrained_logprobs
from lactchain.train.grpo import train_grpo

from test_grpo import _oracle_task

pytestmark = pytest.mark.usefixtures("one_thread")


def _samples_and_logits(actor, n: int = 4):
    task = _oracle_task(actor, n_states=n, generations=1)
    prompts = [r["prompt"] for r in task.rows]
    samples = actor.generate(prompts, constrained=True, temperature=1.0, num_samples=1, seed=3)
    width = max(len(s.token_ids) for s in samples)
    pad = actor.tokenizer.pad_token_id or 0
    targets = torch.tensor([list(s.token_ids) + [pad] * (width - len(s.token_ids)) for s in samples])
    logits = []
    for p, s in zip(prompts, samples):
        ids = actor.prompt_ids(p) + list(s.token_ids)
        with torch.no_grad():
            out = actor.model(input_ids=torch.tensor([ids])).logits[0, -len(s.token_ids) - 1:-1].float()
        logits.append(torch.nn.functional.pad(out, (0, 0, 0, width - len(s.token_ids))))
    return samples, targets, torch.stack(logits)


def test_a_samples_constrained_logprob_is_its_logprob_renormalised_over_the_tokens_the_grammar_allowed(tiny_actor):
    """Per token: log p(token) - log sum of p over the tokens the grammar allowed at that
    position (the states the sampler passed through); the sum is a sample's log-prob
    under the masked policy, at least its raw log-prob, and padding scores 0."""
    samples, targets, logits = _samples_and_logits(tiny_actor)
    automaton = tiny_actor.token_automaton()
    lp, ent = constrained_logprobs(logits, targets, automaton, temperature=1.0, entropy=True)
    states = states_along(automaton, targets)
    for i, s in enumerate(samples):
        n = len(s.token_ids)
        raw = torch.log_softmax(logits[i, :n], -1)
        for j in range(n):
            allowed = automaton.allowed[states[i, j]][: raw.shape[-1]]
            expected = raw[j, targets[i, j]] - torch.logsumexp(raw[j][allowed], 0)
            assert lp[i, j].item() == pytest.approx(expected.item(), abs=1e-4)
        assert lp[i, :n].sum().item() >= raw.gather(1, targets[i, :n, None]).sum().item() - 1e-4
        assert torch.all(lp[i, n:] == 0)
        assert torch.all(ent[i, :n] >= -1e-5)
        # a position with a single allowed token has no choice: log-prob 0, entropy 0
        single = [j for j in range(n) if int(automaton.allowed[states[i, j]].sum()) == 1]
        for j in single:
            assert lp[i, j].item() == pytest.approx(0.0, abs=1e-5) and ent[i, j].item() == pytest.approx(0.0, abs=1e-5)


def test_the_gradient_through_log_probs_and_entropy_is_finite(tiny_actor):
    """Masked logits are -inf: neither the log-probs nor the entropy may put a NaN into
    the gradient (0 * -inf), padding positions included."""
    _, targets, logits = _samples_and_logits(tiny_actor)
    logits = logits.clone().requires_grad_(True)
    lp, ent = constrained_logprobs(logits, targets, tiny_actor.token_automaton(), temperature=1.0, entropy=True)
    (lp.sum() + ent.sum()).backward()
    assert torch.isfinite(lp).all() and torch.isfinite(ent).all() and torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 0


def test_temperature_divides_the_logits_before_the_mask(tiny_actor):
    samples, targets, logits = _samples_and_logits(tiny_actor, n=2)
    automaton = tiny_actor.token_automaton()
    hot, _ = constrained_logprobs(logits, targets, automaton, temperature=2.0)
    same, _ = constrained_logprobs(logits / 2.0, targets, automaton, temperature=1.0)
    assert torch.allclose(hot, same, atol=1e-5)


def test_grpo_records_which_policy_it_scored_and_the_masked_entropy_is_below_the_raw_one(tmp_path, tiny_actor):
    """The run trains with either scoring and says which in its result; TRL's logged
    entropy is finite, and on the same first step the masked policy's entropy is below
    the raw model's over its whole vocabulary."""
    import copy

    first: dict[str, float] = {}
    for policy_logprobs in ("constrained", "raw"):
        actor = copy.copy(tiny_actor)
        actor.model = copy.deepcopy(tiny_actor.model)
        logs: list[dict] = []
        config = TrainActorConfig(loss="grpo", lr=1e-3, max_steps=2, save_steps=100, seed=0,
                                  grpo={"states_per_step": 4, "group_filter": 1, "policy_logprobs": policy_logprobs})
        result = train_grpo(actor, _oracle_task(actor), config, output_dir=tmp_path / policy_logprobs,
                            on_log=lambda step, total, metrics: logs.append(metrics))
        assert result["policy_logprobs"] == policy_logprobs and result["steps"] == 2
        entropies = [m["entropy"] for m in logs if "entropy" in m]
        assert entropies and all(math.isfinite(e) for e in entropies)
        first[policy_logprobs] = entropies[0]
    assert first["constrained"] < first["raw"]
