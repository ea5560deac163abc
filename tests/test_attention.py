"""Grouped-query attention without the KV copy (lactchain.models.attention): the same
numbers as transformers' SDPA for decoding and padded prefill, the same greedy and
seeded answers from an actor whose model has fewer KV heads than query heads, and
training left on transformers' own path."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from lactchain.models.attention import GROUPED_SDPA, grouped_sdpa

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("length, cached", [(1, 30), (9, 30), (30, 30)])  # a decode step, a suffix, a full prefill
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.bfloat16, 2e-2)])
def test_grouped_heads_give_sdpas_numbers_with_padding(length, cached, dtype, tol):
    gen = torch.Generator().manual_seed(0)
    module = SimpleNamespace(num_key_value_groups=3, is_causal=True)
    q = torch.randn(4, 9, length, 16, generator=gen).to(dtype)
    k, v = (torch.randn(4, 3, cached, 16, generator=gen).to(dtype) for _ in range(2))
    mask = torch.ones(4, 1, length, cached, dtype=torch.bool).tril(cached - length)  # causal, left-padded rows
    mask[1, :, :, :7] = False
    mask[3, :, :, :2] = False
    with torch.no_grad():
        want, _ = sdpa_attention_forward(module, q, k, v, mask)
        got, _ = grouped_sdpa(module, q, k, v, mask)
    assert got.shape == want.shape == (4, length, 9, 16)
    assert float((got.float() - want.float()).abs().max()) <= tol


def test_with_a_gradient_it_is_transformers_own_sdpa():
    module = SimpleNamespace(num_key_value_groups=2, is_causal=True)
    q = torch.randn(2, 4, 5, 8, requires_grad=True)
    k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()
    got, _ = grouped_sdpa(module, q, k, v, mask)
    want, _ = sdpa_attention_forward(module, q, k, v, mask)
    assert torch.equal(got, want) and got.requires_grad


def _tiny_gqa(folder: Path) -> Path:
    """The tiny preset's Llama with 4 query heads sharing 2 KV heads, seeded."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from lactchain.models import tiny

    tok = tiny.build_tiny_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id, **{**tiny.TINY_CONFIG, "num_key_value_heads": 2})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(tiny.TINY_SEED)
        model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_an_actor_with_shared_kv_heads_answers_as_with_sdpa(tmp_path):
    from lactchain.models.actor import Actor
    from test_actor import make_prompts

    actor = Actor.load(str(_tiny_gqa(tmp_path / "gqa")), device="cpu")
    assert actor.grouped_attention and actor.model.config._attn_implementation == GROUPED_SDPA
    prompts = make_prompts(6)  # different lengths: padded batches
    comps = [s.token_ids for s in actor.generate(prompts, max_new_tokens=12)]
    runs = {}
    for impl in (GROUPED_SDPA, "sdpa"):
        actor.model.set_attn_implementation(impl)
        actor.clear_prefix_cache()
        runs[impl] = ([s.token_ids for s in actor.generate(prompts, max_new_tokens=12)],
                      [s.token_ids for s in actor.generate(prompts, temperature=1.0, seed=7, max_new_tokens=12)],
                      actor.completion_logprobs(prompts, comps, add_eos=False))
    (greedy, sampled, scores), (greedy_sdpa, sampled_sdpa, scores_sdpa) = runs[GROUPED_SDPA], runs["sdpa"]
    assert greedy == greedy_sdpa and sampled == sampled_sdpa
    assert scores == pytest.approx(scores_sdpa, abs=1e-5)


def test_cudnn_sdpa_is_chosen_per_device_and_other_devices_are_left_alone():
    """On a GPU the loop runs without cuDNN's SDPA unless told (each new shape is a graph
    build there); the switch is torch's own process-wide flag, and a CPU actor never touches it."""
    from lactchain.models.attention import CUDNN_SDPA_PAYS, choose_sdpa_kernels

    was = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        assert choose_sdpa_kernels("cpu") is True and torch.backends.cuda.cudnn_sdp_enabled()
        assert choose_sdpa_kernels(torch.device("cuda")) is CUDNN_SDPA_PAYS["cuda"] is False
        assert torch.backends.cuda.cudnn_sdp_enabled() is False
        assert choose_sdpa_kernels("cuda", cudnn=True) is True and torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)
