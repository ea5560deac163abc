"""VLLMActor's scoring (`completion_logprobs`, `choice_logprobs`) against the HF Actor's.

Skipped where vLLM is not installed. One float32 vLLM engine for the module (the
`tiny-h32` model and fixtures of tests/test_vllm_engine.py). Both engines compute the
same float32 model with different kernels, so scores differ by summation order only:
measured up to 5e-5 nats on sums of up to ~20 token log-probs; 1e-3 leaves room and still
catches any off-by-one position or tempered / masked distribution (those move a
score by whole nats).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import test_vllm_engine as vt

from lactchain.models.vllm_engine import vllm_installed
from lactchain.moves import format_moves

# Every check here starts vLLM engines: the scale tier (`pytest -m scale` after scripts/install.sh --scale).
pytestmark = [pytest.mark.scale,
              pytest.mark.skipif(not vllm_installed(), reason="vllm is not installed here (scripts/install.sh --scale)")]

TOL = 1e-3
_prompts = vt._prompts
# The tiny-h32 model, both engines on it (float32) and a trained adapter: test_vllm_engine's fixtures.
engine_env_vars, h32, hf_h32, vllm_h32, trained_adapter = (
    vt.engine_env_vars, vt.h32, vt.hf_h32, vt.vllm_h32, vt.trained_adapter)


def _flat(x: list) -> list[float]:
    return [v for row in x for v in (row if isinstance(row, list) else [row])]


def _max_diff(a: list, b: list) -> float:
    return max(abs(x - y) for x, y in zip(_flat(a), _flat(b)))


def test_completion_logprobs_equal_hf_at_fp32(hf_h32, vllm_h32):
    prompts = _prompts(8)
    vllm_h32.generate(prompts)  # the prefix cache now holds these prompts: scoring must not read it short
    samples = hf_h32.generate(prompts, temperature=1.0, seed=3)  # constrained: each ends with EOS
    ids = [s.token_ids for s in samples]
    cut = [s.token_ids[:3] for s in samples]  # cut off, no EOS
    texts = [format_moves(["move forward", "turn left"][: 1 + i % 2] * (1 + i % 3)) for i in range(8)]
    cases = {"ids": (ids, True), "cut ids, add_eos=False": (cut, False), "text": (texts, True),
             "text, add_eos=False": (texts, False)}
    for label, (comps, add_eos) in cases.items():
        hf = hf_h32.completion_logprobs(prompts, comps, add_eos=add_eos)
        vl = vllm_h32.completion_logprobs(prompts, comps, add_eos=add_eos)
        print(f"completion_logprobs, {label}: max |hf - vllm| = {_max_diff(hf, vl):.2e}")
        assert vl == pytest.approx(hf, abs=TOL), label
        assert len({round(v, 3) for v in vl}) > 1  # scores depend on prompt and completion
    # EOS already there is not doubled: HF's samples score their own (raw, unmasked) log-prob.
    with_eos = vllm_h32.completion_logprobs(prompts, ids)
    assert all(s.token_ids[-1] == vllm_h32.eos_token_id for s in samples)
    assert with_eos == pytest.approx([s.logprob for s in samples], abs=TOL)
    assert vllm_h32.completion_logprobs(prompts, ids, add_eos=False) == with_eos
    assert vllm_h32.completion_logprobs(prompts, texts) != vllm_h32.completion_logprobs(prompts, texts, add_eos=False)
    # A row's score does not depend on the batch, and repeats exactly.
    assert vllm_h32.completion_logprobs(prompts[2:3], ids[2:3], batch_size=1) == pytest.approx(with_eos[2:3], abs=1e-5)
    assert vllm_h32.completion_logprobs(prompts, ids) == with_eos
    assert vllm_h32.completion_logprobs([], []) == []


def test_scoring_a_vllm_sample_gives_its_raw_logprob(vllm_h32):
    """Unconstrained samples' `Sample.logprob` (vLLM raw logprobs while decoding) is what
    teacher forcing gives back: the two vLLM paths agree."""
    prompts = _prompts(6)
    samples = vllm_h32.generate(prompts, constrained=False, temperature=1.0, seed=5, max_new_tokens=8)
    scored = vllm_h32.completion_logprobs(prompts, [s.token_ids for s in samples], add_eos=False)
    print(f"sample vs teacher forcing: max diff {_max_diff([s.logprob for s in samples], scored):.2e}")
    assert scored == pytest.approx([s.logprob for s in samples], abs=TOL)


def test_choice_logprobs_equal_hf_and_first_token_scores(hf_h32, vllm_h32):
    prompts = _prompts(8)
    options = ("1", "2", "tie")
    hf = hf_h32.choice_logprobs(prompts, options)
    vl = vllm_h32.choice_logprobs(prompts, options, batch_size=3)
    print(f"choice_logprobs: max |hf - vllm| = {_max_diff(hf, vl):.2e}")
    assert len(vl) == 8 and all(len(row) == 3 for row in vl)
    for a, b in zip(hf, vl):
        assert b == pytest.approx(a, abs=TOL)
    # The same numbers as teacher-forcing each option's first token (prompt logprobs, no prefix cache).
    first = [vllm_h32._ids(o)[0] for o in options]
    forced = [vllm_h32.completion_logprobs([p] * 3, [[t] for t in first], add_eos=False) for p in prompts]
    assert _max_diff(vl, forced) < TOL
    assert vllm_h32.choice_logprobs([], options) == []


def test_forced_choice_judge_reads_the_same_on_both_engines(hf_h32, vllm_h32):
    from lactchain.motif.judge import ForcedChoiceJudge

    eps = [SimpleNamespace(caption=c) for c in ("moved forward twice, reached the goal", "turned left, then stopped",
                                                "hit a wall", "moved forward, turned right")]
    pairs = [(eps[0], eps[1]), (eps[2], eps[3]), (eps[1], eps[2])]
    hf = ForcedChoiceJudge(hf_h32).judge(pairs, "gridworld")
    vl = ForcedChoiceJudge(vllm_h32).judge(pairs, "gridworld")
    assert [j.answer for j in vl] == [j.answer for j in hf]


@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_bad_scoring_input_is_a_value_error_on_both_engines(engine, hf_h32, vllm_h32):
    actor = hf_h32 if engine == "hf" else vllm_h32
    prompts = _prompts(2)
    with pytest.raises(ValueError, match="2 prompts but 1 completions"):
        actor.completion_logprobs(prompts, ["['move forward']"])
    with pytest.raises(ValueError, match="empty completion"):
        actor.completion_logprobs(prompts[:1], [[]], add_eos=False)
    with pytest.raises(ValueError, match="start with the same token"):
        actor.choice_logprobs(prompts, ["move forward", "move left"])
    with pytest.raises(ValueError, match="has no tokens"):
        actor.choice_logprobs(prompts, ["1", ""])


def test_scores_follow_the_loaded_adapter(h32, hf_h32, vllm_h32, trained_adapter):
    from lactchain.models.actor import Actor

    prompts = _prompts(6)
    comps = [format_moves(["move forward"] * (1 + i % 3)) for i in range(6)]
    base = vllm_h32.completion_logprobs(prompts, comps)
    tuned_hf = Actor.load(str(h32), adapter=trained_adapter, device="cpu")
    vllm_h32.load_adapter(trained_adapter)
    try:
        tuned = vllm_h32.completion_logprobs(prompts, comps)
        choice = vllm_h32.choice_logprobs(prompts, ("1", "2"))
    finally:
        vllm_h32.unload_adapter()
    print(f"adapter: max |hf - vllm| = {_max_diff(tuned_hf.completion_logprobs(prompts, comps), tuned):.2e}")
    assert tuned == pytest.approx(tuned_hf.completion_logprobs(prompts, comps), abs=TOL)
    assert _max_diff(tuned, base) > 0.1  # the adapter changed the scores
    assert _max_diff(choice, tuned_hf.choice_logprobs(prompts, ("1", "2"))) < TOL
    assert vllm_h32.completion_logprobs(prompts, comps) == pytest.approx(base, abs=1e-5)
